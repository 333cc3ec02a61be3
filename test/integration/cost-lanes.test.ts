/**
 * The cost checks in a real gateway (docs/contract.md, Cost), on both lanes: the X-Max-Cost-Usd cap,
 * a malformed cap, the hourly budget with Retry-After as the window slides (a test clock), and a cap
 * header sent twice. The cost model and control on their own: test/unit/cost.test.ts.
 */
import { request as httpRequest } from 'node:http';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { listPrice } from '../../src/gateway/cost/price-table.js';
import type { TestGateway } from '../support/gateway.js';
import { codes, type GqlResult, gql, gqlInYoga } from '../support/graphql-client.js';
import { metricValue } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { piBody } from '../support/upstream-bodies.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const T0 = Date.UTC(2030, 0, 1, 12, 0, 0);

// ---------------------------------------------------------------------------------------------------
// In a gateway: both paths.
// ---------------------------------------------------------------------------------------------------

const PI_QUERY = '{ pi { __typename ... on ConstantDigits { digits } } }';

type Send = (
  gateway: TestGateway,
  query: string,
  headers?: Record<string, string>,
  variables?: Record<string, unknown>,
) => Promise<GqlResult>;

const PATHS: Array<[string, Send]> = [
  ['fast path (HTTP)', (g, query, headers, variables) => gql(g.url, query, { headers, variables })],
  ["Yoga's handler", (g, query, headers, variables) => gqlInYoga(g, query, { headers, variables })],
];

const ENV = { NULL_API_VERSION: 'v1', PI_API_VERSION: 'v1', BREAKER_THRESHOLD: '0', RETRY_MAX_ATTEMPTS: '1' };

describe.each(PATHS)('in a gateway, %s', (path, send) => {
  const scripted = useScriptedGateways();
  let now = T0;
  let gateway: TestGateway;

  beforeAll(async () => {
    gateway = await scripted.gateway({ ...ENV, COST_BUDGET_USD_PER_HOUR: '1' }, { now: () => now });
  });
  beforeEach(() => {
    scripted.upstream.reset();
    scripted.upstream.route('GET', '/api/v1/pi', { body: piBody({ gpu_cost_usd: 0.4 }) });
  });

  /** Refusals so far (0 before the first one). */
  const refusals = async (reason: string) =>
    (await metricValue(gateway.app.metrics.registry, 'gateway_budget_refusals_total', { reason })) ?? 0;

  it('a malformed X-Max-Cost-Usd is BAD_USER_INPUT (HTTP 400) and calls nothing', async () => {
    for (const header of ['-1', 'NaN', '1e9', 'lots', '99999999']) {
      const result = await send(gateway, PI_QUERY, { 'x-max-cost-usd': header });
      expect(result.status, header).toBe(400);
      expect(codes(result), header).toEqual(['BAD_USER_INPUT']);
      expect(result.data, header).toBeUndefined();
    }
    expect(scripted.upstream.count()).toBe(0);
  });

  it('the hourly budget reserves each estimate, refuses the one that does not fit, with Retry-After, and frees it as the hour slides', async () => {
    now = T0;
    const key = { authorization: `Bearer sk-budget-${path.length}` };
    const before = await refusals('hourly-budget');
    // The first is estimated from the table (pi-x-4o, 3 digits); the upstream charges 0.4, which the
    // running mean then expects of the next.
    const table =
      Math.round(listPrice({ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 }) * 1e8) / 1e8;
    for (const estimated of [table, 0.4]) {
      const ok = await send(gateway, PI_QUERY, key);
      expect(ok.errors).toBeUndefined();
      expect(ok.extensions?.cost).toEqual({
        gpuCostUsd: 0.4,
        upstreamCalls: 1,
        cacheHits: 0,
        estimatedCostUsd: estimated,
      });
      now += MINUTE;
    }
    // 0.8 spent: another 0.4 would pass the budget of 1. It fits once the first 0.4 leaves the hour.
    const refused = await send(gateway, PI_QUERY, key);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('3480');
    expect(refused.data).toBeUndefined();
    expect(refused.errors?.[0]?.extensions).toMatchObject({
      code: 'BUDGET_EXCEEDED',
      retryAfterSeconds: 3480,
      budgetUsdPerHour: 1,
      estimatedCostUsd: 0.4,
    });
    expect(scripted.upstream.count('GET', '/api/v1/pi')).toBe(2);
    expect(await refusals('hourly-budget')).toBe(before + 1);
    expect(gateway.app.fastPath.served.fast > 0).toBe(path.startsWith('fast'));
    // Another key, and health (which calls no model), still go through.
    expect((await send(gateway, PI_QUERY, { 'x-api-key': 'sk-someone-else' })).errors).toBeUndefined();
    scripted.upstream.route('GET', '/api/v1/health', { status: 503 });
    expect((await send(gateway, '{ health { status } }', key)).data?.health).toEqual({ status: 'DOWN' });
    // The first 0.4 leaves the hour at T0 + 1 h.
    now = T0 + HOUR;
    expect((await send(gateway, PI_QUERY, key)).errors).toBeUndefined();
  });

  it('X-Max-Cost-Usd: refused over the estimate without calling anything; the mean of observed costs replaces the table', async () => {
    // pi-x-mini: a model this gateway has not seen an answer of yet, so its estimate is the table's.
    const query = 'query($m: PiModel) { pi(model: $m) { __typename } }';
    const mini =
      Math.round(listPrice({ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-mini', digits: 3 }) * 1e8) / 1e8;
    const over = await send(gateway, query, { 'x-max-cost-usd': '0.0004' }, { m: 'PI_X_MINI' });
    expect(over.status).toBe(400);
    expect(over.data).toBeUndefined();
    expect(over.errors?.[0]?.extensions).toMatchObject({
      code: 'BUDGET_EXCEEDED',
      estimatedCostUsd: mini,
      maxCostUsd: 0.0004,
    });
    expect(scripted.upstream.count()).toBe(0);
    expect(await refusals('max-cost')).toBeGreaterThanOrEqual(1);
    // At the estimate: admitted. The upstream says this model cost 0.0001.
    scripted.upstream.route('GET', '/api/v1/pi', {
      body: piBody({ model: 'pi-x-mini', gpu_cost_usd: 0.0001 }),
    });
    const atCap = await send(gateway, query, { 'x-max-cost-usd': String(mini) }, { m: 'PI_X_MINI' });
    expect(atCap.errors).toBeUndefined();
    expect(scripted.upstream.count()).toBe(1);
    // Now the estimate of pi-x-mini is 0.0001, under a cap the table price was over.
    const cheap = await send(gateway, query, { 'x-max-cost-usd': '0.0002' }, { m: 'PI_X_MINI' });
    expect(cheap.errors).toBeUndefined();
    expect(scripted.upstream.count()).toBe(2);
  });
});

describe('X-Max-Cost-Usd sent twice', () => {
  const scripted = useScriptedGateways();
  let gateway: TestGateway;
  beforeAll(async () => {
    scripted.upstream.route('GET', '/api/v1/pi', { body: piBody() });
    gateway = await scripted.gateway(ENV);
  });

  it('two header lines, even both valid, are BAD_USER_INPUT and call nothing', async () => {
    const body = JSON.stringify({ query: PI_QUERY });
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest(gateway.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      });
      req.setHeader('x-max-cost-usd', ['1', '2']);
      req.once('error', reject);
      req.once('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.once('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.end(body);
    });
    expect(answer.status).toBe(400);
    const result = JSON.parse(answer.text) as GqlResult;
    expect(codes(result)).toEqual(['BAD_USER_INPUT']);
    expect(result.data).toBeUndefined();
    expect(scripted.upstream.count()).toBe(0);
  });
});
