/**
 * The hourly budget under concurrency (docs/contract.md, Cost): reserve, then settle. A burst of
 * operations from one key, on one process or spread over two replicas sharing a real redis-server,
 * is billed no more than the budget plus the estimation error of the operations in flight; refused
 * operations call nothing; a client that goes away and a failed call give their reservation back;
 * Redis going away mid-burst fails nothing (each replica then holds the budget on its own spend), and
 * what was spent meanwhile reaches Redis once it is back.
 *
 * The upstream is the scripted one: it holds the answers of a burst until every operation of it has
 * reserved (reached the upstream) or been refused, so the whole burst is in flight before the first
 * cost is known, whatever the machine's speed; it reports a fixed cost, and counts what reached it.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callerIdOf } from '../../src/gateway/identity.js';
import { budgetRedisKeys } from '../../src/gateway/shared-state/redis-keys.js';
import {
  burstEnv,
  CHECK_USD,
  type Cost,
  check,
  FIRST_ESTIMATE,
  MAX_ESTIMATE_ERROR,
  tally,
  useBurstUpstream,
} from '../support/budget-bursts.js';
import type { TestGateway } from '../support/gateway.js';
import { gql, gqlInYoga } from '../support/graphql-client.js';
import { metricValue } from '../support/metric-values.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { until } from '../support/waits.js';

requireRedisServer('budget-burst');

const BUDGET = 0.05;

const ENV = burstEnv(BUDGET);

const scripted = useScriptedGateways();
const { burst, checks, expectOneBudget, expectSplitBudget } = useBurstUpstream(scripted);

async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  return scripted.gateway({ ...ENV, ...env });
}

describe('one process', () => {
  it('60 concurrent operations of one key, half on each path: billed within the budget plus the estimation error', async () => {
    const g = await gateway();
    const headers = { 'x-api-key': `sk-burst-${randomUUID()}` };
    const results = await burst(60, (i) =>
      i % 2 === 0 ? gql(g.url, check(`v${i}`), { headers }) : gqlInYoga(g, check(`v${i}`), { headers }),
    );
    expect(results).toHaveLength(60);
    // Each reserved the table's 0.0042 before any cost was known: 11 fit in 0.05.
    const { billed, answered, refused } = expectOneBudget(results, BUDGET);
    // The fast path took its half.
    expect(g.app.fastPath.served.fast).toBeGreaterThanOrEqual(30);
    // Each answer says what was reserved for it.
    for (const result of results.filter((r) => r.errors === undefined))
      expect((result.extensions?.cost as Cost | undefined)?.estimatedCostUsd).toBeCloseTo(FIRST_ESTIMATE, 8);
    // /metrics: the estimate next to the bill.
    const registry = g.app.metrics.registry;
    const labels = { upstream: 'null-check', model: 'null-x-4o' };
    expect(await metricValue(registry, 'gateway_cost_estimated_usd_total', labels)).toBeCloseTo(
      answered * FIRST_ESTIMATE,
      8,
    );
    expect(await metricValue(registry, 'gateway_gpu_cost_usd_total', labels)).toBeCloseTo(billed, 8);
    expect(await metricValue(registry, 'gateway_budget_refusals_total', { reason: 'hourly-budget' })).toBe(
      refused,
    );
  });

  describe.each([
    ['fast path', false],
    ["Yoga's handler", true],
  ])('refunds, %s', (_path, viaYoga) => {
    let g: TestGateway;
    beforeAll(async () => {
      // 0.01: two checks fit, a third does not.
      g = await gateway({ COST_BUDGET_USD_PER_HOUR: '0.01' });
    });
    const send = (query: string, headers: Record<string, string>, signal?: AbortSignal) =>
      viaYoga ? gqlInYoga(g, query, { headers, signal }) : gql(g.url, query, { headers, signal });

    it('a client that goes away mid-call is billed the estimate of the call it abandoned, not refunded', async () => {
      const headers = { 'x-api-key': `sk-cancel-${randomUUID()}` };
      const abandoned = () =>
        metricValue(g.app.metrics.registry, 'gateway_abandoned_cost_usd_total', { upstream: 'null-check' });
      const before = (await abandoned()) ?? 0;
      const abort = new AbortController();
      const hanging = send(check('hang'), headers, abort.signal).catch((error: unknown) => error);
      expect(await until(() => checks() === 1)).toBe(true);
      // One reservation hangs, one operation is billed: the third does not fit.
      expect((await send(check('a'), headers)).errors).toBeUndefined();
      const refused = await send(check('b'), headers);
      expect(refused.errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
      abort.abort();
      await hanging;
      // The gateway noticed (the upstream call was aborted, not retried) and settled the reservation
      // to the abandoned call's estimate (docs/contract.md, Cost: the upstream may bill it).
      const hung = scripted.upstream.requests[0];
      expect(await hung?.ended).toBe('client-closed');
      expect(await until(async () => ((await abandoned()) ?? 0) > before)).toBe(true);
      // Billed, not refunded: the budget still has no room for another check.
      const again = await send(check('c'), headers);
      expect(again.errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
      // The upstream saw the hanging call and the one admitted; nothing else.
      expect(checks()).toBe(2);
    });

    it('a failed call (500, 503) bills nothing and gives its reservation back', async () => {
      const headers = { 'x-api-key': `sk-fail-${randomUUID()}` };
      for (let i = 0; i < 4; i++) {
        const failed = await send(check(i % 2 === 0 ? 'fail-500' : 'fail-503'), headers);
        expect(failed.errors?.[0]?.extensions?.code).toMatch(/NULL_PARADOX|UPSTREAM_UNAVAILABLE/);
        expect(failed.extensions?.cost).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 1 });
      }
      // Four failures later the whole budget is still there: two checks fit, the third does not.
      expect((await send(check('x'), headers)).errors).toBeUndefined();
      expect((await send(check('y'), headers)).errors).toBeUndefined();
      expect((await send(check('z'), headers)).errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
      expect(checks()).toBe(6);
    });
  });
});

describe('two replicas on one redis-server', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(() => redis?.stop());

  async function replicas(prefix: string): Promise<[TestGateway, TestGateway]> {
    // A Redis timeout a loaded machine cannot trip: the test is about sharing, not about speed.
    const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: prefix, REDIS_TIMEOUT_MS: '2000' };
    const pair = (await Promise.all([gateway(env), gateway(env)])) as [TestGateway, TestGateway];
    expect(await until(() => pair.every((g) => g.app.sharedState.status() === 'redis'))).toBe(true);
    return pair;
  }

  /**
   * The key's spend and reservations in Redis: the sum of the buckets of its hour's hash (one hash per
   * key and window; fields `s<start>` spend, `r<start>` reservations).
   */
  async function inRedis(prefix: string, apiKey: string): Promise<number> {
    const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await client.connect();
      const fields = await client.hgetall(
        budgetRedisKeys(prefix, callerIdOf(apiKey), [3_600_000]).windows[0] as string,
      );
      return Object.entries(fields).reduce(
        (sum, [name, usd]) => (/^[sr]/.test(name) ? sum + Number(usd) : sum),
        0,
      );
    } finally {
      client.disconnect();
    }
  }

  it('40 concurrent operations of one key, half through each: one budget, billed within it plus the estimation error', async () => {
    const prefix = `burst-${randomUUID().slice(0, 8)}:`;
    const [a, b] = await replicas(prefix);
    const apiKey = `sk-shared-${randomUUID()}`;
    const headers = { 'x-api-key': apiKey };
    const results = await burst(40, (i) => gql((i % 2 === 0 ? a : b).url, check(`r${i}`), { headers }));
    expect(results).toHaveLength(40);
    const { billed } = expectOneBudget(results, BUDGET);
    // Settled: Redis holds what was billed (settlements are written after the answers; bounded wait).
    expect(await until(async () => Math.abs((await inRedis(prefix, apiKey)) - billed) < 1e-9)).toBe(true);
  });

  it('Redis killed mid-burst: nothing fails, each replica holds the budget on its own spend, and the outage spend reaches Redis when it is back', async () => {
    const prefix = `outage-${randomUUID().slice(0, 8)}:`;
    const [a, b] = await replicas(prefix);
    const apiKey = `sk-outage-${randomUUID()}`;
    const headers = { 'x-api-key': apiKey };
    // Killed while the burst reserves; its answers (and so its settlements) come after.
    const results = await burst(
      60,
      (i) => gql((i % 2 === 0 ? a : b).url, check(`o${i}`), { headers }),
      () => redis.kill(),
    );
    expect(results).toHaveLength(60);
    // While Redis is away each replica enforces the budget on its own: at most twice the budget.
    expectSplitBudget(results, BUDGET);
    expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'fallback'))).toBe(true);

    // A burst during the outage (another key): each replica decides on its own spend.
    const outageKey = `sk-during-${randomUUID()}`;
    const during = tally(
      await burst(60, (i) =>
        gql((i % 2 === 0 ? a : b).url, check(`d${i}`), { headers: { 'x-api-key': outageKey } }),
      ),
    );
    expect(during.other).toEqual([]);
    // (The estimate follows the observed price by now: 0.004, 12 fit in each replica's 0.05.)
    expect(during.answered).toBeLessThanOrEqual(2 * Math.floor((BUDGET + 1e-9) / CHECK_USD));
    expect(during.billed).toBeLessThanOrEqual(2 * (BUDGET + MAX_ESTIMATE_ERROR));

    // Back (this redis-server keeps nothing across a restart): what was spent during the outage is
    // pushed at the next budget write, so it counts for every replica.
    await redis.restart();
    expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'redis'), 200)).toBe(true);
    const someone = `sk-other-${randomUUID()}`;
    for (const g of [a, b]) await gql(g.url, check(`after-${g.url}`), { headers: { 'x-api-key': someone } });
    expect(await until(async () => Math.abs((await inRedis(prefix, outageKey)) - during.billed) < 1e-9)).toBe(
      true,
    );
    // And it is enforced across replicas again: the key's hour is spent (up to twice the budget).
    const after = await gql(a.url, check('after'), { headers: { 'x-api-key': outageKey } });
    expect(after.errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
  });
});
