/**
 * The null-check client over the whole upstream stack (createUpstreamClients, as createApp builds it)
 * in front of a scripted upstream: what goes on the wire, how answers and statuses are read, and what
 * the health probe reports. One attempt, no breaker and a fixed API version: this file is about
 * mapping; resilience and versions have their own files.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type ScriptedResponse,
  type ScriptedUpstream,
  startScriptedUpstream,
} from '../fixtures/scripted-upstream.js';
import {
  createTestClients,
  expectClientSafe,
  failureOf,
  MAPPING_ENV,
  type TestClients,
  testOperation,
} from '../support/clients.js';
import { nullMeta } from '../support/upstream-bodies.js';

const CHECK = '/api/v1/check';
const KEY = 'sk-live-very-secret-0001';

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

describe('request bodies: undefined vs null', () => {
  beforeEach(() => {
    up.route('POST', CHECK, { body: { ...nullMeta, is_null: true } });
  });

  it('sends no value key when the value is undefined', async () => {
    await clients.nullCheck.check({ hasValue: false }, testOperation());
    const [request] = up.requests;
    expect(request?.rawBody).toBe('{}');
    expect(Object.hasOwn(request?.body as object, 'value')).toBe(false);
    expect(request?.headers['content-type']).toBe('application/json');
  });

  it('sends no value key for hasValue with an undefined value either', async () => {
    await clients.nullCheck.check({ hasValue: true, value: undefined }, testOperation());
    expect(up.requests[0]?.rawBody).toBe('{}');
  });

  it('sends "value": null for an explicit null', async () => {
    await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(up.requests[0]?.rawBody).toBe('{"value":null}');
  });

  it('sends other values, model, temperature and strict_mode as given', async () => {
    const value = { a: [1, 'two', null], b: false };
    await clients.nullCheck.check(
      { hasValue: true, value, model: 'null-x-opus', temperature: 0.8, strictMode: true },
      testOperation(),
    );
    expect(up.requests[0]?.body).toEqual({
      value,
      model: 'null-x-opus',
      temperature: 0.8,
      strict_mode: true,
    });
  });

  it('sends falsy values (0, "", false) as values', async () => {
    for (const value of [0, '', false])
      await clients.nullCheck.check({ hasValue: true, value }, testOperation());
    expect(up.requests.map((r) => r.rawBody)).toEqual(['{"value":0}', '{"value":""}', '{"value":false}']);
  });

  it('refuses a value JSON cannot encode with BAD_USER_INPUT, without sending anything', async () => {
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: 10n }, testOperation()));
    expect(error.code).toBe('BAD_USER_INPUT');
    expect(error.upstream).toBe('null-check');
    expect(up.count()).toBe(0);
  });
});

describe('answers', () => {
  it('maps a boolean answer, ignores extra fields and passes an unknown model through', async () => {
    const body = { ...nullMeta, is_null: false, model: 'null-x-9000', surprise: { deep: [1] } };
    up.route('POST', CHECK, { body });
    const result = await clients.nullCheck.check({ hasValue: true, value: 1 }, testOperation());
    expect(result.answer).toEqual({ kind: 'boolean', isNull: false });
    expect(result).toMatchObject({
      confidence: 0.97,
      model: 'null-x-9000',
      inferenceTimeMs: 12,
      gpuCostUsd: 0.0021,
      expertsConsulted: 2,
      sponsoredBy: 'NullCorp',
      disclaimer: 'May differ from strict equality.',
    });
    expect(result.raw).toEqual(body);
    // v1 has no philosophical analysis.
    expect(result.philosophicalAnalysis ?? null).toBeNull();
  });

  it('maps the maybe answer', async () => {
    up.route('POST', CHECK, { body: { ...nullMeta, is_null: 'Maybe' } });
    const result = await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(result.answer).toEqual({ kind: 'maybe' });
  });

  it.each([
    ['a string', { ...nullMeta, is_null: 'Is anything truly null?' }, 'Is anything truly null?'],
    ['an object', { ...nullMeta, is_null: { existential_dread: 'The void.' } }, 'The void.'],
    ['null', { ...nullMeta, is_null: null }, null],
    ['a missing is_null', { answer: 'I refuse to answer.' }, 'I refuse to answer.'],
  ])('maps %s as an existential answer with the raw body kept', async (_name, body, musing) => {
    up.route('POST', CHECK, { body });
    const result = await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(result.answer).toEqual({ kind: 'existential', musing });
    expect(result.raw).toEqual(body);
  });
});

describe('bad answers → UPSTREAM_BAD_RESPONSE', () => {
  it.each([
    ['not JSON', { body: 'this is not json' }],
    ['HTML', { html: '<html><body><h1>502 Bad Gateway</h1></body></html>' }],
    ['truncated JSON', { body: { ...nullMeta, is_null: true }, truncate: 20 }],
    ['an empty body', { body: '' }],
    ['a JSON array', { body: [true] }],
    ['a JSON string', { body: '"true"' }],
    ['a wrong-typed confidence', { body: { ...nullMeta, is_null: true, confidence: 'very' } }],
    ['a wrong-typed experts_consulted', { body: { ...nullMeta, is_null: true, experts_consulted: 2.5 } }],
    ['raw bytes', { body: Buffer.from([0xff, 0xfe, 0x00, 0x01]) }],
  ] as [string, ScriptedResponse][])('%s', async (_name, script) => {
    up.route('POST', CHECK, script);
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, withKey()));
    expect(error.code).toBe('UPSTREAM_BAD_RESPONSE');
    expect(error.kind).toBe('bad-response');
    expect(error.upstream).toBe('null-check');
    expect(error.statusCode).toBe(200);
    expectClientSafe(error, {
      port: up.port,
      key: KEY,
      rawBody: typeof script.body === 'string' ? script.body : undefined,
    });
  });

  it('names the offending field in the message without its value', async () => {
    up.route('POST', CHECK, { body: { ...nullMeta, is_null: true, gpu_cost_usd: 'priceless-secret' } });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error.message).toContain('gpu_cost_usd');
    expect(error.message).not.toContain('priceless-secret');
  });

  it('keeps the raw body for the log with the key scrubbed', async () => {
    up.route('POST', CHECK, { body: `not json, but it echoes ${KEY}` });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, withKey()));
    expect(error.body).toBe('not json, but it echoes [redacted]');
  });
});

describe('error statuses', () => {
  const errorBody = (status: number, code: string) => ({
    error: { status, code, message: `internal detail at 10.1.2.3 for ${KEY}` },
  });

  it.each([
    ['400 UNDEFINED_VALUE code', 400, errorBody(400, 'UNDEFINED_VALUE'), true, 'UNDEFINED_VALUE'],
    ['400 without code, no value sent', 400, { oops: true }, false, 'UNDEFINED_VALUE'],
    ['400 other validation, value sent', 400, errorBody(400, 'BAD_USER_INPUT'), true, 'BAD_USER_INPUT'],
    ['401', 401, errorBody(401, 'UNAUTHENTICATED'), true, 'UNAUTHENTICATED'],
    ['418', 418, errorBody(418, 'TIER_FORBIDDEN'), true, 'TIER_FORBIDDEN'],
    ['429', 429, errorBody(429, 'RATE_LIMITED'), true, 'RATE_LIMITED'],
    ['500', 500, errorBody(500, 'NULL_PARADOX'), true, 'NULL_PARADOX'],
    ['503', 503, errorBody(503, 'UNAVAILABLE'), true, 'UPSTREAM_UNAVAILABLE'],
    ['404', 404, '<html>not found</html>', true, 'UPSTREAM_ERROR'],
    ['410', 410, errorBody(410, 'GONE'), true, 'UPSTREAM_ERROR'],
    ['502', 502, '<html>bad gateway</html>', true, 'UPSTREAM_ERROR'],
    ['302', 302, '', true, 'UPSTREAM_ERROR'],
  ])('%s → %s', async (_name, status, body, hasValue, code) => {
    up.route('POST', CHECK, { status, body });
    const error = await failureOf(
      clients.nullCheck.check(hasValue ? { hasValue, value: null } : { hasValue: false }, withKey()),
    );
    expect(error.code).toBe(code);
    expect(error.kind).toBe('status');
    expect(error.upstream).toBe('null-check');
    expect(error.statusCode).toBe(status);
    expect(error.toExtensions()).toMatchObject({ code, upstream: 'null-check', upstreamStatus: status });
    const raw = typeof body === 'string' ? body : JSON.stringify(body);
    // The raw body stays on the error for the log, with the key scrubbed; never in the message.
    expect(error.body ?? '').toBe(raw.replaceAll(KEY, '[redacted]'));
    expect(String(error.body)).not.toContain(KEY);
    expectClientSafe(error, { port: up.port, key: KEY, rawBody: raw });
    expect(error.message).not.toContain('10.1.2.3');
    // One attempt: this file's clients never retry.
    expect(up.count('POST', CHECK)).toBe(1);
  });

  it('reads Retry-After in seconds', async () => {
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': '42' } });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error.retryAfterSeconds).toBe(42);
    expect(error.toExtensions()).toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: 42 });
    expect(error.message).toContain('42');
  });

  it('reads Retry-After as an HTTP date', async () => {
    const at = new Date(Date.now() + 120_000).toUTCString();
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': at } });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error.retryAfterSeconds).toBeGreaterThanOrEqual(100);
    expect(error.retryAfterSeconds).toBeLessThanOrEqual(121);
  });

  it('leaves retryAfterSeconds undefined without the header', async () => {
    up.route('POST', CHECK, { status: 429 });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error.retryAfterSeconds).toBeUndefined();
    expect(error.toExtensions()).not.toHaveProperty('retryAfterSeconds');
  });
});

describe('headers', () => {
  beforeEach(() => {
    up.route('POST', CHECK, { body: { ...nullMeta, is_null: true } });
  });

  it("forwards the operation's key as Bearer on authorization, and its request id", async () => {
    await clients.nullCheck.check({ hasValue: true, value: null }, withKey('req-123'));
    expect(up.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(up.requests[0]?.headers['x-request-id']).toBe('req-123');
  });

  it('sends no auth header for an operation without a key (free tier)', async () => {
    await clients.nullCheck.check({ hasValue: true, value: null }, testOperation({ requestId: 'req-free' }));
    expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
    expect(up.requests[0]?.headers['x-request-id']).toBe('req-free');
  });

  it('sends no auth header and no request id for a call outside any operation', async () => {
    await clients.nullCheck.check({ hasValue: true, value: null }, undefined);
    expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
    expect(up.requests[0]?.headers).not.toHaveProperty('x-request-id');
  });

  it('sends the bare key on a custom header (UPSTREAM_AUTH_HEADER)', async () => {
    const custom = createTestClients({
      nullBaseUrl: up.url,
      piBaseUrl: up.url,
      env: { ...MAPPING_ENV, UPSTREAM_AUTH_HEADER: 'X-API-Key' },
    });
    try {
      await custom.nullCheck.check({ hasValue: true, value: null }, withKey());
      expect(up.requests[0]?.headers['x-api-key']).toBe(KEY);
      expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
    } finally {
      await custom.close();
    }
  });

  it('refuses a key with a line break with BAD_USER_INPUT, without sending anything', async () => {
    const error = await failureOf(
      clients.nullCheck.check({ hasValue: true, value: null }, testOperation({ apiKey: 'a\r\nb' })),
    );
    expect(error.code).toBe('BAD_USER_INPUT');
    expect(error.message).not.toContain('a\r\nb');
    expect(up.count()).toBe(0);
  });

  it('reuses keep-alive connections for sequential calls', async () => {
    const fresh = createTestClients({ nullBaseUrl: up.url, piBaseUrl: up.url, env: MAPPING_ENV });
    try {
      for (let i = 0; i < 10; i++) await fresh.nullCheck.check({ hasValue: true, value: i }, testOperation());
      // undici's Pool may alternate between two sockets for back-to-back calls (the first is still
      // finishing its bookkeeping when the next call is dispatched); what matters is reuse.
      expect(up.count('POST', CHECK)).toBe(10);
      expect(new Set(up.requests.map((r) => r.remotePort)).size).toBeLessThanOrEqual(2);
    } finally {
      await fresh.close();
    }
  });

  it('serves a base URL with a path prefix', async () => {
    up.route('POST', `/prefix${CHECK}`, { body: { ...nullMeta, is_null: false } });
    const prefixed = createTestClients({
      nullBaseUrl: `${up.url}/prefix/`,
      piBaseUrl: up.url,
      env: MAPPING_ENV,
    });
    try {
      const result = await prefixed.nullCheck.check({ hasValue: true, value: 1 }, testOperation());
      expect(result.answer).toEqual({ kind: 'boolean', isNull: false });
      expect(up.requests.map((r) => r.path)).toEqual([`/prefix${CHECK}`]);
    } finally {
      await prefixed.close();
    }
  });
});

describe('health', () => {
  const healthBody = {
    status: 'ok',
    null_detectable: true,
    undefined_detectable: false,
    cluster_status: 'contemplating',
    philosophy_consultant: null,
    monthly_burn: '$4,200,000',
  };

  it('reports a reachable upstream with every field, and what the gateway knows of it', async () => {
    up.route('GET', '/api/v1/health', { body: healthBody });
    const probe = await clients.health.nullCheck(withKey('h-1'));
    expect(probe).toMatchObject({
      reachable: true,
      statusCode: 200,
      error: null,
      breaker: 'disabled',
      apiVersion: 'v1',
      deprecated: false,
      sunset: null,
      body: {
        status: 'ok',
        nullDetectable: true,
        undefinedDetectable: false,
        clusterStatus: 'contemplating',
        philosophyConsultant: null,
        monthlyBurn: '$4,200,000',
      },
    });
    expect(probe.latencyMs).toBeGreaterThanOrEqual(0);
    // Health does not depend on the caller's tier, so the key is not forwarded; the request id is.
    expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
    expect(up.requests[0]?.headers['x-request-id']).toBe('h-1');
  });

  it('reports a body that does not fit as reachable with an error and no body', async () => {
    up.route('GET', '/api/v1/health', { body: { ...healthBody, null_detectable: 'sometimes' } });
    const probe = await clients.health.nullCheck();
    expect(probe.reachable).toBe(true);
    expect(probe.statusCode).toBe(200);
    expect(probe.body).toBeNull();
    expect(probe.error).toContain('null_detectable');
    expect(probe.error).not.toContain('sometimes');
  });

  it('reports a 503 as not reachable, without throwing, and names no address', async () => {
    up.route('GET', '/api/v1/health', { status: 503, html: '<h1>down for maintenance at 10.9.9.9</h1>' });
    const probe = await clients.health.nullCheck();
    expect(probe).toMatchObject({ reachable: false, statusCode: 503, body: null });
    expect(probe.error).toContain('unavailable');
    expect(probe.error).not.toContain('10.9.9.9');
    expect(probe.error).not.toContain('127.0.0.1');
  });
});
