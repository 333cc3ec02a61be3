/**
 * Budget shares in the store (shared-state/budget-shares.ts), on a real redis-server: under a budget
 * large against its estimates a replica admits operations against a share it took from Redis, so an
 * operation pays no budget round trip of its own (counted with Redis' INFO commandstats); the share
 * shows as reserved; what it spent reaches Redis and what it holds unused goes back (idle, close);
 * near the limit the last dollars go one operation at a time; during an outage a replica spends
 * only its share and its part of what was left.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { SHARE_FLOOR_OPS, SHARE_LEASE_MS } from '../../src/gateway/shared-state/budget-shares.js';
import {
  createSharedState,
  type SharedState,
  type SharedStateOptions,
} from '../../src/gateway/shared-state/index.js';
import type { BudgetBucket, BudgetReserveResult } from '../../src/gateway/shared-state/types.js';
import { ESTIMATE, inRedis, silent, useRedisServer, windowOf } from '../support/budget-stores.js';
import {
  type RedisServer,
  requireRedisServer,
  startCuttableLink,
  startRedisServer,
} from '../support/redis-server.js';
import { until } from '../support/waits.js';

requireRedisServer('budget-shares-store');

const sum = (buckets: BudgetBucket[] | undefined, index: 1 | 2) =>
  Math.round((buckets ?? []).reduce((total, bucket) => total + bucket[index], 0) * 1e10) / 1e10;

/** Budget scripts Redis ran so far (EVALSHA and EVAL calls, from INFO commandstats). */
async function scriptCalls(raw: Redis): Promise<number> {
  const info = await raw.info('commandstats');
  let calls = 0;
  for (const match of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(match[2]);
  return calls;
}

describe('budget shares on one redis-server', () => {
  let server: RedisServer;
  let raw: Redis;
  const prefix = `shares-${randomUUID().slice(0, 8)}:`;
  const opened: SharedState[] = [];
  /** A shared state of the suite (closed after it), on its redis-server unless `options` say otherwise. */
  const state = (options: Partial<SharedStateOptions> = {}) => {
    const s = createSharedState({
      redisUrl: server.url,
      keyPrefix: prefix,
      timeoutMs: 1000,
      logger: silent,
      ...options,
    });
    opened.push(s);
    return s;
  };

  useRedisServer((started, client) => {
    server = started;
    raw = client;
  }, opened);

  /** One operation: reserve, settle to `ESTIMATE`, read (what the RateLimit headers do). */
  async function operation(s: SharedState, key: string, windows = windowOf(100)) {
    const held = (await s.budgets.reserve(key, windows, ESTIMATE, Date.now(), 60_000)) as BudgetReserveResult;
    if (held.ok)
      s.budgets.settle(key, windows, held.at, ESTIMATE, ESTIMATE, Date.now(), undefined, held.lease);
    await s.budgets.read(key, windows, Date.now());
    return held.ok;
  }

  it('under a large budget an operation makes about no budget round trip; the share shows as reserved and goes back at close', async () => {
    const s = state();
    expect(await until(() => s.status() === 'redis')).toBe(true);
    const key = `large-${randomUUID()}`;
    // The first operation reserves on its own and takes a share.
    await operation(s, key);
    await until(async () => (await inRedis(raw, prefix, key)).reserved > ESTIMATE);
    const before = await scriptCalls(raw);
    const OPS = 400;
    for (let i = 0; i < OPS; i++) expect(await operation(s, key)).toBe(true);
    const calls = (await scriptCalls(raw)) - before;
    console.info(
      `budget-shares: ${calls} budget scripts for ${OPS} operations (${(calls / OPS).toFixed(3)} per operation)`,
    );
    expect(calls / OPS).toBeLessThanOrEqual(0.1);
    // What the replica holds is reserved for everyone to see; spend and share together are at least the bill.
    const seen = await inRedis(raw, prefix, key);
    expect(seen.reserved).toBeGreaterThan(0);
    // The `budget` field (and the RateLimit headers) show it as reserved too, without a round trip.
    const read = s.budgets.read(key, windowOf(100), Date.now());
    expect(read).not.toBeInstanceOf(Promise);
    expect(sum((await read).windows[0], 2)).toBeGreaterThan(0);
    expect(seen.spent + seen.reserved).toBeGreaterThanOrEqual((OPS + 1) * ESTIMATE - 1e-9);
    // Closed: the spend written back, the share given back.
    await s.close();
    expect(await inRedis(raw, prefix, key)).toEqual({
      spent: Math.round((OPS + 1) * ESTIMATE * 1e10) / 1e10,
      reserved: 0,
    });
  });

  it('an operation admitted against a share and never settled lapses at its lease into spend at its estimate, counted once', async () => {
    const lapses: number[][] = [];
    const s = state({ onBudgetLapse: (count, usd) => lapses.push([count, usd]) });
    expect(await until(() => s.status() === 'redis')).toBe(true);
    const key = `unsettled-${randomUUID()}`;
    for (let i = 0; i < 4; i++) await operation(s, key);
    expect(await until(async () => (await inRedis(raw, prefix, key)).reserved > ESTIMATE)).toBe(true);
    // Admitted against the share (no round trip: a synchronous answer), then never settled.
    const held = s.budgets.reserve(key, windowOf(100), ESTIMATE, Date.now(), 300);
    expect(held).toMatchObject({ ok: true, shared: true });
    expect(await until(() => lapses.length > 0)).toBe(true);
    expect(lapses).toEqual([[1, ESTIMATE]]);
    await s.close();
    expect(await inRedis(raw, prefix, key)).toEqual({
      spent: Math.round(5 * ESTIMATE * 1e10) / 1e10,
      reserved: 0,
    });
  });

  it('an idle share goes back by itself; the window then holds the spend only', async () => {
    const s = state();
    expect(await until(() => s.status() === 'redis')).toBe(true);
    const key = `idle-${randomUUID()}`;
    for (let i = 0; i < 20; i++) await operation(s, key);
    expect(
      await until(async () => {
        const seen = await inRedis(raw, prefix, key);
        return seen.reserved === 0 && Math.abs(seen.spent - 20 * ESTIMATE) < 1e-9;
      }, 100),
    ).toBe(true);
  });

  it('two replicas spend one budget: the last dollars one operation at a time, never past the limit', async () => {
    const a = state();
    const b = state();
    expect(await until(() => a.status() === 'redis' && b.status() === 'redis')).toBe(true);
    const key = `edge-${randomUUID()}`;
    const limit = 100 * ESTIMATE;
    expect(limit).toBeGreaterThan(SHARE_FLOOR_OPS * ESTIMATE);
    const windows = windowOf(limit);
    let admitted = 0;
    // Interleaved, a few at once on each, until both are refused.
    for (let round = 0; round < 200; round++) {
      const answers = await Promise.all(
        [a, b, a, b].map((s) => s.budgets.reserve(key, windows, ESTIMATE, Date.now(), 60_000)),
      );
      const held = answers.filter(
        (answer): answer is Extract<BudgetReserveResult, { ok: true }> => answer.ok,
      );
      admitted += held.length;
      held.forEach((answer, i) => {
        const s = i % 2 === 0 ? a : b;
        s.budgets.settle(key, windows, answer.at, ESTIMATE, ESTIMATE, Date.now(), undefined, answer.lease);
      });
      if (held.length === 0) break;
    }
    expect(admitted * ESTIMATE).toBeLessThanOrEqual(limit + 1e-9);
    // Nothing stranded for long: once the shares went back, what is left fits less than one operation.
    await Promise.all([a.close(), b.close()]);
    const seen = await inRedis(raw, prefix, key);
    expect(seen.reserved).toBe(0);
    expect(seen.spent).toBeCloseTo(admitted * ESTIMATE, 9);
    expect(admitted).toBeGreaterThanOrEqual(100 - 2);
  });

  it('Redis away: each replica spends its share and its part of what was left, never the whole remainder each', async () => {
    const own = await startRedisServer();
    try {
      const [a, b] = [state({ redisUrl: own.url }), state({ redisUrl: own.url })];
      expect(await until(() => a.status() === 'redis' && b.status() === 'redis')).toBe(true);
      const key = `outage-${randomUUID()}`;
      const limit = 200 * ESTIMATE;
      const windows = windowOf(limit);
      // Both active on the key (each holds a lease when the other decides), then Redis goes.
      let billed = 0;
      for (let i = 0; i < 10; i++) {
        const answers = await Promise.all(
          [a, b].map((s) => s.budgets.reserve(key, windows, ESTIMATE, Date.now(), 60_000)),
        );
        answers.forEach((answer, j) => {
          if (!answer.ok) return;
          billed += ESTIMATE;
          (j === 0 ? a : b).budgets.settle(
            key,
            windows,
            answer.at,
            ESTIMATE,
            ESTIMATE,
            Date.now(),
            undefined,
            answer.lease,
          );
        });
      }
      const left = limit - billed;
      await own.kill();
      expect(await until(() => a.status() === 'fallback' && b.status() === 'fallback')).toBe(true);
      let during = 0;
      for (let i = 0; i < 400; i++) {
        const s = i % 2 === 0 ? a : b;
        const answer = (await s.budgets.reserve(
          key,
          windows,
          ESTIMATE,
          Date.now(),
          60_000,
        )) as BudgetReserveResult;
        if (!answer.ok) continue;
        during += ESTIMATE;
        s.budgets.settle(key, windows, answer.at, ESTIMATE, ESTIMATE, Date.now(), undefined, answer.lease);
      }
      console.info(
        `budget-shares outage: ${billed.toFixed(3)} before, ${during.toFixed(3)} during (left ${left.toFixed(3)})`,
      );
      expect(during).toBeGreaterThan(0);
      expect(during).toBeLessThanOrEqual(left + 1e-9);
    } finally {
      await own.stop();
    }
  });

  it('a replica cut off holding a share: the share lapses into spend at its whole amount, counted once by the replica that noticed', async () => {
    // A reaches Redis through a loopback proxy; closing it cuts A off (a partition, or a process gone).
    const link = await startCuttableLink(server.port);
    const lapses: number[][] = [];
    const a = state({ redisUrl: link.url });
    const b = state({ onBudgetLapse: (count, usd) => lapses.push([count, usd]) });
    try {
      expect(await until(() => a.status() === 'redis' && b.status() === 'redis')).toBe(true);
      const key = `cut-${randomUUID()}`;
      for (let i = 0; i < 12; i++) await operation(a, key);
      // A holds a share (booked in Redis as reserved), with spend not yet written back perhaps.
      expect(await until(async () => (await inRedis(raw, prefix, key)).reserved > 0)).toBe(true);
      link.cut();
      expect(await until(() => a.status() === 'fallback')).toBe(true);
      const held = await inRedis(raw, prefix, key);
      // Not renewed, it lapses SHARE_LEASE_MS after A's last script (Redis' clock); B's read sweeps it.
      const lapsed = await until(
        async () => {
          await b.budgets.read(key, windowOf(100), Date.now());
          return lapses.length > 0;
        },
        Math.ceil((SHARE_LEASE_MS + 5000) / 100),
        100,
      );
      expect(lapsed).toBe(true);
      expect(lapses).toEqual([[1, expect.closeTo(held.reserved, 9)]]);
      const after = await inRedis(raw, prefix, key);
      expect(after.reserved).toBe(0);
      // Everything A held counts as spent: at least what its operations were billed.
      expect(after.spent).toBeCloseTo(held.spent + held.reserved, 9);
      expect(after.spent).toBeGreaterThanOrEqual(12 * ESTIMATE - 1e-9);
    } finally {
      link.cut();
    }
  }, 30_000);
});
