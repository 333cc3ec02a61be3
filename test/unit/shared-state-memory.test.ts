import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createSharedState } from '../../src/gateway/shared-state/index.js';

const silent = pino({ level: 'silent' });
const HOUR = 3_600_000;
const MINUTE = 60_000;
/** A sliding hour in minute buckets, no warning. */
const HOUR_WINDOW = { ms: HOUR, bucketMs: MINUTE, limitUsd: 100, warnUsd: -1 };
const H = [HOUR_WINDOW];

function memoryState(options: { localMaxEntries?: number; localMaxBytes?: number } = {}) {
  let time = 1_000_000;
  const state = createSharedState({ logger: silent, now: () => time, ...options });
  return {
    state,
    advance: (ms: number) => {
      time += ms;
    },
  };
}

describe('shared state in memory (no REDIS_URL)', () => {
  it('says so and registers no Redis metrics', async () => {
    const registry = new Registry();
    const state = createSharedState({ logger: silent, registry });
    expect(state.status()).toBe('memory');
    const names = (await registry.getMetricsAsJSON()).map((metric) => metric.name);
    expect(names.filter((name) => name.startsWith('gateway_redis'))).toEqual([]);
    await state.close();
    expect(state.status()).toBe('memory');
  });

  it('answers a cache get synchronously, hit or miss: no promise on the hit path', () => {
    const { state } = memoryState();
    const value = { answer: { kind: 'boolean', value: true } };
    state.cache.set('k', value, 1000);
    const hit = state.cache.get('k');
    expect(hit).not.toBeInstanceOf(Promise);
    expect(hit).toBe(value);
    const miss = state.cache.get('other');
    expect(miss).not.toBeInstanceOf(Promise);
    expect(miss).toBeUndefined();
  });

  it('forgets an answer when its TTL has passed (injected clock)', () => {
    const { state, advance } = memoryState();
    state.cache.set('k', 'v', 1000);
    advance(999);
    expect(state.cache.get('k')).toBe('v');
    advance(1);
    expect(state.cache.get('k')).toBeUndefined();
    expect(state.cache.size).toBe(0);
  });

  it('keeps at most localMaxEntries answers, least recently used out first', () => {
    const { state } = memoryState({ localMaxEntries: 2 });
    state.cache.set('a', 1, 10_000);
    state.cache.set('b', 2, 10_000);
    expect(state.cache.get('a')).toBe(1); // a is now more recent than b
    state.cache.set('c', 3, 10_000);
    expect(state.cache.size).toBe(2);
    expect(state.cache.get('b')).toBeUndefined();
    expect(state.cache.get('a')).toBe(1);
    expect(state.cache.get('c')).toBe(3);
  });

  it('keeps at most localMaxBytes of answers, by the sizes given to set', () => {
    const { state } = memoryState({ localMaxBytes: 1000 });
    state.cache.set('big', 'x', 10_000, 600);
    state.cache.set('bigger', 'y', 10_000, 600);
    expect(state.cache.get('big')).toBeUndefined();
    expect(state.cache.get('bigger')).toBe('y');
    state.cache.set('huge', 'z', 10_000, 5000);
    expect(state.cache.get('huge')).toBeUndefined();
  });

  it('stores neither undefined nor answers without a positive TTL; clear forgets all', () => {
    const { state } = memoryState();
    state.cache.set('u', undefined, 1000);
    state.cache.set('zero', 'v', 0);
    expect(state.cache.size).toBe(0);
    state.cache.set('a', null, 1000);
    expect(state.cache.get('a')).toBeNull();
    state.cache.clear();
    expect(state.cache.size).toBe(0);
    expect(state.cache.get('a')).toBeUndefined();
  });

  it('bounds APQ documents: larger than documentMaxBytes, or past documentsPerOwner new ones per owner per day, are not stored', () => {
    let time = 1_000_000;
    const state = createSharedState({
      logger: silent,
      now: () => time,
      documentMaxBytes: 100,
      documentsPerOwner: 2,
    });
    state.documents.set('big', 'é'.repeat(51), 60_000); // 102 bytes of UTF-8
    expect(state.documents.get('big')).toBeUndefined();
    state.documents.set('fits', 'x'.repeat(100), 60_000);
    expect(state.documents.get('fits')).toBe('x'.repeat(100));
    // Per owner: two new documents a day; registering one again does not count.
    for (const id of ['a', 'b', 'a', 'c'])
      state.documents.set(id, `{ ${id} }`, 60_000, undefined, 'client-1');
    expect([state.documents.get('a'), state.documents.get('b'), state.documents.get('c')]).toEqual([
      '{ a }',
      '{ b }',
      undefined,
    ]);
    state.documents.set('d', '{ d }', 60_000, undefined, 'client-2');
    expect(state.documents.get('d')).toBe('{ d }');
    // A day later the owner may register again. Without an owner only the size counts.
    time += 24 * HOUR;
    state.documents.set('c', '{ c }', 60_000, undefined, 'client-1');
    expect(state.documents.get('c')).toBe('{ c }');
    for (let i = 0; i < 5; i++) state.documents.set(`anon-${i}`, '{ x }', 60_000);
    expect(state.documents.get('anon-4')).toBe('{ x }');
    // The response cache has no such bound.
    state.cache.set('answer', 'y'.repeat(1000), 60_000);
    expect(state.cache.get('answer')).toBe('y'.repeat(1000));
  });

  it('always leads a flight, and a follower gets nothing (in-process sharing is elsewhere)', async () => {
    const { state } = memoryState();
    expect(await state.flights.claim('f', 1000)).toBe('lead');
    expect(await state.flights.claim('f', 1000)).toBe('lead');
    expect(() => state.flights.settle('f', { x: 1 }, 1000)).not.toThrow();
    expect(await state.flights.await('f', 1000)).toBeUndefined();
  });

  it('sums spend per minute bucket, synchronously, oldest first', () => {
    const { state } = memoryState();
    const t0 = 100 * HOUR; // a bucket boundary
    state.budgets.add('key', H, 0.5, t0 + 1000);
    state.budgets.add('key', H, 0.25, t0 + 59_000);
    state.budgets.add('key', H, 1, t0 + MINUTE);
    state.budgets.add('other', H, 7, t0);
    const window = state.budgets.read('key', H, t0 + MINUTE + 1);
    expect(window).not.toBeInstanceOf(Promise);
    expect(window).toEqual({
      at: t0 + MINUTE + 1,
      windows: [
        [
          [t0, 0.75, 0],
          [t0 + MINUTE, 1, 0],
        ],
      ],
    });
    expect(state.budgets.read('nobody', H, t0)).toEqual({ at: t0, windows: [[]] });
  });

  it('slides the hour: a bucket drops out once its start is an hour old', () => {
    const { state } = memoryState();
    const t0 = 100 * HOUR;
    state.budgets.add('key', H, 1, t0);
    state.budgets.add('key', H, 2, t0 + 30 * MINUTE);
    const buckets = (at: number) => (state.budgets.read('key', H, at) as { windows: unknown[][] }).windows[0];
    expect(buckets(t0 + HOUR - 1)).toEqual([
      [t0, 1, 0],
      [t0 + 30 * MINUTE, 2, 0],
    ]);
    expect(buckets(t0 + HOUR)).toEqual([[t0 + 30 * MINUTE, 2, 0]]);
    expect(buckets(t0 + 90 * MINUTE)).toEqual([]);
  });

  it('ignores spend that is not a positive finite amount', () => {
    const { state } = memoryState();
    const t0 = 100 * HOUR;
    state.budgets.add('key', H, -1, t0);
    state.budgets.add('key', H, 0, t0);
    state.budgets.add('key', H, Number.NaN, t0);
    state.budgets.add('key', H, Number.POSITIVE_INFINITY, t0);
    expect(state.budgets.read('key', H, t0)).toEqual({ at: t0, windows: [[]] });
  });
});
