/**
 * Every operation's bill (docs/contract.md, Cost): `extensions.cost` is the sum of what the upstreams
 * reported for the operation's own calls, the same figure as its log line and the cost metric; cache hits
 * and shared calls add nothing; X-Max-Cost-Usd refuses before any call; COST_BUDGET_USD_PER_HOUR refuses
 * once a key spent its hour's budget, and frees up as the hour slides (an injected clock, no sleeps).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { codes, gql } from '../support/graphql-client.js';
import { capturedLogger } from '../support/logs.js';
import { sample } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';

interface Cost {
  gpuCostUsd: number;
  upstreamCalls: number;
  cacheHits: number;
}
const costOf = (result: { extensions?: Record<string, unknown> }) => result.extensions?.cost as Cost;
const round = (usd: number) => Math.round(usd * 1e8) / 1e8;

describe('against the reference services', () => {
  let gateway: TestGateway;
  const logs = capturedLogger('info');
  beforeAll(async () => {
    gateway = await startTestGateway({ logger: logs.logger, env: { FREE_RATE_LIMIT: '0' } });
  });
  afterAll(() => gateway?.close());

  it('extensions.cost is the sum of the gpuCostUsd fields, opus and 4o priced apart; log line and metric agree', async () => {
    const before = await gateway.app.metrics.render();
    const result = await gql(
      gateway.url,
      `query Bill {
        four: isNull(value: 1, model: NULL_X_4O) { ... on NullCheck { gpuCostUsd } }
        opus: isNull(value: 2, model: NULL_X_OPUS) { ... on NullCheck { gpuCostUsd } }
        pi(digits: 3) { ... on ConstantDigits { gpuCostUsd } }
      }`,
    );
    expect(result.errors).toBeUndefined();
    const { four, opus, pi } = result.data as Record<string, { gpuCostUsd: number }>;
    const fields = [four, opus, pi].map((f) => f?.gpuCostUsd ?? Number.NaN);
    expect(fields.every((usd) => usd > 0)).toBe(true);
    // The reference services charge the published prices, which the gateway's table copies: the
    // first estimate (nothing observed yet) is the bill itself.
    const billed = round(fields.reduce((a, b) => a + b, 0));
    expect(costOf(result)).toEqual({
      gpuCostUsd: billed,
      upstreamCalls: 3,
      cacheHits: 0,
      estimatedCostUsd: billed,
    });
    // The spec: opus costs about ten times 4o for the same accuracy.
    expect((opus?.gpuCostUsd ?? 0) / (four?.gpuCostUsd ?? 1)).toBeGreaterThan(5);

    const line = logs.lines.find((l) => l.msg === 'graphql operation' && l.operation === 'Bill');
    expect(line).toMatchObject({
      costUsd: costOf(result).gpuCostUsd,
      estimatedCostUsd: billed,
      upstreamCalls: 3,
      cacheHits: 0,
    });
    const after = await gateway.app.metrics.render();
    // A series absent before the operation counted 0.
    const spent = (text: string, labels: string) => sample(text, 'gateway_gpu_cost_usd_total', labels) ?? 0;
    const delta = (labels: string) => round(spent(after, labels) - spent(before, labels));
    expect(delta('upstream="null-check",model="null-x-opus"')).toBe(opus?.gpuCostUsd);
    expect(delta('upstream="null-check",model="null-x-4o"')).toBe(four?.gpuCostUsd);
    expect(delta('upstream="pi-digits",model="pi-x-4o"')).toBe(pi?.gpuCostUsd);
  });

  it('identical calls within an operation are one call, paid once', async () => {
    const result = await gql(
      gateway.url,
      '{ a: isNull(value: 5) { ... on NullCheck { gpuCostUsd } } b: isNull(value: 5) { ... on NullCheck { gpuCostUsd } } }',
    );
    const a = (result.data as { a: { gpuCostUsd: number } }).a.gpuCostUsd;
    expect(costOf(result)).toMatchObject({ gpuCostUsd: a, upstreamCalls: 1, cacheHits: 0 });
  });

  it('inference is billed by its parsed cost string', async () => {
    const result = await gql(
      gateway.url,
      '{ inference(input: { desiredDigits: 3, liabilityWaiverSigned: true }) { ... on Inference { cost costUsd } } }',
    );
    const { costUsd } = (result.data as { inference: { costUsd: number } }).inference;
    expect(costUsd).toBeGreaterThan(0);
    expect(costOf(result)).toMatchObject({ gpuCostUsd: costUsd, upstreamCalls: 1, cacheHits: 0 });
  });

  it('a cached answer reports no new cost', async () => {
    const cached = await startTestGateway({ env: { RESPONSE_CACHE: 'true', FREE_RATE_LIMIT: '0' } });
    try {
      const query = '{ isNull(value: "cache-me") { ... on NullCheck { gpuCostUsd } } }';
      const first = await gql(cached.url, query);
      expect(costOf(first)).toMatchObject({ upstreamCalls: 1, cacheHits: 0 });
      expect(costOf(first).gpuCostUsd).toBeGreaterThan(0);
      const second = await gql(cached.url, query);
      expect(costOf(second)).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 1 });
      expect(second.extensions?.cache).toEqual({ hits: 1, misses: 0 });
    } finally {
      await cached.close();
    }
  });
});

describe('caps and budgets, against an upstream that counts its requests', () => {
  const scripted = useScriptedGateways();
  beforeAll(() => {
    const upstream = scripted.upstream;
    routeSpecAnswers(upstream);
    upstream.route('POST', '/api/v1/check', (req) => {
      const value = (req.body as { value?: unknown }).value;
      if (value === 'negative') return { body: nullBody({ gpu_cost_usd: -5 }) };
      if (value === 'absurd') return { body: nullBody({ gpu_cost_usd: 1e9 }) };
      return { body: nullBody({ gpu_cost_usd: 0.004 }) };
    });
    upstream.route('POST', '/api/v1/inference', {
      body: { digits: '3.141', chain_of_thought: null, tokens_used: 9, cost: 'twelve doubloons' },
    });
  });
  const upstream = () => scripted.upstream;

  const gatewayFor = (env: Record<string, string> = {}, now?: () => number) =>
    scripted.gateway(env, now ? { now } : {});

  it('over X-Max-Cost-Usd: BUDGET_EXCEEDED with the estimate and the cap, and no upstream call', async () => {
    const gateway = await gatewayFor();
    upstream().resetRecords();
    const result = await gql(
      gateway.url,
      '{ a: isNull(value: 1) { __typename } b: isNull(value: 2) { __typename } }',
      {
        headers: { 'x-max-cost-usd': '0.005' },
      },
    );
    expect(codes(result)).toEqual(['BUDGET_EXCEEDED']);
    expect(result.errors?.[0]?.extensions).toMatchObject({ estimatedCostUsd: 0.0084, maxCostUsd: 0.005 });
    expect(result.data).toBeUndefined();
    expect(upstream().count()).toBe(0);
    // Under the cap it runs.
    const ok = await gql(gateway.url, '{ isNull(value: 1) { __typename } }', {
      headers: { 'x-max-cost-usd': '0.005' },
    });
    expect(ok.errors).toBeUndefined();
    expect(upstream().count('POST', '/api/v1/check')).toBe(1);
  });

  it.each(['-1', 'abc', 'NaN', '1e9', '10000000', '0.1, 0.2', 'Infinity'])(
    'a malformed X-Max-Cost-Usd (%s) is BAD_USER_INPUT and calls nothing',
    async (value) => {
      const gateway = await gatewayFor();
      upstream().resetRecords();
      const result = await gql(gateway.url, '{ isNull(value: 1) { __typename } }', {
        headers: { 'x-max-cost-usd': value },
      });
      expect(result.status).toBe(400);
      expect(codes(result)).toEqual(['BAD_USER_INPUT']);
      expect(upstream().count('POST', '/api/v1/check')).toBe(0);
    },
  );

  it('the hourly budget trips after the expected spend, tells when to retry, and frees up as the hour slides', async () => {
    let clock = Date.UTC(2026, 10, 23, 12, 0, 0);
    const gateway = await gatewayFor({ COST_BUDGET_USD_PER_HOUR: '0.01' }, () => clock);
    upstream().resetRecords();
    const run = (i: number) =>
      gql(gateway.url, '{ isNull(value: 1) { __typename } }', {
        headers: { 'x-api-key': `k${i < 100 ? '' : i}` },
      });
    // 12:00: estimated 0.0042 (the table), billed 0.004; 12:10: estimated 0.004 (the observed
    // price), 0.008 reserved or spent: fits. 12:20: another 0.004 would make 0.012 > 0.01.
    for (const minute of [0, 10]) {
      clock = Date.UTC(2026, 10, 23, 12, minute, 0);
      expect((await run(0)).errors).toBeUndefined();
    }
    clock = Date.UTC(2026, 10, 23, 12, 20, 0);
    const refused = await run(0);
    expect(codes(refused)).toEqual(['BUDGET_EXCEEDED']);
    // The 12:00 spend leaves the hour at 13:00, 40 minutes from 12:20: then this estimate fits.
    expect(refused.errors?.[0]?.extensions?.retryAfterSeconds).toBe(2400);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('2400');
    expect(upstream().count('POST', '/api/v1/check')).toBe(2);
    // Another key is not affected.
    expect((await run(100)).errors).toBeUndefined();
    // At 13:00:30 the 12:00 spend has left the hour: 0.004 + 0.004 <= 0.01.
    clock = Date.UTC(2026, 10, 23, 13, 0, 30);
    expect((await run(0)).errors).toBeUndefined();
  });

  it('a negative or absurd reported cost counts as 0, is logged, and never lowers a budget', async () => {
    const logs = capturedLogger('info');
    const gateway = await scripted.gateway({ COST_BUDGET_USD_PER_HOUR: '0.01' }, { logger: logs.logger });
    const spend = await gql(gateway.url, '{ isNull(value: 1) { __typename } }');
    expect(costOf(spend).gpuCostUsd).toBe(0.004);
    for (const value of ['negative', 'absurd']) {
      const result = await gql(gateway.url, `{ isNull(value: "${value}") { __typename } }`);
      expect(result.errors).toBeUndefined();
      expect(costOf(result).gpuCostUsd).toBe(0);
    }
    expect(
      logs.lines.filter((l) => l.msg === 'upstream reported an implausible cost; counted as 0'),
    ).toHaveLength(2);
    // A negative cost did not give the 0.004 back: one more 0.004 fits (0.008), a third would not.
    expect((await gql(gateway.url, '{ isNull(value: 2) { __typename } }')).errors).toBeUndefined();
    expect(codes(await gql(gateway.url, '{ isNull(value: 3) { __typename } }'))).toEqual(['BUDGET_EXCEEDED']);
  });

  it('an inference cost string that does not parse counts nothing and is logged', async () => {
    const logs = capturedLogger('info');
    const gateway = await scripted.gateway({}, { logger: logs.logger });
    const result = await gql(
      gateway.url,
      '{ inference(input: { desiredDigits: 3, liabilityWaiverSigned: true }) { ... on Inference { cost costUsd } } }',
    );
    expect(result.data?.inference).toEqual({ cost: 'twelve doubloons', costUsd: null });
    expect(costOf(result)).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 1, cacheHits: 0 });
    expect(
      logs.lines.filter((l) => l.msg === 'upstream cost did not parse as US dollars; counted as 0'),
    ).toHaveLength(1);
  });
});
