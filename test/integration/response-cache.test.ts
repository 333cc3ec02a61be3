/**
 * The response cache of deterministic answers end to end (docs/contract.md, Caching and sharing calls): the gateway (`createApp`,
 * fast path first) with RESPONSE_CACHE=true in front of the real reference services (embedded).
 * Cached answers carry `extensions.cache`, their sponsor message and `extensions.cost.cacheHits`, and
 * report no new cost; tier-dependent answers and errors never cross API keys; identical concurrent
 * operations make one upstream call (in front of a scripted upstream that holds its answer until all
 * of them are waiting for it); non-deterministic calls are never cached. The cache is off by default.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { type GqlResult, gql } from '../support/graphql-client.js';
import { metricValue } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { piBody } from '../support/upstream-bodies.js';
import { gate, until } from '../support/waits.js';

interface Cost {
  gpuCostUsd: number;
  upstreamCalls: number;
  cacheHits: number;
}

let gateway: TestGateway;
const scripted = useScriptedGateways();

beforeAll(async () => {
  gateway = await startTestGateway({ env: { RESPONSE_CACHE: 'true', FREE_RATE_LIMIT: '0' } });
});

afterAll(async () => {
  await gateway?.close();
});

function graphql(query: string, apiKey?: string, on: TestGateway = gateway): Promise<GqlResult> {
  return gql(on.url, query, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} });
}

const cacheOf = (result: GqlResult) =>
  result.extensions?.cache as { hits: number; misses: number } | undefined;
const costOf = (result: GqlResult) => result.extensions?.cost as Cost | undefined;

/** HTTP requests the gateway sent to one upstream endpoint (every status and outcome). */
async function upstreamRequests(endpoint: string, on: TestGateway = gateway): Promise<number> {
  const text = await on.app.metrics.render();
  let total = 0;
  for (const match of text.matchAll(
    new RegExp(`gateway_upstream_requests_total\\{[^}]*endpoint="${endpoint}"[^}]*\\} (\\d+)`, 'g'),
  ))
    total += Number(match[1]);
  return total;
}

/** Pi calls saved by sharing an identical call in flight (gateway_dedup_hits_total, source inflight). */
async function inflightShares(on: TestGateway): Promise<number> {
  const labels = { upstream: 'pi-digits', source: 'inflight' };
  return (await metricValue(on.app.metrics.registry, 'gateway_dedup_hits_total', labels)) ?? 0;
}

/** Pi lookups that found nothing in the cache. */
async function piMisses(on: TestGateway): Promise<number> {
  const labels = { upstream: 'pi-digits', result: 'miss' };
  return (await metricValue(on.app.metrics.registry, 'gateway_response_cache_requests_total', labels)) ?? 0;
}

/** Dollars counted in gateway_gpu_cost_usd_total, every upstream and model. */
async function metricCost(): Promise<number> {
  const text = await gateway.app.metrics.render();
  let total = 0;
  for (const match of text.matchAll(/^gateway_gpu_cost_usd_total\{[^}]*\} ([\d.e-]+)$/gm))
    total += Number(match[1]);
  return total;
}

const PI = (args: string) =>
  `{ pi(${args}) { __typename ... on ConstantDigits { digits correctDigits sponsoredBy gpuCostUsd } } }`;

describe('the response cache (RESPONSE_CACHE=true)', () => {
  it('answers a repeated deterministic operation from the cache, sponsor message included, at no new cost', async () => {
    const callsBefore = await upstreamRequests('pi');
    const first = await graphql(PI('digits: 2'));
    const dollarsAfterFirst = await metricCost();
    const second = await graphql(PI('digits: 2'));
    expect(first.errors).toBeUndefined();
    expect(second.data).toEqual(first.data);
    expect(await upstreamRequests('pi')).toBe(callsBefore + 1);

    expect(cacheOf(first)).toEqual({ hits: 0, misses: 1 });
    expect(cacheOf(second)).toEqual({ hits: 1, misses: 0 });
    const price = first.data?.pi?.gpuCostUsd;
    expect(price).toBeGreaterThan(0);
    expect(costOf(first)).toMatchObject({ gpuCostUsd: price, upstreamCalls: 1, cacheHits: 0 });
    // The cached answer keeps the upstream's own gpuCostUsd field, but this operation paid nothing.
    expect(costOf(second)).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 1 });
    expect(await metricCost()).toBe(dollarsAfterFirst);

    const sponsor = first.data?.pi?.sponsoredBy;
    expect(typeof sponsor).toBe('string');
    expect(first.extensions?.sponsoredBy).toEqual([sponsor]);
    expect(second.extensions?.sponsoredBy).toEqual([sponsor]);
  });

  it('never lets a tier-dependent error or answer cross API keys', async () => {
    // Free tier: more than 3 digits is 418 TIER_FORBIDDEN; pro may have 5.
    const pro = await graphql(PI('digits: 5'), 'demo-pro');
    expect(pro.data?.pi?.digits).toBe('3.14159');
    expect(cacheOf(pro)).toEqual({ hits: 0, misses: 1 });
    const free = await graphql(PI('digits: 5'));
    expect(free.errors?.[0]?.extensions?.code).toBe('TIER_FORBIDDEN');
    expect(cacheOf(free)).toEqual({ hits: 0, misses: 1 });
    const freeAgain = await graphql(PI('digits: 5'), 'free');
    expect(freeAgain.errors?.[0]?.extensions?.code).toBe('TIER_FORBIDDEN');
    // The error was not cached: the second free call went upstream again (and was answered 418).
    expect(cacheOf(freeAgain)).toEqual({ hits: 0, misses: 1 });
    expect(costOf(freeAgain)).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 1, cacheHits: 0 });
    const proAgain = await graphql(PI('digits: 5'), 'demo-pro');
    expect(proAgain.data?.pi?.digits).toBe('3.14159');
    expect(cacheOf(proAgain)).toEqual({ hits: 1, misses: 0 });
    // Another paid key does not get the first key's answer either.
    const enterprise = await graphql(PI('digits: 5'), 'demo-enterprise');
    expect(enterprise.data?.pi?.digits).toBe('3.14159');
    expect(cacheOf(enterprise)).toEqual({ hits: 0, misses: 1 });
  });

  it('makes one upstream call for five identical concurrent operations, and bills it once', async () => {
    const cached = await scripted.gateway({ RESPONSE_CACHE: 'true' });
    const answer = gate();
    scripted.upstream.route('GET', '/api/v1/pi', {
      holdUntil: answer.opened,
      body: piBody({ digits: '3.1', precision: 1 }),
    });
    const before = await upstreamRequests('pi', cached);
    const sharedBefore = await inflightShares(cached);
    const missedBefore = await piMisses(cached);
    const pending = Promise.all(Array.from({ length: 5 }, () => graphql(PI('digits: 1'), undefined, cached)));
    // All five have missed the cache (and so joined the one call in flight), and that call is at the
    // upstream, its answer held: only now does it go.
    const overlapping = async () =>
      (await piMisses(cached)) - missedBefore === 5 && scripted.upstream.count('GET', '/api/v1/pi') === 1;
    expect(await until(overlapping, 200)).toBe(true);
    answer.open();
    const answers = await pending;
    expect(await upstreamRequests('pi', cached)).toBe(before + 1);
    for (const answer of answers) expect(answer.errors).toBeUndefined();
    expect(new Set(answers.map((a) => JSON.stringify(a.data))).size).toBe(1);
    // All five looked the answer up in the cache before it was there (a miss each); one of them
    // made and paid for the call, the four others shared it while it was in flight, for free.
    for (const answer of answers) expect(cacheOf(answer)).toEqual({ hits: 0, misses: 1 });
    const price = answers[0]?.data?.pi?.gpuCostUsd;
    expect(answers.map(costOf).sort((x, y) => (y?.gpuCostUsd ?? 0) - (x?.gpuCostUsd ?? 0))).toMatchObject([
      { gpuCostUsd: price, upstreamCalls: 1, cacheHits: 0 },
      ...Array(4).fill({ gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 0 }),
    ]);
    expect((await inflightShares(cached)) - sharedBefore).toBe(4);
    // The answer is cached now: the next one is a plain hit.
    const later = await graphql(PI('digits: 1'), undefined, cached);
    expect(cacheOf(later)).toEqual({ hits: 1, misses: 0 });
    expect(costOf(later)).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 1 });
    expect(await upstreamRequests('pi', cached)).toBe(before + 1);
  });

  it('never caches non-deterministic calls or a missing value', async () => {
    const mini = `{ isNull(value: 1, model: NULL_X_MINI) { __typename } }`;
    await graphql(mini);
    const again = await graphql(mini);
    expect(again.extensions?.cache).toBeUndefined();
    expect(costOf(again)).toMatchObject({ upstreamCalls: 1, cacheHits: 0 });
    const warm = await graphql(PI('digits: 3, temperature: 0.5'));
    expect(warm.extensions?.cache).toBeUndefined();
    const undefinedValue = `{ isNull { __typename } }`;
    await graphql(undefinedValue);
    const missing = await graphql(undefinedValue);
    expect(missing.errors?.[0]?.extensions?.code).toBe('UNDEFINED_VALUE');
    expect(missing.extensions?.cache).toBeUndefined();
    expect(costOf(missing)).toMatchObject({ upstreamCalls: 1, cacheHits: 0 });
  });

  it('caches deterministic null checks per value', async () => {
    const isNull = (value: string) =>
      `{ isNull(value: ${value}) { __typename ... on NullVerdict { isNull } ... on NullCheck { actuallyNull } } }`;
    const a = await graphql(isNull('null'));
    const b = await graphql(isNull('null'));
    const c = await graphql(isNull('"null"'));
    expect(a.data?.isNull).toEqual({ __typename: 'NullVerdict', isNull: true, actuallyNull: true });
    expect(b.data).toEqual(a.data);
    expect(b.extensions?.cache).toEqual({ hits: 1, misses: 0 });
    expect(costOf(b)).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 1 });
    expect(c.data?.isNull).toEqual({ __typename: 'NullVerdict', isNull: false, actuallyNull: false });
    expect(c.extensions?.cache).toEqual({ hits: 0, misses: 1 });
    const metrics = await gateway.app.metrics.render();
    expect(metrics).toMatch(
      /gateway_response_cache_requests_total\{upstream="null-check",result="hit"\} [1-9]/,
    );
    expect(metrics).toMatch(/gateway_dedup_hits_total\{[^}]*source="cache"[^}]*\} [1-9]/);
    expect(metrics).toMatch(/gateway_response_cache_entries [1-9]/);
  });

  it('one operation can mix a hit and a miss: its extensions count both', async () => {
    await graphql(PI('digits: 3'));
    const mixed = await graphql(
      '{ a: pi(digits: 3) { __typename } b: isNull(value: "mixed") { __typename ... on NullCheck { gpuCostUsd } } }',
    );
    expect(mixed.errors).toBeUndefined();
    expect(cacheOf(mixed)).toEqual({ hits: 1, misses: 1 });
    expect(costOf(mixed)).toMatchObject({
      gpuCostUsd: mixed.data?.b?.gpuCostUsd,
      upstreamCalls: 1,
      cacheHits: 1,
    });
  });
});

describe('without RESPONSE_CACHE (the default)', () => {
  it('is off: every identical operation reaches the upstream, and no extensions.cache is shown', async () => {
    expect(loadConfig({}).cache.responseCache).toBe(false);
    const plain = await startTestGateway({ env: { FREE_RATE_LIMIT: '0' } });
    try {
      expect(plain.config.cache.responseCache).toBe(false);
      const before = await upstreamRequests('pi', plain);
      const first = await graphql(PI('digits: 2'), undefined, plain);
      const second = await graphql(PI('digits: 2'), undefined, plain);
      expect(second.data?.pi?.digits).toBe(first.data?.pi?.digits);
      expect(await upstreamRequests('pi', plain)).toBe(before + 2);
      for (const answer of [first, second]) {
        expect(answer.extensions?.cache).toBeUndefined();
        expect(costOf(answer)).toMatchObject({
          gpuCostUsd: answer.data?.pi?.gpuCostUsd,
          upstreamCalls: 1,
          cacheHits: 0,
        });
      }
    } finally {
      await plain.close();
    }
  });
});
