import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { UpstreamError } from '../../src/gateway/upstream/errors.js';
import {
  type ScriptedResponse,
  type ScriptedUpstream,
  startScriptedUpstream,
} from '../fixtures/scripted-upstream.js';

const CHECK = '/api/v1/check';
const KEY = 'sk-live-very-secret-0001';

const meta = {
  confidence: 0.97,
  model: 'null-x-4o',
  inference_time_ms: 12,
  gpu_cost_usd: 0.0021,
  experts_consulted: 2,
  sponsored_by: 'NullCorp',
  disclaimer: 'Results may differ from strict equality.',
};

let up: ScriptedUpstream;
let clients: HttpUpstreamClients;

/** What no client-facing message may contain. */
function expectClientSafe(error: UpstreamError, rawBody?: string): void {
  expect(error.message).not.toContain('127.0.0.1');
  expect(error.message).not.toContain(String(up.port));
  expect(error.message).not.toContain(KEY);
  if (rawBody !== undefined) expect(error.message).not.toContain(rawBody);
}

async function failure(promise: Promise<unknown>): Promise<UpstreamError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  return error as UpstreamError;
}

beforeAll(async () => {
  up = await startScriptedUpstream();
  // One attempt and no breaker: this file is about mapping, not resilience.
  clients = createUpstreamClients({
    nullBaseUrl: up.url,
    piBaseUrl: up.url,
    retryMaxAttempts: 1,
    breakerThreshold: 0,
    timeoutMs: 2000,
  });
});

afterAll(async () => {
  await clients.close();
  await up.close();
});

beforeEach(() => {
  up.reset();
});

describe('request bodies: undefined vs null', () => {
  beforeEach(() => {
    up.route('POST', CHECK, { body: { ...meta, is_null: true } });
  });

  it('sends no value key when the value is undefined', async () => {
    await clients.nullCheck.check({ hasValue: false });
    const [request] = up.requests;
    expect(request?.rawBody).toBe('{}');
    expect(Object.hasOwn(request?.body as object, 'value')).toBe(false);
    expect(request?.headers['content-type']).toBe('application/json');
  });

  it('sends "value": null for an explicit null', async () => {
    await clients.nullCheck.check({ hasValue: true, value: null });
    expect(up.requests[0]?.rawBody).toBe('{"value":null}');
  });

  it('sends other values, model, temperature and strict_mode as given', async () => {
    const value = { a: [1, 'two', null], b: false };
    await clients.nullCheck.check({
      hasValue: true,
      value,
      model: 'null-x-opus',
      temperature: 0.8,
      strictMode: true,
    });
    expect(up.requests[0]?.body).toEqual({
      value,
      model: 'null-x-opus',
      temperature: 0.8,
      strict_mode: true,
    });
  });

  it('sends falsy values (0, "", false) as values', async () => {
    for (const value of [0, '', false]) {
      await clients.nullCheck.check({ hasValue: true, value });
    }
    expect(up.requests.map((r) => r.rawBody)).toEqual(['{"value":0}', '{"value":""}', '{"value":false}']);
  });
});

describe('answers', () => {
  it('maps a boolean answer, ignores extra fields and passes an unknown model through', async () => {
    const body = { ...meta, is_null: false, model: 'null-x-9000', surprise: { deep: [1] } };
    up.route('POST', CHECK, { body });
    const result = await clients.nullCheck.check({ hasValue: true, value: 1 });
    expect(result.answer).toEqual({ kind: 'boolean', isNull: false });
    expect(result.model).toBe('null-x-9000');
    expect(result.expertsConsulted).toBe(2);
    expect(result.raw).toEqual(body);
  });

  it('maps the maybe answer', async () => {
    up.route('POST', CHECK, { body: { ...meta, is_null: 'Maybe' } });
    const result = await clients.nullCheck.check({ hasValue: true, value: null });
    expect(result.answer).toEqual({ kind: 'maybe' });
  });

  it.each([
    ['a string', { ...meta, is_null: 'Is anything truly null?' }, 'Is anything truly null?'],
    ['an object', { ...meta, is_null: { existential_dread: 'The void.' } }, 'The void.'],
    ['null', { ...meta, is_null: null }, null],
    ['a missing is_null', { answer: 'I refuse to answer.' }, 'I refuse to answer.'],
  ])('maps %s as an existential answer with the raw body kept', async (_name, body, musing) => {
    up.route('POST', CHECK, { body });
    const result = await clients.nullCheck.check({ hasValue: true, value: null });
    expect(result.answer).toEqual({ kind: 'existential', musing });
    expect(result.raw).toEqual(body);
  });
});

describe('bad answers → UPSTREAM_BAD_RESPONSE', () => {
  it.each([
    ['not JSON', { body: 'this is not json' }],
    ['HTML', { html: '<html><body><h1>502 Bad Gateway</h1></body></html>' }],
    ['truncated JSON', { body: { ...meta, is_null: true }, truncate: 20 }],
    ['an empty body', { body: '' }],
    ['a JSON array', { body: [true] }],
    ['a JSON string', { body: '"true"' }],
    ['a wrong-typed confidence', { body: { ...meta, is_null: true, confidence: 'very' } }],
    ['a wrong-typed experts_consulted', { body: { ...meta, is_null: true, experts_consulted: 2.5 } }],
    ['raw bytes', { body: Buffer.from([0xff, 0xfe, 0x00, 0x01]) }],
  ] as [string, ScriptedResponse][])('%s', async (_name, script) => {
    up.route('POST', CHECK, script);
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }, { apiKey: KEY }));
    expect(error.code).toBe('UPSTREAM_BAD_RESPONSE');
    expect(error.upstream).toBe('null-check');
    expect(error.statusCode).toBe(200);
    expectClientSafe(
      error,
      typeof script.body === 'string' && script.body.length > 0 ? script.body : undefined,
    );
  });

  it('names the offending field in the message without its value', async () => {
    up.route('POST', CHECK, { body: { ...meta, is_null: true, gpu_cost_usd: 'priceless-secret' } });
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }));
    expect(error.message).toContain('gpu_cost_usd');
    expect(error.message).not.toContain('priceless-secret');
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
    ['502', 502, '<html>bad gateway</html>', true, 'UPSTREAM_ERROR'],
    ['302', 302, '', true, 'UPSTREAM_ERROR'],
  ])('%s → %s', async (_name, status, body, hasValue, code) => {
    up.route('POST', CHECK, { status, body });
    const error = await failure(
      clients.nullCheck.check(hasValue ? { hasValue, value: null } : { hasValue: false }, { apiKey: KEY }),
    );
    expect(error.code).toBe(code);
    expect(error.upstream).toBe('null-check');
    expect(error.statusCode).toBe(status);
    expect(error.toExtensions()).toMatchObject({ code, upstream: 'null-check', upstreamStatus: status });
    const raw = typeof body === 'string' ? body : JSON.stringify(body);
    // The raw body stays on the error for the log, with the key scrubbed; never in the message.
    expect(error.body ?? '').toBe(raw.replaceAll(KEY, '[redacted]'));
    expect(String(error.body)).not.toContain(KEY);
    expectClientSafe(error, raw.length > 0 ? raw : undefined);
    expect(error.message).not.toContain('10.1.2.3');
  });

  it('reads Retry-After in seconds', async () => {
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': '42' } });
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }));
    expect(error.retryAfterSeconds).toBe(42);
    expect(error.toExtensions()).toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: 42 });
  });

  it('reads Retry-After as an HTTP date', async () => {
    const at = new Date(Date.now() + 120_000).toUTCString();
    up.route('POST', CHECK, { status: 429, headers: { 'retry-after': at } });
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }));
    expect(error.retryAfterSeconds).toBeGreaterThanOrEqual(100);
    expect(error.retryAfterSeconds).toBeLessThanOrEqual(121);
  });

  it('leaves retryAfterSeconds undefined without the header', async () => {
    up.route('POST', CHECK, { status: 429 });
    const error = await failure(clients.nullCheck.check({ hasValue: true, value: null }));
    expect(error.retryAfterSeconds).toBeUndefined();
    expect(error.toExtensions()).not.toHaveProperty('retryAfterSeconds');
  });
});

describe('headers', () => {
  beforeEach(() => {
    up.route('POST', CHECK, { body: { ...meta, is_null: true } });
  });

  it('forwards the key as Bearer on authorization, and the request id', async () => {
    await clients.nullCheck.check({ hasValue: true, value: null }, { apiKey: KEY, requestId: 'req-123' });
    expect(up.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(up.requests[0]?.headers['x-request-id']).toBe('req-123');
  });

  it('sends no auth header and no request id when there are none', async () => {
    await clients.nullCheck.check({ hasValue: true, value: null });
    expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
    expect(up.requests[0]?.headers).not.toHaveProperty('x-request-id');
  });

  it('sends the bare key on a custom header', async () => {
    const custom = createUpstreamClients({ nullBaseUrl: up.url, piBaseUrl: up.url, authHeader: 'X-API-Key' });
    try {
      await custom.nullCheck.check({ hasValue: true, value: null }, { apiKey: KEY });
      expect(up.requests[0]?.headers['x-api-key']).toBe(KEY);
      expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
    } finally {
      await custom.close();
    }
  });

  it('refuses a key with a line break without sending anything', async () => {
    const error = await failure(
      clients.nullCheck.check({ hasValue: true, value: null }, { apiKey: 'a\r\nb' }),
    );
    expect(error.code).toBe('BAD_USER_INPUT');
    expect(up.count()).toBe(0);
  });

  it('reuses one keep-alive connection for sequential calls', async () => {
    const fresh = createUpstreamClients({ nullBaseUrl: up.url, piBaseUrl: up.url });
    try {
      for (let i = 0; i < 10; i++) await fresh.nullCheck.check({ hasValue: true, value: i });
      // undici's Pool alternates between two sockets for back-to-back calls (the first is still
      // finishing its bookkeeping when the next call is dispatched); what matters is reuse.
      expect(new Set(up.requests.map((r) => r.remotePort)).size).toBeLessThanOrEqual(2);
    } finally {
      await fresh.close();
    }
  });

  it('serves a base URL with a path prefix', async () => {
    up.route('POST', `/prefix${CHECK}`, { body: { ...meta, is_null: false } });
    const prefixed = createUpstreamClients({ nullBaseUrl: `${up.url}/prefix/`, piBaseUrl: up.url });
    try {
      const result = await prefixed.nullCheck.check({ hasValue: true, value: 1 });
      expect(result.answer).toEqual({ kind: 'boolean', isNull: false });
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

  it('reports a reachable upstream with every field', async () => {
    up.route('GET', '/api/v1/health', { body: healthBody });
    const probe = await clients.nullCheck.health({ apiKey: KEY, requestId: 'h-1' });
    expect(probe).toMatchObject({
      reachable: true,
      statusCode: 200,
      error: null,
      breaker: 'disabled',
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
    // Health does not depend on the caller's tier, so the key is not forwarded.
    expect(up.requests[0]?.headers).not.toHaveProperty('authorization');
    expect(up.requests[0]?.headers['x-request-id']).toBe('h-1');
  });

  it('reports a body that does not fit as reachable with an error and no body', async () => {
    up.route('GET', '/api/v1/health', { body: { ...healthBody, null_detectable: 'sometimes' } });
    const probe = await clients.nullCheck.health();
    expect(probe.reachable).toBe(true);
    expect(probe.body).toBeNull();
    expect(probe.error).toContain('null_detectable');
  });

  it('reports a 503 as not reachable, without throwing', async () => {
    up.route('GET', '/api/v1/health', { status: 503, html: '<h1>down for maintenance at 10.9.9.9</h1>' });
    const probe = await clients.nullCheck.health();
    expect(probe).toMatchObject({ reachable: false, statusCode: 503, body: null });
    expect(probe.error).toContain('unavailable');
    expect(probe.error).not.toContain('10.9.9.9');
  });
});
