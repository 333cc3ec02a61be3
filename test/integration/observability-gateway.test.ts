/**
 * Observability of the real gateway (`createApp`) over a real socket, in front of the reference
 * services: the log line and request id (gateway, response, upstream and the services' own log
 * agree), /metrics and its dollars. Then, in front of a scripted upstream: two concurrent operations
 * with the SAME x-request-id keep their own figures, a client that goes away cancels its upstream call
 * and is a cancellation (not an upstream failure), and every route of the gateway answers with an
 * x-request-id. The operation report in detail, on both request paths (log line, metrics, sponsor
 * messages, spans), is in observability-plugin.test.ts; how an x-request-id is checked and forwarded
 * in schema-http.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServices } from '../../src/services/start-services.js';
import type { ScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, startTestServices, type TestGateway } from '../support/gateway.js';
import { type GqlResult, gql, parsed } from '../support/graphql-client.js';
import { capturedLogger, LEVEL, type LogLine } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { until, within } from '../support/waits.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let services: RunningServices;
let gateway: TestGateway;
/** The gateway's log at debug level: the operation lines carry each call (`calls`). */
const gatewayLog = capturedLogger('debug');
const servicesLog = capturedLogger('info');

beforeAll(async () => {
  services = await startTestServices({ logger: servicesLog.logger, logRequests: true, freeRateLimit: 0 });
  gateway = await startTestGateway({
    nullBaseUrl: services.nullCheckUrl,
    piBaseUrl: services.piDigitsUrl,
    logger: gatewayLog.logger,
    defaultMetrics: true,
    env: { SPONSOR_LOG_INTERVAL_MS: '60000' },
  });
});

afterAll(async () => {
  await gateway?.close();
  await services?.close();
});

const post = (query: string, headers: Record<string, string> = {}, variables?: Record<string, unknown>) =>
  gql(gateway.url, query, { headers, variables });

const operationLines = (requestId: string, lines: LogLine[] = gatewayLog.lines) =>
  lines.filter((l) => l.msg === 'graphql operation' && l.requestId === requestId);
const operationLine = (requestId: string, lines: LogLine[] = gatewayLog.lines) =>
  operationLines(requestId, lines)[0];

describe('request id and the operation log line', () => {
  it('uses the caller’s x-request-id on the response, in the log line and at the upstream', async () => {
    const result = await post(
      'query ObsPi { pi(digits: 3) { ... on ConstantDigits { digits gpuCostUsd } } }',
      {
        'x-request-id': 'obs-it-0001',
      },
    );
    expect(result.data?.pi.digits).toBe('3.141');
    expect(result.headers.get('x-request-id')).toBe('obs-it-0001');
    const cost = result.extensions?.cost as { gpuCostUsd: number } | undefined;
    expect(cost).toMatchObject({ gpuCostUsd: result.data?.pi.gpuCostUsd, upstreamCalls: 1, cacheHits: 0 });
    expect(operationLines('obs-it-0001')).toHaveLength(1);
    // The log line carries the same figures as the extensions.
    expect(operationLine('obs-it-0001')).toMatchObject({
      level: LEVEL.info,
      operation: 'ObsPi',
      operationType: 'query',
      outcome: 'ok',
      upstreamCalls: 1,
      costUsd: cost?.gpuCostUsd,
      cacheHits: 0,
      calls: [
        expect.objectContaining({ upstream: 'pi-digits', endpoint: 'pi', status: 200, source: 'upstream' }),
      ],
    });
    expect(servicesLog.lines.some((l) => l.reqId === 'obs-it-0001')).toBe(true);
  });

  it('generates an id when the caller sends none, and uses that one everywhere', async () => {
    const result = await post('query ObsNull { isNull(value: null) { __typename } }');
    const id = result.headers.get('x-request-id');
    expect(id).toMatch(UUID);
    expect(operationLine(id as string)).toMatchObject({
      operation: 'ObsNull',
      upstreamCalls: 1,
      // The reference null-check service serves v2, which the gateway found in its /openapi.json.
      calls: [expect.objectContaining({ upstream: 'null-check', endpoint: 'null-or-not', status: 200 })],
    });
    expect(servicesLog.lines.some((l) => l.reqId === id)).toBe(true);
  });

  it('logs an operation rejected by validation with the generated id the response carries', async () => {
    const result = await post('query ObsInvalid { noSuchField }');
    expect(result.errors?.length).toBeGreaterThan(0);
    const id = result.headers.get('x-request-id');
    expect(id).toMatch(UUID);
    const line = operationLine(id as string);
    expect(line).toMatchObject({
      outcome: 'invalid',
      upstreamCalls: 0,
      errorCodes: ['GRAPHQL_VALIDATION_FAILED'],
    });
    // No upstream was touched: no calls, no cost.
    expect(line).not.toHaveProperty('calls');
    expect(line).not.toHaveProperty('costUsd');
    expect(result.extensions?.cost).toBeUndefined();
  });

  it('logs failed upstream calls with their status and code, partial results as partial', async () => {
    const result = await post(
      'query ObsPartial { a: isNull(value: 1) { __typename } b: pi(digits: 50) { __typename } }',
      { 'x-request-id': 'obs-it-partial' },
    );
    const line = operationLine('obs-it-partial');
    expect(line).toMatchObject({ outcome: 'partial', errorCodes: ['TIER_FORBIDDEN'], upstreamCalls: 2 });
    expect(line?.calls).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ upstream: 'pi-digits', status: 418, code: 'TIER_FORBIDDEN' }),
        expect.objectContaining({ upstream: 'null-check', status: 200 }),
      ]),
    );
    const cost = result.extensions?.cost as { gpuCostUsd: number } | undefined;
    expect(cost?.gpuCostUsd).toBeGreaterThan(0);
    expect(line?.costUsd).toBe(cost?.gpuCostUsd);
  });

  it('at info level the line has the figures but not the list of calls', async () => {
    const infoLog = capturedLogger('info');
    const quiet = await startTestGateway({
      nullBaseUrl: services.nullCheckUrl,
      piBaseUrl: services.piDigitsUrl,
      logger: infoLog.logger,
    });
    try {
      await gql(quiet.url, 'query ObsInfo { pi(digits: 2) { __typename } }', {
        headers: { 'x-request-id': 'obs-info-1' },
      });
      const line = operationLine('obs-info-1', infoLog.lines);
      expect(line).toMatchObject({ operation: 'ObsInfo', outcome: 'ok', upstreamCalls: 1, cacheHits: 0 });
      expect(line?.costUsd).toBeGreaterThan(0);
      expect(line).not.toHaveProperty('calls');
      // Each gateway has its own registry: this one never saw ObsPi.
      expect(quiet.app.metrics.registry).not.toBe(gateway.app.metrics.registry);
      const text = await quiet.app.metrics.render();
      expect(text).toContain('operation="ObsInfo"');
      expect(text).not.toContain('operation="ObsPi"');
    } finally {
      await quiet.close();
    }
  });
});

describe('GET /metrics', () => {
  it('serves this gateway’s metrics in Prometheus text format; a scrape is not a GraphQL operation', async () => {
    const operationsBefore = gatewayLog.lines.filter((l) => l.msg === 'graphql operation').length;
    const res = await fetch(`${gateway.origin}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(gatewayLog.lines.filter((l) => l.msg === 'graphql operation')).toHaveLength(operationsBefore);
    expect(text).toContain('# TYPE gateway_operation_duration_seconds histogram');
    expect(text).toContain('# TYPE gateway_gpu_cost_usd_total counter');
    expect(text).toContain('# TYPE gateway_upstream_deprecated_total counter');
    expect(text).toContain('gateway_operations_total{operation="ObsPi",type="query",outcome="ok"} 1');
    expect(text).toContain(
      'gateway_operations_total{operation="ObsPartial",type="query",outcome="partial"} 1',
    );
    // Rejected before execution: its name in the document was never read (no operationName sent).
    expect(text).toMatch(
      /gateway_operations_total\{operation="\(anonymous\)",type="query",outcome="invalid"\} [1-9]/,
    );
    expect(text).toMatch(
      /gateway_operation_duration_seconds_bucket\{le="\+Inf",operation="ObsPi",type="query",outcome="ok"\} 1/,
    );
    expect(text).toMatch(
      /gateway_upstream_requests_total\{upstream="pi-digits",endpoint="pi",status="418",outcome="TIER_FORBIDDEN"\} \d+/,
    );
    expect(text).toMatch(
      /gateway_upstream_request_duration_seconds_count\{upstream="null-check",endpoint="null-or-not"\} \d+/,
    );
    expect(text).toContain('gateway_upstream_breaker_state{upstream="pi-digits",state="closed"} 1');
    expect(text).toContain('# TYPE gateway_dedup_hits_total counter');
    expect(text).toContain('process_cpu_user_seconds_total');
  });

  it('counts the same dollars as the operation log lines (gateway_gpu_cost_usd_total{upstream,model})', async () => {
    const text = await gateway.app.metrics.render();
    let metric = 0;
    for (const match of text.matchAll(
      /^gateway_gpu_cost_usd_total\{upstream="[^"]+",model="([^"]+)"\} ([\d.e-]+)$/gm,
    )) {
      expect(match[1]).toMatch(/^(null|pi)-x-/);
      metric += Number(match[2]);
    }
    const logged = gatewayLog.lines
      .filter((l) => l.msg === 'graphql operation')
      .reduce((sum, l) => sum + (typeof l.costUsd === 'number' ? l.costUsd : 0), 0);
    expect(metric).toBeGreaterThan(0);
    expect(metric).toBeCloseTo(logged, 6);
  });
});

describe('in front of a scripted upstream', () => {
  let up: ScriptedUpstream;
  let scripted: TestGateway;
  const log = capturedLogger('debug');

  /** Per value checked: the sponsor message and cost the upstream answers with. */
  const ANSWERS: Record<string, { sponsor: string; cost: number }> = {
    a: { sponsor: 'Sponsor of A', cost: 0.001 },
    b1: { sponsor: 'Sponsor of B, first', cost: 0.002 },
    b2: { sponsor: 'Sponsor of B, second', cost: 0.003 },
  };

  const upstreamAndGateways = useScriptedGateways();

  beforeAll(async () => {
    up = upstreamAndGateways.upstream;
    routeSpecAnswers(up);
    up.route('POST', '/api/v1/check', async (request) => {
      const value = String((request.body as { value?: unknown }).value);
      if (value === 'hang') return { hang: true };
      // Every answer waits until all three calls of the two operations have arrived: the operations
      // overlap for sure (bounded: after 10 s it answers anyway, and the assertions below fail).
      await until(() => up.count('POST', '/api/v1/check') >= 3, 200, 50);
      const answer = ANSWERS[value];
      return {
        body: nullBody({
          is_null: false,
          sponsored_by: answer?.sponsor ?? null,
          gpu_cost_usd: answer?.cost ?? 0,
        }),
      };
    });
    scripted = await upstreamAndGateways.gateway({ RETRY_MAX_ATTEMPTS: '1' }, { logger: log.logger });
  });

  const A = 'query A { isNull(value: "a") { ... on NullCheck { sponsoredBy } } }';
  const B =
    'query B { one: isNull(value: "b1") { ... on NullCheck { sponsoredBy } } two: isNull(value: "b2") { ... on NullCheck { sponsoredBy } } }';

  /** Sends an operation over the fast path (a JSON POST) or over Yoga's handler (a GET). */
  async function send(path: 'fast' | 'yoga', query: string, requestId: string): Promise<GqlResult> {
    const headers = { accept: 'application/graphql-response+json', 'x-request-id': requestId };
    if (path === 'fast') return gql(scripted.url, query, { headers });
    return parsed(await fetch(`${scripted.url}?query=${encodeURIComponent(query)}`, { headers }));
  }

  it.each([
    ['both on the fast path', 'fast', 'fast'],
    ['both through Yoga', 'yoga', 'yoga'],
    ['one on each path', 'fast', 'yoga'],
  ] as const)(
    'two concurrent operations with the same x-request-id keep their own sponsors, cost, calls and log line (%s)',
    async (_name, pathA, pathB) => {
      const id = `same-id-${pathA}-${pathB}`;
      up.resetRecords();
      const fastBefore = scripted.app.fastPath.served.fast;
      const [a, b] = await Promise.all([send(pathA, A, id), send(pathB, B, id)]);
      const fastTaken = [pathA, pathB].filter((p) => p === 'fast').length;
      expect(scripted.app.fastPath.served.fast - fastBefore).toBe(fastTaken);
      // They did overlap: all three upstream calls were in flight together.
      expect(up.count('POST', '/api/v1/check')).toBe(3);
      expect(up.requests.every((r) => r.headers['x-request-id'] === id)).toBe(true);

      expect(a.errors).toBeUndefined();
      expect(b.errors).toBeUndefined();
      expect(a.headers.get('x-request-id')).toBe(id);
      expect(b.headers.get('x-request-id')).toBe(id);
      expect(a.data).toEqual({ isNull: { sponsoredBy: 'Sponsor of A' } });
      expect(a.extensions?.sponsoredBy).toEqual(['Sponsor of A']);
      expect(a.extensions?.cost).toMatchObject({ gpuCostUsd: 0.001, upstreamCalls: 1, cacheHits: 0 });
      expect(b.data).toEqual({
        one: { sponsoredBy: 'Sponsor of B, first' },
        two: { sponsoredBy: 'Sponsor of B, second' },
      });
      expect([...((b.extensions?.sponsoredBy as string[] | undefined) ?? [])].sort()).toEqual([
        'Sponsor of B, first',
        'Sponsor of B, second',
      ]);
      expect(b.extensions?.cost).toMatchObject({ gpuCostUsd: 0.005, upstreamCalls: 2, cacheHits: 0 });

      // Two log lines with that id, each with its own operation's figures.
      const lines = operationLines(id, log.lines);
      expect(lines).toHaveLength(2);
      const lineA = lines.find((l) => l.operation === 'A');
      const lineB = lines.find((l) => l.operation === 'B');
      expect(lineA).toMatchObject({ outcome: 'ok', upstreamCalls: 1, costUsd: 0.001, cacheHits: 0 });
      expect(lineA?.calls).toHaveLength(1);
      expect(lineB).toMatchObject({ outcome: 'ok', upstreamCalls: 2, costUsd: 0.005, cacheHits: 0 });
      expect(lineB?.calls).toHaveLength(2);
    },
  );

  it.each([
    ['on the fast path', 'fast'],
    ['through Yoga (a GET)', 'yoga'],
  ] as const)(
    'a client that goes away cancels its upstream call: logged at debug as cancelled, not as a failure (%s)',
    async (_name, path) => {
      up.resetRecords();
      const id = `obs-gone-${path}`;
      const controller = new AbortController();
      const query = 'query Gone { isNull(value: "hang") { __typename } }';
      const served = { ...scripted.app.fastPath.served };
      const headers = { 'x-request-id': id };
      const request =
        path === 'yoga'
          ? fetch(`${scripted.url}?query=${encodeURIComponent(query)}`, {
              headers: { ...headers, accept: 'application/graphql-response+json' },
              signal: controller.signal,
            })
          : gql(scripted.url, query, { headers, signal: controller.signal });
      const gone = request.then(
        () => 'answered',
        (error: unknown) => (error instanceof Error ? error.name : 'unknown'),
      );
      expect(await until(() => up.count('POST', '/api/v1/check') === 1)).toBe(true);
      expect(scripted.app.fastPath.served).toEqual({
        fast: served.fast + (path === 'fast' ? 1 : 0),
        lifted: served.lifted,
        handedOver: served.handedOver,
      });
      controller.abort();
      expect(await gone).toBe('AbortError');
      // The gateway gave up its upstream call too (its socket closed), and did not try it again.
      expect(await within(up.requests[0]?.ended as Promise<string>, 5000)).toBe('client-closed');
      expect(up.count('POST', '/api/v1/check')).toBe(1);
      expect(await until(() => operationLine(id, log.lines) !== undefined)).toBe(true);
      const cancelled = log.lines.filter((l) => l.msg === 'upstream call cancelled' && l.requestId === id);
      expect(cancelled).toHaveLength(1);
      expect(cancelled[0]).toMatchObject({ level: LEVEL.debug, upstream: 'null-check', code: 'CANCELLED' });
      const mine = log.lines.filter((l) => l.requestId === id);
      expect(mine.filter((l) => l.level >= LEVEL.warn)).toEqual([]);
      expect(JSON.stringify(mine)).not.toContain('UPSTREAM_UNAVAILABLE');
      const line = operationLine(id, log.lines);
      expect(line).toMatchObject({ operation: 'Gone', outcome: 'cancelled', upstreamCalls: 0, costUsd: 0 });
      expect(line?.calls).toEqual([
        expect.objectContaining({ upstream: 'null-check', status: null, code: 'CANCELLED' }),
      ]);
      expect(line).not.toHaveProperty('errorCodes');
      const metrics = await scripted.app.metrics.render();
      expect(metrics).not.toMatch(/gateway_upstream_requests_total\{[^}]*outcome="UPSTREAM_UNAVAILABLE"/);
      expect(metrics).toMatch(
        /gateway_upstream_requests_total\{upstream="null-check",endpoint="check",status="none",outcome="cancelled"\} [1-9]/,
      );
      // The gateway keeps serving.
      expect((await gql(scripted.url, '{ __typename }')).data).toEqual({ __typename: 'Query' });
    },
  );

  it('counts every cancelled operation as such in /metrics', async () => {
    // Its own cancellation, read as a difference: the test does not lean on the ones above having
    // run (alone, or in another order, it still cancels one and sees it counted).
    const outcome = (name: string) =>
      metricValue(scripted.app.metrics.registry, 'gateway_operations_total', {
        operation: 'GoneCounted',
        type: 'query',
        outcome: name,
      }).then((value) => value ?? 0);
    const before = { cancelled: await outcome('cancelled'), error: await outcome('error') };
    up.resetRecords();
    const controller = new AbortController();
    const gone = gql(scripted.url, 'query GoneCounted { isNull(value: "hang") { __typename } }', {
      signal: controller.signal,
    }).catch((error: unknown) => (error instanceof Error ? error.name : 'unknown'));
    expect(await until(() => up.count('POST', '/api/v1/check') === 1)).toBe(true);
    controller.abort();
    expect(await gone).toBe('AbortError');
    // The count follows the client's going away (bounded wait), then must be exactly one more.
    await until(async () => (await outcome('cancelled')) > before.cancelled);
    expect(await outcome('cancelled')).toBe(before.cancelled + 1);
    expect(await outcome('error')).toBe(before.error);
    expect(await scripted.app.metrics.render()).toMatch(
      /gateway_operations_total\{operation="GoneCounted",type="query",outcome="cancelled"\} [1-9]/,
    );
  });
});

describe('every route answers with x-request-id', () => {
  let other: TestGateway;
  const ORIGIN = 'http://app.example.test';

  beforeAll(async () => {
    // GraphiQL off, CORS on: the routes the main gateway does not have.
    other = await startTestGateway({
      nullBaseUrl: services.nullCheckUrl,
      piBaseUrl: services.piDigitsUrl,
      env: { GRAPHIQL: 'false', CORS_ORIGINS: ORIGIN },
    });
  });
  afterAll(async () => {
    await other?.close();
  });

  interface Route {
    name: string;
    on: () => TestGateway;
    path: string | (() => Promise<string>);
    init?: RequestInit;
    status: number;
    /** Also checked, to be sure the route is the one meant. */
    check?: (response: Response, text: string) => void;
  }

  const JSON_POST = { method: 'POST', headers: { 'content-type': 'application/json' } };
  const HTML = { headers: { accept: 'text/html' } };

  /** The address of one GraphiQL asset, as the page links it. */
  const assetPath = async () => {
    const page = await (await fetch(`${gateway.url}`, HTML)).text();
    const href = /href="(\/graphql\/assets\/graphiql\.css\?v=[^"]+)"/.exec(page)?.[1];
    expect(href).toBeDefined();
    return href as string;
  };

  const routes: Route[] = [
    { name: 'GET /health', on: () => gateway, path: '/health', status: 200 },
    {
      name: 'GET /ready',
      on: () => gateway,
      path: '/ready',
      status: 200,
      check: (_r, text) => expect(JSON.parse(text)).toMatchObject({ status: 'ready' }),
    },
    {
      name: 'GET /metrics',
      on: () => gateway,
      path: '/metrics',
      status: 200,
      check: (_r, text) => expect(text).toContain('gateway_operations_total'),
    },
    { name: 'a path that does not exist (404)', on: () => gateway, path: '/no/such/path', status: 404 },
    {
      name: 'the GraphiQL page',
      on: () => gateway,
      path: '/graphql',
      init: HTML,
      status: 200,
      check: (r, text) => {
        expect(r.headers.get('content-type')).toMatch(/^text\/html/);
        expect(text).toContain('graphiql-options');
      },
    },
    {
      name: 'a GraphiQL asset',
      on: () => gateway,
      path: assetPath,
      status: 200,
      check: (r) => expect(r.headers.get('content-type')).toMatch(/^text\/css/),
    },
    {
      name: 'the GraphiQL-off page (GRAPHIQL=false)',
      on: () => other,
      path: '/graphql',
      init: HTML,
      status: 200,
      check: (_r, text) => expect(text).toContain('GraphiQL is off'),
    },
    {
      name: 'an OPTIONS preflight (CORS_ORIGINS set)',
      on: () => other,
      path: '/graphql',
      init: {
        method: 'OPTIONS',
        headers: {
          origin: ORIGIN,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type, x-request-id',
        },
      },
      status: 204,
      check: (r) => expect(r.headers.get('access-control-allow-origin')).toBe(ORIGIN),
    },
    {
      name: 'a CORS GraphQL answer (x-request-id exposed to the page)',
      on: () => other,
      path: `/graphql?query=${encodeURIComponent('{ __typename }')}`,
      init: { headers: { origin: ORIGIN } },
      status: 200,
      check: (r) => expect(r.headers.get('access-control-expose-headers')).toContain('x-request-id'),
    },
    {
      name: 'a GraphQL answer over GET',
      on: () => gateway,
      path: `/graphql?query=${encodeURIComponent('{ __typename }')}`,
      status: 200,
    },
    {
      name: 'a GraphQL answer over POST that called an upstream (the fast path)',
      on: () => gateway,
      path: '/graphql',
      init: { ...JSON_POST, body: JSON.stringify({ query: '{ pi(digits: 1) { __typename } }' }) },
      status: 200,
      check: (_r, text) =>
        expect(JSON.parse(text)).toMatchObject({ data: { pi: { __typename: 'PiDigits' } } }),
    },
    {
      name: 'a request error under legacy application/json (200, as Yoga answers it)',
      on: () => gateway,
      path: '/graphql',
      init: { ...JSON_POST, body: '{"query":"{ nope }"}' },
      status: 200,
      check: (_r, text) => expect(text).toContain('GRAPHQL_VALIDATION_FAILED'),
    },
    {
      name: '400 (malformed JSON)',
      on: () => gateway,
      path: '/graphql',
      init: { ...JSON_POST, body: '{"query": ' },
      status: 400,
    },
    {
      name: '405 (PUT)',
      on: () => gateway,
      path: '/graphql',
      init: { ...JSON_POST, method: 'PUT', body: '{"query": "{ __typename }"}' },
      status: 405,
    },
    {
      name: '413 (a body over MAX_REQUEST_BODY_BYTES)',
      on: () => gateway,
      path: '/graphql',
      init: { ...JSON_POST, body: JSON.stringify({ query: `{ __typename }${' '.repeat(1024 * 1024)}` }) },
      status: 413,
      check: (_r, text) => expect(text).toContain('REQUEST_ENTITY_TOO_LARGE'),
    },
    {
      name: '415 (an XML body)',
      on: () => gateway,
      path: '/graphql',
      init: { method: 'POST', headers: { 'content-type': 'application/xml' }, body: '<query/>' },
      status: 415,
    },
  ];

  it.each(routes)('$name', async (route) => {
    const path = typeof route.path === 'string' ? route.path : await route.path();
    const url = `${route.on().origin}${path}`;
    const headersOf = (extra: Record<string, string>) => ({
      ...(route.init?.headers as Record<string, string> | undefined),
      ...extra,
    });
    // The caller's id comes back ...
    const given = await fetch(url, { ...route.init, headers: headersOf({ 'x-request-id': 'route-id-1' }) });
    const text = await given.text();
    expect(given.status).toBe(route.status);
    expect(given.headers.get('x-request-id')).toBe('route-id-1');
    route.check?.(given, text);
    // ... and without one, a generated id, another for each request.
    const generated = await Promise.all(
      [1, 2].map(async () => {
        const response = await fetch(url, { ...route.init, headers: headersOf({}) });
        await response.arrayBuffer();
        expect(response.status).toBe(route.status);
        return response.headers.get('x-request-id');
      }),
    );
    for (const id of generated) expect(id).toMatch(UUID);
    expect(generated[0]).not.toBe(generated[1]);
  });
});
