/**
 * Two SharedState instances on one real Redis, as two gateway replicas would be.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSharedState, type SharedState } from '../../src/gateway/shared-state/index.js';
import {
  budgetRedisKeys,
  redisKey,
  replicaRegistryKey,
  taggedRedisKey,
} from '../../src/gateway/shared-state/redis-keys.js';
import { metricValue } from '../support/metric-values.js';
import { type RedisReplicas, startRedisReplicas } from '../support/redis-replicas.js';
import { freePort, type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { until, within } from '../support/waits.js';

requireRedisServer('shared-state-redis');
const HOUR = 3_600_000;
const MINUTE = 60_000;
/** A sliding hour in minute buckets (the shape of COST_BUDGET_USD_PER_HOUR), no warning. */
const HOUR_WINDOW = { ms: HOUR, bucketMs: MINUTE, limitUsd: 100, warnUsd: -1 };
const HOUR_1 = [HOUR_WINDOW];

describe('shared state in Redis, two replicas', () => {
  const prefix = `test-${randomUUID().slice(0, 8)}:`;
  const silent = pino({ level: 'silent' });
  const registryA = new Registry();
  let server: RedisServer;
  let raw: Redis;
  let a: SharedState;
  let b: SharedState;

  let replicas: RedisReplicas;

  beforeAll(async () => {
    replicas = await startRedisReplicas({ keyPrefix: prefix, a: { registry: registryA } });
    ({ server, raw, a, b } = replicas);
  });

  afterAll(() => replicas?.stop());

  it('reports Redis as up in the metrics', async () => {
    expect(await metricValue(registryA, 'gateway_redis_up')).toBe(1);
  });

  it('finds through B an answer set through A, then keeps it locally', async () => {
    const value = { answer: { kind: 'boolean', value: false }, sponsoredBy: 'ACME' };
    a.cache.set('check\nfree\n[null]', value, 5000);
    // A's SET and this read travel on different connections: wait until it landed.
    expect(
      await until(async () => (await raw.exists(redisKey(prefix, 'cache', 'check\nfree\n[null]'))) === 1),
    ).toBe(true);
    expect(b.cache.size).toBe(0);
    const remote = b.cache.get('check\nfree\n[null]');
    expect(remote).toBeInstanceOf(Promise);
    expect(await remote).toEqual(value);
    const local = b.cache.get('check\nfree\n[null]');
    expect(local).not.toBeInstanceOf(Promise);
    expect(local).toEqual(value);
    expect(b.cache.size).toBe(1);
  });

  it('keeps APQ documents under their own keys: a document registered through A is found through B, never in the cache', async () => {
    const hash = 'a'.repeat(64);
    a.documents.set(hash, 'query Registered { __typename }', 60_000);
    expect(await until(async () => (await raw.exists(redisKey(prefix, 'documents', hash))) === 1)).toBe(true);
    expect(await raw.exists(redisKey(prefix, 'cache', hash))).toBe(0);
    expect(await b.cache.get(hash)).toBeUndefined();
    expect(await b.documents.get(hash)).toBe('query Registered { __typename }');
    expect(b.documents.size).toBe(1);
  });

  it('counts an owner’s new APQ documents across replicas: past the bound, Redis stores no more of them', async () => {
    const ownerA = createSharedState({
      redisUrl: server.url,
      keyPrefix: prefix,
      timeoutMs: 1000,
      logger: silent,
      documentsPerOwner: 2,
    });
    const ownerB = createSharedState({
      redisUrl: server.url,
      keyPrefix: prefix,
      timeoutMs: 1000,
      logger: silent,
      documentsPerOwner: 2,
    });
    try {
      expect(await until(() => ownerA.status() === 'redis' && ownerB.status() === 'redis')).toBe(true);
      const hashes = ['1', '2', '3'].map((d) => d.repeat(64));
      const documentKey = (i: number) => redisKey(prefix, 'documents', hashes[i] as string);
      // Each write is in Redis before the next (a registration takes a few round trips).
      ownerA.documents.set(hashes[0] as string, '{ one }', 60_000, undefined, 'client-9');
      expect(await until(async () => (await raw.exists(documentKey(0))) === 1)).toBe(true);
      ownerB.documents.set(hashes[1] as string, '{ two }', 60_000, undefined, 'client-9');
      expect(await until(async () => (await raw.exists(documentKey(1))) === 1)).toBe(true);
      // Through A again: A has counted one of this owner's documents, Redis two.
      ownerA.documents.set(hashes[2] as string, '{ three }', 60_000, undefined, 'client-9');
      const counters = await raw.keys(`${prefix}owner:*`);
      expect(counters).toHaveLength(1);
      // Counted (the third), and then refused: no document stored.
      expect(await until(async () => (await raw.get(counters[0] as string)) === '3')).toBe(true);
      await ownerA.flights.claim('owner-sync-3', 1000);
      const stored = await Promise.all(hashes.map((_, i) => raw.exists(documentKey(i))));
      expect(stored).toEqual([1, 1, 0]);
      // The owner's counter lives a day, under a digest.
      expect(await raw.pttl(counters[0] as string)).toBeGreaterThan(23 * HOUR);
    } finally {
      await ownerA.close();
      await ownerB.close();
    }
  });

  it('answers undefined for a key no replica set', async () => {
    expect(await b.cache.get('never-set')).toBeUndefined();
  });

  it('lets A lead a flight and hands its settled answer to B, the follower', async () => {
    expect(await a.flights.claim('pi\nfree\n10', 5000)).toBe('lead');
    expect(await b.flights.claim('pi\nfree\n10', 5000)).toBe('follow');
    const following = b.flights.await('pi\nfree\n10', 5000);
    a.flights.settle('pi\nfree\n10', { digits: '3.141592653' }, 2000);
    expect(await following).toEqual({ digits: '3.141592653' });
    // The lock is released and the answer lives only briefly.
    expect(await raw.exists(taggedRedisKey(prefix, 'flight', 'pi\nfree\n10'))).toBe(0);
    const answerTtl = await raw.pttl(taggedRedisKey(prefix, 'answer', 'pi\nfree\n10'));
    expect(answerTtl).toBeGreaterThan(0);
    expect(answerTtl).toBeLessThanOrEqual(2000);
  });

  it('tells the follower there is no answer when the leader settles without one', async () => {
    expect(await a.flights.claim('failing', 5000)).toBe('lead');
    expect(await b.flights.claim('failing', 5000)).toBe('follow');
    // Waits up to a minute unless it notices the release: bounded here far below that.
    const following = within(b.flights.await('failing', 60_000), 5000);
    a.flights.settle('failing', undefined, 2000);
    expect(await following).toBeUndefined();
    expect(await raw.exists(taggedRedisKey(prefix, 'flight', 'failing'))).toBe(0);
    expect(await raw.exists(taggedRedisKey(prefix, 'answer', 'failing'))).toBe(0);
  });

  it("expires a dead leader's lock by its TTL: the follower gets undefined and may lead", async () => {
    expect(await a.flights.claim('orphan', 300)).toBe('lead');
    const lockTtl = await raw.pttl(taggedRedisKey(prefix, 'flight', 'orphan'));
    expect(lockTtl).toBeGreaterThan(0);
    expect(lockTtl).toBeLessThanOrEqual(300);
    expect(await b.flights.claim('orphan', 5000)).toBe('follow');
    // A never settles. B would wait a minute; it stops once the lock is gone (bounded far below that).
    expect(await within(b.flights.await('orphan', 60_000), 5000)).toBeUndefined();
    expect(await raw.exists(taggedRedisKey(prefix, 'flight', 'orphan'))).toBe(0);
    expect(await b.flights.claim('orphan', 5000)).toBe('lead');
    b.flights.settle('orphan', undefined, 1000);
  });

  it('stops following when the signal says cancelled, lock still held', async () => {
    expect(await a.flights.claim('abandoned', 5000)).toBe('lead');
    const signal = { cancelled: false };
    const following = b.flights.await('abandoned', 10_000, signal);
    signal.cancelled = true;
    expect(await following).toBeUndefined();
    expect(await raw.exists(taggedRedisKey(prefix, 'flight', 'abandoned'))).toBe(1);
    a.flights.settle('abandoned', undefined, 1000);
  });

  /** The Redis key of a budget key's window (budget-store.ts: one hash per key and window length). */
  const budgetHash = (budgetKey: string, ms = HOUR) =>
    budgetRedisKeys(prefix, budgetKey, [ms]).windows[0] as string;

  it('sums the spend of both replicas in one sliding window, in buckets of Redis time', async () => {
    const before = Date.now();
    a.budgets.add('api-key-1', HOUR_1, 0.5, before);
    a.budgets.add('api-key-1', HOUR_1, 1e-7, before);
    b.budgets.add('api-key-1', HOUR_1, 0.25, before);
    // Each replica's window is read after its own add on the same connection: both adds are in.
    await a.budgets.read('api-key-1', HOUR_1, before);
    const read = await b.budgets.read('api-key-1', HOUR_1, before);
    const buckets = read.windows[0] ?? [];
    expect(buckets.reduce((sum, [, spent]) => sum + spent, 0)).toBeCloseTo(0.7500001, 10);
    expect(buckets.every(([, , reserved]) => reserved === 0)).toBe(true);
    // Buckets are whole minutes of Redis' clock (this machine's, here).
    for (const [start] of buckets) {
      expect(start % MINUTE).toBe(0);
      expect(Math.abs(start - before)).toBeLessThan(2 * MINUTE);
    }
    expect(Math.abs(read.at - Date.now())).toBeLessThan(5000);
    const ttl = await raw.pttl(budgetHash('api-key-1'));
    expect(ttl).toBeGreaterThan(HOUR);
    expect(ttl).toBeLessThanOrEqual(HOUR + 2 * MINUTE);
  });

  it("slides the window by Redis' clock, whatever clock the replica passes", async () => {
    // A bucket an hour and a minute old by Redis' clock, written as an older replica would have.
    const old = Math.floor(Date.now() / MINUTE) * MINUTE - HOUR - MINUTE;
    await raw.hset(budgetHash('api-key-2'), `s${old}`, '5');
    // A replica whose clock is two hours behind would still count it; Redis' clock does not.
    const behind = Date.now() - 2 * HOUR;
    expect((await a.budgets.read('api-key-2', HOUR_1, behind)).windows).toEqual([[]]);
    expect(await a.budgets.reserve('api-key-2', [{ ...HOUR_WINDOW, limitUsd: 1 }], 1, behind)).toMatchObject({
      ok: true,
      shared: true,
    });
    // The reservation dropped the old bucket from the hash, and sits in Redis' current minute.
    const fields = Object.keys(await raw.hgetall(budgetHash('api-key-2')));
    expect(fields).toHaveLength(1);
    expect(Math.abs(Number(fields[0]?.slice(1)) - Date.now())).toBeLessThan(2 * MINUTE);
  });

  it('reserves atomically across replicas: of 100 concurrent reservations through A and B, exactly those that fit', async () => {
    const now = Date.now();
    const window = [{ ...HOUR_WINDOW, limitUsd: 0.25 }];
    const tries = Array.from({ length: 100 }, (_, i) =>
      (i % 2 === 0 ? a : b).budgets.reserve('api-key-3', window, 0.01, now),
    );
    const answers = await Promise.all(tries);
    const taken = answers.filter((r) => r.ok);
    expect(taken).toHaveLength(25);
    // Both replicas' reservations went through Redis, not each replica's own memory.
    expect(taken.every((r) => r.ok && r.shared)).toBe(true);
    const refused = answers.find((r) => !r.ok);
    expect(refused !== undefined && !refused.ok && refused.windows[0]?.length).toBeGreaterThanOrEqual(1);
    const stored = await raw.hgetall(budgetHash('api-key-3'));
    expect(sumOf(stored, 'r')).toBeCloseTo(0.25, 10);
    expect(sumOf(stored, 's')).toBe(0);
    // Settling one to a smaller actual cost makes room, for B too.
    const first = taken[0];
    if (first === undefined || !first.ok) throw new Error('unreachable');
    a.budgets.settle('api-key-3', window, first.at, 0.01, 0.004, now);
    // A read through A after its write, on the same connection: the write is in Redis by then.
    await a.budgets.read('api-key-3', window, now);
    const settled = await raw.hgetall(budgetHash('api-key-3'));
    expect(sumOf(settled, 'r')).toBeCloseTo(0.24, 10);
    expect(sumOf(settled, 's')).toBeCloseTo(0.004, 10);
    expect(await b.budgets.reserve('api-key-3', window, 0.007, now)).toMatchObject({ ok: false });
    expect(await b.budgets.reserve('api-key-3', window, 0.006, now)).toMatchObject({
      ok: true,
      shared: true,
    });
  });

  it('reserves in every window of a scope or in none: the tighter window refuses, the other books nothing', async () => {
    const windows = [
      { ms: MINUTE, bucketMs: 1000, limitUsd: 0.05, warnUsd: -1 },
      { ...HOUR_WINDOW, limitUsd: 1 },
    ];
    const now = Date.now();
    for (let i = 0; i < 5; i++)
      expect(await (i % 2 ? a : b).budgets.reserve('api-key-4', windows, 0.01, now)).toMatchObject({
        ok: true,
      });
    const refused = await a.budgets.reserve('api-key-4', windows, 0.01, now);
    expect(refused.ok).toBe(false);
    if (refused.ok) throw new Error('unreachable');
    // Both windows as they were judged: 0.05 in each.
    for (const buckets of refused.windows)
      expect(buckets.reduce((sum, [, spent, reserved]) => sum + spent + reserved, 0)).toBeCloseTo(0.05, 10);
    expect(sumOf(await raw.hgetall(budgetHash('api-key-4', HOUR)), 'r')).toBeCloseTo(0.05, 10);
    expect(sumOf(await raw.hgetall(budgetHash('api-key-4', MINUTE)), 'r')).toBeCloseTo(0.05, 10);
    // The minute window's hash lives a minute and two seconds.
    expect(await raw.pttl(budgetHash('api-key-4', MINUTE))).toBeLessThanOrEqual(MINUTE + 2000);
  });

  it('says once, across replicas, that a window reached its warning figure', async () => {
    const window = [{ ...HOUR_WINDOW, limitUsd: 1, warnUsd: 0.8 }];
    const now = Date.now();
    const heard: unknown[] = [];
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).budgets.reserve('api-key-5', window, 0.1, now)),
    );
    for (const answer of answers) if (answer.ok) heard.push(...answer.warnings);
    // The reservation that took the window to 0.8 is the only one told (0.9 and 1.0 are past it).
    expect(heard).toEqual([{ index: 0, totalUsd: expect.closeTo(0.8, 9) }]);
    // Spend added later is past the figure too, and the warning was given: nothing more.
    const later: unknown[] = [];
    a.budgets.add('api-key-5', window, 0.05, now, (warning) => later.push(warning));
    await a.budgets.read('api-key-5', window, now);
    expect(later).toEqual([]);
  });

  it('writes only prefixed keys, each with a TTL, none naming the caller in clear', async () => {
    const keys = await raw.keys('*');
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(key.startsWith(prefix)).toBe(true);
      expect(key).not.toContain('api-key');
      expect(await raw.pttl(key)).toBeGreaterThan(0);
    }
  });
});

describe('budgets on a Redis that cannot lose them', () => {
  const silent = pino({ level: 'silent' });
  const servers: RedisServer[] = [];
  const states: SharedState[] = [];
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const state of states) await state.close();
    for (const client of clients) client.disconnect();
    for (const server of servers) await server.stop();
  });
  const server = async (args: string[] = []) => {
    const started = await startRedisServer({ args });
    servers.push(started);
    const client = new Redis(started.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await client.connect();
    clients.push(client);
    return { server: started, raw: client };
  };
  const state = (options: Partial<Parameters<typeof createSharedState>[0]>) => {
    const made = createSharedState({ logger: silent, timeoutMs: 1000, ...options });
    states.push(made);
    return made;
  };

  it('checks the eviction policy of the budgets’ Redis: noeviction or no maxmemory is safe, anything that may evict is not', async () => {
    const noeviction = await server(['--maxmemory', '8mb', '--maxmemory-policy', 'noeviction']);
    const lru = await server(['--maxmemory', '8mb', '--maxmemory-policy', 'allkeys-lru']);
    const volatile = await server(['--maxmemory', '8mb', '--maxmemory-policy', 'volatile-ttl']);
    const unlimited = await server(['--maxmemory-policy', 'allkeys-lru']);
    expect(await state({ redisUrl: noeviction.server.url }).checkBudgetRedis(2000)).toMatchObject({
      verdict: 'safe',
      memory: { policy: 'noeviction', maxmemory: 8 * 1024 * 1024 },
    });
    expect(await state({ redisUrl: lru.server.url }).checkBudgetRedis(2000)).toMatchObject({
      verdict: 'evicting',
      memory: { policy: 'allkeys-lru' },
    });
    // The budget hashes carry a TTL: volatile-* policies may pick them too.
    expect(await state({ redisUrl: volatile.server.url }).checkBudgetRedis(2000)).toMatchObject({
      verdict: 'evicting',
    });
    expect(await state({ redisUrl: unlimited.server.url }).checkBudgetRedis(2000)).toMatchObject({
      verdict: 'safe',
      memory: { maxmemory: 0 },
    });
    // Only the budgets' Redis counts: a cache Redis that evicts is what it is for.
    expect(
      await state({ redisUrl: noeviction.server.url, cacheRedisUrl: lru.server.url }).checkBudgetRedis(2000),
    ).toMatchObject({ verdict: 'safe' });
    expect(await state({}).checkBudgetRedis(2000)).toEqual({ verdict: 'memory' });
    expect(await state({ redisUrl: `redis://127.0.0.1:${await freePort()}` }).checkBudgetRedis(2000)).toEqual(
      { verdict: 'unreachable' },
    );
  });

  it('with REDIS_CACHE_URL, cache, documents and flights go there and budgets stay on REDIS_URL', async () => {
    const budgets = await server();
    const cache = await server(['--maxmemory', '8mb', '--maxmemory-policy', 'allkeys-lru']);
    const prefix = 'split:';
    const split = state({ redisUrl: budgets.server.url, cacheRedisUrl: cache.server.url, keyPrefix: prefix });
    expect(await until(() => split.status() === 'redis')).toBe(true);
    split.cache.set('answer', { x: 1 }, 60_000);
    split.documents.set('d'.repeat(64), '{ __typename }', 60_000);
    expect(await split.flights.claim('call', 5000)).toBe('lead');
    expect(await split.budgets.reserve('k', [HOUR_WINDOW], 0.5, Date.now())).toMatchObject({ shared: true });
    expect(await until(async () => (await cache.raw.keys(`${prefix}*`)).length === 3)).toBe(true);
    const inCache = await cache.raw.keys(`${prefix}*`);
    expect(inCache.filter((key) => key.startsWith(`${prefix}budget:`))).toEqual([]);
    const inBudgets = await budgets.raw.keys(`${prefix}*`);
    const k = budgetRedisKeys(prefix, 'k', [HOUR]);
    // The replica registry lives with the budgets (its first beat went before the reserve).
    expect(inBudgets.sort()).toEqual([...k.windows, k.lease, replicaRegistryKey(prefix)].sort());
  });

  it('a full Redis (noeviction, maxmemory reached) still books budgets; only cache writes are lost, and it is no outage', async () => {
    const full = await server(['--maxmemory-policy', 'noeviction']);
    const prefix = 'full:';
    const registry = new Registry();
    const replica = state({ redisUrl: full.server.url, keyPrefix: prefix, registry });
    expect(await until(() => replica.status() === 'redis')).toBe(true);
    // Filled with 4 MB of other keys, then limited to 1 MB: every write Redis checks is refused.
    for (let i = 0; i < 40; i++) await full.raw.set(`filler:${i}`, 'x'.repeat(100_000));
    await full.raw.config('SET', 'maxmemory', '1mb');
    await expect(full.raw.set('probe-of-the-test', '1')).rejects.toThrow(/^OOM /);

    const window = [{ ...HOUR_WINDOW, limitUsd: 0.03 }];
    for (let i = 0; i < 3; i++)
      expect(await replica.budgets.reserve('full-key', window, 0.01, Date.now())).toMatchObject({
        ok: true,
        shared: true,
      });
    expect(await replica.budgets.reserve('full-key', window, 0.01, Date.now())).toMatchObject({ ok: false });
    const booked = await full.raw.hgetall(budgetRedisKeys(prefix, 'full-key', [HOUR]).windows[0] as string);
    expect(sumOf(booked, 'r')).toBeCloseTo(0.03, 10);
    // Settlements go through too.
    replica.budgets.settle('full-key', window, Date.now(), 0.01, 0.002, Date.now());
    await replica.budgets.read('full-key', window, Date.now());
    expect(
      sumOf(await full.raw.hgetall(budgetRedisKeys(prefix, 'full-key', [HOUR]).windows[0] as string), 's'),
    ).toBeCloseTo(0.002, 10);
    // Cached answers are refused by Redis (counted), and sharing goes on: not an outage.
    for (let i = 0; i < 5; i++) replica.cache.set(`answer-${i}`, { i }, 60_000);
    expect(
      await until(
        async () =>
          ((await metricValue(registry, 'gateway_redis_errors_total', { operation: 'cache_set' })) ?? 0) >= 5,
      ),
    ).toBe(true);
    expect(await full.raw.keys(`${prefix}cache:*`)).toEqual([]);
    expect(replica.status()).toBe('redis');
  });
});

function sumOf(fields: Record<string, string>, kind: 's' | 'r'): number {
  return Object.entries(fields).reduce(
    (sum, [name, usd]) => (name.startsWith(kind) ? sum + Number(usd) : sum),
    0,
  );
}
