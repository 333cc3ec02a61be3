/**
 * The budget store's leases (budget-store.ts), on a real redis-server and in memory: a reservation
 * not settled by its lease's end counts as spent at its estimate, exactly once, whoever notices; a
 * late settlement books nothing more; what a replica reserved while Redis was away never reaches
 * Redis as a reservation, only as spend; every key of one budget key shares a Cluster hash tag.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSharedState, type SharedState } from '../../src/gateway/shared-state/index.js';
import { budgetRedisKeys } from '../../src/gateway/shared-state/redis-keys.js';
import type { BudgetBucket } from '../../src/gateway/shared-state/types.js';
import { type RedisReplicas, startRedisReplicas } from '../support/redis-replicas.js';
import { requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { sleep, until } from '../support/waits.js';

requireRedisServer('budget-leases-store');
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const HOUR_WINDOW = { ms: HOUR, bucketMs: 60_000, limitUsd: 1, warnUsd: -1 };
const DAY_WINDOW = { ms: DAY, bucketMs: 24 * 60_000, limitUsd: 5, warnUsd: -1 };
const WINDOWS = [HOUR_WINDOW, DAY_WINDOW];
const silent = pino({ level: 'silent' });

const sum = (buckets: BudgetBucket[] | undefined, index: 1 | 2) =>
  Math.round((buckets ?? []).reduce((total, bucket) => total + bucket[index], 0) * 1e10) / 1e10;

/** Spend and reservations of a hash's fields. */
function fieldsSum(fields: Record<string, string>, kind: 's' | 'r'): number {
  let total = 0;
  for (const [name, value] of Object.entries(fields)) if (name.startsWith(kind)) total += Number(value);
  return Math.round(total * 1e10) / 1e10;
}

describe('leases in Redis', () => {
  const prefix = `lease-${randomUUID().slice(0, 8)}:`;
  let raw: Redis;
  let a: SharedState;
  let b: SharedState;
  const lapses = { a: [] as number[][], b: [] as number[][] };

  let replicas: RedisReplicas;

  beforeAll(async () => {
    replicas = await startRedisReplicas({
      keyPrefix: prefix,
      a: { onBudgetLapse: (n, usd) => lapses.a.push([n, usd]) },
      b: { onBudgetLapse: (n, usd) => lapses.b.push([n, usd]) },
    });
    ({ raw, a, b } = replicas);
  });
  afterAll(() => replicas?.stop());

  it('an unsettled reservation lapses into spend in every window, once, counted by the replica that noticed; a late settlement books nothing more', async () => {
    const key = `lapse-${randomUUID()}`;
    const held = await a.budgets.reserve(key, WINDOWS, 0.3, Date.now(), 400);
    expect(held).toMatchObject({ ok: true, shared: true });
    const early = await b.budgets.read(key, WINDOWS, Date.now());
    expect(early.windows.map((w) => [sum(w, 1), sum(w, 2)])).toEqual([
      [0, 0.3],
      [0, 0.3],
    ]);
    await sleep(600);
    const late = await b.budgets.read(key, WINDOWS, Date.now());
    expect(late.windows.map((w) => [sum(w, 1), sum(w, 2)])).toEqual([
      [0.3, 0],
      [0.3, 0],
    ]);
    expect(lapses.b).toEqual([[1, 0.3]]);
    // Read again through both: nothing lapses twice.
    await a.budgets.read(key, WINDOWS, Date.now());
    await b.budgets.read(key, WINDOWS, Date.now());
    expect(lapses.b).toEqual([[1, 0.3]]);
    expect(lapses.a).toEqual([]);
    // A's settlement comes after the lapse (the lease is gone in Redis): nothing is booked again.
    if (!held.ok) throw new Error('reserved');
    a.budgets.settle(key, WINDOWS, held.at, 0.3, 0.1, Date.now(), undefined, held.lease);
    await a.budgets.read(key, WINDOWS, Date.now());
    const keys = budgetRedisKeys(prefix, key, [HOUR, DAY]);
    for (const hash of keys.windows) {
      const fields = await raw.hgetall(hash);
      expect([fieldsSum(fields, 's'), fieldsSum(fields, 'r')]).toEqual([0.3, 0]);
    }
    expect(await raw.exists(keys.lease)).toBe(0);
  });

  it('a settled reservation leaves no lease behind and never lapses', async () => {
    const key = `settled-${randomUUID()}`;
    const held = await a.budgets.reserve(key, WINDOWS, 0.2, Date.now(), 300);
    if (!held.ok) throw new Error('reserved');
    a.budgets.settle(key, WINDOWS, held.at, 0.2, 0.05, Date.now(), undefined, held.lease);
    const keys = budgetRedisKeys(prefix, key, [HOUR, DAY]);
    expect(await until(async () => (await raw.exists(keys.lease)) === 0)).toBe(true);
    await sleep(500);
    const before = lapses.b.length;
    const read = await b.budgets.read(key, WINDOWS, Date.now());
    expect(read.windows.map((w) => [sum(w, 1), sum(w, 2)])).toEqual([
      [0.05, 0],
      [0.05, 0],
    ]);
    expect(lapses.b.length).toBe(before);
  });

  it('every key of one budget key shares one hash tag (one Cluster slot)', () => {
    const keys = budgetRedisKeys(prefix, 'some-budget-key', [HOUR, DAY]);
    const tags = [keys.lease, ...keys.windows].map((name) => /\{([^}]+)\}/.exec(name)?.[1]);
    expect(new Set(tags).size).toBe(1);
    expect(tags[0]).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(keys.lease).toBe(`${prefix}lease:{${tags[0]}}`);
    expect(keys.windows).toEqual([
      `${prefix}budget:{${tags[0]}}:${HOUR}`,
      `${prefix}budget:{${tags[0]}}:${DAY}`,
    ]);
  });
});

describe('leases while Redis is away, and in memory', () => {
  it('reserved while Redis was away: never pushed as a reservation; its spend reaches Redis when it settles, or its estimate when it lapses', async () => {
    const server = await startRedisServer();
    const raw = new Redis(server.url, { maxRetriesPerRequest: 1 });
    raw.on('error', () => {}); // the test kills the server: the client reconnects by itself
    const prefix = `away-${randomUUID().slice(0, 8)}:`;
    const lapsed: number[][] = [];
    const state = createSharedState({
      redisUrl: server.url,
      keyPrefix: prefix,
      timeoutMs: 1000,
      logger: silent,
      onBudgetLapse: (n, usd) => lapsed.push([n, usd]),
    });
    try {
      expect(await until(() => state.status() === 'redis')).toBe(true);
      await server.kill();
      expect(await until(() => state.status() === 'fallback')).toBe(true);
      const settled = `settled-${randomUUID()}`;
      const abandoned = `abandoned-${randomUUID()}`;
      const one = await state.budgets.reserve(settled, WINDOWS, 0.2, Date.now(), 60_000);
      const two = await state.budgets.reserve(abandoned, WINDOWS, 0.3, Date.now(), 300);
      expect(one).toMatchObject({ ok: true, shared: false });
      expect(two).toMatchObject({ ok: true, shared: false });
      await server.restart();
      expect(await until(() => state.status() === 'redis', 200)).toBe(true);
      // Back: nothing was pushed as reserved.
      await state.budgets.read(settled, WINDOWS, Date.now());
      for (const hash of budgetRedisKeys(prefix, settled, [HOUR]).windows)
        expect(fieldsSum(await raw.hgetall(hash), 'r')).toBe(0);
      // Settled now: Redis learns the spend only.
      if (!one.ok) throw new Error('reserved');
      state.budgets.settle(settled, WINDOWS, one.at, 0.2, 0.05, Date.now(), undefined, one.lease);
      const settledHash = budgetRedisKeys(prefix, settled, [HOUR]).windows[0] as string;
      expect(await until(async () => fieldsSum(await raw.hgetall(settledHash), 's') === 0.05)).toBe(true);
      expect(fieldsSum(await raw.hgetall(settledHash), 'r')).toBe(0);
      // The other one's local lease lapses: counted once here, and its estimate owed to Redis as spend.
      await sleep(400);
      const local = await state.budgets.read(abandoned, WINDOWS, Date.now());
      expect(local.windows.map((w) => [sum(w, 1), sum(w, 2)])).toEqual([
        [0.3, 0],
        [0.3, 0],
      ]);
      expect(lapsed).toEqual([[1, 0.3]]);
      state.budgets.add(`other-${randomUUID()}`, WINDOWS, 0.01, Date.now()); // a write: flushes what is owed
      const abandonedHash = budgetRedisKeys(prefix, abandoned, [HOUR]).windows[0] as string;
      expect(await until(async () => fieldsSum(await raw.hgetall(abandonedHash), 's') === 0.3)).toBe(true);
      expect(fieldsSum(await raw.hgetall(abandonedHash), 'r')).toBe(0);
      // A late settlement of the lapsed one books nothing.
      if (!two.ok) throw new Error('reserved');
      state.budgets.settle(abandoned, WINDOWS, two.at, 0.3, 0.1, Date.now(), undefined, two.lease);
      const again = await state.budgets.read(abandoned, WINDOWS, Date.now());
      expect(again.windows.map((w) => [sum(w, 1), sum(w, 2)])).toEqual([
        [0.3, 0],
        [0.3, 0],
      ]);
      expect(lapsed).toEqual([[1, 0.3]]);
    } finally {
      await state.close();
      raw.disconnect();
      await server.stop();
    }
  });

  it('memory mode: a lease lapses at its end by the given clock, once', () => {
    const lapsed: number[][] = [];
    const state = createSharedState({ logger: silent, onBudgetLapse: (n, usd) => lapsed.push([n, usd]) });
    const t0 = 1_700_000_000_000;
    const held = state.budgets.reserve('k', WINDOWS, 0.4, t0, 10_000);
    expect(held).toMatchObject({ ok: true, shared: false });
    const during = state.budgets.read('k', WINDOWS, t0 + 9_999);
    if (during instanceof Promise) throw new Error('memory is synchronous');
    expect(during.windows.map((w) => [sum(w, 1), sum(w, 2)])).toEqual([
      [0, 0.4],
      [0, 0.4],
    ]);
    const after = state.budgets.read('k', WINDOWS, t0 + 10_000);
    if (after instanceof Promise) throw new Error('memory is synchronous');
    expect(after.windows.map((w) => [sum(w, 1), sum(w, 2)])).toEqual([
      [0.4, 0],
      [0.4, 0],
    ]);
    state.budgets.read('k', WINDOWS, t0 + 20_000);
    expect(lapsed).toEqual([[1, 0.4]]);
  });
});

describe('slow is not away', () => {
  it('cache commands timing out at their short wait make no outage while Redis still answers; a Redis that answers nothing for the budget wait is away', async () => {
    const server = await startRedisServer();
    const state = createSharedState({
      redisUrl: server.url,
      keyPrefix: `slow-${randomUUID().slice(0, 8)}:`,
      timeoutMs: 25,
      // Far above what a loaded machine stalls this process for: the first freeze stays "slow".
      budgetTimeoutMs: 5000,
      logger: silent,
    });
    try {
      expect(await until(() => state.status() === 'redis')).toBe(true);
      server.freeze();
      try {
        // Each times out at 25 ms: more than the three failures in a row an outage needs.
        for (let i = 0; i < 5; i++) expect(await state.cache.get(`slow-${i}`)).toBeUndefined();
      } finally {
        server.thaw();
      }
      expect(state.status()).toBe('redis');
      // The budgets never left Redis.
      expect(await state.budgets.reserve('slow-key', WINDOWS, 0.1, Date.now())).toMatchObject({
        ok: true,
        shared: true,
      });
      server.freeze();
      try {
        // Nothing answered for the budget wait: away.
        let away = false;
        for (let i = 0; i < 400 && !away; i++) {
          await state.cache.get(`away-${i}`);
          away = state.status() === 'fallback';
          if (!away) await sleep(25);
        }
        expect(away).toBe(true);
      } finally {
        server.thaw();
      }
      expect(await until(() => state.status() === 'redis', 200)).toBe(true);
    } finally {
      await state.close();
      await server.stop();
    }
  }, 60_000);
});
