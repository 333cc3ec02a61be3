/**
 * What the shared state costs per call, in memory and in Redis mode: `npx tsx scripts/shared-state-cost.ts`.
 * Uses REDIS_URL when set, else starts a throwaway redis-server on loopback (the test fixture's).
 * Sequential figures are latency per awaited call (one round trip each); "64 in flight" is wall time
 * per call with 64 calls outstanding, closer to the CPU each call costs a busy gateway.
 */
import { pino } from 'pino';
import { createSharedState, type SharedState } from '../src/gateway/shared-state/index.js';
import { startRedisServer } from '../test/support/redis-server.js';

const logger = pino({ level: 'warn' });
/** One sliding hour in minute buckets (the COST_BUDGET_USD_PER_HOUR shape). */
const HOUR_WINDOW = [{ ms: 3_600_000, bucketMs: 60_000, limitUsd: 1, warnUsd: -1 }];

async function measure(label: string, runs: number, call: (i: number) => unknown): Promise<void> {
  for (let i = 0; i < Math.min(runs, 2000); i++) await call(i); // warm-up
  const started = performance.now();
  for (let i = 0; i < runs; i++) {
    const result = call(i);
    if (result instanceof Promise) await result;
  }
  const us = ((performance.now() - started) * 1000) / runs;
  process.stdout.write(
    `${label.padEnd(46)} ${us.toFixed(us < 1 ? 3 : 1).padStart(8)} µs/call  (${runs} calls)\n`,
  );
}

/** Fire-and-forget calls, `batch` at a time, each batch followed by one awaited round trip on the same
 * connection (so the figure includes Redis doing the work, and the queue never outgrows the timeout). */
async function batched(
  label: string,
  runs: number,
  batch: number,
  call: (i: number) => void,
  flush: () => Promise<unknown>,
) {
  const started = performance.now();
  for (let i = 0; i < runs; ) {
    for (const end = Math.min(runs, i + batch); i < end; i++) call(i);
    await flush();
  }
  const us = ((performance.now() - started) * 1000) / runs;
  process.stdout.write(
    `${label.padEnd(46)} ${us.toFixed(1).padStart(8)} µs/call  (${runs} calls, ${batch} per round trip)\n`,
  );
}

async function inFlight(label: string, runs: number, width: number, call: (i: number) => Promise<unknown>) {
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < runs) await call(next++);
    }),
  );
  const us = ((performance.now() - started) * 1000) / runs;
  process.stdout.write(`${label.padEnd(46)} ${us.toFixed(1).padStart(8)} µs/call  (${runs} calls)\n`);
}

async function main() {
  const server = process.env.REDIS_URL ? undefined : await startRedisServer();
  const url = process.env.REDIS_URL ?? server!.url;
  const memory = createSharedState({ logger });
  const a = createSharedState({ redisUrl: url, keyPrefix: 'cost:', timeoutMs: 25, logger });
  const b = createSharedState({ redisUrl: url, keyPrefix: 'cost:', timeoutMs: 25, logger });
  for (let i = 0; i < 200 && (a.status() !== 'redis' || b.status() !== 'redis'); i++)
    await new Promise((resolve) => setTimeout(resolve, 25));
  if (a.status() !== 'redis') throw new Error('redis not connected');

  const answer = {
    answer: { kind: 'boolean', value: true },
    inferenceTimeMs: 12,
    gpuCostUsd: 0.0003,
    model: 'null-x-4o',
  };
  const N = 20_000;
  const get = (state: SharedState, key: string) => state.cache.get(key);

  memory.cache.set('hit', answer, 600_000);
  await measure('memory: cache get, hit', 1_000_000, () => get(memory, 'hit'));
  a.cache.set('hit', answer, 600_000);
  await measure('redis mode: cache get, local hit', 1_000_000, () => get(a, 'hit'));
  // A round trip on A's connection: every command A sent before it is done when it answers.
  const flushA = () => a.flights.claim('flush', 1000);
  await batched(
    'redis mode: cache set (fire and forget)',
    N,
    32,
    (i) => a.cache.set(`k${i}`, answer, 600_000),
    flushA,
  );
  await measure('redis mode: cache get via Redis (B, local miss)', N, (i) => get(b, `k${i}`));
  await measure('redis mode: cache get via Redis, Redis miss', N, (i) => get(b, `missing${i}`));
  await measure('redis mode: flight claim (SET NX PX)', N, (i) => a.flights.claim(`f${i}`, 10_000));
  await batched(
    'redis mode: flight settle (fire and forget)',
    N,
    32,
    (i) => a.flights.settle(`f${i}`, answer, 1000),
    flushA,
  );
  await measure('redis mode: flight await, answer there', N, (i) => b.flights.await(`f${i}`, 100));
  const now = Date.now();
  await batched(
    'redis mode: budget add (fire and forget)',
    N,
    32,
    () => a.budgets.add('key', HOUR_WINDOW, 0.001, now),
    flushA,
  );
  await measure('redis mode: budget read (Lua: TIME, HGETALL)', N, () =>
    a.budgets.read('key', HOUR_WINDOW, now),
  );
  b.cache.clear();
  await inFlight('redis mode: cache get via Redis, 64 in flight', N, 64, async (i) => get(b, `k${i}`));
  await inFlight('redis mode: flight claim, 64 in flight', N, 64, (i) => a.flights.claim(`g${i}`, 10_000));
  process.stdout.write(
    `status after: ${a.status()} / ${b.status()} (both must say redis for the figures to count)\n`,
  );

  await Promise.all([memory.close(), a.close(), b.close()]);
  await server?.stop();
}

await main();
