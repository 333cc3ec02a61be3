/**
 * Retries, the circuit breaker, timeouts and the operation deadline seen through the whole gateway
 * (createApp on a real socket) in front of scripted upstreams: what a GraphQL client gets, what
 * /health and /ready say, and what the upstream actually received. The policies themselves (which
 * failure is retried or counted, backoff, probe sharing) are in test/unit/upstream-interceptors.test.ts;
 * what only the upstream clients show (error kinds, paid calls, slow bodies) in
 * upstream-resilience.test.ts; the error table in gateway-faults.test.ts; a client that goes away in
 * observability-gateway.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { refusedUrl, type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from '../support/gateway.js';
import { codes, type GqlResult, gql, gqlInYoga } from '../support/graphql-client.js';
import { nullBody, nullHealth, piBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { LATE, until, within } from '../support/waits.js';

let nullUp: ScriptedUpstream;
let piUp: ScriptedUpstream;
const gateways: TestGateway[] = [];

/** Both upstreams healthy and answering. */
function scriptHealthy(): void {
  nullUp.reset();
  piUp.reset();
  routeSpecAnswers(nullUp, piUp);
}

async function gatewayOver(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const gateway = await startTestGateway({
    nullBaseUrl: nullUp.url,
    piBaseUrl: piUp.url,
    backoff: { baseMs: 5, capMs: 20 },
    ...options,
    // v1 fixed: no /openapi.json read at start, so the upstreams see only what each test causes
    // (versions have their own file).
    env: { NULL_API_VERSION: 'v1', PI_API_VERSION: 'v1', ...options.env },
  });
  gateways.push(gateway);
  return gateway;
}

beforeAll(async () => {
  [nullUp, piUp] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
});
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(gateways.splice(0).map((g) => g.close()));
});
afterAll(async () => {
  await Promise.all([nullUp?.close(), piUp?.close()]);
});

const BOTH = '{ isNull(value: null) { __typename } pi { __typename ... on ConstantDigits { digits } } }';
const HEALTH = '{ health { status nullCheck { reachable breaker } pi { reachable breaker } } }';

describe('liveness and readiness', () => {
  it('GET /health answers 200 without touching an upstream, even when both are down', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({ nullBaseUrl: await refusedUrl(), piBaseUrl: await refusedUrl() });
    const response = await fetch(`${gateway.origin}/health`);
    expect(response.status).toBe(200);
    expect(nullUp.count() + piUp.count()).toBe(0);
  });

  it('GET /ready is 200 with closed breakers without calling the upstreams, and names no address', async () => {
    scriptHealthy();
    const gateway = await gatewayOver();
    const response = await fetch(`${gateway.origin}/ready`);
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(JSON.parse(text)).toMatchObject({
      status: 'ready',
      upstreams: {
        nullCheck: { ready: true, breaker: 'closed' },
        piDigits: { ready: true, breaker: 'closed' },
      },
    });
    expect(text).not.toContain('127.0.0.1');
    expect(text).not.toContain(String(nullUp.port));
    expect(nullUp.count() + piUp.count()).toBe(0);
  });

  it('with the breaker off, GET /ready probes the upstream health: 503 when one is unreachable', async () => {
    scriptHealthy();
    const down = await refusedUrl();
    const gateway = await gatewayOver({ piBaseUrl: down, env: { BREAKER_THRESHOLD: '0' } });
    const response = await fetch(`${gateway.origin}/ready`);
    const text = await response.text();
    expect(response.status).toBe(503);
    expect(JSON.parse(text)).toMatchObject({
      status: 'unready',
      upstreams: {
        nullCheck: { ready: true, breaker: 'disabled', reachable: true },
        piDigits: { ready: false, breaker: 'disabled', reachable: false },
      },
    });
    expect(text).not.toContain(down.replace('http://', ''));
    expect(nullUp.count('GET', '/api/v1/health')).toBe(1);
    // The probe carries no caller key (there is none here) and no body.
    expect(nullUp.requests[0]?.headers).not.toHaveProperty('authorization');
  });

  it('GET /ready probes on a pool of its own: it answers while every business connection waits on a slow upstream', async () => {
    scriptHealthy();
    // One business connection per upstream, held by a call the upstream answers only after 20 s
    // (longer than any wait below; the gateway is closed before it ends).
    nullUp.route('POST', '/api/v1/check', { hang: true });
    const gateway = await gatewayOver({
      env: {
        BREAKER_THRESHOLD: '0',
        UPSTREAM_CONNECTIONS: '1',
        UPSTREAM_TIMEOUT_MS: '20000',
        // The held calls never end: the gateway's close cuts them after this.
        SHUTDOWN_TIMEOUT_MS: '500',
      },
    });
    const held = [1, 2, 3].map((n) =>
      gql(gateway.url, `{ isNull(value: "busy-${n}") { __typename } }`).catch(() => undefined),
    );
    // The one connection is provably busy: the upstream has the first call, and holds it.
    expect(await until(() => nullUp.count('POST', '/api/v1/check') === 1)).toBe(true);
    const ready = await within(fetch(`${gateway.origin}/ready`), 10_000);
    if (ready === LATE) throw new Error('/ready did not answer within 10 s');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({
      upstreams: { nullCheck: { ready: true, reachable: true } },
    });
    // Still one business call at the upstream: the probe did not wait for, or take, that connection.
    expect(nullUp.count('POST', '/api/v1/check')).toBe(1);
    expect(nullUp.count('GET', '/api/v1/health')).toBe(1);
    void held;
  });
});

describe('503 bursts and the circuit breaker', () => {
  it('opens after BREAKER_THRESHOLD failures (the upstream sees no more calls), shows it in health and /ready, re-opens on a failed probe, and recovers by itself', async () => {
    // The half-open delay passes when the test moves the clock (cockatiel reads Date.now()), not by
    // waiting: only Date is faked, and it keeps running with real time (sockets, timeouts, the
    // readiness probe's reuse window), so moving it is a jump of the wall clock between two calls.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    const halfOpenAfterMs = 60_000;
    scriptHealthy();
    const gateway = await gatewayOver({
      env: {
        BREAKER_THRESHOLD: '3',
        RETRY_MAX_ATTEMPTS: '1',
        BREAKER_HALF_OPEN_AFTER_MS: String(halfOpenAfterMs),
      },
    });
    // The null-check service goes down: every call and its health answer 503.
    nullUp.route('POST', '/api/v1/check', { status: 503, headers: { 'retry-after': '1' } });
    nullUp.route('GET', '/api/v1/health', { status: 503 });

    for (let i = 0; i < 3; i++) {
      const result = await gql(gateway.url, `{ isNull(value: ${i}) { __typename } }`);
      expect(result.errors?.[0]?.extensions).toMatchObject({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: 'null-check',
        upstreamStatus: 503,
      });
    }
    expect(nullUp.count('POST', '/api/v1/check')).toBe(3);

    // Open: fail fast, nothing reaches the upstream's model endpoint, nothing is paid.
    for (let i = 0; i < 5; i++) {
      const result = await gql(gateway.url, `{ isNull(value: ${i}) { __typename } }`);
      expect(codes(result)).toEqual(['UPSTREAM_UNAVAILABLE']);
      expect(result.errors?.[0]?.extensions?.upstreamStatus).toBeUndefined();
      expect(result.errors?.[0]?.message).toContain('circuit open');
      expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 0 });
    }
    expect(nullUp.count('POST', '/api/v1/check')).toBe(3);

    // The other upstream is unaffected: partial results.
    const partial = await gql(gateway.url, BOTH);
    expect(partial.data).toEqual({ isNull: null, pi: { __typename: 'PiDigits', digits: '3.141' } });

    // Health bypasses the breaker: it asks the upstream, and reports the breaker's state.
    const probesBefore = nullUp.count('GET', '/api/v1/health');
    const health = await gql(gateway.url, HEALTH);
    expect(nullUp.count('GET', '/api/v1/health')).toBe(probesBefore + 1);
    expect(health.data?.health).toMatchObject({
      status: 'DEGRADED',
      nullCheck: { reachable: false, breaker: 'open' },
      pi: { reachable: true, breaker: 'closed' },
    });

    const unready = await fetch(`${gateway.origin}/ready`);
    expect(unready.status).toBe(503);
    expect(await unready.json()).toMatchObject({
      status: 'unready',
      upstreams: {
        nullCheck: { ready: false, breaker: 'open', reachable: false },
        piDigits: { ready: true },
      },
    });

    // After the half-open delay, the next call probes health first; a failed probe opens the circuit
    // again without calling the endpoint.
    vi.advanceTimersByTime(halfOpenAfterMs);
    nullUp.resetRecords();
    const stillDown = await gql(gateway.url, '{ isNull(value: 1) { __typename } }');
    expect(codes(stillDown)).toEqual(['UPSTREAM_UNAVAILABLE']);
    expect(stillDown.errors?.[0]?.message).toContain('circuit open');
    expect(nullUp.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /api/v1/health']);

    // The service comes back. No restart, no operator: the first call after the half-open delay
    // probes its health, closes the circuit and goes through.
    nullUp.route('POST', '/api/v1/check', { body: nullBody() });
    nullUp.route('GET', '/api/v1/health', { body: nullHealth });
    vi.advanceTimersByTime(halfOpenAfterMs);
    nullUp.resetRecords();
    const recovered = await gql(gateway.url, '{ isNull(value: null) { __typename } }');
    expect(recovered.errors).toBeUndefined();
    expect(recovered.data?.isNull?.__typename).toBe('NullVerdict');
    expect(nullUp.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /api/v1/health',
      'POST /api/v1/check',
    ]);

    const healed = await gql(gateway.url, HEALTH);
    expect(healed.data?.health).toMatchObject({
      status: 'OK',
      nullCheck: { reachable: true, breaker: 'closed' },
    });
    // /ready reuses a failed probe for up to a second: poll (bounded) until it has looked again.
    expect(await until(async () => (await fetch(`${gateway.origin}/ready`)).status === 200)).toBe(true);
  });

  it('a short 503 burst on an idempotent call is absorbed by retries: the client sees the answer', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({ env: { RETRY_MAX_ATTEMPTS: '3' } });
    piUp.route('GET', '/api/v1/pi', [{ status: 503 }, { status: 503 }, { body: piBody() }]);
    const result = await gql(gateway.url, '{ pi { __typename } }');
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ pi: { __typename: 'PiDigits' } });
    expect(piUp.count('GET', '/api/v1/pi')).toBe(3);
    // Every answered attempt counts (docs/contract.md, Cost); only the answer is paid for.
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.01, upstreamCalls: 3, cacheHits: 0 });
  });
});

describe('slow and hanging upstreams', () => {
  it('a hanging upstream is UPSTREAM_TIMEOUT, and the gateway closes that upstream socket', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({ env: { UPSTREAM_TIMEOUT_MS: '300', RETRY_MAX_ATTEMPTS: '3' } });
    nullUp.route('POST', '/api/v1/check', { hang: true });
    const result = await gql(gateway.url, BOTH);
    expect(result.data?.isNull).toBeNull();
    expect(result.data?.pi).toEqual({ __typename: 'PiDigits', digits: '3.141' });
    expect(result.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_TIMEOUT',
      upstream: 'null-check',
    });
    expect(result.errors?.[0]?.message).toContain('did not answer in time');
    // Timeouts are not retried (a hanging upstream would eat the deadline again).
    expect(nullUp.count('POST', '/api/v1/check')).toBe(1);
    expect(await within(nullUp.requests[0]?.ended ?? Promise.resolve('none'), 5_000)).toBe('client-closed');
  });

  it('a slow upstream within the timeout answers normally', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({ env: { UPSTREAM_TIMEOUT_MS: '5000' } });
    nullUp.route('POST', '/api/v1/check', { delayMs: 200, bodyDelayMs: 100, body: nullBody() });
    const result = await gql(
      gateway.url,
      '{ isNull(value: null) { __typename ... on NullVerdict { isNull } } }',
    );
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ isNull: { __typename: 'NullVerdict', isNull: true } });
  });
});

describe.each([
  ['fast path', (g: TestGateway, query: string) => gql(g.url, query)],
  ["Yoga's handler", (g: TestGateway, query: string) => gqlInYoga(g, query)],
] as Array<[string, (g: TestGateway, query: string) => Promise<GqlResult>]>)(
  'the operation deadline (%s)',
  (_path, send) => {
    it('OPERATION_DEADLINE_MS ends a hanging call before its own timeout with UPSTREAM_TIMEOUT, and closes its connection', async () => {
      scriptHealthy();
      const gateway = await gatewayOver({
        env: { OPERATION_DEADLINE_MS: '300', UPSTREAM_TIMEOUT_MS: '20000' },
      });
      piUp.route('GET', '/api/v1/pi', { hang: true });
      const result = await within(send(gateway, '{ pi { __typename } }'), 10_000);
      if (result === LATE) throw new Error('the deadline did not end the call');
      expect(result.data).toEqual({ pi: null });
      expect(result.errors?.[0]?.extensions).toEqual({ code: 'UPSTREAM_TIMEOUT', upstream: 'pi-digits' });
      expect(result.errors?.[0]?.message).toContain('deadline');
      // The gateway gave up on the exchange itself (the scripted upstream never answers).
      expect(await within(piUp.requests[0]?.ended ?? Promise.resolve('none'), 5_000)).toBe('client-closed');
      // Retries never go past the deadline: one attempt was all there was time for.
      expect(piUp.count('GET', '/api/v1/pi')).toBe(1);
    });
  },
);

describe('429 with Retry-After', () => {
  it('a Retry-After longer than the deadline allows is RATE_LIMITED with retryAfterSeconds, at once', async () => {
    scriptHealthy();
    const gateway = await gatewayOver();
    piUp.route('GET', '/api/v1/pi', { status: 429, headers: { 'retry-after': '120' } });
    const result = await gql(gateway.url, '{ pi { __typename } }');
    expect(result.errors?.[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      upstream: 'pi-digits',
      upstreamStatus: 429,
      retryAfterSeconds: 120,
    });
    expect(piUp.count('GET', '/api/v1/pi')).toBe(1);
  });

  it('a Retry-After that fits the operation deadline is waited out and the retry answers', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({ env: { OPERATION_DEADLINE_MS: '10000' } });
    piUp.route('GET', '/api/v1/pi', [{ status: 429, headers: { 'retry-after': '1' } }, { body: piBody() }]);
    const started = Date.now();
    const result = await gql(gateway.url, '{ pi { __typename } }');
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ pi: { __typename: 'PiDigits' } });
    expect(piUp.count('GET', '/api/v1/pi')).toBe(2);
    // A lower bound only (load can only make it longer): the retry waited for Retry-After, not the
    // few-ms backoff.
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
});
