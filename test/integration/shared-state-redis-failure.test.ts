/**
 * Redis going away (killed, frozen, never there) never fails nor stalls a call: the shared state
 * falls back to memory, says so once, and rejoins by itself.
 */
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { createSharedState, type SharedState } from '../../src/gateway/shared-state/index.js';
import { capturedLogger, count, LEVEL } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { freePort, type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { LATE, until, within } from '../support/waits.js';

requireRedisServer('shared-state-redis-failure');
const DOWN = 'redis unavailable; using in-memory state';
/** A sliding hour in minute buckets (the shape of COST_BUDGET_USD_PER_HOUR). */
const HOUR_1 = [{ ms: 3_600_000, bucketMs: 60_000, limitUsd: 100, warnUsd: -1 }];
const BACK = 'redis back; sharing state again';
/**
 * What tells a stalled call from an answered one. Every call is bounded by the 25 ms command timeout
 * (or fails at once on a closed socket); a stalled one would wait for Redis until its socket closes,
 * or for ever. Seconds, far beyond any scheduling gap of a busy machine: only a stall is LATE.
 */
const STALL_MS = 10_000;

/** One of every call, each bounded: its outcome or LATE. */
async function everyCall(state: SharedState, key: string) {
  const now = Date.now();
  state.cache.set(key, { at: now }, 5000);
  state.budgets.add(key, HOUR_1, 0.01, now);
  state.flights.settle(`${key}-settled`, 1, 1000);
  return Promise.all([
    within(state.cache.get(key), STALL_MS),
    within(state.cache.get(`${key}-missing`), STALL_MS),
    within(state.flights.claim(key, 5000), STALL_MS),
    within(state.flights.await(`${key}-other`, 200), STALL_MS),
    within(state.budgets.read(key, HOUR_1, now), STALL_MS),
  ]);
}

describe('shared state when Redis fails', () => {
  const servers: RedisServer[] = [];
  const states: SharedState[] = [];
  afterAll(async () => {
    for (const state of states) await state.close();
    for (const server of servers) await server.stop();
  });

  function replica(url: string, prefix: string) {
    const log = capturedLogger();
    const registry = new Registry();
    // The default command timeout (25 ms): the one production uses.
    const state = createSharedState({
      redisUrl: url,
      keyPrefix: prefix,
      timeoutMs: 25,
      logger: log.logger,
      registry,
    });
    states.push(state);
    return { state, registry, ...log };
  }

  it('keeps answering through a kill, warns once, and rejoins after a restart', async () => {
    const server = await startRedisServer();
    servers.push(server);
    const prefix = `kill-${randomUUID().slice(0, 8)}:`;
    const a = replica(server.url, prefix);
    const b = replica(server.url, prefix);
    expect(await until(() => a.state.status() === 'redis' && b.state.status() === 'redis')).toBe(true);

    // B follows a flight A leads, then Redis dies under both.
    expect(await a.state.flights.claim('held', 60_000)).toBe('lead');
    expect(await b.state.flights.claim('held', 60_000)).toBe('follow');
    const following = within(b.state.flights.await('held', 60_000), STALL_MS);
    const calls = [0, 1, 2].map((i) => everyCall(a.state, `before-${i}`));
    // kill() sends SIGKILL at once and resolves when the process is gone: these calls race its death.
    const killed = server.kill();
    calls.push(...[0, 1, 2].map((i) => everyCall(a.state, `during-${i}`)));
    await killed;
    calls.push(everyCall(a.state, 'after'), everyCall(b.state, 'after'));
    const outcomes = (await Promise.all(calls)).flat(1);
    expect(outcomes).toHaveLength(8 * 5);
    expect(outcomes).not.toContain(LATE);
    // The follower stopped waiting (no answer), well before its 60 s.
    expect(await following).toBeUndefined();

    expect(await until(() => a.state.status() === 'fallback' && b.state.status() === 'fallback')).toBe(true);
    // In fallback the stores answer from memory, synchronously.
    a.state.cache.set('local', 'v', 5000);
    expect(a.state.cache.get('local')).toBe('v');
    expect(await a.state.flights.claim('held', 60_000)).toBe('lead');
    const spentAt = Date.now();
    a.state.budgets.add('outage-spend', HOUR_1, 2, spentAt);
    expect(a.state.budgets.read('outage-spend', HOUR_1, spentAt)).toEqual({
      at: spentAt,
      windows: [[[Math.floor(spentAt / 60_000) * 60_000, 2, 0]]],
    });
    expect(await metricValue(a.registry, 'gateway_redis_up')).toBe(0);

    // Several failed reconnections later, still one warning per replica.
    const connectionErrors = () =>
      metricValue(a.registry, 'gateway_redis_errors_total', { operation: 'connection' });
    expect(await until(async () => ((await connectionErrors()) ?? 0) >= 3)).toBe(true);
    expect(count(a.lines, LEVEL.warn, DOWN)).toBe(1);
    expect(count(b.lines, LEVEL.warn, DOWN)).toBe(1);

    await server.restart();
    expect(await until(() => a.state.status() === 'redis' && b.state.status() === 'redis', 200)).toBe(true);
    expect(count(a.lines, LEVEL.info, BACK)).toBe(1);
    expect(count(b.lines, LEVEL.info, BACK)).toBe(1);
    expect(count(a.lines, LEVEL.warn, DOWN)).toBe(1);
    expect(await metricValue(a.registry, 'gateway_redis_up')).toBe(1);

    // Sharing works again (the restarted Redis is empty: its scripts are loaded anew).
    a.state.cache.set('again', { shared: true }, 5000);
    expect(await a.state.flights.claim('again', 5000)).toBe('lead'); // A's SET is in before this reply
    expect(await b.state.cache.get('again')).toEqual({ shared: true });
    // Spend A saw during the outage still counts in A's window, merged with Redis' (empty) one.
    const read = await a.state.budgets.read('outage-spend', HOUR_1, spentAt);
    expect(read.windows).toEqual([[[Math.floor(spentAt / 60_000) * 60_000, 2, 0]]]);
  });

  it('treats a run of timed-out commands on an open socket as an outage, and rejoins', async () => {
    const server = await startRedisServer();
    servers.push(server);
    const a = replica(server.url, `pause-${randomUUID().slice(0, 8)}:`);
    expect(await until(() => a.state.status() === 'redis')).toBe(true);
    try {
      // Redis stops answering until the test thaws it; the sockets stay open.
      server.freeze();
      const outcomes: unknown[] = [];
      for (let i = 0; i < 5 && a.state.status() === 'redis'; i++)
        outcomes.push(...(await everyCall(a.state, `slow-${i}`)));
      expect(outcomes).not.toContain(LATE);
      expect(a.state.status()).toBe('fallback');
      expect(count(a.lines, LEVEL.warn, DOWN)).toBe(1);
      expect(String(a.lines.find((line) => line.msg === DOWN)?.reason)).toContain('timed out');
      expect(
        await metricValue(a.registry, 'gateway_redis_errors_total', { operation: 'cache_get' }),
      ).toBeGreaterThan(0);
      // While in fallback nothing is sent: a local miss is a synchronous undefined.
      expect(a.state.cache.get('slow-missing')).toBeUndefined();
      server.thaw();
      expect(await until(() => a.state.status() === 'redis', 200)).toBe(true);
      expect(count(a.lines, LEVEL.info, BACK)).toBe(1);
      expect(count(a.lines, LEVEL.warn, DOWN)).toBe(1);
    } finally {
      server.thaw();
    }
  });

  it('starts in fallback when nothing listens, never logs the password, and joins once Redis is there', async () => {
    const closed = replica(`redis://gateway:s3cret-pw@127.0.0.1:${await freePort()}`, 'closed:');
    expect(closed.state.status()).toBe('fallback');
    closed.state.cache.set('k', 'v', 1000);
    expect(closed.state.cache.get('k')).toBe('v');
    expect(closed.state.cache.get('missing')).toBeUndefined();
    expect(await within(closed.state.flights.claim('k', 1000), STALL_MS)).toBe('lead');
    expect((await closed.state.budgets.read('k', HOUR_1, Date.now())).windows).toEqual([[]]);
    expect(await until(() => count(closed.lines, LEVEL.warn, DOWN) === 1)).toBe(true);
    expect(closed.raw.join('')).not.toContain('s3cret-pw');
    // The address is logged without user or password.
    expect(closed.lines.find((line) => line.msg === DOWN)?.redis).toMatch(/^redis:\/\/127\.0\.0\.1:\d+$/);

    // A Redis that is down when the gateway starts, and comes up later.
    const server = await startRedisServer();
    servers.push(server);
    await server.stop();
    const late = replica(server.url, 'late:');
    expect(late.state.status()).toBe('fallback');
    expect(await until(() => count(late.lines, LEVEL.warn, DOWN) === 1)).toBe(true);
    await server.restart();
    expect(await until(() => late.state.status() === 'redis', 200)).toBe(true);
    expect(count(late.lines, LEVEL.info, BACK)).toBe(1);
    expect(count(late.lines, LEVEL.warn, DOWN)).toBe(1);
  });
});
