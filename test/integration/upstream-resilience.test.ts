import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
  type UpstreamCallEvent,
  type UpstreamClientsOptions,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { UpstreamError } from '../../src/gateway/upstream/errors.js';
import { refusedUrl, type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';

const CHECK = '/api/v1/check';
const PI = '/api/v1/pi';
const INFERENCE = '/api/v1/inference';
const HEALTH = '/api/v1/health';
const KEY = 'pro-key-that-must-not-leak';

const checkBody = {
  is_null: true,
  confidence: 1,
  model: 'null-x-4o',
  inference_time_ms: 1,
  gpu_cost_usd: 0,
  experts_consulted: 2,
};
const piBody = {
  digits: '3.14',
  precision: 2,
  confidence: 1,
  model: 'pi-x-4o',
  inference_time_ms: 1,
  gpu_cost_usd: 0,
};
const nullHealth = {
  status: 'ok',
  null_detectable: true,
  undefined_detectable: true,
  cluster_status: 'ok',
  philosophy_consultant: null,
  monthly_burn: '$1',
};

let up: ScriptedUpstream;
const opened: HttpUpstreamClients[] = [];

function clientsWith(options: Partial<UpstreamClientsOptions> = {}): HttpUpstreamClients {
  const clients = createUpstreamClients({
    nullBaseUrl: up.url,
    piBaseUrl: up.url,
    timeoutMs: 2000,
    backoffBaseMs: 5,
    backoffCapMs: 20,
    breakerThreshold: 0,
    ...options,
  });
  opened.push(clients);
  return clients;
}

async function failure(promise: Promise<unknown>): Promise<UpstreamError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  return error as UpstreamError;
}

/** Settles with the promise, or with 'still pending' after `ms`: a bound, not a benchmark. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'still pending'> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'still pending'>((resolve) => {
    timer = setTimeout(() => resolve('still pending'), ms);
  });
  return Promise.race([promise.catch((e: unknown) => e as T), bound]).finally(() => clearTimeout(timer));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  up = await startScriptedUpstream();
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
});

afterAll(async () => {
  await up.close();
});

beforeEach(() => {
  up.reset();
});

describe('connection failures and timeouts', () => {
  it('fails fast with UPSTREAM_UNAVAILABLE on a refused connection, retrying it', async () => {
    const url = await refusedUrl();
    const events: UpstreamCallEvent[] = [];
    const clients = clientsWith({ nullBaseUrl: url, onCall: (e) => events.push(e) });
    const started = Date.now();
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }, { apiKey: KEY }));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(error.statusCode).toBeUndefined();
    expect(error.message).not.toContain('127.0.0.1');
    expect(error.message).not.toContain(new URL(url).port);
    expect(events.map((e) => [e.attempt, e.outcome, e.statusCode])).toEqual([
      [1, 'UPSTREAM_UNAVAILABLE', null],
      [2, 'UPSTREAM_UNAVAILABLE', null],
      [3, 'UPSTREAM_UNAVAILABLE', null],
    ]);
  });

  it('retries a refused inference (it never reached the service)', async () => {
    const events: UpstreamCallEvent[] = [];
    const clients = clientsWith({ piBaseUrl: await refusedUrl(), onCall: (e) => events.push(e) });
    const error = await failure(
      clients.piDigits.inference({ desiredDigits: 3, liabilityWaiverSigned: true }),
    );
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(events).toHaveLength(3);
  });

  it('times out a hanging upstream with UPSTREAM_TIMEOUT and closes the socket, without retrying', async () => {
    up.route('POST', CHECK, { hang: true });
    const clients = clientsWith({ timeoutMs: 200 });
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
    expect(up.count('POST', CHECK)).toBe(1);
    expect(await up.requests[0]?.ended).toBe('client-closed');
  });

  it('times out a body that never comes (headers sent)', async () => {
    up.route('GET', PI, { hangAfterHeaders: true, body: piBody });
    const clients = clientsWith({ timeoutMs: 200 });
    const error = await failure(clients.piDigits.pi({ digits: 2 }));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
    expect(error.statusCode).toBe(200);
  });

  it('times out a slow-drip body by the total deadline, not chunk inactivity', async () => {
    up.route('GET', PI, { bodyDelayMs: 400, body: piBody });
    const clients = clientsWith({ timeoutMs: 200 });
    expect((await failure(clients.piDigits.pi({ digits: 2 }))).code).toBe('UPSTREAM_TIMEOUT');
  });

  it('answers from a slow upstream within the deadline', async () => {
    up.route('GET', PI, { delayMs: 100, bodyDelayMs: 50, body: piBody });
    const clients = clientsWith({ timeoutMs: 2000 });
    expect((await clients.piDigits.pi({ digits: 2 })).digits).toBe('3.14');
  });

  it('maps a connection reset before any answer to UPSTREAM_UNAVAILABLE', async () => {
    up.route('POST', INFERENCE, { destroy: true });
    const clients = clientsWith();
    const error = await failure(
      clients.piDigits.inference({ desiredDigits: 3, liabilityWaiverSigned: true }),
    );
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    // A reset request may have reached the service: a paid inference is not retried.
    expect(up.count('POST', INFERENCE)).toBe(1);
  });

  it('retries a reset idempotent read and succeeds', async () => {
    up.route('GET', PI, [{ destroy: true }, { body: piBody }]);
    const clients = clientsWith();
    expect((await clients.piDigits.pi({})).digits).toBe('3.14');
    expect(up.count('GET', PI)).toBe(2);
  });

  it('fails without network when the deadline has already passed', async () => {
    up.route('GET', PI, { body: piBody });
    const clients = clientsWith();
    const error = await failure(clients.piDigits.pi({}, { deadline: Date.now() - 1 }));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
    expect(up.count()).toBe(0);
  });

  it('shortens the attempt to the remaining deadline', async () => {
    up.route('GET', PI, { hang: true });
    const clients = clientsWith({ timeoutMs: 10_000 });
    const result = await within(failure(clients.piDigits.pi({}, { deadline: Date.now() + 150 })), 5000);
    expect(result).toBeInstanceOf(UpstreamError);
    expect((result as UpstreamError).code).toBe('UPSTREAM_TIMEOUT');
  });
});

describe('retries', () => {
  it('retries a 503 burst and returns the answer; the server saw every attempt', async () => {
    up.route('POST', CHECK, [{ status: 503 }, { status: 503 }, { body: checkBody }]);
    const clients = clientsWith({ retryMaxAttempts: 3 });
    const result = await clients.nullCheck.check({ hasValue: true, value: null });
    expect(result.answer).toEqual({ kind: 'boolean', isNull: true });
    expect(up.count('POST', CHECK)).toBe(3);
  });

  it('gives up after retryMaxAttempts with the last error', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ retryMaxAttempts: 4 });
    expect((await failure(clients.piDigits.pi({}))).code).toBe('UPSTREAM_UNAVAILABLE');
    expect(up.count('GET', PI)).toBe(4);
  });

  it.each([400, 401, 418])('never retries %i', async (status) => {
    up.route('POST', CHECK, { status });
    up.route('GET', PI, { status });
    const clients = clientsWith({ retryMaxAttempts: 3 });
    await failure(clients.nullCheck.check({ hasValue: true, value: 1 }));
    await failure(clients.piDigits.pi({}));
    expect(up.count('POST', CHECK)).toBe(1);
    expect(up.count('GET', PI)).toBe(1);
  });

  it('retries a null paradox at most once (two calls in total)', async () => {
    up.route('POST', CHECK, { status: 500 });
    const clients = clientsWith({ retryMaxAttempts: 5 });
    expect((await failure(clients.nullCheck.check({ hasValue: true, value: null }))).code).toBe(
      'NULL_PARADOX',
    );
    expect(up.count('POST', CHECK)).toBe(2);
  });

  it('does not retry a 503 from inference (it costs money)', async () => {
    up.route('POST', INFERENCE, { status: 503 });
    const clients = clientsWith({ retryMaxAttempts: 3 });
    await failure(clients.piDigits.inference({ desiredDigits: 3, liabilityWaiverSigned: true }));
    expect(up.count('POST', INFERENCE)).toBe(1);
  });

  it('waits out a Retry-After that fits, then succeeds', async () => {
    up.route('GET', PI, [{ status: 429, headers: { 'retry-after': '1' } }, { body: piBody }]);
    const clients = clientsWith({ timeoutMs: 3000 });
    const started = Date.now();
    expect((await clients.piDigits.pi({})).digits).toBe('3.14');
    expect(up.count('GET', PI)).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('fails at once with RATE_LIMITED when Retry-After does not fit the deadline', async () => {
    up.route('GET', PI, [{ status: 429, headers: { 'retry-after': '1' } }, { body: piBody }]);
    const clients = clientsWith({ timeoutMs: 3000 });
    const error = await failure(clients.piDigits.pi({}, { deadline: Date.now() + 500 }));
    expect(error.code).toBe('RATE_LIMITED');
    expect(error.retryAfterSeconds).toBe(1);
    expect(up.count('GET', PI)).toBe(1);
  });

  it('fails at once when Retry-After is longer than an attempt timeout (no deadline given)', async () => {
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': '30' } });
    const clients = clientsWith({ timeoutMs: 1000 });
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }));
    expect(error.code).toBe('RATE_LIMITED');
    expect(error.retryAfterSeconds).toBe(30);
    expect(up.count('POST', CHECK)).toBe(1);
  });

  it('retries a 429 without Retry-After with the normal backoff', async () => {
    up.route('POST', CHECK, [{ status: 429 }, { body: checkBody }]);
    const clients = clientsWith();
    await clients.nullCheck.check({ hasValue: true, value: null });
    expect(up.count('POST', CHECK)).toBe(2);
  });
});

describe('cancellation', () => {
  it('aborts an in-flight request promptly; the server sees the socket close', async () => {
    up.route('POST', CHECK, { hang: true });
    const clients = clientsWith({ timeoutMs: 30_000 });
    const controller = new AbortController();
    const call = failure(
      clients.nullCheck.check({ hasValue: true, value: null }, { signal: controller.signal }),
    );
    while (up.count() === 0) await sleep(5);
    controller.abort();
    const error = await within(call, 5000);
    expect(error).toBeInstanceOf(UpstreamError);
    expect((error as UpstreamError).message).toContain('cancelled');
    expect(await up.requests[0]?.ended).toBe('client-closed');
    expect(up.count()).toBe(1);
  });

  it('maps an abort whose reason is a timeout to UPSTREAM_TIMEOUT', async () => {
    up.route('GET', PI, { hang: true });
    const clients = clientsWith({ timeoutMs: 30_000 });
    const error = await failure(clients.piDigits.pi({}, { signal: AbortSignal.timeout(100) }));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
  });

  it('aborts a backoff wait', async () => {
    // Full jitter draws the wait in [0, cap): pin the draw near the top so the wait is ~20 s.
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.99);
    try {
      up.route('GET', PI, { status: 503 });
      const clients = clientsWith({ backoffBaseMs: 20_000, backoffCapMs: 20_000, retryMaxAttempts: 3 });
      const controller = new AbortController();
      const call = failure(clients.piDigits.pi({}, { signal: controller.signal }));
      while (up.count() === 0) await sleep(5);
      await sleep(20);
      controller.abort();
      const error = await within(call, 5000);
      expect(error).toBeInstanceOf(UpstreamError);
      expect((error as UpstreamError).message).toContain('cancelled');
      expect(up.count('GET', PI)).toBe(1);
    } finally {
      random.mockRestore();
    }
  });

  it('rejects an already aborted call without network', async () => {
    up.route('GET', PI, { body: piBody });
    const clients = clientsWith();
    await failure(clients.piDigits.pi({}, { signal: AbortSignal.abort() }));
    expect(up.count()).toBe(0);
  });
});

describe('circuit breaker', () => {
  it('opens after N consecutive failures, fails fast without network, then recovers via a health probe', async () => {
    up.route('POST', CHECK, { status: 503 });
    up.route('GET', HEALTH, { body: nullHealth });
    const clients = clientsWith({ breakerThreshold: 3, breakerHalfOpenAfterMs: 300, retryMaxAttempts: 1 });
    expect(clients.nullCheck.breakerState()).toBe('closed');
    for (let i = 0; i < 3; i++) {
      expect((await failure(clients.nullCheck.check({ hasValue: true, value: null }))).code).toBe(
        'UPSTREAM_UNAVAILABLE',
      );
    }
    expect(up.count('POST', CHECK)).toBe(3);
    expect(clients.nullCheck.breakerState()).toBe('open');

    const fast = await failure(clients.nullCheck.check({ hasValue: true, value: null }));
    expect(fast.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(fast.message).toContain('circuit open');
    expect(up.count('POST', CHECK)).toBe(3);
    expect((await clients.nullCheck.health()).breaker).toBe('open');

    // The upstream comes back; after halfOpenAfter the next call probes health first.
    up.route('POST', CHECK, { body: checkBody });
    up.resetRecords();
    await sleep(350);
    const result = await clients.nullCheck.check({ hasValue: true, value: null });
    expect(result.answer).toEqual({ kind: 'boolean', isNull: true });
    expect(up.requests.map((r) => `${r.method} ${r.path}`)).toEqual([`GET ${HEALTH}`, `POST ${CHECK}`]);
    expect(clients.nullCheck.breakerState()).toBe('closed');
  });

  it('lets concurrent calls wait for one half-open probe, then all proceed', async () => {
    up.route('GET', PI, { status: 503 });
    up.route('GET', HEALTH, {
      delayMs: 50,
      body: { status: 'ok', pi_available: true, gpu_cluster: 'ok', monthly_burn_rate: '$1' },
    });
    const clients = clientsWith({ breakerThreshold: 1, breakerHalfOpenAfterMs: 100, retryMaxAttempts: 1 });
    await failure(clients.piDigits.pi({}));
    expect(clients.piDigits.breakerState()).toBe('open');
    up.route('GET', PI, { body: piBody });
    await sleep(150);
    up.resetRecords();
    const results = await Promise.all([
      clients.piDigits.pi({}),
      clients.piDigits.pi({}),
      clients.piDigits.pi({}),
    ]);
    expect(results.map((r) => r.digits)).toEqual(['3.14', '3.14', '3.14']);
    expect(up.count('GET', HEALTH)).toBe(1);
    expect(up.count('GET', PI)).toBe(3);
    expect(up.requests[0]?.path).toBe(HEALTH);
  });

  it('re-opens when the half-open health probe fails, without calling the endpoint', async () => {
    up.route('GET', PI, { status: 500 });
    up.route('GET', HEALTH, { status: 503 });
    const clients = clientsWith({ breakerThreshold: 2, breakerHalfOpenAfterMs: 100, retryMaxAttempts: 1 });
    await failure(clients.piDigits.pi({}));
    await failure(clients.piDigits.pi({}));
    expect(clients.piDigits.breakerState()).toBe('open');
    await sleep(150);
    up.resetRecords();
    const error = await failure(clients.piDigits.pi({}));
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(up.requests.map((r) => r.path)).toEqual([HEALTH]);
    expect(clients.piDigits.breakerState()).toBe('open');
  });

  it('counts timeouts and refused connections as failures', async () => {
    const clients = clientsWith({
      piBaseUrl: await refusedUrl(),
      breakerThreshold: 2,
      retryMaxAttempts: 1,
    });
    await failure(clients.piDigits.pi({}));
    await failure(clients.piDigits.pi({}));
    expect(clients.piDigits.breakerState()).toBe('open');

    up.route('POST', CHECK, { hang: true });
    const slow = clientsWith({ timeoutMs: 100, breakerThreshold: 2, retryMaxAttempts: 1 });
    await failure(slow.nullCheck.check({ hasValue: true, value: null }));
    await failure(slow.nullCheck.check({ hasValue: true, value: null }));
    expect(slow.nullCheck.breakerState()).toBe('open');
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
    const clients = clientsWith({ breakerThreshold: 2, retryMaxAttempts: 1 });
    for (let i = 0; i < 7; i++) await failure(clients.nullCheck.check({ hasValue: true, value: 1 }));
    expect(clients.nullCheck.breakerState()).toBe('closed');
    expect(up.count('POST', CHECK)).toBe(7);
  });

  it('is not opened by the caller aborting', async () => {
    up.route('GET', PI, { hang: true });
    const clients = clientsWith({ breakerThreshold: 1, retryMaxAttempts: 1, timeoutMs: 30_000 });
    await failure(clients.piDigits.pi({}, { signal: AbortSignal.abort() }));
    const controller = new AbortController();
    const call = failure(clients.piDigits.pi({}, { signal: controller.signal }));
    while (up.count() === 0) await sleep(5);
    controller.abort();
    await call;
    expect(clients.piDigits.breakerState()).toBe('closed');
  });

  it('reports disabled with threshold 0 and keeps calling', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ breakerThreshold: 0, retryMaxAttempts: 1 });
    for (let i = 0; i < 6; i++) await failure(clients.piDigits.pi({}));
    expect(up.count('GET', PI)).toBe(6);
    expect(clients.piDigits.breakerState()).toBe('disabled');
  });
});

describe('logging and events', () => {
  it('logs failures with the raw body and never the key', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = pino({ level: 'debug' }, sink);
    up.route('POST', CHECK, {
      status: 500,
      body: { error: { code: 'NULL_PARADOX', detail: `echo ${KEY}` } },
    });
    up.route('GET', PI, { status: 418, body: 'tier says no' });
    const clients = clientsWith({ logger, retryMaxAttempts: 1 });
    await failure(
      clients.nullCheck.check({ hasValue: true, value: null }, { apiKey: KEY, requestId: 'log-1' }),
    );
    await failure(clients.piDigits.pi({ digits: 50 }, { apiKey: KEY }));
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const paradox = records.find((r) => r.code === 'NULL_PARADOX');
    expect(paradox).toMatchObject({
      level: 40,
      upstream: 'null-check',
      upstreamStatus: 500,
      requestId: 'log-1',
    });
    expect(String(paradox?.upstreamBody)).toContain('NULL_PARADOX');
    expect(records.find((r) => r.code === 'TIER_FORBIDDEN')).toMatchObject({
      level: 20,
      upstreamBody: 'tier says no',
    });
    expect(lines.join('\n')).not.toContain(KEY);
  });

  it('reports one event per attempt with status, outcome and duration', async () => {
    const events: UpstreamCallEvent[] = [];
    up.route('POST', CHECK, [{ status: 503 }, { body: checkBody }]);
    up.route('GET', HEALTH, { body: nullHealth });
    const clients = clientsWith({ onCall: (e) => events.push(e) });
    await clients.nullCheck.check({ hasValue: true, value: null });
    await clients.nullCheck.health();
    expect(events.map(({ durationMs: _d, ...rest }) => rest)).toEqual([
      {
        upstream: 'null-check',
        endpoint: 'check',
        statusCode: 503,
        outcome: 'UPSTREAM_UNAVAILABLE',
        attempt: 1,
      },
      { upstream: 'null-check', endpoint: 'check', statusCode: 200, outcome: 'ok', attempt: 2 },
      { upstream: 'null-check', endpoint: 'health', statusCode: 200, outcome: 'ok', attempt: 1 },
    ]);
    for (const e of events) expect(e.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('survives a throwing onCall callback', async () => {
    up.route('GET', PI, { body: piBody });
    const clients = clientsWith({
      onCall: () => {
        throw new Error('metrics exploded');
      },
    });
    expect((await clients.piDigits.pi({})).digits).toBe('3.14');
  });

  it('reports an unreachable health endpoint without throwing', async () => {
    const clients = clientsWith({ nullBaseUrl: await refusedUrl(), breakerThreshold: 5 });
    const probe = await clients.nullCheck.health();
    expect(probe).toMatchObject({ reachable: false, statusCode: null, body: null, breaker: 'closed' });
    expect(probe.error).toContain('could not be reached');
    expect(probe.error).not.toContain('127.0.0.1');
  });

  it('times out a hanging health endpoint with its own short timeout', async () => {
    up.route('GET', HEALTH, { hang: true });
    const clients = clientsWith({ healthTimeoutMs: 100, timeoutMs: 30_000 });
    const probe = await clients.piDigits.health();
    expect(probe).toMatchObject({ reachable: false, body: null });
    expect(probe.error).toContain('did not answer in time');
  });
});
