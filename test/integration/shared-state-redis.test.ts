/**
 * Two SharedState instances on one real Redis, as two gateway replicas would be.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSharedState, type SharedState } from '../../src/gateway/shared-state/index.js';
import { redisKey } from '../../src/gateway/shared-state/redis-keys.js';
import { metricValue } from '../support/metric-values.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { until, within } from '../support/waits.js';

requireRedisServer('shared-state-redis');
const HOUR = 3_600_000;
const MINUTE = 60_000;

describe('shared state in Redis, two replicas', () => {
  const prefix = `test-${randomUUID().slice(0, 8)}:`;
  const silent = pino({ level: 'silent' });
  const registryA = new Registry();
  let server: RedisServer;
  let raw: Redis;
  let a: SharedState;
  let b: SharedState;

  beforeAll(async () => {
    server = await startRedisServer();
    raw = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await raw.connect();
    // A timeout far above the default: a loaded CI machine must not turn these tests into fallbacks.
    a = createSharedState({
      redisUrl: server.url,
      keyPrefix: prefix,
      timeoutMs: 1000,
      logger: silent,
      registry: registryA,
    });
    b = createSharedState({ redisUrl: server.url, keyPrefix: prefix, timeoutMs: 1000, logger: silent });
    expect(await until(() => a.status() === 'redis' && b.status() === 'redis')).toBe(true);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    raw?.disconnect();
    await server?.stop();
  });

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
    expect(await raw.exists(redisKey(prefix, 'flight', 'pi\nfree\n10'))).toBe(0);
    const answerTtl = await raw.pttl(redisKey(prefix, 'answer', 'pi\nfree\n10'));
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
    expect(await raw.exists(redisKey(prefix, 'flight', 'failing'))).toBe(0);
    expect(await raw.exists(redisKey(prefix, 'answer', 'failing'))).toBe(0);
  });

  it("expires a dead leader's lock by its TTL: the follower gets undefined and may lead", async () => {
    expect(await a.flights.claim('orphan', 300)).toBe('lead');
    const lockTtl = await raw.pttl(redisKey(prefix, 'flight', 'orphan'));
    expect(lockTtl).toBeGreaterThan(0);
    expect(lockTtl).toBeLessThanOrEqual(300);
    expect(await b.flights.claim('orphan', 5000)).toBe('follow');
    // A never settles. B would wait a minute; it stops once the lock is gone (bounded far below that).
    expect(await within(b.flights.await('orphan', 60_000), 5000)).toBeUndefined();
    expect(await raw.exists(redisKey(prefix, 'flight', 'orphan'))).toBe(0);
    expect(await b.flights.claim('orphan', 5000)).toBe('lead');
    b.flights.settle('orphan', undefined, 1000);
  });

  it('stops following when the signal says cancelled, lock still held', async () => {
    expect(await a.flights.claim('abandoned', 5000)).toBe('lead');
    const signal = { cancelled: false };
    const following = b.flights.await('abandoned', 10_000, signal);
    signal.cancelled = true;
    expect(await following).toBeUndefined();
    expect(await raw.exists(redisKey(prefix, 'flight', 'abandoned'))).toBe(1);
    a.flights.settle('abandoned', undefined, 1000);
  });

  it('sums the spend of both replicas in one sliding window', async () => {
    const t0 = Math.floor(Date.now() / HOUR) * HOUR;
    a.budgets.add('api-key-1', 0.5, t0 + 1000);
    a.budgets.add('api-key-1', 1e-7, t0 + MINUTE);
    b.budgets.add('api-key-1', 0.25, t0 + 2000);
    // Each replica's window is read after its own add on the same connection: both adds are in.
    await a.budgets.window('api-key-1', t0 + MINUTE);
    const window = await b.budgets.window('api-key-1', t0 + MINUTE);
    expect(window).toHaveLength(2);
    expect(window[0]?.[0]).toBe(t0);
    expect(window[0]?.[1]).toBeCloseTo(0.75, 10);
    expect(window[1]).toEqual([t0 + MINUTE, 1e-7]);
    // An hour after its start the first bucket is out of the window, for both replicas.
    expect(await a.budgets.window('api-key-1', t0 + HOUR)).toEqual([[t0 + MINUTE, 1e-7]]);
    const ttl = await raw.pttl(redisKey(prefix, 'budget', 'api-key-1'));
    expect(ttl).toBeGreaterThan(HOUR);
    expect(ttl).toBeLessThanOrEqual(HOUR + 2 * MINUTE);
  });

  it('reserves atomically across replicas: of 100 concurrent reservations through A and B, exactly those that fit', async () => {
    const now = Date.now();
    const tries = Array.from({ length: 100 }, (_, i) =>
      (i % 2 === 0 ? a : b).budgets.reserve('api-key-3', 0.01, 0.25, now),
    );
    const answers = await Promise.all(tries);
    const taken = answers.filter((r) => r.ok);
    expect(taken).toHaveLength(25);
    // Both replicas' reservations went through Redis, not each replica's own memory.
    expect(taken.every((r) => r.ok && r.shared)).toBe(true);
    const refused = answers.find((r) => !r.ok);
    expect(refused !== undefined && !refused.ok && refused.buckets.length).toBe(1);
    const stored = await raw.hgetall(redisKey(prefix, 'budget', 'api-key-3'));
    expect(Object.values(stored).reduce((sum, usd) => sum + Number(usd), 0)).toBeCloseTo(0.25, 10);
    // Settling one to a smaller actual cost makes room, for B too.
    const first = taken[0];
    if (first === undefined || !first.ok) throw new Error('unreachable');
    a.budgets.adjust('api-key-3', first.bucketStart, -0.006, now);
    // A read through A after its write, on the same connection: the write is in Redis by then.
    await a.budgets.window('api-key-3', now);
    expect(await b.budgets.reserve('api-key-3', 0.007, 0.25, now)).toMatchObject({ ok: false });
    expect(await b.budgets.reserve('api-key-3', 0.006, 0.25, now)).toMatchObject({ ok: true, shared: true });
  });

  it('drops buckets older than the hour from the Redis hash on the next add', async () => {
    const t0 = Math.floor(Date.now() / HOUR) * HOUR;
    a.budgets.add('api-key-2', 1, t0);
    a.budgets.add('api-key-2', 2, t0 + HOUR + MINUTE);
    await a.budgets.window('api-key-2', t0 + HOUR + MINUTE);
    expect(await raw.hkeys(redisKey(prefix, 'budget', 'api-key-2'))).toEqual([String(t0 + HOUR + MINUTE)]);
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
