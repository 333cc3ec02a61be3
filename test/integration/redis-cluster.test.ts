/**
 * The shared state on a 3-master Redis Cluster (docs/contract.md §9, More than one machine;
 * `REDIS_URL=redis+cluster://…`): every store works, every key one script or MGET touches shares a
 * hash slot (no CROSSSLOT: gateway_redis_errors_total stays 0), a budget burst across two replicas
 * holds exactly as on one server, the response cache and APQ are shared, and the eviction check reads
 * every master.
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisBudgetStore } from '../../src/gateway/shared-state/budget-redis.js';
import { createSharedState, type SharedState } from '../../src/gateway/shared-state/index.js';
import { type RunningServices, startServices } from '../../src/services/start-services.js';
import { burstEnv, check, useBurstUpstream } from '../support/budget-bursts.js';
import type { TestGateway } from '../support/gateway.js';
import { gql } from '../support/graphql-client.js';
import { capturedLogger } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { directClient, type RedisCluster, startRedisCluster } from '../support/redis-topologies.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { until } from '../support/waits.js';
import { call, postJson } from './services-test-helpers.js';

const HOUR = 3_600_000;
const BUDGET = 0.05;

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await startRedisCluster();
}, 60_000);
afterAll(() => cluster?.stop());

/** Every key of every master of the cluster, by master port. */
async function keysByMaster(pattern: string): Promise<Map<number, string[]>> {
  const found = new Map<number, string[]>();
  for (const node of cluster.nodes) {
    const client = directClient(node.port);
    try {
      await client.connect();
      found.set(node.port, await client.keys(pattern));
    } finally {
      client.disconnect();
    }
  }
  return found;
}

/** The sum of gateway_redis_errors_total over its operations (0 when there is none). */
async function redisErrors(registry: Registry): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'gateway_redis_errors_total');
  return (metric?.values ?? []).reduce((sum, series) => sum + series.value, 0);
}

describe('the shared state on a 3-master Cluster', () => {
  const states: Array<{ state: SharedState; registry: Registry }> = [];
  const prefix = `cl-${randomUUID().slice(0, 8)}:`;
  const replica = () => {
    const registry = new Registry();
    const state = createSharedState({
      redisUrl: cluster.url,
      keyPrefix: prefix,
      timeoutMs: 2000,
      logger: pino({ level: 'silent' }),
      registry,
      documentsPerOwner: 2,
      budgets: true,
    });
    states.push({ state, registry });
    return { state, registry };
  };
  afterAll(() => Promise.all(states.map(({ state }) => state.close())));

  it('every store works across two replicas, with no CROSSSLOT (no Redis error at all), its keys spread over the masters', async () => {
    const a = replica();
    const b = replica();
    expect(await until(() => a.state.status() === 'redis' && b.state.status() === 'redis', 400)).toBe(true);
    expect(a.state.topology()).toEqual({ budgets: 'cluster', cache: 'cluster' });

    // Cache: set through A, found through B.
    for (let i = 0; i < 20; i++) a.state.cache.set(`answer-${i}`, { i }, 60_000);
    expect(await until(async () => (await b.state.cache.get('answer-19')) !== undefined)).toBe(true);
    expect(await b.state.cache.get('answer-7')).toEqual({ i: 7 });

    // APQ documents with an owner (the counter and the document are in different slots).
    const hashes = ['1', '2', '3'].map((d) => d.repeat(64));
    a.state.documents.set(hashes[0] as string, '{ one }', 60_000, undefined, 'owner-1');
    expect(await until(async () => (await b.state.documents.get(hashes[0] as string)) === '{ one }')).toBe(
      true,
    );
    b.state.documents.set(hashes[1] as string, '{ two }', 60_000, undefined, 'owner-1');
    expect(await until(async () => (await a.state.documents.get(hashes[1] as string)) === '{ two }')).toBe(
      true,
    );

    // Single flight: the settle script and the followers' MGET touch the lock and the answer.
    expect(await a.state.flights.claim('pi-10', 5000)).toBe('lead');
    expect(await b.state.flights.claim('pi-10', 5000)).toBe('follow');
    const waiting = b.state.flights.await('pi-10', 5000);
    a.state.flights.settle('pi-10', { digits: '3.14' }, 5000);
    expect(await waiting).toEqual({ digits: '3.14' });

    // Budgets: two windows of one key in one script (reserve, settle, read).
    const windows = [
      { ms: HOUR, bucketMs: HOUR / 60, limitUsd: 0.01, warnUsd: -1 },
      { ms: 24 * HOUR, bucketMs: (24 * HOUR) / 60, limitUsd: 1, warnUsd: -1 },
    ];
    const reserved = await a.state.budgets.reserve('key-1', windows, 0.006, Date.now());
    expect(reserved).toMatchObject({ ok: true, shared: true });
    expect(await b.state.budgets.reserve('key-1', windows, 0.006, Date.now())).toMatchObject({ ok: false });
    if (!reserved.ok) throw new Error('unreachable');
    a.state.budgets.settle('key-1', windows, reserved.at, 0.006, 0.002, Date.now());
    const settled = async () => {
      const read = await b.state.budgets.read('key-1', windows, Date.now());
      let spent = 0;
      let reservedUsd = 0;
      for (const [, s, r] of read.windows[0] ?? []) {
        spent += s;
        reservedUsd += r;
      }
      return Math.abs(spent - 0.002) < 1e-9 && Math.abs(reservedUsd) < 1e-9;
    };
    expect(await until(settled)).toBe(true);
    // The replica registry (one key of its own, beaten by each replica since its first reserve).
    const replicas = (s: SharedState) => (s.budgets as RedisBudgetStore).replicas();
    expect(await until(() => replicas(b.state) === 2)).toBe(true);

    // Not one Redis error in either replica: no CROSSSLOT, no MOVED left unanswered.
    expect(await redisErrors(a.registry)).toBe(0);
    expect(await redisErrors(b.registry)).toBe(0);
    expect(
      await metricValue(a.registry, 'gateway_redis_topology', { role: 'budgets', topology: 'cluster' }),
    ).toBe(1);
    // The keys really are spread: more than one master holds some.
    const byMaster = await keysByMaster(`${prefix}*`);
    expect([...byMaster.values()].filter((keys) => keys.length > 0).length).toBeGreaterThan(1);
    // The tagged pairs share a master: the budget's two windows.
    const budgetKeys = [...byMaster.values()].filter((keys) => keys.some((key) => key.includes('budget:')));
    expect(budgetKeys).toHaveLength(1);
    expect(budgetKeys[0]?.filter((key) => key.includes('budget:'))).toHaveLength(2);
  });

  it('the eviction check reads every master: one that may evict is enough to refuse, and named', async () => {
    const { state } = replica();
    expect(await state.checkBudgetRedis(5000)).toMatchObject({ verdict: 'safe' });
    const last = cluster.nodes[cluster.nodes.length - 1];
    if (last === undefined) throw new Error('no node');
    const client = directClient(last.port);
    await client.connect();
    try {
      await client.config('SET', 'maxmemory', '64mb');
      await client.config('SET', 'maxmemory-policy', 'allkeys-lru');
      const check = await state.checkBudgetRedis(5000);
      expect(check).toMatchObject({
        verdict: 'evicting',
        memory: { policy: 'allkeys-lru', server: `127.0.0.1:${last.port}` },
      });
    } finally {
      await client.config('SET', 'maxmemory-policy', 'noeviction');
      await client.config('SET', 'maxmemory', '0');
      client.disconnect();
    }
    expect(await state.checkBudgetRedis(5000)).toMatchObject({ verdict: 'safe' });
  });
});

describe('two gateway replicas on a 3-master Cluster', () => {
  const scripted = useScriptedGateways();
  const { burst, checks, expectOneBudget } = useBurstUpstream(scripted);

  async function replicas(
    prefix: string,
    logger = capturedLogger('info'),
  ): Promise<[TestGateway, TestGateway]> {
    const env = {
      ...burstEnv(BUDGET),
      REDIS_URL: cluster.url,
      REDIS_KEY_PREFIX: prefix,
      // A Redis timeout a loaded machine cannot trip: the test is about sharing, not about speed.
      REDIS_TIMEOUT_MS: '2000',
      RESPONSE_CACHE: 'true',
    };
    const pair = (await Promise.all([
      scripted.gateway(env, { logger: logger.logger }),
      scripted.gateway(env, { logger: logger.logger }),
    ])) as [TestGateway, TestGateway];
    expect(await until(() => pair.every((g) => g.app.sharedState.status() === 'redis'), 400)).toBe(true);
    return pair;
  }

  it('40 concurrent operations of one key, half through each: one budget, as on one server, and no Redis error', async () => {
    const prefix = `clb-${randomUUID().slice(0, 8)}:`;
    const logs = capturedLogger('info');
    const [a, b] = await replicas(prefix, logs);
    const headers = { 'x-api-key': `sk-cluster-${randomUUID()}` };
    const results = await burst(40, (i) => gql((i % 2 === 0 ? a : b).url, check(`c${i}`), { headers }));
    expect(results).toHaveLength(40);
    expectOneBudget(results, BUDGET);
    for (const g of [a, b]) expect(await redisErrors(g.app.metrics.registry)).toBe(0);
    expect(logs.text()).not.toMatch(/CROSSSLOT/);
    // Never in fallback: no Redis warning (the budget's own warning line is expected).
    expect(logs.lines.filter((line) => line.level >= 40 && /redis/i.test(line.msg))).toEqual([]);
  });

  it('the response cache and APQ registrations are shared; /ready and /metrics say cluster', async () => {
    const prefix = `clc-${randomUUID().slice(0, 8)}:`;
    const [a, b] = await replicas(prefix);
    const headers = { 'x-api-key': `sk-cache-${randomUUID()}` };
    // Cached through A, served to B without calling the upstream again.
    expect((await gql(a.url, check('cached'), { headers })).errors).toBeUndefined();
    const calls = checks();
    expect(
      await until(async () => {
        const again = await gql(b.url, check('cached'), { headers });
        return again.errors === undefined && checks() === calls;
      }),
    ).toBe(true);

    // APQ: registered through A (hash and text), run through B by hash alone.
    const query = '{ health { nullCheck { status } } }';
    const { createHash } = await import('node:crypto');
    const sha256Hash = createHash('sha256').update(query).digest('hex');
    const persisted = { persistedQuery: { version: 1, sha256Hash } };
    const register = await fetch(a.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, extensions: persisted }),
    });
    expect(register.status).toBe(200);
    const byHash = async () => {
      const response = await fetch(b.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ extensions: persisted }),
      });
      const body = (await response.json()) as { errors?: unknown[] };
      return body.errors === undefined;
    };
    expect(await until(byHash)).toBe(true);

    const ready = (await (await fetch(new URL('/ready', a.origin))).json()) as Record<string, unknown>;
    expect(ready).toMatchObject({ redis: 'redis', redisTopology: { budgets: 'cluster', cache: 'cluster' } });
    const metrics = await (await fetch(new URL('/metrics', a.origin))).text();
    expect(metrics).toMatch(/gateway_redis_topology\{role="budgets",topology="cluster"\} 1/);
    for (const g of [a, b]) expect(await redisErrors(g.app.metrics.registry)).toBe(0);
  });
});

describe('the reference services on a 3-master Cluster', () => {
  const running: RunningServices[] = [];
  afterAll(() => Promise.all(running.map((services) => services.close())));

  it('two replicas share one rate limit per caller (REDIS_URL=redis+cluster://…)', async () => {
    const options = {
      redisUrl: cluster.url,
      redisKeyPrefix: `rl-${randomUUID().slice(0, 8)}:`,
      redisTimeoutMs: 2000,
      rateLimitWindowMs: 60_000,
      freeRateLimit: 4,
    };
    for (let i = 0; i < 2; i++) running.push(await startServices(options));
    const [a, b] = running as [RunningServices, RunningServices];
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      const answer = await call(
        `${(i % 2 === 0 ? a : b).nullCheckUrl}/api/v1/check`,
        postJson({ value: null }),
      );
      statuses.push(answer.status);
    }
    // 4 in total across both replicas, not 4 each.
    expect(statuses.filter((status) => status === 200)).toHaveLength(4);
    expect(statuses.filter((status) => status === 429)).toHaveLength(6);
  });
});

// Last: it leaves the cluster with four masters.
describe('the Cluster’s masters change (a fourth master takes slots)', () => {
  it('the link logs and counts it, and the stores go on', async () => {
    const logs = capturedLogger('info');
    const registry = new Registry();
    const state = createSharedState({
      redisUrl: cluster.url,
      keyPrefix: `clm-${randomUUID().slice(0, 8)}:`,
      timeoutMs: 2000,
      logger: logs.logger,
      registry,
    });
    try {
      expect(await until(() => state.status() === 'redis', 400)).toBe(true);
      const added = await cluster.addMaster(500);
      // ioredis refreshes its slots every 5 s (and after a MOVED): the new master appears then.
      const changed = () => logs.lines.filter((line) => line.msg === 'redis cluster masters changed');
      expect(await until(() => changed().length >= 1, 300)).toBe(true);
      expect(changed()[0]).toMatchObject({ topology: 'cluster' });
      expect(String(changed()[0]?.masters)).toContain(`127.0.0.1:${added.port}`);
      expect(String(changed()[0]?.before)).not.toContain(`127.0.0.1:${added.port}`);
      expect(
        await metricValue(registry, 'gateway_redis_topology_changes_total', { role: 'budgets' }),
      ).toBeGreaterThanOrEqual(1);
      // Still sharing: a flight across the new layout.
      expect(await state.flights.claim('after-reshard', 5000)).toBe('lead');
      expect(await state.flights.claim('after-reshard', 5000)).toBe('follow');
      expect(state.status()).toBe('redis');
    } finally {
      await state.close();
    }
  }, 90_000);
});
