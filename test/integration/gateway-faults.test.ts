/**
 * Every fault and odd shape of the upstreams, seen at the GraphQL level over real sockets: the
 * gateway (`createApp`, fast path and Yoga) on loopback in front of two scripted upstreams
 * (test/fixtures/scripted-upstream.ts).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  refusedUrl,
  type ScriptedResponse,
  type ScriptedUpstream,
  startScriptedUpstream,
} from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway, testDigitEngine } from '../support/gateway.js';
import { codes, gql } from '../support/graphql-client.js';
import { nullHealth, piHealth, nullBody as specNullBody } from '../support/upstream-bodies.js';
import { gate, until } from '../support/waits.js';

const engine = testDigitEngine();

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

describe('the error table (docs/contract.md, Errors), at the GraphQL level', () => {
  /**
   * What the upstream does, and what the client is told: the code, and the upstream's status when it
   * answered at all (and anything else the error extensions carry).
   */
  type Row = [
    name: string,
    which: 'null' | 'pi',
    script: ScriptedResponse,
    code: string,
    upstreamStatus?: number,
    extra?: Record<string, unknown>,
  ];
  const BAD = 'UPSTREAM_BAD_RESPONSE';
  const rows: Row[] = [
    ['400 for a value it refuses', 'null', { status: 400, body: secretBody(400) }, 'BAD_USER_INPUT', 400],
    ['418 strict mode', 'null', { status: 418, body: secretBody(418) }, 'TIER_FORBIDDEN', 418],
    ['418 digits', 'pi', { status: 418, body: secretBody(418) }, 'TIER_FORBIDDEN', 418],
    [
      '429 with Retry-After',
      'pi',
      { status: 429, headers: { 'retry-after': '7' }, body: secretBody(429) },
      'RATE_LIMITED',
      429,
      { retryAfterSeconds: 7 },
    ],
    ['null-check 500: the null paradox', 'null', { status: 500, body: secretBody(500) }, 'NULL_PARADOX', 500],
    ['pi-digits 500', 'pi', { status: 500, body: secretBody(500) }, 'UPSTREAM_ERROR', 500],
    ['503', 'null', { status: 503, body: secretBody(503) }, 'UPSTREAM_UNAVAILABLE', 503],
    ['401 bad key', 'pi', { status: 401, body: secretBody(401) }, 'UNAUTHENTICATED', 401],
    [
      "a proxy's 502 HTML page",
      'null',
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
    ['200 with malformed JSON', 'null', { status: 200, body: '{"is_null": tru' }, BAD, 200],
    [
      '200 with a wrong field type',
      'null',
      { body: nullBody({ confidence: 'very INTERNAL-SECRET' }) },
      BAD,
      200,
    ],
    [
      '200 with an unknown is_null shape and a wrong-typed confidence (no invented confidence: 0)',
      'null',
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
    ['headers, then no body', 'null', { hangAfterHeaders: true }, 'UPSTREAM_TIMEOUT', 200],
  ];

  it.each(rows)('%s', async (_name, which, script, code, upstreamStatus, extra) => {
    (which === 'null' ? nullUp : piUp).route(
      which === 'null' ? 'POST' : 'GET',
      which === 'null' ? '/api/v1/check' : '/api/v1/pi',
      script,
    );
    // Only an answer that never comes meets the short timeout.
    const via = code === 'UPSTREAM_TIMEOUT' ? impatient : gateway;
    const result = await gql(via.url, which === 'null' ? IS_NULL : PI);
    // Data (the field null) with an error: 294 Partial Success under application/graphql-response+json.
    expect(result.status).toBe(294);
    expect(result.data).toEqual({ f: null });
    expect(result.errors).toHaveLength(1);
    expect(result.errors?.[0]?.path).toEqual(['f']);
    expect(result.errors?.[0]?.extensions).toEqual({
      code,
      upstream: which === 'null' ? 'null-check' : 'pi-digits',
      ...(upstreamStatus === undefined ? {} : { upstreamStatus }),
      ...extra,
    });
    // Never the upstream's raw body or an internal address.
    expect(result.text).not.toContain('INTERNAL-SECRET');
    expect(result.text).not.toContain('127.0.0.1');
    expect(result.text).not.toContain('10.9.8.7');
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

  it('isNull without a value: the upstream 400 is UNDEFINED_VALUE', async () => {
    nullUp.route('POST', '/api/v1/check', { status: 400, body: secretBody(400) });
    const result = await gql(gateway.url, '{ f: isNull { __typename } }');
    expect(result.errors?.[0]?.extensions).toEqual({
      code: 'UNDEFINED_VALUE',
      upstream: 'null-check',
      upstreamStatus: 400,
    });
    expect(result.text).not.toContain('INTERNAL-SECRET');
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

  it('a slow upstream within the timeout still answers', async () => {
    // Slow: the answer is held until the call has reached the upstream and waits there.
    const answer = gate();
    piUp.route('GET', '/api/v1/pi', { holdUntil: answer.opened, body: await piBody(3) });
    const pending = gql(gateway.url, PI);
    expect(await until(() => piUp.count('GET', '/api/v1/pi') === 1)).toBe(true);
    answer.open();
    const result = await pending;
    expect(result.errors).toBeUndefined();
    expect(result.data?.f).toMatchObject({ __typename: 'PiDigits', correctDigits: 3 });
  });

  it('one failing upstream leaves the other field (partial results), and only the answer is paid for', async () => {
    piUp.route('GET', '/api/v1/pi', { status: 503 });
    const result = await gql(
      gateway.url,
      '{ a: isNull(value: null) { __typename ... on NullCheck { actuallyNull } } b: pi { __typename } }',
    );
    expect(result.data).toEqual({ a: { __typename: 'NullVerdict', actuallyNull: true }, b: null });
    expect(result.errors?.[0]).toMatchObject({ path: ['b'], extensions: { code: 'UPSTREAM_UNAVAILABLE' } });
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.0012, upstreamCalls: 2, cacheHits: 0 });
    expect(result.extensions?.sponsoredBy).toEqual(['Scripted Sponsor']);
  });
});

describe('connection refused and the circuit breaker', () => {
  it('a refused connection is UPSTREAM_UNAVAILABLE, and health reports DOWN without failing', async () => {
    const nowhere = await refusedUrl();
    const dead = await startGateway(nowhere, nowhere);
    try {
      const result = await gql(
        dead.url,
        `${IS_NULL.slice(0, -1)} h: health { status nullCheck { reachable error statusCode } pi { reachable } } }`,
      );
      expect(result.errors).toHaveLength(1);
      expect(result.errors?.[0]).toMatchObject({
        path: ['f'],
        extensions: { code: 'UPSTREAM_UNAVAILABLE', upstream: 'null-check' },
      });
      expect(result.data?.h).toMatchObject({
        status: 'DOWN',
        nullCheck: { reachable: false, statusCode: null },
        pi: { reachable: false },
      });
      expect(result.data?.h.nullCheck.error).toBeTypeOf('string');
      expect(result.text).not.toContain(nowhere.replace('http://', ''));
      // Nothing answered: no upstream call counted.
      expect(result.extensions?.cost).toMatchObject({ upstreamCalls: 0, gpuCostUsd: 0 });
    } finally {
      await dead.close();
    }
  });

  it('after BREAKER_THRESHOLD failures the circuit opens: UPSTREAM_UNAVAILABLE without calling the upstream', async () => {
    const guarded = await startGateway(nullUp.url, piUp.url, {
      BREAKER_THRESHOLD: '2',
      BREAKER_HALF_OPEN_AFTER_MS: '60000',
    });
    try {
      piUp.route('GET', '/api/v1/pi', { status: 500 });
      for (let i = 0; i < 2; i++) expect(codes(await gql(guarded.url, PI))).toEqual(['UPSTREAM_ERROR']);
      expect(guarded.app.clients.state('pi-digits').breaker).toBe('open');
      const open = await gql(guarded.url, PI);
      expect(open.errors?.[0]?.extensions).toMatchObject({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'pi-digits',
      });
      expect(open.extensions?.cost).toMatchObject({ upstreamCalls: 0 });
      expect(piUp.count('GET', '/api/v1/pi')).toBe(2);
      // The other upstream's circuit is its own.
      expect(guarded.app.clients.state('null-check').breaker).toBe('closed');
    } finally {
      await guarded.close();
    }
  });

  it('a transient 503 on an idempotent call is retried (RETRY_MAX_ATTEMPTS), each answered attempt counted', async () => {
    const patient = await startGateway(nullUp.url, piUp.url, { RETRY_MAX_ATTEMPTS: '3' });
    try {
      piUp.route('GET', '/api/v1/pi', [{ status: 503 }, { body: await piBody(3) }]);
      const result = await gql(patient.url, PI);
      expect(result.errors).toBeUndefined();
      expect(result.data?.f).toMatchObject({ __typename: 'PiDigits' });
      expect(piUp.count('GET', '/api/v1/pi')).toBe(2);
      expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.01, upstreamCalls: 2, cacheHits: 0 });
    } finally {
      await patient.close();
    }
  });
});

describe('odd but valid answers', () => {
  it.each([
    ['a string', { is_null: 'The void stares back.' }, 'The void stares back.'],
    [
      'an object with a musing',
      { is_null: { musing: 'Is anything truly null?' } },
      'Is anything truly null?',
    ],
    ['a number', { is_null: 42 }, null],
  ])('an existential answer (%s) keeps its text and the untouched body', async (_what, shape, musing) => {
    const body = nullBody(shape);
    nullUp.route('POST', '/api/v1/check', { body });
    const result = await gql(
      gateway.url,
      '{ isNull(value: 1, temperature: 0.9) { __typename ... on ExistentialVerdict { musing raw correct actuallyNull } } }',
    );
    expect(result.errors).toBeUndefined();
    expect(result.data?.isNull).toMatchObject({
      __typename: 'ExistentialVerdict',
      correct: null,
      actuallyNull: false,
      musing,
    });
    // Null when the answer had no text: nothing is made up.
    expect(result.data?.isNull.musing).toBe(musing);
    expect(result.data?.isNull.raw).toEqual(body);
  });

  it('"maybe" is a MaybeVerdict', async () => {
    nullUp.route('POST', '/api/v1/check', { body: nullBody({ is_null: 'maybe' }) });
    const result = await gql(
      gateway.url,
      '{ isNull(value: null) { __typename ... on MaybeVerdict { answer correct actuallyNull } } }',
    );
    expect(result.data?.isNull).toEqual({
      __typename: 'MaybeVerdict',
      answer: 'maybe',
      correct: null,
      actuallyNull: true,
    });
  });

  it('e digits with a marker, and without one, are EulerDigits checked against e', async () => {
    piUp.route('GET', '/api/v1/pi', [
      { body: await piBody(12, { constant: 'e' }, 'e') },
      { body: await piBody(12, {}, 'e') },
    ]);
    for (const digits of [12, 13]) {
      const result = await gql(
        gateway.url,
        `{ pi(digits: ${digits}, temperature: 0.8) { __typename ... on ConstantDigits { digits correctDigits } } }`,
      );
      expect(result.data?.pi).toEqual({
        __typename: 'EulerDigits',
        digits: await engine.digits('e', 12),
        correctDigits: 12,
      });
    }
    expect(piUp.count('GET', '/api/v1/pi')).toBe(2);
  });

  it('hallucinated digits are counted only as far as they agree', async () => {
    const truth = await engine.digits('pi', 30);
    const badAt = 2 + 17; // index of decimal place 18 in "3.xxxx"
    const wrong = `${truth.slice(0, badAt)}${truth[badAt] === '9' ? '8' : '9'}${truth.slice(badAt + 1)}`;
    piUp.route('GET', '/api/v1/pi', { body: { ...(await piBody(30)), digits: wrong } });
    const result = await gql(
      gateway.url,
      '{ pi(digits: 30) { ... on ConstantDigits { digits correctDigits } } }',
    );
    expect(result.data?.pi).toEqual({ digits: wrong, correctDigits: 17 });
  });

  it('a clamped answer is visible via requestedDigits, and an unknown model keeps its name', async () => {
    piUp.route('GET', '/api/v1/pi', { body: await piBody(3, { model: 'pi-x-5-turbo' }) });
    const result = await gql(
      gateway.url,
      '{ pi(digits: 9, model: PI_X_OPUS_ALMOST_CORRECT) { ... on ConstantDigits { precision requestedDigits correctDigits model modelName } } }',
    );
    expect(result.data?.pi).toEqual({
      precision: 3,
      requestedDigits: 9,
      correctDigits: 3,
      model: null,
      modelName: 'pi-x-5-turbo',
    });
    expect(piUp.requests[0]?.query).toMatchObject({ digits: '9', model: 'pi-x-opus-almost-correct' });
  });

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

  it('health: one upstream down is DEGRADED, with the other fully reported', async () => {
    nullUp.route('GET', '/api/v1/health', { status: 503 });
    const result = await gql(
      gateway.url,
      '{ health { status nullCheck { reachable statusCode error } pi { reachable status piAvailable } } }',
    );
    expect(result.data?.health).toMatchObject({
      status: 'DEGRADED',
      nullCheck: { reachable: false, statusCode: 503 },
      pi: { reachable: true, status: 'ok', piAvailable: true },
    });
    expect(result.data?.health.nullCheck.error).toBeTypeOf('string');
    expect(result.errors).toBeUndefined();
  });

  it('health: each upstream reports its API version and, when its endpoint is deprecated, the Sunset date', async () => {
    const sunset = 'Sat, 01 Aug 2026 00:00:00 GMT';
    piUp.route('GET', '/api/v1/pi', {
      body: await piBody(3),
      headers: { deprecation: '@1767225600', sunset, link: '</api/v1/inference>; rel="successor-version"' },
    });
    expect((await gql(gateway.url, PI)).data?.f).toMatchObject({ __typename: 'PiDigits' });
    const result = await gql(
      gateway.url,
      '{ health { nullCheck { apiVersion deprecated sunset } pi { apiVersion deprecated sunset } } }',
    );
    expect(result.errors).toBeUndefined();
    expect(result.data?.health).toEqual({
      nullCheck: { apiVersion: 'v1', deprecated: false, sunset: null },
      pi: { apiVersion: 'v1', deprecated: true, sunset },
    });
    expect(await gateway.app.metrics.render()).toMatch(
      /gateway_upstream_deprecated_total\{upstream="pi-digits",endpoint="pi"\} [1-9]/,
    );
  });
});

describe('what reaches the wire', () => {
  it('an omitted value is a body without "value"; an explicit null is "value": null', async () => {
    await gql(gateway.url, '{ a: isNull { __typename } b: isNull(value: null) { __typename } }');
    const bodies = nullUp.requests.filter((r) => r.path === '/api/v1/check').map((r) => r.rawBody);
    expect(bodies).toHaveLength(2);
    // One body without the key, one with it (the order of the two calls is not fixed).
    expect(bodies.map((b) => 'value' in JSON.parse(b)).sort()).toEqual([false, true]);
    const explicit = bodies.find((b) => 'value' in JSON.parse(b));
    expect(JSON.parse(explicit ?? '{}')).toEqual({ value: null });
  });

  it('arguments become the upstream fields (snake_case, model strings)', async () => {
    await gql(
      gateway.url,
      '{ isNull(value: {a: [1]}, model: NULL_X_MINI, temperature: 0.25, strictMode: true) { __typename } }',
    );
    expect(nullUp.requests.find((r) => r.path === '/api/v1/check')?.body).toEqual({
      value: { a: [1] },
      model: 'null-x-mini',
      temperature: 0.25,
      strict_mode: true,
    });
  });

  it('the API key goes upstream as a Bearer token, with the request id; no key, no header', async () => {
    await gql(gateway.url, PI, { headers: { 'x-api-key': 'k-forwarded-1', 'x-request-id': 'trace-77' } });
    await gql(gateway.url, PI);
    const [withKey, without] = piUp.requests;
    expect(withKey?.headers.authorization).toBe('Bearer k-forwarded-1');
    expect(withKey?.headers['x-request-id']).toBe('trace-77');
    expect(without?.headers.authorization).toBeUndefined();
    // Without a caller's id, a generated one (a UUID) still goes upstream.
    expect(without?.headers['x-request-id']).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/,
    );
  });

  it('identical calls in one operation reach the upstream once, and are paid for once', async () => {
    const result = await gql(
      gateway.url,
      '{ a: pi { __typename } b: pi { __typename } c: isNull(value: 1) { __typename } d: isNull(value: 1) { __typename } }',
    );
    expect(result.errors).toBeUndefined();
    expect(piUp.count('GET', '/api/v1/pi')).toBe(1);
    expect(nullUp.count('POST', '/api/v1/check')).toBe(1);
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.0112, upstreamCalls: 2, cacheHits: 0 });
  });
});
