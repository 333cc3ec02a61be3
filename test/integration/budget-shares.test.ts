/**
 * Budget shares through the gateway (docs/contract.md, More than one machine; issue 40): two replicas
 * on a real redis-server or Cluster take shares of a key's budget and admit against them in memory.
 * The bills are counted by the scripted upstream (what it charged for the checks that reached it),
 * not by the gateway. A burst across both is billed within the budget plus one estimate; with Redis
 * killed outright the two together spend no more than was left; a budgeted operation under a budget
 * large against its estimate makes about no Redis round trip for the budget (INFO commandstats of
 * the budgets' own Redis, the cache and flights on another).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHARE_FLOOR_OPS } from '../../src/gateway/shared-state/budget-shares.js';
import {
  burstEnv,
  CHECK_USD,
  check,
  FIRST_ESTIMATE,
  MAX_ESTIMATE_ERROR,
  tally,
  useBurstUpstream,
} from '../support/budget-bursts.js';
import type { TestGateway } from '../support/gateway.js';
import { gql } from '../support/graphql-client.js';
import { metricValue } from '../support/metric-values.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { type RedisCluster, startRedisCluster, startRedisSentinel } from '../support/redis-topologies.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { until } from '../support/waits.js';

requireRedisServer('budget-shares');

/** Large enough against an estimate for shares (SHARE_FLOOR_OPS estimates), small enough to run out. */
const BUDGET = 0.2;

const scripted = useScriptedGateways();
const { burst, checks } = useBurstUpstream(scripted);

/** Two replicas on one Redis, connected. */
async function pair(
  url: string,
  prefix: string,
  env: Record<string, string> = {},
): Promise<[TestGateway, TestGateway]> {
  const settings = {
    ...burstEnv(BUDGET),
    REDIS_URL: url,
    REDIS_KEY_PREFIX: prefix,
    REDIS_TIMEOUT_MS: '2000',
    ...env,
  };
  const both = (await Promise.all([scripted.gateway(settings), scripted.gateway(settings)])) as [
    TestGateway,
    TestGateway,
  ];
  expect(await until(() => both.every((g) => g.app.sharedState.status() === 'redis'), 400)).toBe(true);
  return both;
}

/** A few checks one after the other on each replica: each takes a share of the key. */
async function warm(replicas: TestGateway[], headers: Record<string, string>, each = 4): Promise<number> {
  let billed = 0;
  for (let i = 0; i < each; i++)
    for (const [j, g] of replicas.entries()) {
      const answer = await gql(g.url, check(`warm-${j}-${i}`), { headers });
      expect(answer.errors).toBeUndefined();
      billed += CHECK_USD;
    }
  return billed;
}

/** A burst across both replicas: every operation answered or refused, refused ones calling nothing. */
async function spread(
  replicas: [TestGateway, TestGateway],
  headers: Record<string, string>,
  count: number,
  meanwhile?: () => Promise<void>,
) {
  const before = checks();
  const results = await burst(
    count,
    (i) => gql((i % 2 === 0 ? replicas[0] : replicas[1]).url, check(`b${i}-${randomUUID()}`), { headers }),
    meanwhile,
  );
  const counted = tally(results);
  expect(counted.other).toEqual([]);
  expect(counted.answered + counted.refused).toBe(count);
  expect(checks() - before).toBe(counted.answered);
  return counted;
}

describe('budget shares, two replicas on one redis-server', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(() => redis?.stop());

  it('a burst across both after they took shares: billed within the budget plus one estimate, the shares seen in /metrics', async () => {
    expect(BUDGET).toBeGreaterThanOrEqual(SHARE_FLOOR_OPS * FIRST_ESTIMATE);
    const [a, b] = await pair(redis.url, `sh-${randomUUID().slice(0, 8)}:`);
    const headers = { 'x-api-key': `sk-shares-${randomUUID()}` };
    const warmed = await warm([a, b], headers);
    const refills = await metricValue(a.app.metrics.registry, 'gateway_budget_share_refills_total');
    expect(refills).toBeGreaterThanOrEqual(1);
    const { billed, answered } = await spread([a, b], headers, 80);
    const total = warmed + billed;
    console.info(
      `budget-shares burst: ${answered} answered of 80 after ${warmed.toFixed(3)} USD warm; billed ${total.toFixed(4)} USD of ${BUDGET}`,
    );
    expect(total).toBeLessThanOrEqual(BUDGET + FIRST_ESTIMATE + 1e-9);
    // Most of the budget went: a share stranded elsewhere costs at most a few operations.
    expect(total).toBeGreaterThan(BUDGET - 8 * FIRST_ESTIMATE);
  });

  it('Redis killed outright while both serve: together they spend no more than was left, and nothing fails but BUDGET_EXCEEDED', async () => {
    const own = await startRedisServer();
    try {
      const [a, b] = await pair(own.url, `shk-${randomUUID().slice(0, 8)}:`);
      const headers = { 'x-api-key': `sk-killed-${randomUUID()}` };
      const warmed = await warm([a, b], headers, 6);
      const left = BUDGET - warmed;
      const during = await spread([a, b], headers, 80, async () => {
        await own.kill();
      });
      expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'fallback'))).toBe(true);
      const after = await spread([a, b], headers, 40);
      const spent = during.billed + after.billed;
      console.info(
        `budget-shares Redis killed: ${warmed.toFixed(3)} USD before, ${spent.toFixed(4)} during the outage (${during.answered + after.answered} answered; left ${left.toFixed(3)})`,
      );
      expect(spent).toBeLessThanOrEqual(left + MAX_ESTIMATE_ERROR + 1e-9);
      expect(after.refused).toBeGreaterThan(0);
    } finally {
      await own.stop();
    }
  });

  it('a budget too small for shares, Redis killed outright after some spend: each replica spends only its part of what was left', async () => {
    const own = await startRedisServer();
    try {
      const SMALL = 0.05;
      const [a, b] = await pair(own.url, `spk-${randomUUID().slice(0, 8)}:`, {
        COST_BUDGET_USD_PER_HOUR: String(SMALL),
      });
      const headers = { 'x-api-key': `sk-small-${randomUUID()}` };
      // Both serve the key at once, then Redis goes. Replicas count each other by the key's leases:
      // each operation is sent once the one before reached the upstream (its reservation held), so
      // each replica's reservations after the first see the other's.
      const sent = checks();
      const first = tally(
        await burst(6, async (i) => {
          await until(() => checks() - sent >= i, 200);
          return gql((i % 2 === 0 ? a : b).url, check(`s${i}-${randomUUID()}`), { headers });
        }),
      );
      expect(first.answered).toBe(6);
      const left = SMALL - first.billed;
      await own.kill();
      expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'fallback'))).toBe(true);
      const during = await spread([a, b], headers, 40);
      console.info(
        `budget-shares Redis killed (per-operation path): ${first.billed.toFixed(3)} USD before, ${during.billed.toFixed(4)} during (${during.answered} answered; left ${left.toFixed(3)})`,
      );
      expect(during.billed).toBeLessThanOrEqual(left + MAX_ESTIMATE_ERROR + 1e-9);
      expect(during.refused).toBeGreaterThan(0);
    } finally {
      await own.stop();
    }
  });

  it('a budgeted operation under a large budget makes about no Redis round trip for the budget', async () => {
    const budgets = await startRedisServer();
    const cache = await startRedisServer();
    const raw = new Redis(budgets.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await raw.connect();
      const { COST_BUDGET_USD_PER_HOUR: _shorthand, ...env } = burstEnv(BUDGET);
      const g = await scripted.gateway({
        ...env,
        COST_BUDGETS: JSON.stringify({ default: { '1h': 1000 }, anonymous: { '1h': 0.05 } }),
        REDIS_URL: budgets.url,
        REDIS_CACHE_URL: cache.url,
        REDIS_KEY_PREFIX: 'rt:',
        REDIS_TIMEOUT_MS: '2000',
      });
      expect(await until(() => g.app.sharedState.status() === 'redis', 400)).toBe(true);
      /**
       * From INFO commandstats: round trips (EVALSHA and EVAL calls: the budgets' Redis sees only
       * scripts), every command (the scripts' inner ones included) and Redis' µs in the scripts.
       */
      const commands = async () => {
        const info = await raw.info('commandstats');
        const stats = { trips: 0, all: 0, usec: 0 };
        for (const match of info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/gm)) {
          if (match[1] === 'info') continue;
          stats.all += Number(match[2]);
          if (match[1] === 'evalsha' || match[1] === 'eval') {
            stats.trips += Number(match[2]);
            stats.usec += Number(match[3]);
          }
        }
        return stats;
      };
      const per = (from: { trips: number; all: number; usec: number }, to: typeof from, ops: number) => ({
        trips: (to.trips - from.trips) / ops,
        all: (to.all - from.all) / ops,
        usec: (to.usec - from.usec) / ops,
      });
      // Per operation (a budget small against the estimate: anonymous), for comparison.
      const small = await commands();
      let exact = 0;
      for (let i = 0; i < 8; i++) if ((await gql(g.url, check(`anon-${i}`))).errors === undefined) exact++;
      const perOperation = per(small, await commands(), 8);
      // Under a large budget: a share.
      const headers = { 'x-api-key': `sk-large-${randomUUID()}` };
      await gql(g.url, check('first'), { headers });
      const before = await commands();
      const OPS = 400;
      const worker = async (w: number) => {
        for (let i = w; i < OPS; i += 8)
          expect((await gql(g.url, check(`l${i}`), { headers })).errors).toBeUndefined();
      };
      await Promise.all(Array.from({ length: 8 }, (_, w) => worker(w)));
      const perShared = per(before, await commands(), OPS);
      const show = (figures: typeof perShared) =>
        `${figures.trips.toFixed(3)} round trips, ${figures.all.toFixed(2)} commands, ${figures.usec.toFixed(1)} µs of Redis`;
      console.info(
        `budget-shares, per budgeted operation: per-operation path (${exact} answered) ${show(perOperation)}; with a share ${show(perShared)}`,
      );
      expect(exact).toBeGreaterThan(0);
      expect(perShared.trips).toBeLessThanOrEqual(0.1);
      expect(await metricValue(g.app.metrics.registry, 'gateway_budget_shares_held_usd')).toBeGreaterThan(0);
    } finally {
      raw.disconnect();
      await Promise.all([budgets.stop(), cache.stop()]);
    }
  });
});

describe('budget shares on a 3-master Cluster', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(() => cluster?.stop());

  it('a burst across two replicas after they took shares: billed within the budget plus one estimate', async () => {
    const [a, b] = await pair(cluster.url, `shc-${randomUUID().slice(0, 8)}:`);
    const headers = { 'x-api-key': `sk-cluster-${randomUUID()}` };
    const warmed = await warm([a, b], headers);
    const { billed } = await spread([a, b], headers, 80);
    expect(warmed + billed).toBeLessThanOrEqual(BUDGET + FIRST_ESTIMATE + 1e-9);
    expect(warmed + billed).toBeGreaterThan(BUDGET - 8 * FIRST_ESTIMATE);
  });
});

describe('budget shares through a Sentinel failover', () => {
  it('the primary killed mid-burst across two replicas holding shares: billed within the budget plus the estimation error, shared again after', async () => {
    const setup = await startRedisSentinel({ downAfterMs: 1000 });
    try {
      const [a, b] = await pair(setup.url, `shs-${randomUUID().slice(0, 8)}:`);
      const headers = { 'x-api-key': `sk-failover-${randomUUID()}` };
      const warmed = await warm([a, b], headers);
      // A fifth of the burst on the primary, the rest during the switch.
      let killed: () => void = () => {};
      const afterKill = new Promise<void>((resolve) => {
        killed = resolve;
      });
      const before = checks();
      const results = await burst(
        80,
        async (i) => {
          if (i >= 16) await afterKill;
          return gql((i % 2 === 0 ? a : b).url, check(`f${i}-${randomUUID()}`), { headers });
        },
        async () => {
          await until(() => checks() - before >= 16, 200);
          await setup.primary.kill();
          expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'fallback'))).toBe(
            true,
          );
          killed();
        },
      );
      const during = tally(results);
      expect(during.other).toEqual([]);
      expect(checks() - before).toBe(during.answered);
      expect(await until(async () => (await setup.primaryPort()) === setup.replica.port, 600)).toBe(true);
      expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'redis'), 600)).toBe(true);
      const after = await spread([a, b], headers, 20);
      const total = warmed + during.billed + after.billed;
      console.info(
        `budget-shares failover: ${warmed.toFixed(3)} warm, ${during.billed.toFixed(4)} in the burst (${during.answered} answered, 16 before the kill), ${after.billed.toFixed(4)} after; billed ${total.toFixed(4)} USD of ${BUDGET}`,
      );
      expect(total).toBeLessThanOrEqual(BUDGET + FIRST_ESTIMATE + 1e-9);
    } finally {
      await setup.stop();
    }
  }, 90_000);
});
