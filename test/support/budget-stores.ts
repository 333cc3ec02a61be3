/**
 * What the budget-store suites on a real redis-server share: one window of an hour in minute buckets,
 * one operation's estimate, a silent logger, and the suite's redis-server with a raw client beside it,
 * started before the suite and stopped after it with every shared state the suite opened.
 */
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import type { SharedState } from '../../src/gateway/shared-state/index.js';
import { budgetRedisKeys } from '../../src/gateway/shared-state/redis-keys.js';
import { type RedisServer, startRedisServer } from './redis-server.js';

export const HOUR = 3_600_000;
/** One operation's estimate, USD. */
export const ESTIMATE = 0.004;
export const silent = pino({ level: 'silent' });
/** Spend and reservations of a key's hour in Redis (its window hash), rounded to 1e-10 USD. */
export async function inRedis(
  raw: Redis,
  prefix: string,
  key: string,
): Promise<{ spent: number; reserved: number }> {
  const fields = await raw.hgetall(budgetRedisKeys(prefix, key, [HOUR]).windows[0] as string);
  let spent = 0;
  let reserved = 0;
  for (const [name, usd] of Object.entries(fields)) {
    if (name.startsWith('s')) spent += Number(usd);
    if (name.startsWith('r')) reserved += Number(usd);
  }
  return { spent: Math.round(spent * 1e10) / 1e10, reserved: Math.round(reserved * 1e10) / 1e10 };
}

/** A budget of one sliding hour (minute buckets), no warning. */
export const windowOf = (limitUsd: number) => [{ ms: HOUR, bucketMs: 60_000, limitUsd, warnUsd: -1 }];

/**
 * Starts the suite's redis-server and a raw client on it before the suite (`started` receives both),
 * and after it closes every state in `opened`, the client and the server.
 */
export function useRedisServer(
  started: (server: RedisServer, raw: Redis) => void,
  opened: readonly SharedState[],
): void {
  let server: RedisServer | undefined;
  let raw: Redis | undefined;
  beforeAll(async () => {
    server = await startRedisServer();
    raw = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await raw.connect();
    started(server, raw);
  });
  afterAll(async () => {
    await Promise.all(opened.map((s) => s.close()));
    raw?.disconnect();
    await server?.stop();
  });
}
