/**
 * Upstream faults seen through the whole gateway (createApp on a real socket) in front of scripted
 * upstreams: what a GraphQL client gets, what /health and /ready say, and what the upstream actually
 * received. The client-level details (backoff, jitter, probe sharing) are in upstream-resilience.test.ts.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { refusedUrl, type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from '../support/gateway.js';
import { codes, gql } from '../support/graphql-client.js';
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

describe('connection refused', () => {
  it('fails fast with UPSTREAM_UNAVAILABLE (not a timeout) on both fields, and the gateway keeps serving', async () => {
    const gateway = await gatewayOver({
      nullBaseUrl: await refusedUrl(),
      piBaseUrl: await refusedUrl(),
      // A long timeout and deadline: a refused connection must not wait for them.
      env: { UPSTREAM_TIMEOUT_MS: '60000', OPERATION_DEADLINE_MS: '120000' },
    });
    const result = await within(gql(gateway.url, BOTH), 20_000);
    if (typeof result === 'symbol') throw new Error('the refused calls waited for the timeout');
    expect(result.data).toEqual({ isNull: null, pi: null });
    expect(codes(result)).toEqual(['UPSTREAM_UNAVAILABLE', 'UPSTREAM_UNAVAILABLE']);
    expect(result.errors?.map((e) => e.extensions?.upstream).sort()).toEqual(['null-check', 'pi-digits']);
    for (const error of result.errors ?? []) expect(error.extensions).not.toHaveProperty('upstreamStatus');
    expect(result.text).not.toMatch(/127\.0\.0\.1|ECONNREFUSED/);
    expect((await gql(gateway.url, '{ __typename }')).data).toEqual({ __typename: 'Query' });
  });
});

describe('503 bursts and the circuit breaker', () => {
  it('opens after BREAKER_THRESHOLD failures (the upstream sees no more calls), shows it in health and /ready, and recovers by itself', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({
      env: { BREAKER_THRESHOLD: '3', RETRY_MAX_ATTEMPTS: '1', BREAKER_HALF_OPEN_AFTER_MS: '300' },
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

    // Open: fail fast, nothing reaches the upstream's model endpoint (a half-open probe, if the
    // machine is slow enough to reach one, goes to /health first and fails there).
    for (let i = 0; i < 5; i++) {
      const result = await gql(gateway.url, `{ isNull(value: ${i}) { __typename } }`);
      expect(codes(result)).toEqual(['UPSTREAM_UNAVAILABLE']);
      expect(result.errors?.[0]?.extensions?.upstreamStatus).toBeUndefined();
    }
    expect(nullUp.count('POST', '/api/v1/check')).toBe(3);

    // The other upstream is unaffected: partial results.
    const partial = await gql(gateway.url, BOTH);
    expect(partial.data).toEqual({ isNull: null, pi: { __typename: 'PiDigits', digits: '3.141' } });

    const health = await gql(gateway.url, HEALTH);
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

    // The service comes back. No restart, no operator: the next calls after the half-open delay probe
    // its health, close the circuit and go through.
    nullUp.route('POST', '/api/v1/check', { body: nullBody() });
    nullUp.route('GET', '/api/v1/health', { body: nullHealth });
    const recovered = await until(async () => {
      const result = await gql(gateway.url, '{ isNull(value: null) { __typename } }');
      return result.data?.isNull?.__typename === 'NullVerdict';
    });
    expect(recovered).toBe(true);
    expect(nullUp.count('GET', '/api/v1/health')).toBeGreaterThan(0);

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
    // Every answered attempt counts (docs/contract.md, Cost).
    expect(result.extensions?.cost).toMatchObject({ upstreamCalls: 3 });
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
    // Timeouts are not retried (a hanging upstream would eat the deadline again).
    expect(nullUp.count('POST', '/api/v1/check')).toBe(1);
    expect(await within(nullUp.requests[0]?.ended ?? Promise.resolve('none'), 5_000)).toBe('client-closed');
  });

  it('the operation deadline (OPERATION_DEADLINE_MS) ends a hanging call before its own timeout', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({
      env: { UPSTREAM_TIMEOUT_MS: '60000', OPERATION_DEADLINE_MS: '300' },
    });
    nullUp.route('POST', '/api/v1/check', { hang: true });
    const result = await within(gql(gateway.url, '{ isNull(value: 1) { __typename } }'), 20_000);
    if (typeof result === 'symbol') throw new Error('the deadline did not end the call');
    expect(codes(result)).toEqual(['UPSTREAM_TIMEOUT']);
    expect(result.errors?.[0]?.message).toContain('deadline');
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
    const result = await gql(gateway.url, '{ pi { __typename } }');
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ pi: { __typename: 'PiDigits' } });
    expect(piUp.count('GET', '/api/v1/pi')).toBe(2);
  });
});

describe('client disconnect', () => {
  /** Sends an isNull operation over a raw socket and destroys it once the upstream has the call. */
  async function disconnectMidCall(gateway: TestGateway, accept: string | undefined): Promise<unknown> {
    const body = JSON.stringify({ query: '{ isNull(value: 1) { __typename } }' });
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    };
    if (accept !== undefined) headers.accept = accept;
    const request = httpRequest(gateway.url, { method: 'POST', headers });
    request.on('error', () => {}); // the abort below errors the request: expected
    request.end(body);

    expect(await until(() => nullUp.count('POST', '/api/v1/check') === 1)).toBe(true);
    const recorded = nullUp.requests.find((r) => r.path === '/api/v1/check');
    request.destroy();
    // Well within the 20 s upstream timeout: only the client going away can end it this soon.
    return within(recorded?.ended ?? Promise.resolve('none'), 5_000);
  }

  it('on the fast path, aborts the upstream request: the scripted upstream sees its socket close', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({ env: { UPSTREAM_TIMEOUT_MS: '20000' } });
    nullUp.route('POST', '/api/v1/check', { hang: true });
    const before = { ...gateway.app.fastPath.served };
    expect(await disconnectMidCall(gateway, 'application/json')).toBe('client-closed');
    expect(gateway.app.fastPath.served.fast).toBe(before.fast + 1);
    expect((await gql(gateway.url, '{ __typename }')).data).toEqual({ __typename: 'Query' });
  });

  it('with HTTP_FAST_PATH=false (Yoga only), aborts the upstream request', async () => {
    scriptHealthy();
    const gateway = await gatewayOver({ env: { UPSTREAM_TIMEOUT_MS: '20000', HTTP_FAST_PATH: 'false' } });
    nullUp.route('POST', '/api/v1/check', { hang: true });
    expect(await disconnectMidCall(gateway, 'application/json')).toBe('client-closed');
    expect(gateway.app.fastPath.served).toEqual({ fast: 0, handedOver: 0 });
  });
});
