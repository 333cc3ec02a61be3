/**
 * `npx tsx test/bench/upstream-layers.ts --a <dist> --b <dist>`: what the upstream layers alone cost
 * per model call, in two compiled builds (alternating rounds, in one process each), without the
 * network, GraphQL or HTTP: the business stack of clients.ts (observe → single flight → API versions →
 * retry → circuit breaker → attempts) over a stub transport that answers from a microtask, as undici's
 * handler does from its socket callback, called through `callModel` as the loaders do. Prints CPU µs
 * and bytes allocated per call (V8 heap, as bench:path counts it) per round, and the medians.
 *
 * The stub transport takes the shape of the build's `Dispatch`: `(request) => Promise<answer>` before
 * the handler cut, `(request, handler) => void` after it (the build exports `dispatchPromise`).
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { measuredRound } from './measured-round.js';

const argument = (name: string, fallback?: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : process.argv[index + 1];
};
const CALLS = Number(argument('calls', '200000'));
const AT_ONCE = 50;

type Loaded = Record<string, (...args: never[]) => unknown>;
async function load(dist: string, path: string): Promise<Loaded> {
  return (await import(pathToFileURL(resolve(dist, path)).href)) as Loaded;
}

/** One round in this process: `--round <dist>`; prints `µs bytes`. */
async function round(dist: string): Promise<void> {
  const dispatchModule = await load(dist, 'gateway/upstream/dispatch.js');
  const handlerShaped = typeof dispatchModule.dispatchPromise === 'function';
  const { pino } = await import('pino');
  const logger = pino({ level: 'silent' });
  const { createGatewayMetrics } = (await load(dist, 'gateway/observability/metrics.js')) as never as {
    createGatewayMetrics: (options: unknown) => unknown;
  };
  const { createSponsorLog } = (await load(dist, 'gateway/observability/sponsor-log.js')) as never as {
    createSponsorLog: (options: unknown) => unknown;
  };
  const { createUpstreamObserver } = (await load(
    dist,
    'gateway/observability/upstream-observer.js',
  )) as never as {
    createUpstreamObserver: (options: unknown) => { interceptor: unknown; attempts: unknown };
  };
  const { singleFlight } = (await load(dist, 'gateway/upstream/interceptors/single-flight.js')) as never as {
    singleFlight: (options?: unknown) => unknown;
  };
  const { createApiVersions } = (await load(
    dist,
    'gateway/upstream/interceptors/api-versions.js',
  )) as never as {
    createApiVersions: (options: unknown) => { interceptor: unknown };
  };
  const { retry } = (await load(dist, 'gateway/upstream/interceptors/retry.js')) as never as {
    retry: (options?: unknown) => unknown;
  };
  const { createCircuitBreaker } = (await load(
    dist,
    'gateway/upstream/interceptors/circuit-breaker.js',
  )) as never as { createCircuitBreaker: (options: unknown) => { interceptor: unknown } };
  const { Operation } = (await load(dist, 'gateway/operation/operation.js')) as never as {
    Operation: new (options: unknown) => unknown;
  };
  const compose = dispatchModule.compose as unknown as (...layers: unknown[]) => unknown;
  const callModel = dispatchModule.callModel as unknown as (
    dispatch: unknown,
    call: unknown,
  ) => Promise<unknown>;

  const metrics = createGatewayMetrics({ defaultMetrics: false });
  const observer = createUpstreamObserver({
    logger,
    metrics,
    sponsorLog: createSponsorLog({ logger, intervalMs: 60_000 }),
    tracer: undefined,
  });
  const facts = { costUsd: 0.0001, sponsor: null, model: 'null-x-4o' };
  const answerOf = (request: { form: { endpoint: string } }) => ({
    value: true,
    source: 'upstream',
    endpoint: request.form.endpoint,
    statusCode: 200,
    facts,
    deprecation: undefined,
    bodyChars: 200,
  });
  const transport = handlerShaped
    ? (request: { form: { endpoint: string } }, handler: { onAnswer(answer: unknown): void }) =>
        queueMicrotask(() => handler.onAnswer(answerOf(request)))
    : (request: { form: { endpoint: string } }) =>
        new Promise((done) => queueMicrotask(() => done(answerOf(request))));
  const dispatch = compose(
    transport,
    observer.interceptor,
    singleFlight(),
    createApiVersions({ upstream: 'null-check', setting: 'auto', logger }).interceptor,
    retry({ maxAttempts: 3 }),
    createCircuitBreaker({ upstream: 'null-check', probe: async () => true, threshold: 5 }).interceptor,
    observer.attempts,
  );
  const form = (version: 'v1' | 'v2') => ({
    endpoint: version === 'v1' ? 'check' : 'null-or-not',
    version,
    method: 'POST',
    path: version === 'v1' ? '/api/v1/check' : '/api/v2/null-or-not',
    body: '{"value":null}',
    retry: 'idempotent',
    decode: (json: unknown) => json,
    facts: () => facts,
  });
  const forms = { v1: form('v1'), v2: form('v2') };
  const pricing = { upstream: 'null-check', kind: 'check', model: 'null-x-4o' };
  let n = 0;
  const call = () =>
    callModel(dispatch, {
      forms,
      shareKey: `null\n${n++}`,
      cacheable: () => true,
      operation: new Operation({ apiKey: undefined, requestId: 'r', deadlineMs: 15_000 }),
      pricing,
    });
  const drive = async (calls: number) => {
    for (let done = 0; done < calls; done += AT_ONCE) {
      const batch: Promise<unknown>[] = [];
      for (let i = 0; i < AT_ONCE; i++) batch.push(call());
      await Promise.all(batch);
    }
  };
  await drive(CALLS / 4);
  const { cpuUs, bytes } = await measuredRound(() => drive(CALLS));
  process.stdout.write(`${cpuUs / CALLS} ${bytes / CALLS}\n`);
}

async function main(): Promise<void> {
  const single = argument('round');
  if (single !== undefined) return round(single);
  const A = argument('a', 'bench-results/base-dist') as string;
  const B = argument('b') as string;
  const pairs = Number(argument('pairs', '5'));
  const script = fileURLToPath(import.meta.url);
  const results: { a: number[][]; b: number[][] } = { a: [], b: [] };
  const one = (dist: string) => {
    const run = spawnSync(
      process.execPath,
      ['--import', 'tsx', script, '--round', dist, '--calls', String(CALLS)],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    return (run.stdout.trim().split(' ') as string[]).map(Number);
  };
  for (let pair = 1; pair <= pairs; pair++) {
    const a = one(A);
    const b = one(B);
    results.a.push(a);
    results.b.push(b);
    process.stdout.write(
      `pair ${pair}: A ${a[0]?.toFixed(2)} µs ${a[1]?.toFixed(0)} B | B ${b[0]?.toFixed(2)} µs ${b[1]?.toFixed(0)} B\n`,
    );
  }
  const median = (values: number[]) =>
    [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] as number;
  const of = (rows: number[][], i: number) => median(rows.map((row) => row[i] as number));
  const [aCpu, aBytes, bCpu, bBytes] = [
    of(results.a, 0),
    of(results.a, 1),
    of(results.b, 0),
    of(results.b, 1),
  ];
  process.stdout.write(
    `A ${A}: ${aCpu.toFixed(2)} µs, ${aBytes.toFixed(0)} bytes per call (medians)\n` +
      `B ${B}: ${bCpu.toFixed(2)} µs, ${bBytes.toFixed(0)} bytes per call\n` +
      `B ÷ A: CPU ${(bCpu / aCpu).toFixed(3)}, allocated ${(bBytes / aBytes).toFixed(3)}\n`,
  );
}

await main();
