/**
 * `npx tsx test/bench/attempt-signal-bench.ts`: what the abort handle of one upstream attempt costs,
 * `AttemptSignal` (src/gateway/upstream/attempt-signal.ts) against the standard ones, on the Node that
 * runs it. It was kept for a Node 20 measurement (~20 µs per request for an AbortSignal with a
 * listener); this re-measures it whenever the Node version changes.
 *
 * Variants, each doing per attempt what the transport would do with it:
 * - `none`: no abort handle at all (the floor);
 * - `attempt-signal`: the transport's own: one object is the handle, the deadline-sweep entry and the
 *   operation's cancellation watcher;
 * - `abort-controller`: an AbortController per attempt, still watched by the sweep and the operation
 *   (only the handle differs);
 * - `abort-signal-any`: the idiomatic form: the operation owns an AbortController, each attempt
 *   `AbortSignal.any([operation, AbortSignal.timeout(ms)])` (no sweep, no watcher set).
 *
 * Two measures: `micro` (no network: 50 attempts set up, a turn of the event loop, torn down; ns per
 * attempt, GC included) and `exchange` (undici `Pool.dispatch` against the fixed upstream in a child
 * process, 50 at once: this process's CPU µs per request, where the Node 20 cost was seen). Variants
 * alternate within each round; each figure is the median of the rounds.
 */
import { createServer } from 'node:net';
import { type Dispatcher, Pool } from 'undici';
import { Operation } from '../../src/gateway/operation/operation.js';
import { AttemptSignal } from '../../src/gateway/upstream/attempt-signal.js';
import { unwatchDeadline, watchDeadline } from '../../src/gateway/upstream/deadline-sweep.js';
import { installSignalCleanup, startChild } from './bench-processes.js';

const argument = (name: string, fallback: number) => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(process.argv[index + 1]);
};
const ROUNDS = argument('rounds', 7);
const MICRO_ATTEMPTS = argument('micro', 200_000);
const REQUESTS = argument('requests', 10_000);
const CONCURRENCY = 50;
const TIMEOUT_MS = 5000;
const TIMED_OUT = new Error('upstream attempt timed out');

/** What the body collector needs of a handle: subscribe, unsubscribe (the shapes differ). */
interface Handle {
  listen(listener: () => void): void;
  unlisten(listener: () => void): void;
  /** Ends the attempt's bookkeeping (sweep entry, operation watcher). */
  done(): void;
}

type Variant = (operation: Operation) => Handle;

const noop = () => {};

const VARIANTS: Record<string, Variant> = {
  none: () => ({ listen: noop, unlisten: noop, done: noop }),
  'attempt-signal': (operation) => {
    const signal = new AttemptSignal(Date.now() + TIMEOUT_MS, TIMED_OUT);
    watchDeadline(signal);
    operation.attach(signal);
    return {
      listen: (listener) => signal.on('abort', listener),
      unlisten: (listener) => signal.removeListener('abort', listener),
      done: () => {
        unwatchDeadline(signal);
        operation.detach(signal);
      },
    };
  },
  'abort-controller': (operation) => {
    const controller = new AbortController();
    const entry = {
      at: Date.now() + TIMEOUT_MS,
      fire: () => controller.abort(TIMED_OUT),
      abort: (reason: unknown) => controller.abort(reason),
    };
    watchDeadline(entry);
    operation.attach(entry);
    const signal = controller.signal;
    return {
      listen: (listener) => signal.addEventListener('abort', listener, { once: true }),
      unlisten: (listener) => signal.removeEventListener('abort', listener),
      done: () => {
        unwatchDeadline(entry);
        operation.detach(entry);
      },
    };
  },
  'abort-signal-any': () => {
    // The operation's own controller (one per operation; here one operation makes one attempt).
    const cancellation = new AbortController();
    const signal = AbortSignal.any([cancellation.signal, AbortSignal.timeout(TIMEOUT_MS)]);
    return {
      listen: (listener) => signal.addEventListener('abort', listener, { once: true }),
      unlisten: (listener) => signal.removeEventListener('abort', listener),
      done: noop,
    };
  },
};

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

/** ns per attempt: CONCURRENCY attempts set up with a listener, one event-loop turn, then torn down. */
async function micro(variant: Variant): Promise<number> {
  const operations = Array.from(
    { length: CONCURRENCY },
    () => new Operation({ apiKey: undefined, requestId: 'bench', deadlineMs: 15_000 }),
  );
  const handles: Handle[] = new Array(CONCURRENCY);
  const listeners: Array<() => void> = new Array(CONCURRENCY);
  const start = process.hrtime.bigint();
  for (let done = 0; done < MICRO_ATTEMPTS; done += CONCURRENCY) {
    for (let i = 0; i < CONCURRENCY; i++) {
      const handle = variant(operations[i] as Operation);
      // A listener per attempt, as the body collector has (a bound method, a closure).
      const listener = () => {};
      handle.listen(listener);
      handles[i] = handle;
      listeners[i] = listener;
    }
    await new Promise<void>((resolve) => setImmediate(resolve));
    for (let i = 0; i < CONCURRENCY; i++) {
      const handle = handles[i] as Handle;
      handle.unlisten(listeners[i] as () => void);
      handle.done();
    }
  }
  return Number(process.hrtime.bigint() - start) / MICRO_ATTEMPTS;
}

/** The transport's body collector, with the handle's own subscribe and unsubscribe. */
class Collector implements Dispatcher.DispatchHandler {
  private controller: Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestStart']>>[0] | undefined;
  private chunks: Buffer[] = [];
  constructor(
    private readonly handle: Handle,
    private readonly resolve: (text: string) => void,
    private readonly reject: (error: Error) => void,
  ) {}
  private readonly abort = () => this.controller?.abort(TIMED_OUT);
  onRequestStart(controller: NonNullable<typeof this.controller>): void {
    this.controller = controller;
    this.handle.listen(this.abort);
  }
  onResponseData(_controller: unknown, chunk: Buffer): void {
    this.chunks.push(chunk);
  }
  onResponseEnd(): void {
    this.handle.unlisten(this.abort);
    this.resolve(Buffer.concat(this.chunks).toString('utf8'));
  }
  onResponseError(_controller: unknown, error: Error): void {
    this.handle.unlisten(this.abort);
    this.reject(error);
  }
}

/** This process's CPU µs per request: REQUESTS through `pool`, CONCURRENCY at once. */
async function exchange(pool: Pool, origin: string, variant: Variant): Promise<number> {
  let sent = 0;
  const worker = async () => {
    while (sent < REQUESTS) {
      sent++;
      const operation = new Operation({ apiKey: undefined, requestId: 'bench', deadlineMs: 15_000 });
      const handle = variant(operation);
      try {
        const text = await new Promise<string>((resolve, reject) =>
          pool.dispatch(
            { origin, method: 'GET', path: '/api/v1/pi?digits=3', headers: { 'x-request-id': 'bench' } },
            new Collector(handle, resolve, reject),
          ),
        );
        JSON.parse(text);
      } finally {
        handle.done();
      }
    }
  };
  const before = process.cpuUsage();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / REQUESTS;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function main(): Promise<void> {
  installSignalCleanup();
  const names = Object.keys(VARIANTS);
  const microRounds = new Map<string, number[]>(names.map((name) => [name, []]));
  const exchangeRounds = new Map<string, number[]>(names.map((name) => [name, []]));

  for (const name of names) await micro(VARIANTS[name] as Variant); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    // Rotated order per round, so no variant always runs right after another's garbage.
    for (const name of [...names.slice(round % names.length), ...names.slice(0, round % names.length)])
      microRounds.get(name)?.push(await micro(VARIANTS[name] as Variant));
  }

  const port = await freePort();
  const upstream = await startChild({
    name: 'fixed-upstream',
    script: 'test/bench/fixed-upstream.ts',
    env: {},
    port,
    readyPath: '/api/v1/health',
  });
  const origin = `http://127.0.0.1:${port}`;
  const pool = new Pool(origin, { connections: CONCURRENCY, pipelining: 1 });
  try {
    for (const name of names) await exchange(pool, origin, VARIANTS[name] as Variant); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of [...names.slice(round % names.length), ...names.slice(0, round % names.length)])
        exchangeRounds.get(name)?.push(await exchange(pool, origin, VARIANTS[name] as Variant));
    }
  } finally {
    await pool.close();
    await upstream.stop();
  }

  console.log(
    `Node ${process.version}; ${ROUNDS} rounds; micro: ${MICRO_ATTEMPTS} attempts a round, exchange: ${REQUESTS} requests a round, ${CONCURRENCY} at once`,
  );
  console.log(
    '| variant | micro ns/attempt (median) | micro rounds | exchange CPU µs/req (median) | exchange rounds |',
  );
  console.log('|---|---|---|---|---|');
  for (const name of names) {
    const m = microRounds.get(name) ?? [];
    const e = exchangeRounds.get(name) ?? [];
    console.log(
      `| ${name} | ${median(m).toFixed(0)} | ${m.map((v) => v.toFixed(0)).join(' / ')} | ${median(e).toFixed(1)} | ${e.map((v) => v.toFixed(1)).join(' / ')} |`,
    );
  }
}

await main();
