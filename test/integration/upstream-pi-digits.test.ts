/**
 * The pi-digits client over the whole upstream stack in front of a scripted upstream: GET /pi and
 * POST /inference on the wire, answers, statuses and the health probe. One attempt, no breaker, v1
 * fixed: mapping only (resilience and versions have their own files). The size cap is a transport
 * option the settings do not expose, so it is tested on the transport itself.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dispatchPromise } from '../../src/gateway/upstream/dispatch.js';
import { createTransport } from '../../src/gateway/upstream/transport.js';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import {
  createTestClients,
  expectClientSafe,
  failureOf,
  MAPPING_ENV,
  piTransportRequest,
  type TestClients,
  testOperation,
} from '../support/clients.js';
import { piAnswer } from '../support/upstream-bodies.js';
import { gate, until } from '../support/waits.js';

const PI = '/api/v1/pi';
const INFERENCE = '/api/v1/inference';
const KEY = 'demo-enterprise-secret-42';

const inferenceBody = {
  digits: '3.1415926535',
  chain_of_thought: 'Circles are round, therefore 3.14...',
  tokens_used: 314,
  cost: '$1,234.50',
};

let up: ScriptedUpstream;
let clients: TestClients;

const withKey = (requestId = 'test-request') => testOperation({ apiKey: KEY, requestId });

beforeAll(async () => {
  up = await startScriptedUpstream();
  clients = createTestClients({ nullBaseUrl: up.url, piBaseUrl: up.url, env: MAPPING_ENV });
});

afterAll(async () => {
  await clients?.close();
  await up?.close();
});

beforeEach(() => {
  up.reset();
});

describe('GET /pi', () => {
  it('sends only the given query parameters, and no body', async () => {
    up.route('GET', PI, { body: piAnswer });
    await clients.piDigits.pi({}, testOperation());
    await clients.piDigits.pi(
      { digits: 0, model: 'pi-x-mini', temperature: 0.5, sponsored: false },
      testOperation(),
    );
    expect(up.requests[0]?.query).toEqual({});
    expect(up.requests[1]?.query).toEqual({
      digits: '0',
      model: 'pi-x-mini',
      temperature: '0.5',
      sponsored: 'false',
    });
    expect(up.requests[1]?.rawBody).toBe('');
    expect(up.requests[1]?.headers).not.toHaveProperty('content-type');
  });

  it('maps the answer, with no marker when none is sent and an unknown model kept; forwards key and id', async () => {
    up.route('GET', PI, { body: { ...piAnswer, model: 'pi-x-quantum', extra: [1, 2, 3] } });
    const result = await clients.piDigits.pi({ digits: 5 }, withKey('rq-9'));
    expect(result).toMatchObject({
      digits: '3.14159',
      precision: 5,
      confidence: 0.99,
      model: 'pi-x-quantum',
      inferenceTimeMs: 40,
      gpuCostUsd: 0.3,
      sponsoredBy: 'PiCorp',
      disclaimer: 'Digits may differ from actual pi.',
      constantMarker: null,
    });
    expect(up.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(up.requests[0]?.headers['x-request-id']).toBe('rq-9');
  });

  it('reads an e marker', async () => {
    up.route('GET', PI, { body: { ...piAnswer, digits: '2.71828', constant: 'e' } });
    const result = await clients.piDigits.pi({ digits: 5, temperature: 1 }, testOperation());
    expect(result.constantMarker).toBe('e');
    expect(result.digits).toBe('2.71828');
  });

  it('carries a body of a million digits', async () => {
    const digits = `3.${'1'.repeat(1_000_000)}`;
    up.route('GET', PI, { body: { ...piAnswer, digits, precision: 1_000_000 } });
    const result = await clients.piDigits.pi({ digits: 1_000_000 }, testOperation());
    expect(result.digits.length).toBe(1_000_002);
    expect(result.precision).toBe(1_000_000);
  });

  it.each([
    ['digits with letters', { ...piAnswer, digits: '3.14abc' }],
    ['numeric digits', { ...piAnswer, digits: 3.14 }],
    ['a string precision', { ...piAnswer, precision: '5' }],
    ['a missing confidence', { ...piAnswer, confidence: undefined }],
  ])('rejects %s with UPSTREAM_BAD_RESPONSE', async (_name, body) => {
    up.route('GET', PI, { body });
    const error = await failureOf(clients.piDigits.pi({ digits: 5 }, testOperation()));
    expect(error.code).toBe('UPSTREAM_BAD_RESPONSE');
    expect(error.upstream).toBe('pi-digits');
  });

  it.each([
    ['HTML', { html: '<!doctype html><title>Oops</title>' }],
    ['truncated', { body: piAnswer, truncate: true }],
    ['not JSON', { body: '3.14159' }],
  ])('rejects a %s body with UPSTREAM_BAD_RESPONSE', async (_name, script) => {
    up.route('GET', PI, script);
    const error = await failureOf(clients.piDigits.pi({ digits: 5 }, withKey()));
    expect(error.code).toBe('UPSTREAM_BAD_RESPONSE');
    expectClientSafe(error, { port: up.port, key: KEY });
  });
});

describe('the response size cap (transport)', () => {
  it('refuses a body over maxResponseBytes with UPSTREAM_BAD_RESPONSE, and keeps one under it', async () => {
    const transport = createTransport({
      upstream: 'pi-digits',
      baseUrl: up.url,
      maxResponseBytes: 64 * 1024,
    });
    try {
      const request = piTransportRequest(PI);
      up.route('GET', PI, { body: { ...piAnswer, digits: `3.${'1'.repeat(128 * 1024)}` } });
      const error = await failureOf(dispatchPromise(transport.dispatch, request));
      expect(error.code).toBe('UPSTREAM_BAD_RESPONSE');
      expect(error.message).toContain('too large');

      up.route('GET', PI, { body: { ...piAnswer, digits: `3.${'1'.repeat(32 * 1024)}` } });
      const answer = await dispatchPromise(transport.dispatch, request);
      expect(answer.value.digits.length).toBe(32 * 1024 + 2);
      expect(answer).toMatchObject({ source: 'upstream', endpoint: 'pi', statusCode: 200 });
    } finally {
      await transport.close();
    }
  });
});

describe('POST /inference', () => {
  it('sends the snake_case body and maps the answer', async () => {
    up.route('POST', INFERENCE, { body: inferenceBody });
    const result = await clients.piDigits.inference(
      {
        desiredDigits: 10,
        model: 'pi-x-4o',
        temperature: 0,
        useChainOfThought: true,
        liabilityWaiverSigned: true,
      },
      testOperation(),
    );
    expect(up.requests[0]?.body).toEqual({
      desired_digits: 10,
      model: 'pi-x-4o',
      temperature: 0,
      use_chain_of_thought: true,
      liability_waiver_signed: true,
    });
    expect(up.requests[0]?.headers['content-type']).toBe('application/json');
    expect(result).toMatchObject({
      digits: '3.1415926535',
      chainOfThought: 'Circles are round, therefore 3.14...',
      tokensUsed: 314,
      cost: '$1,234.50',
      costUsd: 1234.5,
      precision: 10,
      model: null,
      constantMarker: null,
    });
  });

  it('keeps an unparsable cost string with costUsd null', async () => {
    up.route('POST', INFERENCE, {
      body: { ...inferenceBody, cost: 'one arm and one leg', chain_of_thought: null },
    });
    const result = await clients.piDigits.inference(
      { desiredDigits: 10, liabilityWaiverSigned: true },
      testOperation(),
    );
    expect(result.cost).toBe('one arm and one leg');
    expect(result.costUsd).toBeNull();
    expect(result.chainOfThought).toBeNull();
  });

  it('is never shared: two identical inferences in flight are two upstream calls', async () => {
    // Both answers are held until the upstream has both requests: both calls are in flight at once.
    const held = gate();
    up.route('POST', INFERENCE, { holdUntil: held.opened, body: inferenceBody });
    const operation = testOperation();
    const calls = Promise.all([
      clients.piDigits.inference(
        { desiredDigits: 3, temperature: 0, liabilityWaiverSigned: true },
        operation,
      ),
      clients.piDigits.inference(
        { desiredDigits: 3, temperature: 0, liabilityWaiverSigned: true },
        operation,
      ),
    ]);
    const bothArrived = await until(() => up.count('POST', INFERENCE) === 2);
    held.open();
    await calls;
    expect(bothArrived).toBe(true);
    expect(up.count('POST', INFERENCE)).toBe(2);
  });
});

describe('error statuses', () => {
  const errorBody = (status: number, code: string) =>
    JSON.stringify({ error: { status, code, message: `cluster 10.2.3.4 says no to ${KEY}` } });

  it.each([
    ['pi', 400, errorBody(400, 'BAD_USER_INPUT'), 'BAD_USER_INPUT'],
    ['pi', 401, errorBody(401, 'UNAUTHENTICATED'), 'UNAUTHENTICATED'],
    ['pi', 418, errorBody(418, 'TIER_FORBIDDEN'), 'TIER_FORBIDDEN'],
    ['pi', 429, errorBody(429, 'RATE_LIMITED'), 'RATE_LIMITED'],
    ['pi', 500, errorBody(500, 'INTERNAL'), 'UPSTREAM_ERROR'],
    ['pi', 503, errorBody(503, 'UNAVAILABLE'), 'UPSTREAM_UNAVAILABLE'],
    ['pi', 504, '<html>gateway timeout</html>', 'UPSTREAM_ERROR'],
    ['pi', 422, errorBody(422, 'UNPROCESSABLE'), 'UPSTREAM_ERROR'],
    ['inference', 400, errorBody(400, 'WAIVER_REQUIRED'), 'WAIVER_REQUIRED'],
    ['inference', 400, errorBody(400, 'BAD_USER_INPUT'), 'BAD_USER_INPUT'],
    ['inference', 401, errorBody(401, 'UNAUTHENTICATED'), 'UNAUTHENTICATED'],
    ['inference', 418, errorBody(418, 'TIER_FORBIDDEN'), 'TIER_FORBIDDEN'],
    ['inference', 429, errorBody(429, 'RATE_LIMITED'), 'RATE_LIMITED'],
    ['inference', 500, errorBody(500, 'INTERNAL'), 'UPSTREAM_ERROR'],
    ['inference', 503, errorBody(503, 'UNAVAILABLE'), 'UPSTREAM_UNAVAILABLE'],
  ])('%s %i → %s', async (endpoint, status, body, code) => {
    up.route(endpoint === 'pi' ? 'GET' : 'POST', endpoint === 'pi' ? PI : INFERENCE, { status, body });
    const call =
      endpoint === 'pi'
        ? clients.piDigits.pi({ digits: 4 }, withKey())
        : clients.piDigits.inference({ desiredDigits: 4, liabilityWaiverSigned: true }, withKey());
    const error = await failureOf(call);
    expect(error.code).toBe(code);
    expect(error.upstream).toBe('pi-digits');
    expect(error.statusCode).toBe(status);
    expect(error.toExtensions()).toMatchObject({ code, upstream: 'pi-digits', upstreamStatus: status });
    expect(error.body).toBe(body.replaceAll(KEY, '[redacted]'));
    expectClientSafe(error, { port: up.port, key: KEY, rawBody: body });
    expect(error.message).not.toContain('10.2.3.4');
  });

  it('maps a 400 without an error code to WAIVER_REQUIRED when the waiver was not signed', async () => {
    up.route('POST', INFERENCE, { status: 400, body: 'waiver missing' });
    const error = await failureOf(
      clients.piDigits.inference({ desiredDigits: 4, liabilityWaiverSigned: false }, testOperation()),
    );
    expect(error.code).toBe('WAIVER_REQUIRED');
    expect(up.requests[0]?.body).toMatchObject({ liability_waiver_signed: false });
  });

  it('maps a 400 without an error code to BAD_USER_INPUT when the waiver was signed', async () => {
    up.route('POST', INFERENCE, { status: 400, body: 'something else' });
    const error = await failureOf(
      clients.piDigits.inference({ desiredDigits: 4, liabilityWaiverSigned: true }, testOperation()),
    );
    expect(error.code).toBe('BAD_USER_INPUT');
  });
});

describe('health', () => {
  it('reports every field of the health body, without the key', async () => {
    up.route('GET', '/api/v1/health', {
      body: { status: 'ok', pi_available: true, gpu_cluster: 'melting', monthly_burn_rate: '$3.14M' },
    });
    const probe = await clients.health.piDigits(withKey());
    expect(probe).toMatchObject({
      reachable: true,
      statusCode: 200,
      error: null,
      breaker: 'disabled',
      apiVersion: 'v1',
      deprecated: false,
      sunset: null,
      body: { status: 'ok', piAvailable: true, gpuCluster: 'melting', monthlyBurnRate: '$3.14M' },
    });
    expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
  });

  it('reports a missing field as an error with no body', async () => {
    up.route('GET', '/api/v1/health', { body: { status: 'ok', pi_available: true } });
    const probe = await clients.health.piDigits();
    expect(probe).toMatchObject({ reachable: true, body: null });
    expect(probe.error).toContain('gpu_cluster');
  });
});
