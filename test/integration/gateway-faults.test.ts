/**
 * What a GraphQL client is told when an upstream fails, seen over real sockets: the gateway
 * (`createApp`, fast path and Yoga) on loopback in front of two scripted upstreams
 * (test/fixtures/scripted-upstream.ts): the error table of docs/contract.md, refused and reset
 * connections, partial results, masking of what is not an upstream error. Retries, the breaker and
 * timeouts over time are in gateway-resilience.test.ts; valid answers of every shape in
 * schema-gateway.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DigitEngine } from '../../src/digits/digit-engine.js';
import {
  refusedUrl,
  type ScriptedResponse,
  type ScriptedUpstream,
  startScriptedUpstream,
} from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway, testDigitEngine } from '../support/gateway.js';
import { type GqlResult, gql } from '../support/graphql-client.js';
import { metricValue } from '../support/metric-values.js';
import { nullHealth, piHealth, nullBody as specNullBody } from '../support/upstream-bodies.js';
import { within } from '../support/waits.js';

const engine = testDigitEngine();

/** correctDigits of this many places throws a non-GraphQL error (the masking test). */
const BROKEN_PLACES = 77;
const brokenEngine: DigitEngine = {
  digits: (constant, decimals) =>
    decimals === BROKEN_PLACES
      ? Promise.reject(new TypeError('secret internal detail at 10.0.0.7'))
      : engine.digits(constant, decimals),
  peek: (constant, decimals) => {
    if (decimals === BROKEN_PLACES) throw new TypeError('secret internal detail at 10.0.0.7');
    return engine.peek(constant, decimals);
  },
  close: () => engine.close(),
};

/**
 * No retries, no breaker: each row is exactly one upstream attempt. Timeouts in seconds: an answer
 * the scripted upstream sends is never taken for a timeout, however busy the machine.
 */
const PLAIN_ENV = {
  UPSTREAM_TIMEOUT_MS: '10000',
  HEALTH_TIMEOUT_MS: '10000',
  RETRY_MAX_ATTEMPTS: '1',
  BREAKER_THRESHOLD: '0',
};
/**
 * The timeout of the gateway in front of upstreams that never answer (the UPSTREAM_TIMEOUT rows):
 * short, as nothing can arrive before it anyway.
 */
const SHORT_TIMEOUT = { UPSTREAM_TIMEOUT_MS: '300', NULL_API_VERSION: 'v1', PI_API_VERSION: 'v1' };

function startGateway(nullBaseUrl: string, piBaseUrl: string, env: Record<string, string> = {}) {
  return startTestGateway({
    nullBaseUrl,
    piBaseUrl,
    env: { ...PLAIN_ENV, ...env },
    backoff: { baseMs: 1, capMs: 5 },
    digits: brokenEngine,
  });
}

const nullBody = (extra: Record<string, unknown> = {}) =>
  specNullBody({ sponsored_by: 'Scripted Sponsor', ...extra });

const piBody = async (
  decimals: number,
  extra: Record<string, unknown> = {},
  constant: 'pi' | 'e' = 'pi',
) => ({
  digits: await engine.digits(constant, decimals),
  precision: decimals,
  confidence: 0.99,
  model: 'pi-x-4o',
  inference_time_ms: 20,
  gpu_cost_usd: 0.01,
  sponsored_by: 'Scripted Pie',
  disclaimer: 'Digits may differ from actual pi.',
  ...extra,
});

/** An upstream error body that must never reach a client. */
const secretBody = (status: number) => ({
  error: { status, code: 'X', message: 'INTERNAL-SECRET stack at http://10.9.8.7:7001/internal' },
});

let nullUp: ScriptedUpstream;
let piUp: ScriptedUpstream;
let gateway: TestGateway;
/** The same, with a short upstream timeout: for answers that never come. */
let impatient: TestGateway;

beforeAll(async () => {
  [nullUp, piUp] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
  [gateway, impatient] = await Promise.all([
    startGateway(nullUp.url, piUp.url),
    startGateway(nullUp.url, piUp.url, SHORT_TIMEOUT),
  ]);
});
afterAll(async () => {
  await Promise.all([gateway?.close(), impatient?.close()]);
  await Promise.all([nullUp?.close(), piUp?.close()]);
});
beforeEach(async () => {
  nullUp.reset();
  piUp.reset();
  nullUp.route('POST', '/api/v1/check', { body: nullBody() });
  nullUp.route('GET', '/api/v1/health', { body: nullHealth });
  piUp.route('GET', '/api/v1/pi', { body: await piBody(3) });
  piUp.route('GET', '/api/v1/health', { body: piHealth });
});

const IS_NULL = '{ f: isNull(value: 1) { __typename ... on NullCheck { actuallyNull correct modelName } } }';
const PI =
  '{ f: pi { __typename ... on ConstantDigits { digits precision requestedDigits correctDigits modelName model } } }';

/** The field a row asks for: its query, the upstream it calls, and the endpoint that call reaches. */
const FIELDS = {
  isNull: { query: IS_NULL, up: () => nullUp, upstream: 'null-check', method: 'POST', path: '/api/v1/check' },
  'isNull without a value': {
    query: '{ f: isNull { __typename } }',
    up: () => nullUp,
    upstream: 'null-check',
    method: 'POST',
    path: '/api/v1/check',
  },
  pi: { query: PI, up: () => piUp, upstream: 'pi-digits', method: 'GET', path: '/api/v1/pi' },
} as const;
type Field = keyof typeof FIELDS;

/**
 * One failed field, as the client sees it: the field null with exactly one error (the code, the
 * upstream, its status when it answered at all, and `extra`), a message naming the service, and
 * never the upstream's raw body or an address. The upstream was called once.
 */
function expectFailedField(
  result: GqlResult,
  field: Field,
  code: string,
  upstreamStatus?: number,
  extra?: Record<string, unknown>,
): void {
  const { upstream, up, method, path } = FIELDS[field];
  // Data (the field null) with an error: 294 Partial Success under application/graphql-response+json.
  expect(result.status).toBe(294);
  expect(result.data).toEqual({ f: null });
  expect(result.errors).toHaveLength(1);
  expect(result.errors?.[0]?.path).toEqual(['f']);
  expect(result.errors?.[0]?.extensions).toEqual({
    code,
    upstream,
    ...(upstreamStatus === undefined ? {} : { upstreamStatus }),
    ...extra,
  });
  expect(result.errors?.[0]?.message).toMatch(
    upstream === 'null-check' ? /null-check service/ : /pi-digits service/,
  );
  // Never the upstream's raw body or an internal address.
  expect(result.text).not.toContain('INTERNAL-SECRET');
  expect(result.text).not.toContain('127.0.0.1');
  expect(result.text).not.toContain('10.9.8.7');
  expect(up().count(method, path)).toBe(1);
}

describe('the error table (docs/contract.md, Errors), at the GraphQL level', () => {
  /**
   * What the upstream does, and what the client is told: the code, and the upstream's status when it
   * answered at all (and anything else the error extensions carry).
   */
  type Row = [
    name: string,
    field: Field,
    script: ScriptedResponse,
    code: string,
    upstreamStatus?: number,
    extra?: Record<string, unknown>,
  ];
  const BAD = 'UPSTREAM_BAD_RESPONSE';
  const rows: Row[] = [
    ['400 for a value it refuses', 'isNull', { status: 400, body: secretBody(400) }, 'BAD_USER_INPUT', 400],
    ['418 strict mode', 'isNull', { status: 418, body: secretBody(418) }, 'TIER_FORBIDDEN', 418],
    ['418 digits', 'pi', { status: 418, body: secretBody(418) }, 'TIER_FORBIDDEN', 418],
    [
      '429 with Retry-After',
      'pi',
      { status: 429, headers: { 'retry-after': '7' }, body: secretBody(429) },
      'RATE_LIMITED',
      429,
      { retryAfterSeconds: 7 },
    ],
    [
      'null-check 500: the null paradox',
      'isNull',
      { status: 500, body: secretBody(500) },
      'NULL_PARADOX',
      500,
    ],
    ['pi-digits 500', 'pi', { status: 500, body: secretBody(500) }, 'UPSTREAM_ERROR', 500],
    ['503', 'isNull', { status: 503, body: secretBody(503) }, 'UPSTREAM_UNAVAILABLE', 503],
    ['401 bad key', 'pi', { status: 401, body: secretBody(401) }, 'UNAUTHENTICATED', 401],
    [
      "a proxy's 502 HTML page",
      'isNull',
      { status: 502, html: '<html>INTERNAL-SECRET bad gateway</html>' },
      'UPSTREAM_ERROR',
      502,
    ],
    [
      '200 with an HTML body',
      'pi',
      { status: 200, html: '<html><body>INTERNAL-SECRET login</body></html>' },
      BAD,
      200,
    ],
    ['200 with malformed JSON', 'isNull', { status: 200, body: '{"is_null": tru' }, BAD, 200],
    [
      '200 with a wrong field type',
      'isNull',
      { body: nullBody({ confidence: 'very INTERNAL-SECRET' }) },
      BAD,
      200,
    ],
    [
      '200 with an unknown is_null shape and a wrong-typed confidence (no invented confidence: 0)',
      'isNull',
      { body: nullBody({ is_null: 42, confidence: 'high' }) },
      BAD,
      200,
    ],
    [
      '200 with digits that are not digits',
      'pi',
      { body: { digits: 'three point one', precision: 3 } },
      BAD,
      200,
    ],
    ['a hanging upstream', 'pi', { hang: true }, 'UPSTREAM_TIMEOUT'],
    [
      'isNull without a value: the upstream 400 is UNDEFINED_VALUE',
      'isNull without a value',
      { status: 400, body: secretBody(400) },
      'UNDEFINED_VALUE',
      400,
    ],
    [
      "a proxy's 502 HTML page, from pi-digits",
      'pi',
      { status: 502, html: '<h1>Bad gateway</h1>INTERNAL-SECRET' },
      'UPSTREAM_ERROR',
      502,
    ],
    ['headers, then no body', 'isNull', { hangAfterHeaders: true }, 'UPSTREAM_TIMEOUT', 200],
  ];

  it.each(rows)('%s', async (_name, field, script, code, upstreamStatus, extra) => {
    const { up, method, path, query } = FIELDS[field];
    up().route(method, path, script);
    // Only an answer that never comes meets the short timeout.
    const via = code === 'UPSTREAM_TIMEOUT' ? impatient : gateway;
    const result = await gql(via.url, query);
    expectFailedField(result, field, code, upstreamStatus, extra);
    // A failed call costs nothing; it counts as an upstream call when the upstream answered at all.
    const answered = upstreamStatus === undefined ? 0 : 1;
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0, upstreamCalls: answered, cacheHits: 0 });
  });

  it('an unexpected 404 (on v1 and on v2: no retirement) is UPSTREAM_ERROR with the v1 status', async () => {
    // NULL_API_VERSION=auto: a 404 is first taken for a retirement and the v2 form is tried, within
    // the same call; v2 is not there either (the scripted upstream answers it 404), so nothing moved.
    nullUp.route('POST', '/api/v1/check', { status: 404, body: secretBody(404) });
    const result = await gql(gateway.url, IS_NULL);
    expect(result.data).toEqual({ f: null });
    expect(result.errors?.[0]?.extensions).toEqual({
      code: 'UPSTREAM_ERROR',
      upstream: 'null-check',
      upstreamStatus: 404,
    });
    expect(result.text).not.toContain('INTERNAL-SECRET');
    expect(nullUp.count('POST', '/api/v2/null-or-not')).toBe(1);
    expect(gateway.app.clients.state('null-check').apiVersion).toBe('v1');
    // The next call still goes to v1.
    nullUp.route('POST', '/api/v1/check', { body: nullBody() });
    expect((await gql(gateway.url, IS_NULL)).data?.f).toMatchObject({ __typename: 'NullVerdict' });
  });

  it('a body cut off mid-way is an upstream failure, not a crash', async () => {
    piUp.route('GET', '/api/v1/pi', { body: await piBody(50), truncate: true });
    const result = await gql(gateway.url, PI);
    expect(result.data).toEqual({ f: null });
    expect(['UPSTREAM_BAD_RESPONSE', 'UPSTREAM_UNAVAILABLE']).toContain(result.errors?.[0]?.extensions?.code);
  });

  it('a reset connection is UPSTREAM_UNAVAILABLE', async () => {
    nullUp.route('POST', '/api/v1/check', { destroy: true });
    const result = await gql(gateway.url, IS_NULL);
    expect(result.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: 'null-check',
    });
  });

  it('one failing upstream leaves the other fields (partial results), and only the answer is paid for', async () => {
    piUp.route('GET', '/api/v1/pi', { status: 503 });
    const result = await gql(
      gateway.url,
      '{ a: isNull(value: null) { __typename ... on NullCheck { actuallyNull } } b: pi { __typename } h: health { status } }',
    );
    // 294 Partial Success: data with a field error (the 2026 draft).
    expect(result.status).toBe(294);
    expect(result.data).toEqual({
      a: { __typename: 'NullVerdict', actuallyNull: true },
      b: null,
      h: { status: 'OK' },
    });
    expect(result.errors).toHaveLength(1);
    expect(result.errors?.[0]).toMatchObject({
      path: ['b'],
      extensions: { code: 'UPSTREAM_UNAVAILABLE', upstream: 'pi-digits', upstreamStatus: 503 },
    });
    // The check, the failed pi call and the two health probes were answered; only the check costs.
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.0012, upstreamCalls: 4, cacheHits: 0 });
    expect(result.extensions?.sponsoredBy).toEqual(['Scripted Sponsor']);
  });

  it('anything else is masked: "Unexpected error." on that field only, nothing of the cause', async () => {
    const FIELDS_OF_PI = '__typename ... on ConstantDigits { digits correctDigits }';
    // Honest digits, as many as asked: correctDigits checks them for that many places.
    piUp.route('GET', '/api/v1/pi', async (request) => ({
      body: await piBody(Number(request.query.digits)),
    }));
    const result = await gql(
      gateway.url,
      `{ pi(digits: ${BROKEN_PLACES}) { ${FIELDS_OF_PI} } ok: pi(digits: 2) { ${FIELDS_OF_PI} } }`,
    );
    expect(result.errors).toHaveLength(1);
    expect(result.errors?.[0]).toMatchObject({ message: 'Unexpected error.', path: ['pi', 'correctDigits'] });
    expect(result.data?.pi).toBeNull();
    expect(result.data?.ok).toMatchObject({ correctDigits: 2 });
    expect(result.text).not.toContain('secret');
    expect(result.text).not.toContain('10.0.0.7');
  });
});

describe('connection refused', () => {
  it('is UPSTREAM_UNAVAILABLE without an upstream status, fast (not the timeout), after the retries; health reports DOWN without failing', async () => {
    const nowhere = await refusedUrl();
    // A long timeout and deadline: a refused connection must not wait for them. The default retries.
    const dead = await startGateway(nowhere, nowhere, {
      UPSTREAM_TIMEOUT_MS: '60000',
      OPERATION_DEADLINE_MS: '120000',
      RETRY_MAX_ATTEMPTS: '3',
    });
    try {
      const result = await within(
        gql(
          dead.url,
          `{ f: isNull(value: 1) { __typename } g: pi { __typename }
             h: health { status nullCheck { reachable error statusCode } pi { reachable } } }`,
        ),
        20_000,
      );
      if (typeof result === 'symbol') throw new Error('the refused calls waited for the timeout');
      expect(result.data?.f).toBeNull();
      expect(result.data?.g).toBeNull();
      expect(result.errors).toHaveLength(2);
      expect(result.errors?.find((e) => e.path?.[0] === 'f')?.extensions).toEqual({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'null-check',
      });
      expect(result.errors?.find((e) => e.path?.[0] === 'g')?.extensions).toEqual({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'pi-digits',
      });
      expect(result.data?.h).toMatchObject({
        status: 'DOWN',
        nullCheck: { reachable: false, statusCode: null },
        pi: { reachable: false },
      });
      expect(result.data?.h.nullCheck.error).toContain('could not be reached');
      // No address, no port, no socket error code.
      expect(result.text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED/);
      expect(result.text).not.toContain(new URL(nowhere).port);
      // Nothing answered: no upstream call counted, nothing paid.
      expect(result.extensions?.cost).toMatchObject({ upstreamCalls: 0, gpuCostUsd: 0 });
      // Each attempt is in the metrics: three (RETRY_MAX_ATTEMPTS), none answered.
      expect(
        await metricValue(dead.app.metrics.registry, 'gateway_upstream_requests_total', {
          upstream: 'null-check',
          endpoint: 'check',
          status: 'none',
          outcome: 'UPSTREAM_UNAVAILABLE',
        }),
      ).toBe(3);
      // The gateway keeps serving.
      expect((await gql(dead.url, '{ __typename }')).data).toEqual({ __typename: 'Query' });
    } finally {
      await dead.close();
    }
  });
});

describe('odd but valid answers', () => {
  it('pi over v2 (the inference answer names no model): model and modelName are null, nothing invented', async () => {
    const v2 = await startGateway(nullUp.url, piUp.url, { PI_API_VERSION: 'v2', PI_WAIVER_ACCEPTED: 'true' });
    try {
      piUp.route('POST', '/api/v1/inference', {
        body: { digits: await engine.digits('pi', 3), tokens_used: 12, cost: '$0.0004' },
      });
      const result = await gql(
        v2.url,
        '{ pi { __typename ... on ConstantDigits { digits correctDigits model modelName } } }',
      );
      expect(result.errors).toBeUndefined();
      expect(result.data?.pi).toEqual({
        __typename: 'PiDigits',
        digits: await engine.digits('pi', 3),
        correctDigits: 3,
        model: null,
        modelName: null,
      });
      expect(piUp.count('GET', '/api/v1/pi')).toBe(0);
      expect(piUp.requests[0]?.body).toMatchObject({ liability_waiver_signed: true });
    } finally {
      await v2.close();
    }
  });
});
