/**
 * The replica registry (shared-state/replica-registry.ts), on real redis-server processes: replicas
 * know each other through Redis even when their operations on a budget key never overlapped, so with
 * Redis killed outright the two together spend no more than what was left (plus one estimate each);
 * without the registry (its beat off) each spends the whole remainder alone. A replica that closes
 * leaves the registry; one cut off (as a killed process) ages out. Its beats count under `health` in
 * gateway_redis_commands_total, nothing under `budget`.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { RedisBudgetStore } from '../../src/gateway/shared-state/budget-redis.js';
import { createSharedState, type SharedState } from '../../src/gateway/shared-state/index.js';
import { budgetRedisKeys, replicaRegistryKey } from '../../src/gateway/shared-state/redis-keys.js';
import type { BudgetReserveResult } from '../../src/gateway/shared-state/types.js';
import { ESTIMATE, HOUR, silent, useRedisServer, windowOf } from '../support/budget-stores.js';
import {
  type RedisServer,
  requireRedisServer,
  startCuttableLink,
  startRedisServer,
} from '../support/redis-server.js';
import { until } from '../support/waits.js';

requireRedisServer('budget-replicas');
/** Short beats keep the tests quick (entries count for 3 beats). */
const BEAT_MS = 100;
const replicasOf = (s: SharedState) => (s.budgets as RedisBudgetStore).replicas();

/** One operation on `s`: reserve, settle at its estimate; whether it was admitted. */
async function operation(s: SharedState, key: string, windows: ReturnType<typeof windowOf>) {
  const held = (await s.budgets.reserve(key, windows, ESTIMATE, Date.now(), 60_000)) as BudgetReserveResult;
  if (held.ok) s.budgets.settle(key, windows, held.at, ESTIMATE, ESTIMATE, Date.now(), undefined, held.lease);
  return held.ok;
}

describe('the replica registry', () => {
  let server: RedisServer;
  let raw: Redis;
  const opened: SharedState[] = [];
  const state = (url: string, prefix: string, heartbeatMs = BEAT_MS, registry?: Registry) => {
    const s = createSharedState({
      redisUrl: url,
      keyPrefix: prefix,
      timeoutMs: 1000,
      logger: silent,
      budgets: true,
      replicaHeartbeatMs: heartbeatMs,
      registry,
    });
    opened.push(s);
    return s;
  };

  useRedisServer((started, client) => {
    server = started;
    raw = client;
  }, opened);

  /**
   * A serves one operation on a key, then B one (A's lease gone first: they never overlap), then
   * Redis is killed and both serve on; what they admitted during the outage, and what was left.
   */
  async function apartThenKilled(heartbeatMs: number) {
    const own = await startRedisServer();
    const prefix = `apart-${randomUUID().slice(0, 8)}:`;
    try {
      const [a, b] = [state(own.url, prefix, heartbeatMs), state(own.url, prefix, heartbeatMs)];
      expect(await until(() => a.status() === 'redis' && b.status() === 'redis')).toBe(true);
      const key = `apart-${randomUUID()}`;
      const limit = 200 * ESTIMATE;
      const windows = windowOf(limit);
      const lease = budgetRedisKeys(prefix, key, [HOUR]).lease;
      const direct = new Redis(own.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
      await direct.connect();
      try {
        if (heartbeatMs > 0) {
          // Both registered before either serves: each learns 2 from the registry, not from the key.
          expect(await until(() => replicasOf(a) === 2 && replicasOf(b) === 2)).toBe(true);
          expect(await direct.zcard(replicaRegistryKey(prefix))).toBe(2);
        }
        for (const s of [a, b]) {
          expect(await operation(s, key, windows)).toBe(true);
          // Settled in Redis: the lease set is empty, so the other never sees this one in it.
          expect(await until(async () => (await direct.zcard(lease)) === 0)).toBe(true);
        }
      } finally {
        direct.disconnect();
      }
      const left = limit - 2 * ESTIMATE;
      await own.kill();
      expect(await until(() => a.status() === 'fallback' && b.status() === 'fallback')).toBe(true);
      let during = 0;
      for (let i = 0; i < 400; i++)
        if (await operation(i % 2 === 0 ? a : b, key, windows)) during += ESTIMATE;
      console.info(
        `budget-replicas (beat ${heartbeatMs} ms): ${during.toFixed(3)} spent during the outage, ${left.toFixed(3)} left`,
      );
      return { during, left, replicas: [replicasOf(a), replicasOf(b)] };
    } finally {
      await own.stop();
    }
  }

  it('two replicas that never overlapped on a key count each other; Redis killed, together they spend no more than what was left', async () => {
    const { during, left, replicas } = await apartThenKilled(BEAT_MS);
    expect(replicas).toEqual([2, 2]);
    expect(during).toBeGreaterThan(0);
    expect(during).toBeLessThanOrEqual(left + 2 * ESTIMATE + 1e-9);
  });

  it('without the registry (beat off), the same two count only themselves and each spends the whole remainder', async () => {
    // The control of the test above: the gap the registry closes.
    const { during, left, replicas } = await apartThenKilled(0);
    expect(replicas).toEqual([1, 1]);
    expect(during).toBeGreaterThan(1.5 * left);
  });

  it('a replica that closes leaves the registry; one cut off ages out; the beats count as health, not budget', async () => {
    const prefix = `leave-${randomUUID().slice(0, 8)}:`;
    const registryKey = replicaRegistryKey(prefix);
    // C reaches Redis through a loopback proxy; closing it cuts C off, as a killed process would be.
    const link = await startCuttableLink(server.port);
    const metrics = new Registry();
    const a = state(server.url, prefix, BEAT_MS, metrics);
    const b = state(server.url, prefix);
    const c = state(link.url, prefix);
    try {
      expect(await until(() => [a, b, c].every((s) => replicasOf(s) === 3))).toBe(true);
      expect(await raw.zcard(registryKey)).toBe(3);
      // Closed: gone at once.
      await b.close();
      expect(await raw.zcard(registryKey)).toBe(2);
      // Cut off: no more beats; its entry no longer counts after 3 beats, and A learns it.
      link.cut();
      expect(await until(() => c.status() === 'fallback')).toBe(true);
      expect(await until(async () => (await raw.zcard(registryKey)) === 1 && replicasOf(a) === 1)).toBe(true);
      // C remembers what it counted last (its outage part is ÷ that).
      expect(replicasOf(c)).toBeGreaterThanOrEqual(2);
      const counted = await metrics.getSingleMetric('gateway_redis_commands_total')?.get();
      const sent = (purpose: string) =>
        counted?.values.find((value) => value.labels.purpose === purpose)?.value ?? Number.NaN;
      // A made no budget call: every command it sent is a beat or the eviction check.
      expect(sent('health')).toBeGreaterThanOrEqual(3);
      expect(sent('budget')).toBe(0);
      await a.close();
      expect(await raw.exists(registryKey)).toBe(0);
    } finally {
      link.cut();
    }
  }, 20_000);
});
