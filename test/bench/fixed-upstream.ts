/**
 * A fixed-answer upstream for the gateway benchmark: a tiny node:http server answering the spec's JSON
 * shapes for GET /api/v1/pi, POST /api/v1/check and GET /api/v1/health, as cheaply as possible, so a
 * benchmark measures what the gateway (or proxy) in front of it costs, not the upstream.
 *
 * Run as its own process (`node --import tsx test/bench/fixed-upstream.ts`): it listens on loopback,
 * port `PORT` (0 = ephemeral), and prints one JSON line `{"port": n}` when ready.
 *
 * Answers are real enough for the gateway's validation: digits are the true digits of pi (from the
 * test oracle), `is_null` is strict equality for the two values the benchmark sends. Nothing is
 * random and nothing is rate-limited: every answer for the same request is byte-identical.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { pathToFileURL } from 'node:url';

const PI = readFileSync(new URL('../fixtures/pi-2000.txt', import.meta.url), 'utf8').trim();
const SPONSOR = 'This null check was brought to you by NullCorp';
const PI_SPONSOR = 'Digits sponsored by Pi Hut';

const piBody = (digits: number): Buffer =>
  Buffer.from(
    JSON.stringify({
      digits: digits === 0 ? '3' : PI.slice(0, 2 + digits),
      precision: digits,
      confidence: 0.99,
      model: 'pi-x-4o',
      inference_time_ms: 42,
      gpu_cost_usd: 0.0003,
      sponsored_by: PI_SPONSOR,
      disclaimer: 'Generated digits may differ from actual pi.',
    }),
  );

const checkBody = (isNull: boolean): Buffer =>
  Buffer.from(
    JSON.stringify({
      is_null: isNull,
      confidence: 0.97,
      inference_time_ms: 17,
      gpu_cost_usd: 0.0002,
      model: 'null-x-4o',
      experts_consulted: 8,
      sponsored_by: SPONSOR,
      disclaimer: 'Results may differ from strict equality.',
    }),
  );

/** One process plays both services: its health body carries the fields of both specs. */
const HEALTH = Buffer.from(
  JSON.stringify({
    status: 'ok',
    null_detectable: true,
    undefined_detectable: true,
    cluster_status: 'nominal',
    philosophy_consultant: null,
    monthly_burn: '$1,000,000',
    pi_available: true,
    gpu_cluster: 'warm',
    monthly_burn_rate: '$3.14M',
  }),
);
const NOT_FOUND = Buffer.from(
  JSON.stringify({ error: { status: 404, code: 'NOT_FOUND', message: 'no route' } }),
);

/** Answers by path+query, built on first use (the benchmark asks the same few things over and over). */
const piAnswers = new Map<string, Buffer>();
const CHECK_TRUE = checkBody(true);
const CHECK_FALSE = checkBody(false);

function send(res: ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length });
  res.end(body);
}

function piAnswer(url: string): Buffer {
  let body = piAnswers.get(url);
  if (body === undefined) {
    const digits = Number(new URL(url, 'http://upstream').searchParams.get('digits') ?? '3');
    body = piBody(Math.min(Math.max(0, Number.isFinite(digits) ? digits : 3), 2000));
    piAnswers.set(url, body);
  }
  return body;
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  if (req.method === 'POST' && url === '/api/v1/check') {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      // Fixed answers: only null vs anything else matters to the benchmark.
      const text = Buffer.concat(chunks).toString();
      send(res, 200, /"value"\s*:\s*null\b/.test(text) ? CHECK_TRUE : CHECK_FALSE);
    });
    return;
  }
  if (req.method === 'GET' && (url === '/api/v1/pi' || url.startsWith('/api/v1/pi?'))) {
    send(res, 200, piAnswer(url));
    req.resume();
    return;
  }
  if (req.method === 'GET' && url === '/api/v1/health') {
    send(res, 200, HEALTH);
    req.resume();
    return;
  }
  req.resume();
  send(res, 404, NOT_FOUND);
}

export interface FixedUpstreamHandle {
  port: number;
  close(): Promise<void>;
}

/** Starts the server in this process (the benchmark runs it as a child process instead). */
export function startFixedUpstream(port = 0): Promise<FixedUpstreamHandle> {
  const server = createServer(handle);
  server.keepAliveTimeout = 65_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      resolve({
        port: typeof address === 'object' && address ? address.port : port,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const handle = await startFixedUpstream(Number(process.env.PORT ?? 0));
  process.stdout.write(`${JSON.stringify({ port: handle.port })}\n`);
  const stop = () => handle.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
