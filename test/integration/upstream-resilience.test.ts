/**
 * The upstream stack (createUpstreamClients, every layer) against a scripted upstream that fails, for
 * what only the clients show: which failures a paid inference may retry (refused: never sent; reset:
 * maybe sent), a reset read retried, a slow-drip body, a deadline already passed or an operation
 * already cancelled (no network at all), the 5 s Retry-After cap outside any operation, the breaker
 * counting each attempt, the health probe's own timeout, a throwing attempt observer.
 * The policies themselves, on stub dispatches, are in test/unit/upstream-interceptors.test.ts; what a
 * GraphQL client gets from the same faults in gateway-faults.test.ts and gateway-resilience.test.ts.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { dispatchPromise } from '../../src/gateway/upstream/dispatch.js';
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
import { metricValue } from '../support/metric-values.js';
import { piBody } from '../support/upstream-bodies.js';
import { LATE, within } from '../support/waits.js';

const CHECK = '/api/v1/check';
const PI = '/api/v1/pi';
const INFERENCE = '/api/v1/inference';
const HEALTH = '/api/v1/health';

let up: ScriptedUpstream;
const opened: TestClients[] = [];

interface ClientsOptions {
  env?: Record<string, string>;
  nullBaseUrl?: string;
  piBaseUrl?: string;
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
  vi.useRealTimers();
  await Promise.all(opened.splice(0).map((c) => c.close()));
});

afterAll(async () => {
  await up?.close();
});

beforeEach(() => {
  up.reset();
});

describe('connection failures and timeouts', () => {
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

  it('times out a slow-drip body by the total attempt time, not chunk inactivity', async () => {
    up.route('GET', PI, { bodyDelayMs: 1500, body: piBody() });
    const clients = clientsWith({ env: { UPSTREAM_TIMEOUT_MS: '200' } });
    expect((await failureOf(clients.piDigits.pi({ digits: 2 }, testOperation()))).code).toBe(
      'UPSTREAM_TIMEOUT',
    );
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
    // The deadline passes by moving the clock (only Date is faked, and it keeps running), not by waiting.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    const operation = testOperation({ deadlineMs: 1 });
    vi.advanceTimersByTime(10);
    const error = await failureOf(clients.piDigits.pi({}, operation));
    expect(error.code).toBe('UPSTREAM_TIMEOUT');
    expect(error.message).toContain('deadline');
    expect(up.count()).toBe(0);
  });
});

describe('retries', () => {
  it('fails at once on a long Retry-After outside any operation (no deadline: at most 5 s is waited)', async () => {
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': '30' } });
    const clients = clientsWith();
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, undefined));
    expect(error.code).toBe('RATE_LIMITED');
    expect(up.count('POST', CHECK)).toBe(1);
  });
});

describe('cancellation', () => {
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
  it('counts each retry attempt: one call of three failed attempts opens a threshold of 3', async () => {
    up.route('GET', PI, { status: 503 });
    const clients = clientsWith({ env: { BREAKER_THRESHOLD: '3', RETRY_MAX_ATTEMPTS: '3' } });
    await failureOf(clients.piDigits.pi({}, testOperation()));
    expect(up.count('GET', PI)).toBe(3);
    expect(clients.state('pi-digits').breaker).toBe('open');
  });
});

describe('logs and per-attempt metrics', () => {
  it('survives a throwing attempt observer (the attempts layer)', async () => {
    up.route('GET', PI, { body: piBody() });
    let told = 0;
    const transport = createTransport({ upstream: 'pi-digits', baseUrl: up.url });
    const observed = observeAttempts(() => {
      told++;
      throw new Error('metrics exploded');
    })(transport.dispatch);
    try {
      const answer = await dispatchPromise(observed, piTransportRequest(PI));
      expect(answer.value.digits).toBe('3.141');
      expect(told).toBe(1);
    } finally {
      await transport.close();
    }
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
