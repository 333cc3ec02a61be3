/**
 * The operation report (observability/operation-report.ts) on both request paths: the fast path (a
 * plain JSON POST over HTTP) and Yoga's handler (`app.yoga.fetch`), which must log and count
 * identically. A real gateway (`createApp`) in front of two scripted upstreams: the log line, the
 * metrics, `extensions.sponsoredBy` / `cost` / `cache`, the sponsor log, /metrics and the spans.
 */
import { SpanKind, type Tracer, type TracerProvider, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import type { TestGateway } from '../support/gateway.js';
import { startTestGateway } from '../support/gateway.js';
import { codes, type GqlResult, gql, gqlInYoga } from '../support/graphql-client.js';
import { capturedLogger, LEVEL, type LogLine } from '../support/logs.js';
import { sample } from '../support/metric-values.js';
import { nullBody, nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';

const SECRET_KEY = 'sk-live-very-secret-123';
const BASE_ENV = { NULL_API_VERSION: 'v1', PI_API_VERSION: 'v1', BREAKER_THRESHOLD: '0' };

let nullUp: ScriptedUpstream;
let piUp: ScriptedUpstream;
const started: TestGateway[] = [];

/** The old fake clients' behaviour, on the wire: free tier up to 3 digits, sponsors by parity. */
function script() {
  nullUp.reset();
  piUp.reset();
  piUp.route('GET', '/api/v1/pi', (request) => {
    const digits = request.query.digits === undefined ? 5 : Number(request.query.digits);
    if (digits > 3 && request.headers.authorization === undefined) {
      return {
        status: 418,
        body: { error: { status: 418, code: 'TIER_FORBIDDEN', message: 'upstream secret body' } },
      };
    }
    return {
      body: piBody({
        digits: '3.14159265358979'.slice(0, digits === 0 ? 1 : digits + 2),
        precision: digits,
        gpu_cost_usd: 0.125,
        // digits 1: no sponsor at all.
        sponsored_by: digits === 1 ? null : digits % 2 === 0 ? 'Sponsor Even' : 'Sponsor Odd',
      }),
    };
  });
  nullUp.route('POST', '/api/v1/check', {
    body: nullBody({ gpu_cost_usd: 0.5, sponsored_by: 'Sponsor Even' }),
  });
  nullUp.route('GET', '/api/v1/health', { body: nullHealth });
  piUp.route('GET', '/api/v1/health', { body: piHealth });
}

beforeAll(async () => {
  [nullUp, piUp] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
});
beforeEach(script);
afterAll(async () => {
  await Promise.all(started.map((g) => g.close()));
  await Promise.all([nullUp?.close(), piUp?.close()]);
});

interface Observed {
  g: TestGateway;
  lines: LogLine[];
  raw: string[];
  /** The operation log lines. */
  ops: () => LogLine[];
  metrics: () => Promise<string>;
}

/** A gateway with its logs captured at `level`; warmed up so plain POSTs take the fast path. */
async function observe(
  options: { level?: string; env?: Record<string, string>; tracerProvider?: TracerProvider } = {},
): Promise<Observed> {
  const { logger, lines, raw } = capturedLogger(options.level ?? 'info');
  const g = await startTestGateway({
    nullBaseUrl: nullUp.url,
    piBaseUrl: piUp.url,
    env: { ...BASE_ENV, ...options.env },
    logger,
    tracerProvider: options.tracerProvider,
  });
  started.push(g);
  lines.length = 0;
  raw.length = 0;
  nullUp.resetRecords();
  piUp.resetRecords();
  return {
    g,
    lines,
    raw,
    ops: () => lines.filter((l) => l.msg === 'graphql operation'),
    metrics: () => g.app.metrics.render(),
  };
}

interface SendOptions {
  headers?: Record<string, string>;
  operationName?: string;
  signal?: AbortSignal;
}
type Send = (g: TestGateway, query: string, options?: SendOptions) => Promise<GqlResult>;

const fastPath: Send = (g, query, options = {}) => gql(g.url, query, options);
const yogaPath: Send = gqlInYoga;
const PATHS: Array<[string, Send]> = [
  ['fast path', fastPath],
  ["Yoga's handler", yogaPath],
];

const DIGITS = '__typename ... on ConstantDigits { digits }';

describe.each(PATHS)('the operation report (%s)', (path, send) => {
  it('writes one line per operation: name, type, outcome, duration, request id, upstream calls and cost', async () => {
    const o = await observe();
    const result = await send(
      o.g,
      `query Digits { a: pi(digits: 2) { ${DIGITS} } b: pi(digits: 3) { ${DIGITS} } }`,
      {
        headers: { 'x-request-id': 'req-abc-1' },
        operationName: 'Digits',
      },
    );
    expect(result.data).toEqual({
      a: { __typename: 'PiDigits', digits: '3.14' },
      b: { __typename: 'PiDigits', digits: '3.141' },
    });
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.25, upstreamCalls: 2, cacheHits: 0 });
    // The response cache is off by default: nothing says otherwise.
    expect(result.extensions?.cache).toBeUndefined();
    expect(o.ops()).toHaveLength(1);
    const line = o.ops()[0] as LogLine;
    expect(line).toMatchObject({
      level: LEVEL.info,
      requestId: 'req-abc-1',
      operation: 'Digits',
      operationType: 'query',
      outcome: 'ok',
      upstreamCalls: 2,
      costUsd: 0.25,
      cacheHits: 0,
    });
    expect(typeof line.durationMs).toBe('number');
    // The list of calls is for debugging, not for every info line; no error codes on success.
    expect(line).not.toHaveProperty('calls');
    expect(line).not.toHaveProperty('errorCodes');
    // The id reached every upstream call, and the response.
    expect(piUp.requests.map((r) => r.headers['x-request-id'])).toEqual(['req-abc-1', 'req-abc-1']);
    expect(result.headers.get('x-request-id')).toBe('req-abc-1');
    const text = await o.metrics();
    expect(sample(text, 'gateway_operations_total', 'operation="Digits",type="query",outcome="ok"')).toBe(1);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="pi-x-4o"')).toBe(0.25);
    expect(o.g.app.fastPath.served.fast).toBe(path === 'fast path' ? 1 : 0);
  });

  it('lists each call (status, duration, source) at debug', async () => {
    const o = await observe({ level: 'debug' });
    await send(o.g, `{ a: pi(digits: 2) { ${DIGITS} } b: pi(digits: 9) { ${DIGITS} } }`);
    const calls = o.ops()[0]?.calls as Array<Record<string, unknown>>;
    expect(calls).toHaveLength(2);
    expect(calls).toEqual(
      expect.arrayContaining([
        {
          upstream: 'pi-digits',
          endpoint: 'pi',
          status: 200,
          durationMs: expect.any(Number),
          source: 'upstream',
        },
        {
          upstream: 'pi-digits',
          endpoint: 'pi',
          status: 418,
          durationMs: expect.any(Number),
          source: 'upstream',
          code: 'TIER_FORBIDDEN',
        },
      ]),
    );
  });

  it('takes the operation name from the document when the request does not name it', async () => {
    const o = await observe();
    await send(o.g, `query OnlyOne { pi(digits: 1) { ${DIGITS} } }`);
    await send(o.g, `{ pi(digits: 1) { ${DIGITS} } }`);
    expect(o.ops().map((l) => l.operation)).toEqual(['OnlyOne', null]);
    const text = await o.metrics();
    expect(sample(text, 'gateway_operations_total', 'operation="OnlyOne",type="query",outcome="ok"')).toBe(1);
    expect(
      sample(text, 'gateway_operations_total', 'operation="(anonymous)",type="query",outcome="ok"'),
    ).toBe(1);
  });

  it('records partial results and failed operations with their error codes; every answered attempt counts', async () => {
    const o = await observe();
    const mixed = await send(
      o.g,
      `query Mixed { ok: pi(digits: 2) { ${DIGITS} } no: pi(digits: 9) { ${DIGITS} } }`,
      {
        headers: { 'x-request-id': 'r-mixed' },
      },
    );
    const fails = await send(o.g, `query Fails { pi(digits: 9) { ${DIGITS} } }`, {
      headers: { 'x-request-id': 'r-fail' },
    });
    expect(mixed.extensions?.cost).toMatchObject({ gpuCostUsd: 0.125, upstreamCalls: 2, cacheHits: 0 });
    expect(fails.extensions?.cost).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 1, cacheHits: 0 });
    const [mixedLine, failsLine] = o.ops();
    expect(mixedLine).toMatchObject({
      level: LEVEL.info,
      requestId: 'r-mixed',
      outcome: 'partial',
      upstreamCalls: 2,
      costUsd: 0.125,
      errorCodes: ['TIER_FORBIDDEN'],
    });
    expect(failsLine).toMatchObject({
      level: LEVEL.warn,
      requestId: 'r-fail',
      outcome: 'error',
      upstreamCalls: 1,
      costUsd: 0,
      errorCodes: ['TIER_FORBIDDEN'],
    });
    const text = await o.metrics();
    expect(sample(text, 'gateway_operations_total', 'operation="Mixed",type="query",outcome="partial"')).toBe(
      1,
    );
    expect(sample(text, 'gateway_operations_total', 'operation="Fails",type="query",outcome="error"')).toBe(
      1,
    );
    expect(
      sample(
        text,
        'gateway_upstream_requests_total',
        'upstream="pi-digits",endpoint="pi",status="418",outcome="TIER_FORBIDDEN"',
      ),
    ).toBe(2);
  });

  it('counts retried attempts in upstreamCalls and /metrics, one logical call in the list', async () => {
    const o = await observe({ level: 'debug' });
    piUp.route('GET', '/api/v1/pi', [{ status: 503 }, { body: piBody({ gpu_cost_usd: 0.125 }) }]);
    const result = await send(o.g, `{ pi { ${DIGITS} } }`);
    expect(result.errors).toBeUndefined();
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.125, upstreamCalls: 2, cacheHits: 0 });
    expect(o.ops()[0]).toMatchObject({ upstreamCalls: 2, costUsd: 0.125 });
    expect(o.ops()[0]?.calls).toEqual([
      expect.objectContaining({ upstream: 'pi-digits', endpoint: 'pi', status: 200, source: 'upstream' }),
    ]);
    const text = await o.metrics();
    expect(
      sample(
        text,
        'gateway_upstream_requests_total',
        'upstream="pi-digits",endpoint="pi",status="503",outcome="UPSTREAM_UNAVAILABLE"',
      ),
    ).toBe(1);
    expect(
      sample(
        text,
        'gateway_upstream_requests_total',
        'upstream="pi-digits",endpoint="pi",status="200",outcome="ok"',
      ),
    ).toBe(1);
    expect(text).toContain(
      'gateway_upstream_request_duration_seconds_count{upstream="pi-digits",endpoint="pi"} 2',
    );
  });

  it('logs operations refused before execution as "invalid", without upstream calls or cost', async () => {
    const o = await observe({ env: { MAX_UPSTREAM_CALLS: '1' } });
    const bad = await send(o.g, 'query Bad { nope }', { headers: { 'x-request-id': 'r-bad' } });
    expect(codes(bad)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    const over = await send(o.g, `{ a: pi(digits: 1) { ${DIGITS} } b: pi(digits: 2) { ${DIGITS} } }`, {
      headers: { 'x-request-id': 'r-over' },
    });
    expect(codes(over)).toEqual(['BAD_USER_INPUT']);
    const capped = await send(o.g, `{ pi { ${DIGITS} } }`, {
      headers: { 'x-request-id': 'r-cap', 'x-max-cost-usd': '0' },
    });
    expect(codes(capped)).toEqual(['BUDGET_EXCEEDED']);
    for (const result of [bad, over, capped]) expect(result.extensions).toBeUndefined();
    expect(o.ops()).toEqual([
      expect.objectContaining({ requestId: 'r-bad', operation: null, outcome: 'invalid', upstreamCalls: 0 }),
      expect.objectContaining({
        requestId: 'r-over',
        outcome: 'invalid',
        upstreamCalls: 0,
        errorCodes: ['BAD_USER_INPUT'],
      }),
      expect.objectContaining({
        requestId: 'r-cap',
        outcome: 'invalid',
        upstreamCalls: 0,
        errorCodes: ['BUDGET_EXCEEDED'],
      }),
    ]);
    for (const line of o.ops()) expect(line).not.toHaveProperty('costUsd');
    expect(nullUp.count() + piUp.count()).toBe(0);
    const text = await o.metrics();
    expect(
      sample(text, 'gateway_operations_total', 'operation="(anonymous)",type="query",outcome="invalid"'),
    ).toBe(3);
    expect(sample(text, 'gateway_budget_refusals_total', 'reason="max-cost"')).toBe(1);
  });

  it("writes an upstream's error body only into the failed call's line (a 418: at debug), never into an operation line", async () => {
    const o = await observe({ level: 'debug' });
    await send(o.g, `query K { pi(digits: 9) { ${DIGITS} } isNull { __typename } }`, {
      headers: { authorization: `Bearer ${SECRET_KEY}` },
    });
    await send(o.g, `query K2 { pi(digits: 9) { ${DIGITS} } }`, { headers: { 'x-api-key': SECRET_KEY } });
    await send(o.g, `query K3 { pi(digits: 9) { ${DIGITS} } }`);
    expect(o.ops()).toHaveLength(3);
    for (const line of o.ops()) expect(JSON.stringify(line)).not.toContain('upstream secret body');
    // The 418 of the call without a key: logged (at debug: the caller's tier, not the upstream's fault) with its body.
    const failed = o.lines.filter((l) => l.msg === 'upstream call failed');
    expect(failed).toEqual([
      expect.objectContaining({
        level: LEVEL.debug,
        upstream: 'pi-digits',
        code: 'TIER_FORBIDDEN',
        upstreamStatus: 418,
      }),
    ]);
    expect(String(failed[0]?.upstreamBody)).toContain('upstream secret body');
  });

  it('accounts health probes as upstream calls (two, free)', async () => {
    const o = await observe({ level: 'debug' });
    const result = await send(o.g, 'query H { health { status } }', { headers: { 'x-request-id': 'r-h' } });
    expect(result.data).toEqual({ health: { status: 'OK' } });
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 2, cacheHits: 0 });
    expect(o.ops()[0]).toMatchObject({ requestId: 'r-h', upstreamCalls: 2, costUsd: 0 });
    expect(o.ops()[0]?.calls).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ upstream: 'null-check', endpoint: 'health', status: 200 }),
        expect.objectContaining({ upstream: 'pi-digits', endpoint: 'health', status: 200 }),
      ]),
    );
    expect(nullUp.requests[0]?.headers['x-request-id']).toBe('r-h');
    const text = await o.metrics();
    for (const upstream of ['null-check', 'pi-digits'])
      expect(
        sample(
          text,
          'gateway_upstream_requests_total',
          `upstream="${upstream}",endpoint="health",status="200",outcome="ok"`,
        ),
      ).toBe(1);
  });

  it('writes no operation line when the level is above info, and still counts; a failed one is a warning', async () => {
    const o = await observe({ level: 'warn' });
    await send(o.g, `query Q { pi(digits: 2) { ${DIGITS} } }`);
    expect(o.lines).toEqual([]);
    await send(o.g, `query F { pi(digits: 9) { ${DIGITS} } }`);
    expect(o.ops()).toEqual([
      expect.objectContaining({ level: LEVEL.warn, operation: 'F', outcome: 'error' }),
    ]);
    const text = await o.metrics();
    expect(sample(text, 'gateway_operations_total', 'operation="Q",type="query",outcome="ok"')).toBe(1);
    expect(sample(text, 'gateway_operations_total', 'operation="F",type="query",outcome="error"')).toBe(1);
  });

  it('with RESPONSE_CACHE on, says what came from the cache, which costs nothing', async () => {
    const o = await observe({ level: 'debug', env: { RESPONSE_CACHE: 'true' } });
    const first = await send(o.g, `{ pi(digits: 2) { ${DIGITS} } }`);
    const second = await send(o.g, `{ pi(digits: 2) { ${DIGITS} } }`);
    expect(first.extensions).toMatchObject({
      cache: { hits: 0, misses: 1 },
      cost: { gpuCostUsd: 0.125, upstreamCalls: 1, cacheHits: 0 },
    });
    expect(second.extensions).toMatchObject({
      cache: { hits: 1, misses: 0 },
      cost: { gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 1 },
      // The cached answer's sponsor is still shown: the terms require it.
      sponsoredBy: ['Sponsor Even'],
    });
    expect(piUp.count()).toBe(1);
    expect(o.ops()[1]).toMatchObject({ upstreamCalls: 0, costUsd: 0, cacheHits: 1 });
    expect(o.ops()[1]?.calls).toEqual([expect.objectContaining({ source: 'cache', status: 200 })]);
    const text = await o.metrics();
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="pi-x-4o"')).toBe(0.125);
    expect(sample(text, 'gateway_dedup_hits_total', 'upstream="pi-digits",source="cache"')).toBe(1);
    expect(sample(text, 'gateway_response_cache_requests_total', 'upstream="pi-digits",result="hit"')).toBe(
      1,
    );
    expect(sample(text, 'gateway_response_cache_requests_total', 'upstream="pi-digits",result="miss"')).toBe(
      1,
    );
    expect(text).toContain('gateway_response_cache_entries 1');
  });
});

describe.each(PATHS)('sponsor messages (%s)', (_path, send) => {
  it('exposes the distinct sponsor messages of the operation in extensions.sponsoredBy, those the fields show', async () => {
    const o = await observe();
    const SPONSOR = '... on ConstantDigits { sponsoredBy }';
    const result = await send(
      o.g,
      `query S { a: pi(digits: 2) { ${SPONSOR} } b: pi(digits: 3) { ${SPONSOR} } c: pi(digits: 0) { ${SPONSOR} } isNull(value: 1) { __typename } }`,
    );
    const sponsors = (result.extensions?.sponsoredBy as string[] | undefined) ?? [];
    expect([...sponsors].sort()).toEqual(['Sponsor Even', 'Sponsor Odd']);
    for (const field of ['a', 'b', 'c']) expect(sponsors).toContain(result.data?.[field].sponsoredBy);
  });

  it('adds no sponsoredBy when no answer carried a sponsor message (a failed call: cost only)', async () => {
    const o = await observe();
    const none = await send(o.g, `query N { pi(digits: 1) { ${DIGITS} } }`);
    expect(none.extensions).toEqual({
      cost: { gpuCostUsd: 0.125, upstreamCalls: 1, cacheHits: 0, estimatedCostUsd: expect.any(Number) },
    });
    const failed = await send(o.g, `query F { pi(digits: 9) { ${DIGITS} } }`);
    expect(failed.extensions).toEqual({
      cost: { gpuCostUsd: 0, upstreamCalls: 1, cacheHits: 0, estimatedCostUsd: expect.any(Number) },
    });
    // No upstream touched: no extensions at all.
    expect((await send(o.g, '{ __typename }')).extensions).toBeUndefined();
  });

  it('logs each distinct message once per interval, not once per request, and counts every one', async () => {
    const o = await observe();
    for (let i = 0; i < 5; i++)
      await send(o.g, `query S { pi(digits: 2) { ${DIGITS} } isNull(value: 1) { __typename } }`);
    const sponsorLines = o.lines.filter((l) => l.msg === 'sponsor message');
    expect(sponsorLines.map((l) => `${l.upstream}:${l.sponsoredBy}`).sort()).toEqual([
      'null-check:Sponsor Even',
      'pi-digits:Sponsor Even',
    ]);
    const text = await o.metrics();
    expect(sample(text, 'gateway_sponsor_messages_total', 'upstream="pi-digits"')).toBe(5);
    expect(sample(text, 'gateway_sponsor_messages_total', 'upstream="null-check"')).toBe(5);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="null-check",model="null-x-4o"')).toBe(2.5);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="pi-x-4o"')).toBe(0.625);
  });
});

describe('both paths log and count identically', () => {
  /** A line without what differs by nature: time, process, durations, generated ids. */
  const normalized = (line: LogLine): Record<string, unknown> => {
    const { time: _t, pid: _p, hostname: _h, durationMs: _d, ...rest } = line;
    if (Array.isArray(rest.calls))
      rest.calls = (rest.calls as Array<Record<string, unknown>>).map(({ durationMs: _c, ...call }) => call);
    return rest;
  };
  const OWN = new Set(['graphql operation', 'sponsor message', 'upstream call failed']);
  /** The counters of the gateway's own metrics (histogram sums and buckets hold durations). */
  const counters = (text: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith('gateway_') && !/_seconds_(sum|bucket)/.test(l))
      .sort();

  it('the same operations give the same log lines and the same metrics on either path', async () => {
    const fast = await observe({ level: 'debug' });
    const yoga = await observe({ level: 'debug' });
    const operations: Array<[string, SendOptions]> = [
      [
        `query A { a: pi(digits: 2) { ${DIGITS} } b: pi(digits: 3) { ${DIGITS} } }`,
        { headers: { 'x-request-id': 'id-1' } },
      ],
      [
        `query B { ok: pi(digits: 2) { ${DIGITS} } no: pi(digits: 9) { ${DIGITS} } }`,
        { headers: { 'x-request-id': 'id-2' } },
      ],
      [`query C { pi(digits: 9) { ${DIGITS} } }`, { headers: { 'x-request-id': 'id-3' } }],
      [
        'query D { health { status } isNull(value: null) { __typename } }',
        { headers: { 'x-request-id': 'id-4' } },
      ],
      ['query E { nope }', { headers: { 'x-request-id': 'id-5' } }],
      [`query F { pi { ${DIGITS} } }`, { headers: { 'x-request-id': 'id-6', 'x-max-cost-usd': '0.000001' } }],
      [
        `query G { pi(digits: 5) { ${DIGITS} } }`,
        { headers: { 'x-request-id': 'id-7', authorization: `Bearer ${SECRET_KEY}` }, operationName: 'G' },
      ],
    ];
    const results: Record<string, GqlResult[]> = { fast: [], yoga: [] };
    for (const [query, options] of operations) {
      results.fast?.push(await fastPath(fast.g, query, options));
      results.yoga?.push(await yogaPath(yoga.g, query, options));
    }
    // The fast path really served the plain ones (A, B, C, D, F, G); E failed validation and went to Yoga.
    expect(fast.g.app.fastPath.served.fast).toBe(6);
    expect(yoga.g.app.fastPath.served.fast).toBe(0);
    const body = (r: GqlResult) => ({
      status: r.status,
      data: r.data,
      errors: r.errors,
      extensions: r.extensions,
    });
    expect(results.fast?.map(body)).toEqual(results.yoga?.map(body));
    const own = (o: Observed) => o.lines.filter((l) => OWN.has(l.msg)).map(normalized);
    expect(own(fast).length).toBeGreaterThanOrEqual(operations.length);
    expect(own(fast)).toEqual(own(yoga));
    expect(counters(await fast.metrics())).toEqual(counters(await yoga.metrics()));
  });
});

describe('shared and deprecated answers', () => {
  it('identical calls in flight share one upstream call: counted once, paid once, seen by both', async () => {
    const o = await observe({ level: 'debug' });
    piUp.route('GET', '/api/v1/pi', {
      delayMs: 300,
      body: piBody({ gpu_cost_usd: 0.125, sponsored_by: 'Sponsor Odd' }),
    });
    const [a, b] = await Promise.all([
      gql(o.g.url, `query A { pi { ${DIGITS} } }`),
      gql(o.g.url, `query B { pi { ${DIGITS} } }`),
    ]);
    expect(piUp.count()).toBe(1);
    expect(a.data).toEqual(b.data);
    expect([a.extensions?.sponsoredBy, b.extensions?.sponsoredBy]).toEqual([
      ['Sponsor Odd'],
      ['Sponsor Odd'],
    ]);
    const costs = [a, b]
      .map((r) => r.extensions?.cost)
      .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
    expect(costs).toMatchObject([
      { gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 0 },
      { gpuCostUsd: 0.125, upstreamCalls: 1, cacheHits: 0 },
    ]);
    expect(
      o
        .ops()
        .flatMap((l) => (l.calls as Array<{ source: string }>).map((c) => c.source))
        .sort(),
    ).toEqual(['shared', 'upstream']);
    const text = await o.metrics();
    expect(sample(text, 'gateway_dedup_hits_total', 'upstream="pi-digits",source="inflight"')).toBe(1);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="pi-x-4o"')).toBe(0.125);
    // Both saw the sponsor message; it was received (and counted) once.
    expect(sample(text, 'gateway_sponsor_messages_total', 'upstream="pi-digits"')).toBe(1);
  });

  it('counts every answer marked deprecated, warns once per endpoint, and health shows it with the Sunset date', async () => {
    const o = await observe();
    const sunset = 'Wed, 01 Jan 2031 00:00:00 GMT';
    // Either form of the Deprecation header (RFC 9745's date, or the older `true`).
    const marked = (deprecation: string) => ({
      headers: { deprecation, sunset, link: '</api/v1/inference>; rel="successor-version"' },
      body: piBody(),
    });
    piUp.route('GET', '/api/v1/pi', [marked('@1767225600'), marked('true'), marked('true')]);
    for (let i = 0; i < 3; i++) {
      const result = await gql(o.g.url, `{ pi(digits: ${i}) { ${DIGITS} } }`);
      expect(result.errors).toBeUndefined();
      expect(result.data?.pi).toMatchObject({ __typename: 'PiDigits' });
    }
    expect(
      sample(await o.metrics(), 'gateway_upstream_deprecated_total', 'upstream="pi-digits",endpoint="pi"'),
    ).toBe(3);
    expect(o.lines.filter((l) => l.msg === 'upstream endpoint is deprecated')).toEqual([
      expect.objectContaining({ level: LEVEL.warn, upstream: 'pi-digits', endpoint: 'pi', sunset }),
    ]);
    const health = await gql(
      o.g.url,
      '{ health { nullCheck { apiVersion deprecated sunset } pi { apiVersion deprecated sunset } } }',
    );
    expect(health.errors).toBeUndefined();
    // Each upstream its own: the null-check service was never marked.
    expect(health.data?.health).toEqual({
      nullCheck: { apiVersion: 'v1', deprecated: false, sunset: null },
      pi: { apiVersion: 'v1', deprecated: true, sunset },
    });
  });
});

describe('/metrics', () => {
  it('leaves POST /metrics to the rest of the server', async () => {
    const o = await observe();
    const response = await fetch(`${o.g.origin}/metrics`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(404);
  });

  it('shows the real breaker state, read at scrape time: open after the threshold of failures', async () => {
    const o = await observe({
      env: { BREAKER_THRESHOLD: '1', RETRY_MAX_ATTEMPTS: '1', BREAKER_HALF_OPEN_AFTER_MS: '600000' },
    });
    let text = await o.metrics();
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="closed"')).toBe(1);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="open"')).toBe(0);
    piUp.route('GET', '/api/v1/pi', { status: 503 });
    await gql(o.g.url, `{ pi { ${DIGITS} } }`);
    text = await o.metrics();
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="open"')).toBe(1);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="closed"')).toBe(0);
    // Each upstream its own breaker.
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="null-check",state="closed"')).toBe(1);
  });
});

describe.each(PATHS)('tracing (%s)', (_path, send) => {
  let provider: BasicTracerProvider | undefined;
  afterEach(async () => {
    await provider?.shutdown();
    provider = undefined;
    trace.disable();
  });

  it('creates an operation span with a child span per upstream call when tracing is on', async () => {
    const exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const o = await observe({ env: { OTEL_TRACING: 'true' }, tracerProvider: provider });
    exporter.reset();
    await send(
      o.g,
      `query Traced { ok: pi(digits: 2) { ${DIGITS} } no: pi(digits: 9) { ${DIGITS} } isNull(value: 1) { __typename } }`,
      { headers: { 'x-request-id': 'r-trace' } },
    );
    const spans = exporter.getFinishedSpans();
    const op = spans.find((s) => s.name === 'query Traced');
    expect(op).toBeDefined();
    expect(op?.attributes).toMatchObject({
      'graphql.operation.name': 'Traced',
      'graphql.operation.type': 'query',
      'gateway.request_id': 'r-trace',
      'gateway.outcome': 'partial',
    });
    // One CLIENT child per upstream call, of either upstream.
    const children = spans.filter((s) => s.parentSpanContext?.spanId === op?.spanContext().spanId);
    expect(children.map((s) => s.name).sort()).toEqual(['null-check check', 'pi-digits pi', 'pi-digits pi']);
    for (const child of children) {
      expect(child.kind).toBe(SpanKind.CLIENT);
      expect(child.spanContext().traceId).toBe(op?.spanContext().traceId);
    }
    const upstream = children.filter((s) => s.name === 'pi-digits pi');
    const failed = upstream.find((s) => s.attributes['error.type'] === 'TIER_FORBIDDEN');
    expect(failed?.attributes['http.response.status_code']).toBe(418);
    expect(failed?.status.code).toBe(2);
    const ok = upstream.find((s) => s !== failed);
    expect(ok?.attributes).toMatchObject({
      'http.response.status_code': 200,
      'gateway.answer.source': 'upstream',
    });
  });

  it('uses the globally registered provider (the host SDK) by default', async () => {
    const exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    const o = await observe({ env: { OTEL_TRACING: 'true' } });
    await send(o.g, `query Global { pi(digits: 1) { ${DIGITS} } }`);
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(
      expect.arrayContaining(['query Global', 'pi-digits pi']),
    );
  });

  it('makes no tracer call at all when tracing is off', async () => {
    let providerCalls = 0;
    let tracerCalls = 0;
    // A provider whose tracer counts every call; registered globally too, as a host SDK would.
    const counting: TracerProvider = {
      getTracer() {
        providerCalls++;
        const tracer = trace.getTracerProvider().getTracer('noop');
        return new Proxy(tracer, {
          get(target, prop, receiver) {
            tracerCalls++;
            return Reflect.get(target, prop, receiver);
          },
        }) as Tracer;
      },
    };
    trace.setGlobalTracerProvider(counting);
    const o = await observe({ tracerProvider: counting });
    const result = await send(o.g, `query Off { pi(digits: 2) { ${DIGITS} } health { status } }`);
    expect(result.data?.pi).toEqual({ __typename: 'PiDigits', digits: '3.14' });
    expect(providerCalls).toBe(0);
    expect(tracerCalls).toBe(0);
  });
});
