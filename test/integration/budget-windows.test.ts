/**
 * Budgets per tier and per key over two windows at once (COST_BUDGETS, docs/contract.md, Cost), across
 * two replicas on one real redis-server: each window refuses at its own limit, through either
 * replica, with its own retry time; the `budget` field shows, through either replica, what was
 * billed; anonymous callers have a budget of their own; a key no scope covers has none.
 *
 * Windows slide by Redis' clock, which a test cannot move: spend made earlier in a long window is
 * written into its hash as a replica would have booked it (`s<bucket start>`, Redis' time), so that
 * the long window can be the one that refuses without waiting for the short one to slide.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callerIdOf } from '../../src/gateway/identity.js';
import { budgetRedisKeys } from '../../src/gateway/shared-state/redis-keys.js';
import type { TestGateway } from '../support/gateway.js';
import { type GqlResult, gql } from '../support/graphql-client.js';
import { capturedLogger } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody } from '../support/upstream-bodies.js';
import { until } from '../support/waits.js';

requireRedisServer('budget-windows');

/** What the scripted upstream charges per check; once observed, also every replica's estimate. */
const CHECK_USD = 0.004;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const sha = (key: string) => createHash('sha256').update(key).digest('hex');

const BUDGETS = {
  'tier:pro': { '1m': 0.012, '1h': 0.02 },
  [`key:${sha('sk-vip')}`]: { '5m': 0.008, '24h': 0.016 },
  [`key:${sha('sk-vip-2')}`]: { '5m': 0.008, '24h': 0.016 },
  anonymous: { '1h': 0.004 },
};

const check = (value: string) => `{ isNull(value: ${JSON.stringify(value)}) { __typename } }`;
const BUDGET =
  '{ budget { scope windows { window limitUsd spentUsd reservedUsd remainingUsd resetSeconds } } }';

const scripted = useScriptedGateways();
let redis: RedisServer;
let raw: Redis;
let a: TestGateway;
let b: TestGateway;
const prefix = `windows-${randomUUID().slice(0, 8)}:`;

beforeAll(async () => {
  redis = await startRedisServer();
  raw = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  await raw.connect();
  scripted.upstream.route('POST', '/api/v1/check', { body: nullBody({ gpu_cost_usd: CHECK_USD }) });
  const env = {
    API_KEYS: 'sk-pro-1:pro,sk-pro-2:pro,sk-vip:pro,sk-vip-2:enterprise',
    COST_BUDGETS: JSON.stringify(BUDGETS),
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: prefix,
    // A timeout a loaded machine cannot trip: the test is about sharing, not about speed.
    REDIS_TIMEOUT_MS: '2000',
    BREAKER_THRESHOLD: '0',
    RETRY_MAX_ATTEMPTS: '1',
  };
  [a, b] = await Promise.all([scripted.gateway(env), scripted.gateway(env)]);
  expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'redis'))).toBe(true);
  // Each replica learns the upstream's price (estimates are per replica) from a key no scope covers:
  // from here on an estimate is exactly what a check costs.
  for (const g of [a, b]) {
    const warm = await gql(g.url, check(`warm-${g.url}`), { headers: { 'x-api-key': 'sk-warm-up' } });
    expect(warm.errors).toBeUndefined();
  }
});

afterAll(async () => {
  raw?.disconnect();
  await redis?.stop();
});

const as = (apiKey: string | undefined): { headers: Record<string, string> } => ({
  headers: apiKey === undefined ? {} : { 'x-api-key': apiKey },
});
const billed = (results: GqlResult[]) =>
  Math.round(
    results.reduce((sum, r) => sum + ((r.extensions?.cost as { gpuCostUsd?: number })?.gpuCostUsd ?? 0), 0) *
      1e8,
  ) / 1e8;

/** Redis' clock, in ms. */
async function redisNow(): Promise<number> {
  const [seconds, micros] = await raw.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** Books `usd` of spend `ago` ms back in the key's window, as a replica would have then. */
async function spentEarlier(apiKey: string, windowMs: number, ago: number, usd: number) {
  const bucketMs = windowMs / 60;
  const at = (await redisNow()) - ago;
  const start = at - (at % bucketMs);
  const key = budgetRedisKeys(prefix, callerIdOf(apiKey), [windowMs]).windows[0] as string;
  await raw.hincrbyfloat(key, `s${start}`, usd);
  await raw.pexpire(key, windowMs + 2 * bucketMs);
  return start;
}

function refusal(result: GqlResult) {
  expect(result.data).toBeUndefined();
  expect(result.errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
  return result.errors?.[0]?.extensions as Record<string, unknown> & { retryAfterSeconds?: number };
}

/** The `budget` field through a replica, once it shows `spentUsd` in its first window. */
async function budgetOnceSettled(g: TestGateway, apiKey: string | undefined, spent: number[]) {
  let last: unknown;
  const settled = await until(async () => {
    const answer = await gql(g.url, BUDGET, as(apiKey));
    last = answer.data?.budget;
    const windows = (answer.data?.budget?.windows ?? []) as Array<{ spentUsd: number; reservedUsd: number }>;
    return windows.every((w, i) => Math.abs(w.spentUsd - (spent[i] ?? 0)) < 1e-9 && w.reservedUsd === 0);
  });
  expect(settled, JSON.stringify(last)).toBe(true);
  return last as { scope: string; windows: Array<Record<string, number | string>> };
}

describe('per tier (tier:pro, 1m and 1h), through two replicas', () => {
  it('the minute refuses at its limit on both replicas, and the budget field agrees with the bill', async () => {
    const answered: GqlResult[] = [];
    for (let i = 0; i < 3; i++) {
      const result = await gql((i % 2 ? b : a).url, check(`pro-1-${i}`), as('sk-pro-1'));
      expect(result.errors).toBeUndefined();
      answered.push(result);
    }
    expect(billed(answered)).toBe(0.012);
    const calls = scripted.upstream.count('POST', '/api/v1/check');
    for (const g of [a, b]) {
      const refused = await gql(g.url, check('pro-1-over'), as('sk-pro-1'));
      expect(refused.status).toBe(429);
      const extensions = refusal(refused);
      expect(extensions).toMatchObject({
        budgetWindow: '1m',
        budgetLimitUsd: 0.012,
        budgetScope: 'tier:pro',
      });
      expect(extensions.budgetUsdPerHour).toBeUndefined();
      expect(extensions.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(extensions.retryAfterSeconds).toBeLessThanOrEqual(60);
      expect(refused.headers.get('retry-after')).toBe(String(extensions.retryAfterSeconds));
    }
    // Refused operations called nothing.
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(calls);
    for (const g of [a, b]) {
      const budget = await budgetOnceSettled(g, 'sk-pro-1', [0.012, 0.012]);
      expect(budget).toEqual({
        scope: 'tier:pro',
        windows: [
          expect.objectContaining({
            window: '1m',
            limitUsd: 0.012,
            spentUsd: 0.012,
            reservedUsd: 0,
            remainingUsd: 0,
          }),
          expect.objectContaining({
            window: '1h',
            limitUsd: 0.02,
            spentUsd: 0.012,
            reservedUsd: 0,
            remainingUsd: 0.008,
          }),
        ],
      });
      expect(budget.windows[0]?.resetSeconds).toBeLessThanOrEqual(60);
      expect(budget.windows[1]?.resetSeconds).toBeGreaterThan(3500);
    }
    // Asking for the budget calls nothing upstream.
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(calls);
  });

  it('the hour refuses at its own limit while the minute has room, with the hour’s retry time', async () => {
    // 0.016 spent 30 minutes ago: in the hour, long out of the minute.
    const start = await spentEarlier('sk-pro-2', HOUR, 30 * MINUTE, 0.016);
    const first = await gql(a.url, check('pro-2-a'), as('sk-pro-2'));
    expect(first.errors).toBeUndefined();
    for (const g of [b, a]) {
      const extensions = refusal(await gql(g.url, check('pro-2-b'), as('sk-pro-2')));
      expect(extensions).toMatchObject({
        budgetWindow: '1h',
        budgetLimitUsd: 0.02,
        budgetUsdPerHour: 0.02,
        budgetScope: 'tier:pro',
      });
      // When the earlier spend's bucket leaves the hour.
      const expected = Math.ceil((start + HOUR - (await redisNow())) / 1000);
      expect(Math.abs((extensions.retryAfterSeconds ?? 0) - expected)).toBeLessThanOrEqual(2);
    }
    const budget = await budgetOnceSettled(b, 'sk-pro-2', [0.004, 0.02]);
    expect(budget.windows.map((w) => [w.window, w.remainingUsd])).toEqual([
      ['1m', 0.008],
      ['1h', 0],
    ]);
  });
});

describe('per key (key:<sha256>, 5m and 24h), over its tier', () => {
  it('the key’s own scope applies, not its tier’s: its 5 minutes refuse at 0.008', async () => {
    for (const g of [a, b])
      expect((await gql(g.url, check(`vip-${g.url}`), as('sk-vip'))).errors).toBeUndefined();
    for (const g of [a, b]) {
      const extensions = refusal(await gql(g.url, check('vip-over'), as('sk-vip')));
      expect(extensions).toMatchObject({ budgetWindow: '5m', budgetLimitUsd: 0.008, budgetScope: 'key' });
      expect(extensions.retryAfterSeconds).toBeLessThanOrEqual(300);
    }
    const budget = await budgetOnceSettled(a, 'sk-vip', [0.008, 0.008]);
    expect(budget.scope).toBe('key');
    expect(budget.windows.map((w) => w.window)).toEqual(['5m', '24h']);
  });

  it('its 24 hours refuse at 0.016 with the 24h retry time', async () => {
    const start = await spentEarlier('sk-vip-2', 24 * HOUR, 12 * HOUR, 0.012);
    expect((await gql(b.url, check('vip-2-a'), as('sk-vip-2'))).errors).toBeUndefined();
    const extensions = refusal(await gql(a.url, check('vip-2-b'), as('sk-vip-2')));
    expect(extensions).toMatchObject({ budgetWindow: '24h', budgetLimitUsd: 0.016, budgetScope: 'key' });
    const expected = Math.ceil((start + 24 * HOUR - (await redisNow())) / 1000);
    expect(Math.abs((extensions.retryAfterSeconds ?? 0) - expected)).toBeLessThanOrEqual(2);
    await budgetOnceSettled(a, 'sk-vip-2', [0.004, 0.016]);
  });
});

describe('callers without a key, and keys no scope covers', () => {
  it('anonymous callers share the anonymous budget', async () => {
    expect((await gql(a.url, check('anon-a'), as(undefined))).errors).toBeUndefined();
    const extensions = refusal(await gql(b.url, check('anon-b'), as('free')));
    expect(extensions).toMatchObject({ budgetWindow: '1h', budgetScope: 'anonymous' });
    const budget = await budgetOnceSettled(b, undefined, [0.004]);
    expect(budget).toMatchObject({
      scope: 'anonymous',
      windows: [{ window: '1h', limitUsd: 0.004, remainingUsd: 0 }],
    });
  });

  it('a key without a scope (no default) has no budget: null, and nothing refused', async () => {
    const headers = as('sk-no-scope');
    for (let i = 0; i < 6; i++)
      expect((await gql(a.url, check(`free-${i}`), headers)).errors).toBeUndefined();
    const answer = await gql(b.url, BUDGET, headers);
    expect(answer.errors).toBeUndefined();
    expect(answer.data).toEqual({ budget: null });
  });
});

describe("one clock: Redis'", () => {
  it('a replica whose clock is two hours behind still counts in the same window: what it booked is not forgotten by the other', async () => {
    const env = {
      API_KEYS: 'sk-clock:pro',
      COST_BUDGETS: JSON.stringify({ 'tier:pro': { '1h': 0.008 } }),
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `clock-${randomUUID().slice(0, 8)}:`,
      REDIS_TIMEOUT_MS: '2000',
    };
    const [behind, right] = await Promise.all([
      scripted.gateway(env, { now: () => Date.now() - 2 * HOUR }),
      scripted.gateway(env),
    ]);
    expect(await until(() => [behind, right].every((g) => g.app.sharedState.status() === 'redis'))).toBe(
      true,
    );
    for (const g of [behind, right])
      expect((await gql(g.url, check(`clock-warm-${g.url}`), as('sk-warm-up'))).errors).toBeUndefined();
    // Two checks through the replica that is behind: the hour is spent, by Redis' clock.
    for (let i = 0; i < 2; i++)
      expect((await gql(behind.url, check(`clock-${i}`), as('sk-clock'))).errors).toBeUndefined();
    await budgetOnceSettled(right, 'sk-clock', [0.008]);
    for (const g of [right, behind]) {
      const extensions = refusal(await gql(g.url, check('clock-over'), as('sk-clock')));
      // Within the hour by Redis' clock, not two hours off.
      expect(extensions.retryAfterSeconds).toBeGreaterThan(3500);
      expect(extensions.retryAfterSeconds).toBeLessThanOrEqual(3600);
    }
  });
});

describe('the warning ratio', () => {
  it('one warn line per key and window (the key as its sha256, never in clear) and gateway_budget_warnings_total', async () => {
    const log = capturedLogger('info');
    const env = {
      COST_BUDGETS: JSON.stringify({ default: { '1h': 0.01, '24h': 1 } }),
      COST_BUDGET_WARNING_RATIO: '0.8',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `warn-${randomUUID().slice(0, 8)}:`,
      REDIS_TIMEOUT_MS: '2000',
    };
    const [c, d] = await Promise.all([
      scripted.gateway(env, { logger: log.logger }),
      scripted.gateway(env, { logger: log.logger }),
    ]);
    expect(await until(() => [c, d].every((g) => g.app.sharedState.status() === 'redis'))).toBe(true);
    const key = 'sk-warn-SECRET-42';
    // The table's 0.0042 reserved through C, settled to 0.004; then 0.0042 through D: 0.0082, past
    // 0.8 × 0.01. The crossing is decided in Redis, once, whichever replica made it.
    expect((await gql(c.url, check('warn-0'), as(key))).errors).toBeUndefined();
    expect((await gql(d.url, check('warn-1'), as(key))).errors).toBeUndefined();
    const warned = async (window: string) =>
      ((await metricValue(c.app.metrics.registry, 'gateway_budget_warnings_total', {
        scope: 'default',
        window,
      })) ?? 0) +
      ((await metricValue(d.app.metrics.registry, 'gateway_budget_warnings_total', {
        scope: 'default',
        window,
      })) ?? 0);
    expect(await warned('1h')).toBe(1);
    expect(await warned('24h')).toBe(0);
    const lines = log.lines.filter(
      (line) => line.msg === 'cost budget warning: a key passed its warning ratio in a window',
    );
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        budgetKey: `key:${sha(key)}`,
        scope: 'default',
        window: '1h',
        limitUsd: 0.01,
      }),
    ]);
    // Refused from here (0.008 + 0.004 > 0.01): no second line.
    expect((await gql(c.url, check('warn-2'), as(key))).errors?.[0]?.extensions?.code).toBe(
      'BUDGET_EXCEEDED',
    );
    expect(await warned('1h')).toBe(1);
    expect(log.text()).not.toContain('SECRET');
  });
});
