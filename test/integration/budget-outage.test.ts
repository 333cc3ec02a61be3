/**
 * The outage bound when no replica holds anything (docs/contract.md, More than one machine; issue 47,
 * found from outside): two gateway processes on one real redis-server serve one key with a 0.05 USD
 * hourly budget for a few seconds, 0.021 spent through both, every reservation settled and nothing
 * held (each replica's `budget` field shows 0 reserved). Redis is then killed for good and 40
 * operations of the key go to the two replicas alternately, ten at a time. Together they may admit
 * what was left plus one estimate per replica in flight, never the remainder each (before the fix: 13
 * answered, 0.0756 USD billed against 0.05). The bill is the scripted upstream's (in this process).
 * And, on the stores alone, an outage that comes before a replica has read the replica registry: it
 * counts at least EXPECTED_REPLICAS, else the replica whose one beat found itself alone spends as if
 * it were (the control).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSharedState, type SharedState } from '../../src/gateway/shared-state/index.js';
import { budgetRedisKeys, replicaRegistryKey } from '../../src/gateway/shared-state/redis-keys.js';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { check, FIRST_ESTIMATE, tally } from '../support/budget-bursts.js';
import { ESTIMATE, HOUR, silent, windowOf } from '../support/budget-stores.js';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';
import { gql } from '../support/graphql-client.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { sleep, until } from '../support/waits.js';

requireRedisServer('budget-outage');

const BUDGET = 0.05;
/** What the upstream charges per check: the gateway's first estimate, so five checks are 0.021. */
const PRICE = FIRST_ESTIMATE;
const BUDGET_QUERY = '{ budget { windows { window spentUsd reservedUsd remainingUsd } } }';

interface Window {
  window: string;
  spentUsd: number;
  reservedUsd: number;
}

async function windowsOf(replica: GatewayProcess, apiKey: string): Promise<Window[]> {
  const answer = await gql(replica.url, BUDGET_QUERY, { headers: { 'x-api-key': apiKey } });
  expect(answer.errors).toBeUndefined();
  return (answer.data as { budget: { windows: Window[] } }).budget.windows;
}

describe('a budget through an outage, no replica holding anything', () => {
  let redis: RedisServer;
  let upstream: ScriptedUpstream;
  let replicas: [GatewayProcess, GatewayProcess];

  beforeAll(async () => {
    redis = await startRedisServer();
    upstream = await startScriptedUpstream();
    routeSpecAnswers(upstream, upstream, '/pi');
    upstream.route('POST', '/api/v1/check', { body: nullBody({ gpu_cost_usd: PRICE }) });
    const env = {
      NULL_BASE_URL: upstream.url,
      PI_BASE_URL: `${upstream.url}/pi`,
      NULL_API_VERSION: 'v1',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `outage-${randomUUID().slice(0, 8)}:`,
      COST_BUDGET_USD_PER_HOUR: String(BUDGET),
      // As the Deployment gives it (deploy/kubernetes): how many replicas may spend the budget.
      EXPECTED_REPLICAS: '2',
      FREE_RATE_LIMIT: '0',
      UPSTREAM_TIMEOUT_MS: '30000',
      BREAKER_THRESHOLD: '0',
      RETRY_MAX_ATTEMPTS: '1',
    };
    replicas = (await Promise.all([startGatewayProcess(env), startGatewayProcess(env)])) as [
      GatewayProcess,
      GatewayProcess,
    ];
    for (const replica of replicas) {
      const connected = () => replica.lines.some((l) => l.msg === 'redis connected; sharing state');
      expect(await until(connected, 400), 'connected to Redis').toBe(true);
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all((replicas ?? []).map((replica) => replica?.stop()));
    await upstream?.close();
    await redis?.stop();
  });

  it('two replicas that served a key, Redis killed for good: together they admit what was left plus one estimate each', async () => {
    const [a, b] = replicas;
    const headers = { 'x-api-key': `sk-outage-${randomUUID()}` };
    // Both serve the key for a few seconds: five checks, in turn, 500 ms apart.
    const before: Awaited<ReturnType<typeof gql>>[] = [];
    for (let i = 0; i < 5; i++) {
      before.push(await gql((i % 2 === 0 ? a : b).url, check(`before-${i}-${randomUUID()}`), { headers }));
      await sleep(500);
    }
    const served = tally(before);
    expect(served.answered).toBe(5);
    // Every reservation settled, nothing held: each replica's `budget` field shows 0 reserved.
    const settled = async () => {
      for (const replica of replicas)
        for (const window of await windowsOf(replica, headers['x-api-key']))
          if (window.reservedUsd !== 0 || Math.abs(window.spentUsd - served.billed) > 1e-9) return false;
      return true;
    };
    expect(await until(settled, 100), 'settled, 0 reserved on both').toBe(true);

    await redis.kill();
    const away = (replica: GatewayProcess) =>
      replica.lines.some((l) => l.msg === 'redis unavailable; using in-memory state');
    expect(await until(() => replicas.every(away), 200), 'both in fallback').toBe(true);

    // 40 operations, to A and B in turn, ten at a time.
    const during: Awaited<ReturnType<typeof gql>>[] = [];
    for (let round = 0; round < 4; round++)
      during.push(
        ...(await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            gql((i % 2 === 0 ? a : b).url, check(`during-${round}-${i}-${randomUUID()}`), { headers }),
          ),
        )),
      );
    const outage = tally(during);
    expect(outage.other).toEqual([]);
    const bill = served.billed + outage.billed;
    console.info(
      `budget-outage: ${served.billed.toFixed(4)} USD before the kill; during it ${outage.answered} answered of 40, ` +
        `${outage.billed.toFixed(4)} USD; billed ${bill.toFixed(4)} of ${BUDGET}`,
    );
    expect(outage.refused).toBeGreaterThan(0);
    // The bound: the budget plus one estimate per replica in flight.
    expect(bill).toBeLessThanOrEqual(BUDGET + 2 * FIRST_ESTIMATE + 1e-9);
  }, 60_000);
});

describe('an outage before the replica registry is read', () => {
  /**
   * Two replicas' stores on their own redis-server, each beating once when it connects (the next beat
   * a minute away: the registry is never read here), serve a key in turn; Redis is then killed and
   * they serve on. The first to beat found itself alone in the registry. What they admitted during
   * the outage, and what was left.
   */
  async function killedBeforeRead(expectedReplicas: number) {
    const own = await startRedisServer();
    const prefix = `unread-${randomUUID().slice(0, 8)}:`;
    const raw = new Redis(own.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    const [a, b] = [0, 1].map(() =>
      createSharedState({
        redisUrl: own.url,
        keyPrefix: prefix,
        timeoutMs: 1000,
        logger: silent,
        budgets: true,
        replicaHeartbeatMs: 60_000,
        expectedReplicas,
      }),
    ) as [SharedState, SharedState];
    try {
      await raw.connect();
      expect(await until(async () => (await raw.zcard(replicaRegistryKey(prefix))) === 2)).toBe(true);
      const key = `unread-${randomUUID()}`;
      const lease = budgetRedisKeys(prefix, key, [HOUR]).lease;
      // Below SHARE_FLOOR_OPS estimates: no share, every decision on the part of what was left.
      const limit = 30 * ESTIMATE;
      const windows = windowOf(limit);
      const admitted = async (s: SharedState) => {
        const held = await s.budgets.reserve(key, windows, ESTIMATE, Date.now(), 60_000);
        if (held.ok)
          s.budgets.settle(key, windows, held.at, ESTIMATE, ESTIMATE, Date.now(), undefined, held.lease);
        return held.ok ? ESTIMATE : 0;
      };
      let before = 0;
      for (let i = 0; i < 6; i++) {
        before += await admitted(i % 2 === 0 ? a : b);
        // Settled in Redis before the other reserves: neither learns of the other from the key's leases.
        expect(await until(async () => (await raw.zcard(lease)) === 0)).toBe(true);
      }
      expect(before).toBeCloseTo(6 * ESTIMATE, 9);
      await own.kill();
      expect(await until(() => a.status() === 'fallback' && b.status() === 'fallback')).toBe(true);
      let during = 0;
      for (let i = 0; i < 100; i++) during += await admitted(i % 2 === 0 ? a : b);
      console.info(
        `budget-outage (EXPECTED_REPLICAS=${expectedReplicas}, registry not read): ${during.toFixed(3)} spent during the outage, ${(limit - before).toFixed(3)} left`,
      );
      return { during, left: limit - before };
    } finally {
      raw.disconnect();
      await Promise.all([a.close(), b.close()]);
      await own.stop();
    }
  }

  it('EXPECTED_REPLICAS=2: together they spend no more than what was left, plus one estimate each', async () => {
    const { during, left } = await killedBeforeRead(2);
    expect(during).toBeGreaterThan(0);
    expect(during).toBeLessThanOrEqual(left + 2 * ESTIMATE + 1e-9);
  });

  it('the control, EXPECTED_REPLICAS=1: the replica whose one beat found itself alone spends its remainder as if alone', async () => {
    const { during, left } = await killedBeforeRead(1);
    expect(during).toBeGreaterThan(left + 2 * ESTIMATE);
  });
});
