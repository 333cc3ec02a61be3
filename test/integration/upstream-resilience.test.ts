/**
 * The upstream stack (createUpstreamClients, every layer) against a scripted upstream that fails:
 * refused and reset connections, hangs, slow bodies, 5xx bursts, 429s, cancellation, the circuit
 * breaker with its half-open health probe, and what each attempt leaves in metrics and logs.
 * The policies themselves, on stub dispatches, are in test/unit/upstream-interceptors.test.ts.
 */
import type { Logger } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { UpstreamCallError } from '../../src/gateway/errors.js';
import { observeAttempts } from '../../src/gateway/upstream/interceptors/attempts.js';
import { createTransport } from '../../src/gateway/upstream/transport.js';
import { refusedUrl, type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import {
  createTestClients,
  failureOf,
  piTransportRequest,
  type TestClients,
  testOperation,
} from '../support/clients.js';
import { capturedLogger, LEVEL } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { nullBody, nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';
import { LATE, sleep, until, within } from '../support/waits.js';

const CHECK = '/api/v1/check';
const PI = '/api/v1/pi';
const INFERENCE = '/api/v1/inference';
const HEALTH = '/api/v1/health';
const KEY = 'pro-key-that-must-not-leak';

let up: ScriptedUpstream;
const opened: TestClients[] = [];

interface ClientsOptions {
  env?: Record<string, string>;
  nullBaseUrl?: string;
  piBaseUrl?: string;
  logger?: Logger;
  backoff?: { baseMs: number; capMs: number };
}

/** Clients over the scripted upstream: no breaker unless asked, v1 fixed (no version discovery). */
function clientsWith(options: ClientsOptions = {}): TestClients {
  const clients = createTestClients({
    nullBaseUrl: options.nullBaseUrl ?? up.url,
    piBaseUrl: options.piBaseUrl ?? up.url,
    env: {
      UPSTREAM_TIMEOUT_MS: '2000',
      BREAKER_THRESHOLD: '0',
      NULL_API_VERSION: 'v1',
      PI_API_VERSION: 'v1',
      ...options.env,
    },
    logger: options.logger,
    backoff: options.backoff ?? { baseMs: 5, capMs: 20 },
  });
  opened.push(clients);
  return clients;
}

const requests = (clients: TestClients, labels: Record<string, string>) =>
  metricValue(clients.metrics.registry, 'gateway_upstream_requests_total', labels);

beforeAll(async () => {
  up = await startScriptedUpstream();
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
});

afterAll(async () => {
  await up?.close();
});

beforeEach(() => {
  up.reset();
});

describe('connection failures and timeouts', () => {
  it('fails with UPSTREAM_UNAVAILABLE on a refused connection, not by the timeout, retrying it', async () => {
    const url = await refusedUrl();
    // A long timeout: a refused connection must not wait for it.
    const clients = clientsWith({ nullBaseUrl: url, env: { UPSTREAM_TIMEOUT_MS: '60000' } });
    const operation = testOperation({ apiKey: KEY, deadlineMs: 120_000 });
    const outcome = await within(
      failureOf(clients.nullCheck.check({ hasValue: true, value: null }, operation)),
      20_000,
    );
    expect(outcome).not.toBe(LATE);
    const error = outcome as UpstreamCallError;
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(error.kind).toBe('refused');
    expect(error.statusCode).toBeUndefined();
    expect(error.message).not.toContain('127.0.0.1');
    expect(error.message).not.toContain(new URL(url).port);
    // Three attempts (RETRY_MAX_ATTEMPTS default), none answered.
    expect(
      await requests(clients, {
        upstream: 'null-check',
        endpoint: 'check',
        status: 'none',
        outcome: 'UPSTREAM_UNAVAILABLE',
      }),
    ).toBe(3);
    expect(operation.ledger.upstreamCalls).toBe(0);
  });

  it('retries a refused inference (it never reached the service)', async () => {
    const clients = clientsWith({ piBaseUrl: await refusedUrl() });
    const error = await failureOf(
      clients.piDigits.inference({ desiredDigits: 3, liabilityWaiverSigned: true }, testOperation()),
    );
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(
      await requests(clients, {
        upstream: 'pi-digits',
        endpoint: 'inference',
        status: 'none',
        outcome: 'UPSTREAM_UNAVAILABLE',
      }),
    ).toBe(3);
  });

  it('times out a hanging upstream with UPSTREAM_TIMEOUT and closes the socket, without retrying', async () => {
    up.route('POST', CHECK, { hang: true });
    const clients = clientsWith({ env: { UPSTREAM_TIMEOUT_MS: '200' } });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
    expect(error.kind).toBe('timeout');
    expect(error.message).toContain('did not answer in time');
    expect(up.count('POST', CHECK)).toBe(1);
    expect(await within(up.requests[0]?.ended ?? Promise.resolve('none'), 5000)).toBe('client-closed');
  });

  it('times out a body that never comes (headers sent)', async () => {
    up.route('GET', PI, { hangAfterHeaders: true, body: piBody() });
    const clients = clientsWith({ env: { UPSTREAM_TIMEOUT_MS: '200' } });
    const error = await failureOf(clients.piDigits.pi({ digits: 2 }, testOperation()));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
    expect(error.statusCode).toBe(200);
  });

  it('times out a slow-drip body by the total attempt time, not chunk inactivity', async () => {
    up.route('GET', PI, { bodyDelayMs: 1500, body: piBody() });
    const clients = clientsWith({ env: { UPSTREAM_TIMEOUT_MS: '200' } });
    expect((await failureOf(clients.piDigits.pi({ digits: 2 }, testOperation()))).code).toBe(
      'UPSTREAM_TIMEOUT',
    );
  });

  it('answers from a slow upstream within the timeout', async () => {
    up.route('GET', PI, { delayMs: 100, bodyDelayMs: 50, body: piBody() });
    const clients = clientsWith({ env: { UPSTREAM_TIMEOUT_MS: '5000' } });
    expect((await clients.piDigits.pi({ digits: 2 }, testOperation())).digits).toBe('3.141');
  });

  it('maps a connection reset before any answer to UPSTREAM_UNAVAILABLE, and never retries a paid inference', async () => {
    up.route('POST', INFERENCE, { destroy: true });
    const clients = clientsWith();
    const error = await failureOf(
      clients.piDigits.inference({ desiredDigits: 3, liabilityWaiverSigned: true }, testOperation()),
    );
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(error.kind).toBe('connection');
    // A reset request may have reached the service: a paid inference is not retried.
    expect(up.count('POST', INFERENCE)).toBe(1);
  });

  it('retries a reset idempotent read and succeeds', async () => {
    up.route('GET', PI, [{ destroy: true }, { body: piBody() }]);
    const clients = clientsWith();
    expect((await clients.piDigits.pi({}, testOperation())).digits).toBe('3.141');
    expect(up.count('GET', PI)).toBe(2);
  });

  it('fails without network when the operation deadline has already passed', async () => {
    up.route('GET', PI, { body: piBody() });
    const clients = clientsWith();
    const operation = testOperation({ deadlineMs: 1 });
    await sleep(10);
    const error = await failureOf(clients.piDigits.pi({}, operation));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
    expect(error.message).toContain('deadline');
    expect(up.count()).toBe(0);
  });

  it('shortens the attempt to the operation deadline', async () => {
    up.route('GET', PI, { hang: true });
    const clients = clientsWith({ env: { UPSTREAM_TIMEOUT_MS: '30000' } });
    const outcome = await within(
      failureOf(clients.piDigits.pi({}, testOperation({ deadlineMs: 150 }))),
      10_000,
    );
    expect(outcome).toBeInstanceOf(UpstreamCallError);
    expect((outcome as UpstreamCallError).code).toBe('UPSTREAM_TIMEOUT');
    expect((outcome as UpstreamCallError).message).toContain('deadline');
    expect(await within(up.requests[0]?.ended ?? Promise.resolve('none'), 5000)).toBe('client-closed');
  });
});

describe('retries', () => {
  it('retries a 503 burst and returns the answer; the server saw every attempt', async () => {
    up.route('POST', CHECK, [{ status: 503 }, { status: 503 }, { body: nullBody() }]);
    const clients = clientsWith({ env: { RETRY_MAX_ATTEMPTS: '3' } });
    const operation = testOperation();
    const result = await clients.nullCheck.check({ hasValue: true, value: null }, operation);
    expect(result.answer).toEqual({ kind: 'boolean', isNull: true });
    expect(up.count('POST', CHECK)).toBe(3);
    // docs/contract.md, Cost: every attempt the upstream answered counts.
    expect(operation.ledger.upstreamCalls).toBe(3);
  });

  it('gives up after RETRY_MAX_ATTEMPTS with the last error', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ env: { RETRY_MAX_ATTEMPTS: '4' } });
    expect((await failureOf(clients.piDigits.pi({}, testOperation()))).code).toBe('UPSTREAM_UNAVAILABLE');
    expect(up.count('GET', PI)).toBe(4);
  });

  it('makes one attempt with RETRY_MAX_ATTEMPTS=1', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ env: { RETRY_MAX_ATTEMPTS: '1' } });
    await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(up.count('GET', PI)).toBe(1);
  });

  it.each([400, 401, 404, 418, 502])('never retries %i', async (status) => {
    up.route('POST', CHECK, { status });
    up.route('GET', PI, { status });
    const clients = clientsWith({ env: { RETRY_MAX_ATTEMPTS: '3' } });
    await failureOf(clients.nullCheck.check({ hasValue: true, value: 1 }, testOperation()));
    await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(up.count('POST', CHECK)).toBe(1);
    expect(up.count('GET', PI)).toBe(1);
  });

  it('never retries a bad body', async () => {
    up.route('GET', PI, { body: 'not json' });
    const clients = clientsWith({ env: { RETRY_MAX_ATTEMPTS: '3' } });
    expect((await failureOf(clients.piDigits.pi({}, testOperation()))).code).toBe('UPSTREAM_BAD_RESPONSE');
    expect(up.count('GET', PI)).toBe(1);
  });

  it('retries a null paradox at most once (two calls in total)', async () => {
    up.route('POST', CHECK, { status: 500 });
    const clients = clientsWith({ env: { RETRY_MAX_ATTEMPTS: '5' } });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error.code).toBe('NULL_PARADOX');
    expect(up.count('POST', CHECK)).toBe(2);
  });

  it('does not retry a 503 from inference (it costs money)', async () => {
    up.route('POST', INFERENCE, { status: 503 });
    const clients = clientsWith({ env: { RETRY_MAX_ATTEMPTS: '3' } });
    await failureOf(
      clients.piDigits.inference({ desiredDigits: 3, liabilityWaiverSigned: true }, testOperation()),
    );
    expect(up.count('POST', INFERENCE)).toBe(1);
  });

  it('waits out a Retry-After that fits the deadline, then succeeds', async () => {
    up.route('GET', PI, [{ status: 429, headers: { 'retry-after': '1' } }, { body: piBody() }]);
    const clients = clientsWith();
    const started = Date.now();
    expect((await clients.piDigits.pi({}, testOperation({ deadlineMs: 10_000 }))).digits).toBe('3.141');
    expect(up.count('GET', PI)).toBe(2);
    // A lower bound only (load can only make it longer): the retry waited for Retry-After, not the
    // few-ms backoff.
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('fails at once with RATE_LIMITED when Retry-After does not fit the deadline', async () => {
    up.route('GET', PI, [{ status: 429, headers: { 'retry-after': '1' } }, { body: piBody() }]);
    const clients = clientsWith();
    const error = await failureOf(clients.piDigits.pi({}, testOperation({ deadlineMs: 500 })));
    expect(error.code).toBe('RATE_LIMITED');
    expect(error.retryAfterSeconds).toBe(1);
    expect(up.count('GET', PI)).toBe(1);
  });

  it('fails at once when Retry-After is longer than the default operation deadline', async () => {
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': '30' } });
    const clients = clientsWith();
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error.code).toBe('RATE_LIMITED');
    expect(error.retryAfterSeconds).toBe(30);
    expect(up.count('POST', CHECK)).toBe(1);
  });

  it('fails at once on a long Retry-After outside any operation (no deadline: at most 5 s is waited)', async () => {
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': '30' } });
    const clients = clientsWith();
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, undefined));
    expect(error.code).toBe('RATE_LIMITED');
    expect(up.count('POST', CHECK)).toBe(1);
  });

  it('retries a 429 without Retry-After with the normal backoff', async () => {
    up.route('POST', CHECK, [{ status: 429 }, { body: nullBody() }]);
    const clients = clientsWith();
    await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(up.count('POST', CHECK)).toBe(2);
  });
});

describe('cancellation', () => {
  it('aborts an in-flight request when the operation is cancelled; the server sees the socket close', async () => {
    up.route('POST', CHECK, { hang: true });
    const clients = clientsWith({ env: { UPSTREAM_TIMEOUT_MS: '30000' } });
    const operation = testOperation({ deadlineMs: 60_000 });
    const call = failureOf(clients.nullCheck.check({ hasValue: true, value: null }, operation));
    expect(await until(() => up.count() > 0)).toBe(true);
    operation.cancel(new Error('client went away'));
    const error = await within(call, 5000);
    expect(error).toBeInstanceOf(UpstreamCallError);
    expect((error as UpstreamCallError).kind).toBe('cancelled');
    expect((error as UpstreamCallError).message).toContain('cancelled');
    expect(await within(up.requests[0]?.ended ?? Promise.resolve('none'), 5000)).toBe('client-closed');
    expect(up.count()).toBe(1);
  });

  it('aborts a backoff wait', async () => {
    // Full jitter draws the wait in [0, cap): pin the draw near the top so the wait is ~20 s.
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.99);
    try {
      up.route('GET', PI, { status: 503 });
      const clients = clientsWith({
        env: { RETRY_MAX_ATTEMPTS: '3' },
        backoff: { baseMs: 20_000, capMs: 20_000 },
      });
      const operation = testOperation({ deadlineMs: 120_000 });
      const call = failureOf(clients.piDigits.pi({}, operation));
      expect(await until(() => up.count() > 0)).toBe(true);
      await sleep(20);
      operation.cancel('gone');
      const error = await within(call, 5000);
      expect(error).toBeInstanceOf(UpstreamCallError);
      expect((error as UpstreamCallError).kind).toBe('cancelled');
      expect(up.count('GET', PI)).toBe(1);
    } finally {
      random.mockRestore();
    }
  });

  it('rejects a call of an already cancelled operation without network', async () => {
    up.route('GET', PI, { body: piBody() });
    const clients = clientsWith();
    const operation = testOperation();
    operation.cancel('gone');
    expect((await failureOf(clients.piDigits.pi({}, operation))).kind).toBe('cancelled');
    expect(up.count()).toBe(0);
  });
});

describe('circuit breaker', () => {
  it('opens after N consecutive failures, fails fast without network, then recovers via a health probe', async () => {
    up.route('POST', CHECK, { status: 503 });
    up.route('GET', HEALTH, { body: nullHealth });
    const clients = clientsWith({
      env: { BREAKER_THRESHOLD: '3', BREAKER_HALF_OPEN_AFTER_MS: '300', RETRY_MAX_ATTEMPTS: '1' },
    });
    expect(clients.state('null-check').breaker).toBe('closed');
    for (let i = 0; i < 3; i++) {
      const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: i }, testOperation()));
      expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    }
    expect(up.count('POST', CHECK)).toBe(3);
    expect(clients.state('null-check').breaker).toBe('open');
    // The other upstream has its own breaker.
    expect(clients.state('pi-digits').breaker).toBe('closed');

    const fast = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(fast.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(fast.kind).toBe('circuit-open');
    expect(fast.message).toContain('circuit open');
    expect(fast.statusCode).toBeUndefined();
    expect(up.count('POST', CHECK)).toBe(3);
    // Health bypasses the breaker and reports its state.
    expect((await clients.health.nullCheck()).breaker).toBe('open');

    // The upstream comes back; after the half-open delay the next call probes health first.
    up.route('POST', CHECK, { body: nullBody() });
    up.resetRecords();
    await sleep(350);
    const result = await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(result.answer).toEqual({ kind: 'boolean', isNull: true });
    expect(up.requests.map((r) => `${r.method} ${r.path}`)).toEqual([`GET ${HEALTH}`, `POST ${CHECK}`]);
    expect(clients.state('null-check').breaker).toBe('closed');
  });

  it('lets concurrent calls wait for one half-open probe, then all proceed', async () => {
    up.route('GET', PI, { status: 503 });
    up.route('GET', HEALTH, { delayMs: 50, body: piHealth });
    const clients = clientsWith({
      env: { BREAKER_THRESHOLD: '1', BREAKER_HALF_OPEN_AFTER_MS: '100', RETRY_MAX_ATTEMPTS: '1' },
    });
    await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(clients.state('pi-digits').breaker).toBe('open');
    up.route('GET', PI, { body: piBody() });
    await sleep(150);
    up.resetRecords();
    // Different digits: three distinct calls (identical ones would share one call in flight).
    const results = await Promise.all(
      [1, 2, 3].map((digits) => clients.piDigits.pi({ digits }, testOperation())),
    );
    expect(results.map((r) => r.digits)).toEqual(['3.141', '3.141', '3.141']);
    expect(up.count('GET', HEALTH)).toBe(1);
    expect(up.count('GET', PI)).toBe(3);
    expect(up.requests[0]?.path).toBe(HEALTH);
    expect(clients.state('pi-digits').breaker).toBe('closed');
  });

  it('re-opens when the half-open health probe fails, without calling the endpoint', async () => {
    up.route('GET', PI, { status: 500 });
    up.route('GET', HEALTH, { status: 503 });
    const clients = clientsWith({
      env: { BREAKER_THRESHOLD: '2', BREAKER_HALF_OPEN_AFTER_MS: '100', RETRY_MAX_ATTEMPTS: '1' },
    });
    await failureOf(clients.piDigits.pi({}, testOperation()));
    await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(clients.state('pi-digits').breaker).toBe('open');
    await sleep(150);
    up.resetRecords();
    const error = await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(error.kind).toBe('circuit-open');
    expect(up.requests.map((r) => r.path)).toEqual([HEALTH]);
    expect(clients.state('pi-digits').breaker).toBe('open');
  });

  it('counts timeouts and refused connections as failures', async () => {
    const refused = clientsWith({
      piBaseUrl: await refusedUrl(),
      env: { BREAKER_THRESHOLD: '2', RETRY_MAX_ATTEMPTS: '1' },
    });
    await failureOf(refused.piDigits.pi({}, testOperation()));
    await failureOf(refused.piDigits.pi({}, testOperation()));
    expect(refused.state('pi-digits').breaker).toBe('open');

    up.route('POST', CHECK, { hang: true });
    const slow = clientsWith({
      env: { UPSTREAM_TIMEOUT_MS: '100', BREAKER_THRESHOLD: '2', RETRY_MAX_ATTEMPTS: '1' },
    });
    await failureOf(slow.nullCheck.check({ hasValue: true, value: 1 }, testOperation()));
    await failureOf(slow.nullCheck.check({ hasValue: true, value: 2 }, testOperation()));
    expect(slow.state('null-check').breaker).toBe('open');
  });

  it('counts each retry attempt: one call of three failed attempts opens a threshold of 3', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ env: { BREAKER_THRESHOLD: '3', RETRY_MAX_ATTEMPTS: '3' } });
    await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(up.count('GET', PI)).toBe(3);
    expect(clients.state('pi-digits').breaker).toBe('open');
  });

  it('is not opened by 4xx answers or 429, which also reset the failure count', async () => {
    up.route('POST', CHECK, [
      { status: 503 },
      { status: 418 },
      { status: 503 },
      { status: 429 },
      { status: 400 },
      { status: 401 },
      { status: 503 },
    ]);
    const clients = clientsWith({ env: { BREAKER_THRESHOLD: '2', RETRY_MAX_ATTEMPTS: '1' } });
    for (let i = 0; i < 7; i++)
      await failureOf(clients.nullCheck.check({ hasValue: true, value: i }, testOperation()));
    expect(clients.state('null-check').breaker).toBe('closed');
    expect(up.count('POST', CHECK)).toBe(7);
  });

  it('is not opened by bad bodies', async () => {
    up.route('GET', PI, { body: '<html>oops</html>' });
    const clients = clientsWith({ env: { BREAKER_THRESHOLD: '2', RETRY_MAX_ATTEMPTS: '1' } });
    for (let i = 0; i < 4; i++) await failureOf(clients.piDigits.pi({ digits: i }, testOperation()));
    expect(clients.state('pi-digits').breaker).toBe('closed');
    expect(up.count('GET', PI)).toBe(4);
  });

  it('is not opened by the operation being cancelled', async () => {
    up.route('GET', PI, { hang: true });
    const clients = clientsWith({
      env: { BREAKER_THRESHOLD: '1', RETRY_MAX_ATTEMPTS: '1', UPSTREAM_TIMEOUT_MS: '30000' },
    });
    const already = testOperation();
    already.cancel('gone');
    await failureOf(clients.piDigits.pi({}, already));
    const operation = testOperation({ deadlineMs: 60_000 });
    const call = failureOf(clients.piDigits.pi({ digits: 7 }, operation));
    expect(await until(() => up.count() > 0)).toBe(true);
    operation.cancel('gone');
    expect((await call).kind).toBe('cancelled');
    expect(clients.state('pi-digits').breaker).toBe('closed');
  });

  it('reports disabled with BREAKER_THRESHOLD=0 and keeps calling', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ env: { BREAKER_THRESHOLD: '0', RETRY_MAX_ATTEMPTS: '1' } });
    for (let i = 0; i < 6; i++) await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(up.count('GET', PI)).toBe(6);
    expect(clients.state('pi-digits').breaker).toBe('disabled');
  });

  it('shows the breaker state in gateway_upstream_breaker_state, read at scrape time', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ env: { BREAKER_THRESHOLD: '1', RETRY_MAX_ATTEMPTS: '1' } });
    const gauge = (upstream: string, state: string) =>
      metricValue(clients.metrics.registry, 'gateway_upstream_breaker_state', { upstream, state });
    expect(await gauge('pi-digits', 'closed')).toBe(1);
    expect(await gauge('pi-digits', 'open')).toBe(0);
    await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(await gauge('pi-digits', 'open')).toBe(1);
    expect(await gauge('pi-digits', 'closed')).toBe(0);
    expect(await gauge('null-check', 'closed')).toBe(1);
  });
});

describe('logs and per-attempt metrics', () => {
  it('logs failed attempts with the raw body and never the key: warn for upstream trouble, debug for 4xx', async () => {
    const { logger, lines, text } = capturedLogger('debug');
    up.route('POST', CHECK, {
      status: 500,
      body: { error: { code: 'NULL_PARADOX', detail: `echo ${KEY}` } },
    });
    up.route('GET', PI, { status: 418, body: 'tier says no' });
    const clients = clientsWith({ logger, env: { RETRY_MAX_ATTEMPTS: '1' } });
    await failureOf(
      clients.nullCheck.check(
        { hasValue: true, value: null },
        testOperation({ apiKey: KEY, requestId: 'log-1' }),
      ),
    );
    await failureOf(clients.piDigits.pi({ digits: 50 }, testOperation({ apiKey: KEY })));
    const paradox = lines.find((r) => r.code === 'NULL_PARADOX');
    expect(paradox).toMatchObject({
      level: LEVEL.warn,
      msg: 'upstream call failed',
      upstream: 'null-check',
      endpoint: 'check',
      attempt: 1,
      upstreamStatus: 500,
      requestId: 'log-1',
    });
    expect(String(paradox?.upstreamBody)).toContain('NULL_PARADOX');
    expect(String(paradox?.upstreamBody)).toContain('[redacted]');
    expect(lines.find((r) => r.code === 'TIER_FORBIDDEN')).toMatchObject({
      level: LEVEL.debug,
      upstreamBody: 'tier says no',
    });
    expect(text()).not.toContain(KEY);
  });

  it('records one series per attempt (status, outcome) and counts answered attempts on the operation', async () => {
    up.route('POST', CHECK, [{ status: 503 }, { body: nullBody() }]);
    up.route('GET', HEALTH, { body: nullHealth });
    const clients = clientsWith();
    const operation = testOperation();
    await clients.nullCheck.check({ hasValue: true, value: null }, operation);
    await clients.health.nullCheck();
    expect(
      await requests(clients, {
        upstream: 'null-check',
        endpoint: 'check',
        status: '503',
        outcome: 'UPSTREAM_UNAVAILABLE',
      }),
    ).toBe(1);
    expect(
      await requests(clients, { upstream: 'null-check', endpoint: 'check', status: '200', outcome: 'ok' }),
    ).toBe(1);
    expect(
      await requests(clients, { upstream: 'null-check', endpoint: 'health', status: '200', outcome: 'ok' }),
    ).toBe(1);
    expect(
      await metricValue(clients.metrics.registry, 'gateway_upstream_request_duration_seconds_count', {
        upstream: 'null-check',
        endpoint: 'check',
      }),
    ).toBe(2);
    expect(operation.ledger.upstreamCalls).toBe(2);
    // One logical call in the operation's report, however many attempts it took.
    expect(operation.ledger.calls).toEqual([
      expect.objectContaining({ upstream: 'null-check', endpoint: 'check', status: 200, source: 'upstream' }),
    ]);
  });

  it('survives a throwing attempt observer (the attempts layer)', async () => {
    up.route('GET', PI, { body: piBody() });
    let told = 0;
    const transport = createTransport({ upstream: 'pi-digits', baseUrl: up.url });
    const observed = observeAttempts(() => {
      told++;
      throw new Error('metrics exploded');
    })(transport.dispatch);
    try {
      const answer = await observed(piTransportRequest(PI));
      expect(answer.value.digits).toBe('3.141');
      expect(told).toBe(1);
    } finally {
      await transport.close();
    }
  });

  it('reports an unreachable health endpoint without throwing', async () => {
    const clients = clientsWith({ nullBaseUrl: await refusedUrl(), env: { BREAKER_THRESHOLD: '5' } });
    const probe = await clients.health.nullCheck();
    expect(probe).toMatchObject({ reachable: false, statusCode: null, body: null, breaker: 'closed' });
    expect(probe.error).toContain('could not be reached');
    expect(probe.error).not.toContain('127.0.0.1');
  });

  it('times out a hanging health endpoint with its own short timeout (HEALTH_TIMEOUT_MS)', async () => {
    up.route('GET', HEALTH, { hang: true });
    const clients = clientsWith({ env: { HEALTH_TIMEOUT_MS: '100', UPSTREAM_TIMEOUT_MS: '30000' } });
    const probe = await within(clients.health.piDigits(), 10_000);
    expect(probe).not.toBe(LATE);
    expect(probe).toMatchObject({ reachable: false, body: null });
    expect(probe !== LATE && probe.error).toContain('did not answer in time');
  });
});
