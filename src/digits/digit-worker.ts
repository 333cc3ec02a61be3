/**
 * Worker-thread entry point: computes digits on request so that multi-second BigInt work never
 * blocks the event loop of the servers. A failed computation is answered as an error message; only a
 * real crash (out of memory, a bug in the runtime) kills the thread, which the engine detects.
 */
import { parentPort } from 'node:worker_threads';
import { computeE } from './compute-e.js';
import { computePi } from './compute-pi.js';
import type { DigitWorkerRequest, DigitWorkerResponse } from './digit-worker-protocol.js';

const port = parentPort;
if (port === null) throw new Error('digit-worker must run in a worker thread');

port.on('message', (request: DigitWorkerRequest) => {
  let response: DigitWorkerResponse;
  try {
    const started = performance.now();
    const digits = request.constant === 'e' ? computeE(request.decimals) : computePi(request.decimals);
    response = { id: request.id, ok: true, digits, elapsedMs: performance.now() - started };
  } catch (error) {
    response = { id: request.id, ok: false, message: error instanceof Error ? error.message : String(error) };
  }
  port.postMessage(response);
});
