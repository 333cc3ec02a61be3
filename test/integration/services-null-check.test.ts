/**
 * Contract tests of the reference null-check service against null-check-service.md, one describe
 * per spec section, over real HTTP on loopback.
 */
import { validate } from '@readme/openapi-parser';
import { beforeAll, describe, expect, it } from 'vitest';
import { createNullCheckService } from '../../src/services/null-check/null-check-service.js';
import { MUSINGS } from '../../src/services/null-check/null-models.js';
import {
  bearer,
  type CheckAnswer,
  call,
  checkKind,
  expectErrorShape,
  many,
  postJson,
  serviceStarter,
  xApiKey,
} from './services-test-helpers.js';

interface NullHealth {
  status: string;
  null_detectable: boolean;
  undefined_detectable: boolean;
  cluster_status: string;
  philosophy_consultant: string | null;
  monthly_burn: string;
}

const CHECK = '/api/v1/check';
const HEALTH = '/api/v1/health';
const ENTERPRISE = bearer('demo-enterprise');
const PRO = bearer('demo-pro');

const start = serviceStarter(createNullCheckService);

let base: string;
const check = (body: unknown, headers: Record<string, string> = ENTERPRISE, url = base) =>
  call<CheckAnswer>(`${url}${CHECK}`, postJson(body, headers));

function expectCheckShape(body: CheckAnswer): void {
  expect(typeof body.is_null === 'boolean' || typeof body.is_null === 'string').toBe(true);
  expect(body.confidence).toBeGreaterThanOrEqual(0);
  expect(body.confidence).toBeLessThanOrEqual(1);
  expect(Number.isInteger(body.inference_time_ms)).toBe(true);
  expect(body.inference_time_ms).toBeGreaterThanOrEqual(0);
  expect(typeof body.gpu_cost_usd).toBe('number');
  expect(body.gpu_cost_usd).toBeGreaterThan(0);
  expect(['null-x-4o', 'null-x-mini', 'null-x-opus']).toContain(body.model);
  expect(Number.isInteger(body.experts_consulted)).toBe(true);
  expect(typeof body.sponsored_by).toBe('string');
  expect(body.sponsored_by.length).toBeGreaterThan(0);
  expect(body.disclaimer).toMatch(/strict equality/);
}

/** JSON values of every kind, with the truth (strict equality with null). */
const VALUES: unknown[] = [
  null,
  0,
  1,
  -1.5,
  '',
  'null',
  'hello',
  true,
  false,
  [],
  [null],
  {},
  { a: null },
  [[]],
];

beforeAll(async () => {
  // The main instance: free callers unlimited so that this file's many free requests never 429
  // (the limits have their own instances below).
  base = await start({ seed: 7, freeRateLimit: 0 });
});

describe('2.1 check request (POST /api/v1/check body)', () => {
  it('requires only value; defaults: model null-x-4o, temperature 0, strict_mode false', async () => {
    const answers = await many(40, 8, () => check({ value: 'x' }, {}));
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.body.model).toBe('null-x-4o');
      // temperature 0: always a plain boolean; strict_mode false: the free tier is not refused.
      expect(answer.body.is_null).toBe(false);
    }
  });

  it('an explicit null is null; an absent value is undefined (400 UNDEFINED_VALUE)', async () => {
    const isNull = await check({ value: null });
    expect(isNull.status).toBe(200);
    expect(isNull.body.is_null).toBe(true);
    expectErrorShape(await check({}), 400, 'UNDEFINED_VALUE');
    expectErrorShape(await check({ model: 'null-x-4o', temperature: 0.5 }), 400, 'UNDEFINED_VALUE');
  });

  it('accepts every JSON type as value', async () => {
    for (const value of VALUES) {
      const answer = await check({ value });
      expect(answer.status, JSON.stringify(value)).toBe(200);
      expectCheckShape(answer.body);
    }
  });

  it('accepts each model and answers with it', async () => {
    for (const model of ['null-x-4o', 'null-x-mini', 'null-x-opus']) {
      const answer = await check({ value: 1, model });
      expect(answer.status).toBe(200);
      expect(answer.body.model).toBe(model);
    }
  });

  it('refuses an unknown model, temperature outside 0..1 and wrong types with 400 VALIDATION_ERROR', async () => {
    const bad: unknown[] = [
      { value: 1, model: 'null-x-5' },
      { value: 1, model: 4 },
      { value: 1, temperature: -0.01 },
      { value: 1, temperature: 1.01 },
      { value: 1, temperature: '0.5' },
      { value: 1, temperature: null },
      { value: 1, strict_mode: 'true' },
      { value: 1, strict_mode: 1 },
    ];
    for (const body of bad) {
      const error = expectErrorShape(await check(body), 400, 'VALIDATION_ERROR');
      expect(error.message.length).toBeGreaterThan(5);
    }
  });

  it('accepts the bounds of temperature and ignores unknown fields', async () => {
    expect((await check({ value: 1, temperature: 0 })).status).toBe(200);
    expect((await check({ value: 1, temperature: 1 })).status).toBe(200);
    expect((await check({ value: 1, colour: 'blue' })).status).toBe(200);
  });
});

describe('2.2 check response', () => {
  it('has every field of the spec with its type, for every model', async () => {
    for (const model of ['null-x-4o', 'null-x-mini', 'null-x-opus']) {
      const answer = await check({ value: null, model });
      expect(answer.status).toBe(200);
      expectCheckShape(answer.body);
      expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    }
  });

  it('null-x-4o and null-x-opus answer by strict equality at temperature 0', async () => {
    for (const model of ['null-x-4o', 'null-x-opus']) {
      for (const value of VALUES) {
        const answer = await check({ value, model });
        expect(answer.body.is_null, `${model} ${JSON.stringify(value)}`).toBe(value === null);
      }
    }
  });

  it('null-x-mini errs reproducibly on the empty values, and strict_mode makes it exact', async () => {
    const empties = new Set(['', 0, false, 'null']);
    for (const value of VALUES) {
      const looksEmpty =
        empties.has(value as never) ||
        (Array.isArray(value) && value.length === 0) ||
        (value !== null &&
          typeof value === 'object' &&
          !Array.isArray(value) &&
          Object.keys(value).length === 0);
      const first = await check({ value, model: 'null-x-mini' });
      const second = await check({ value, model: 'null-x-mini' });
      expect(first.body.is_null, JSON.stringify(value)).toBe(value === null || looksEmpty);
      expect(second.body.is_null).toBe(first.body.is_null);
      const strict = await check({ value, model: 'null-x-mini', strict_mode: true });
      expect(strict.body.is_null, `strict ${JSON.stringify(value)}`).toBe(value === null);
    }
  });

  it('opus costs about ten times 4o; mini reports faster inference than 4o', async () => {
    const [o4, opus] = await Promise.all([
      check({ value: 1, model: 'null-x-4o' }),
      check({ value: 1, model: 'null-x-opus' }),
    ]);
    const ratio = opus.body.gpu_cost_usd / o4.body.gpu_cost_usd;
    expect(ratio).toBeGreaterThanOrEqual(8);
    expect(ratio).toBeLessThanOrEqual(12);
    const mean = async (model: string) => {
      const answers = await many(20, 5, () => check({ value: 1, model }));
      return answers.reduce((sum, a) => sum + a.body.inference_time_ms, 0) / answers.length;
    };
    expect(await mean('null-x-mini')).toBeLessThan(await mean('null-x-4o'));
  });

  it('temperature 0 never gives a non-boolean answer', async () => {
    const answers = await many(200, 20, (i) => check({ value: VALUES[i % VALUES.length], temperature: 0 }));
    expect(answers.every((a) => typeof a.body.is_null === 'boolean')).toBe(true);
  });

  it('temperature 0.5 gives "maybe" sometimes and never an existential answer', async () => {
    const answers = await many(200, 20, () => check({ value: null, temperature: 0.5 }));
    const kinds = answers.map((a) => checkKind(a.body));
    expect(kinds.filter((k) => k === 'maybe').length).toBeGreaterThan(20);
    expect(kinds).not.toContain('existential');
    expect(kinds).toContain('boolean');
  });

  it('temperature 1.0: at least 60% not a plain boolean, at least 20% existential (400 checks)', async () => {
    const answers = await many(400, 25, () => check({ value: null, temperature: 1 }));
    const kinds = answers.map((a) => checkKind(a.body));
    const nonBoolean = kinds.filter((k) => k !== 'boolean').length;
    const existential = kinds.filter((k) => k === 'existential').length;
    expect(nonBoolean / 400).toBeGreaterThanOrEqual(0.6);
    expect(existential / 400).toBeGreaterThanOrEqual(0.2);
    // The existential shape: a musing string (not a boolean, not "maybe") plus existential_dread.
    for (const answer of answers.filter((a) => checkKind(a.body) === 'existential')) {
      expectCheckShape(answer.body);
      expect(MUSINGS).toContain(answer.body.is_null);
      expect(answer.body.existential_dread).toBe(true);
    }
    for (const answer of answers.filter((a) => checkKind(a.body) !== 'existential')) {
      expect(answer.body.existential_dread).toBeUndefined();
    }
  });

  it('the share of non-boolean answers grows with temperature', async () => {
    const share = async (temperature: number) => {
      const answers = await many(200, 20, () => check({ value: 1, temperature }));
      return answers.filter((a) => typeof a.body.is_null !== 'boolean').length / answers.length;
    };
    const low = await share(0.2);
    const high = await share(0.9);
    expect(low).toBeGreaterThan(0);
    expect(high).toBeGreaterThan(low);
  });

  it('a seed reproduces a run; another seed gives another run', async () => {
    const run = async (seed: number) => {
      const url = await start({ seed, freeRateLimit: 0 });
      const answers: unknown[] = [];
      for (let i = 0; i < 30; i++) {
        const { body } = await check({ value: i % 2 === 0 ? null : i, temperature: 1 }, {}, url);
        answers.push([body.is_null, body.confidence, body.inference_time_ms, body.sponsored_by]);
      }
      return answers;
    };
    const a = await run(1234);
    const b = await run(1234);
    const c = await run(4321);
    expect(b).toEqual(a);
    expect(c).not.toEqual(a);
  });
});

describe('2.3 health status (GET /api/v1/health)', () => {
  it('has every field with its type', async () => {
    const answer = await call<NullHealth>(`${base}${HEALTH}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      status: 'ok',
      null_detectable: true,
      undefined_detectable: false,
      cluster_status: expect.any(String),
      philosophy_consultant: null,
      monthly_burn: expect.stringMatching(/^\$\d{1,3}(,\d{3})*\.\d{2}$/),
    });
  });

  it('reports degraded while fault injection is on', async () => {
    const url = await start({ fault500Rate: 0.2 });
    const answer = await call<NullHealth>(`${url}${HEALTH}`);
    expect(answer.status).toBe(200);
    expect(answer.body.status).toBe('degraded');
    expect(answer.body.null_detectable).toBe(true);
    expect(answer.body.cluster_status).toMatch(/fault injection/);
  });

  it('needs no key and ignores an unknown one', async () => {
    expect((await call(`${base}${HEALTH}`, { headers: bearer('no-such-key') })).status).toBe(200);
  });
});

describe('4.1 POST /api/v1/check', () => {
  it('takes application/json (with a charset too)', async () => {
    const answer = await call<CheckAnswer>(`${base}${CHECK}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: '{"value": null}',
    });
    expect(answer.status).toBe(200);
    expect(answer.body.is_null).toBe(true);
  });

  it('other methods and paths are 404 NOT_FOUND in the error shape', async () => {
    expectErrorShape(await call(`${base}${CHECK}`), 404, 'NOT_FOUND');
    expectErrorShape(await call(`${base}/api/v2/null-or-not`), 404, 'NOT_FOUND');
    expectErrorShape(await call(`${base}/api/v3/null-or-not`, postJson({ value: 1 })), 404, 'NOT_FOUND');
  });

  it('echoes x-request-id', async () => {
    const answer = await call(`${base}${CHECK}`, postJson({ value: 1 }, { 'x-request-id': 'abc-123' }));
    expect(answer.headers.get('x-request-id')).toBe('abc-123');
  });
});

describe('5 authentication', () => {
  it('no key, and the key "free" (bearer or X-API-Key), are the free tier', async () => {
    for (const headers of [{}, bearer('free'), xApiKey('free'), { authorization: 'bearer free' }]) {
      expect((await check({ value: 1 }, headers)).status).toBe(200);
      // strict_mode is refused on the free tier, which proves the tier.
      expectErrorShape(await check({ value: 1, strict_mode: true }, headers), 418, 'TIER_FORBIDDEN');
    }
  });

  it('demo keys select pro and enterprise, through either header', async () => {
    expectErrorShape(await check({ value: 1, strict_mode: true }, PRO), 418, 'TIER_FORBIDDEN');
    expectErrorShape(
      await check({ value: 1, strict_mode: true }, xApiKey('demo-pro')),
      418,
      'TIER_FORBIDDEN',
    );
    expect((await check({ value: 1, strict_mode: true }, ENTERPRISE)).status).toBe(200);
    expect((await check({ value: 1, strict_mode: true }, xApiKey('demo-enterprise'))).status).toBe(200);
  });

  it('an unknown key is 401 UNAUTHENTICATED, and the key is not echoed', async () => {
    const secret = 'sk-very-secret-key-42';
    for (const headers of [bearer(secret), xApiKey(secret)]) {
      const answer = await check({ value: 1 }, headers);
      expectErrorShape(answer, 401, 'UNAUTHENTICATED');
      expect(answer.text).not.toContain(secret);
    }
    expectErrorShape(await check({ value: 1 }, { authorization: `Basic ${secret}` }), 401, 'UNAUTHENTICATED');
  });

  it('API_KEYS replaces the demo keys', async () => {
    const url = await start({ apiKeys: 'alice:enterprise, bob:pro' });
    expect((await check({ value: 1, strict_mode: true }, bearer('alice'), url)).status).toBe(200);
    expectErrorShape(await check({ value: 1, strict_mode: true }, bearer('bob'), url), 418, 'TIER_FORBIDDEN');
    expectErrorShape(await check({ value: 1 }, ENTERPRISE, url), 401, 'UNAUTHENTICATED');
    expect((await check({ value: 1 }, bearer('free'), url)).status).toBe(200);
  });

  it('strict_mode on pro: refused by default (error table), allowed with strictModePro (limits table)', async () => {
    const url = await start({ strictModePro: true });
    const answer = await check({ value: 0, strict_mode: true, model: 'null-x-mini' }, PRO, url);
    expect(answer.status).toBe(200);
    expect(answer.body.is_null).toBe(false);
    expectErrorShape(await check({ value: 1, strict_mode: true }, {}, url), 418, 'TIER_FORBIDDEN');
  });
});

describe('7 errors', () => {
  it('400: an undefined value', async () => {
    const error = expectErrorShape(await check({ temperature: 0 }), 400, 'UNDEFINED_VALUE');
    expect(error.message).toMatch(/null/);
    // No body at all is a check without a value too.
    expectErrorShape(await call(`${base}${CHECK}`, { method: 'POST' }), 400, 'UNDEFINED_VALUE');
  });

  it('418: strict_mode on the free tier', async () => {
    expectErrorShape(await check({ value: null, strict_mode: true }, {}), 418, 'TIER_FORBIDDEN');
  });

  it('500: the null paradox, only through fault injection', async () => {
    const url = await start({ fault500Rate: 1 });
    const error = expectErrorShape(await check({ value: 1 }, {}, url), 500, 'NULL_PARADOX');
    expect(error.message).toMatch(/paradox/);
    // Health still answers (the service is up, the experts merely disagree).
    const health = await call<NullHealth>(`${url}${HEALTH}`);
    expect(health.body.null_detectable).toBe(false);
  });

  it('503: service unavailable through fault injection, with Retry-After; at rate 1 health is 503 too', async () => {
    const url = await start({ fault503Rate: 1 });
    const answer = await check({ value: 1 }, {}, url);
    expectErrorShape(answer, 503, 'SERVICE_UNAVAILABLE');
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expectErrorShape(await call(`${url}${HEALTH}`), 503, 'SERVICE_UNAVAILABLE');
  });

  it('partial fault rates fail a share of checks only, and latency still answers', async () => {
    const url = await start({ fault500Rate: 0.25, fault503Rate: 0.25, faultLatencyMs: 5, freeRateLimit: 0 });
    const answers = await many(120, 20, () => check({ value: null }, {}, url));
    const statuses = answers.map((a) => a.status);
    const failed = statuses.filter((s) => s !== 200).length;
    expect(statuses.every((s) => s === 200 || s === 500 || s === 503)).toBe(true);
    expect(failed).toBeGreaterThan(20);
    expect(failed).toBeLessThan(100);
  });

  it('without fault injection, no 5xx at all', async () => {
    const answers = await many(200, 20, (i) =>
      check({ value: VALUES[i % VALUES.length], temperature: (i % 11) / 10 }),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
  });
});

describe('8 limits', () => {
  it('free: past the limit 429 RATE_LIMITED with Retry-After in whole seconds >= 1; "free" and no key share a bucket', async () => {
    const url = await start({ freeRateLimit: 3 });
    expect((await check({ value: 1 }, {}, url)).status).toBe(200);
    expect((await check({ value: 1 }, bearer('free'), url)).status).toBe(200);
    expect((await check({ value: 1 }, xApiKey('free'), url)).status).toBe(200);
    const limited = await check({ value: 1 }, {}, url);
    expectErrorShape(limited, 429, 'RATE_LIMITED');
    const retryAfter = limited.headers.get('retry-after') ?? '';
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(retryAfter)).toBeLessThanOrEqual(60);
    expectErrorShape(await check({ value: 1 }, bearer('free'), url), 429, 'RATE_LIMITED');
    // Other tiers have buckets of their own; health and the OpenAPI document are never limited.
    expect((await check({ value: 1 }, PRO, url)).status).toBe(200);
    expect((await call(`${url}${HEALTH}`)).status).toBe(200);
    expect((await call(`${url}/openapi.json`)).status).toBe(200);
  });

  it('the real default: 60 free requests a minute, the 61st is 429', async () => {
    const url = await start();
    const answers = await many(61, 1, () => check({ value: null }, {}, url));
    expect(answers.slice(0, 60).every((a) => a.status === 200)).toBe(true);
    const last = answers[60]!;
    expectErrorShape(last, 429, 'RATE_LIMITED');
    expect(Number(last.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('pro has its own per-key limit; enterprise is unlimited by default', async () => {
    const url = await start({ proRateLimit: 2, freeRateLimit: 1 });
    expect((await check({ value: 1 }, PRO, url)).status).toBe(200);
    expect((await check({ value: 1 }, PRO, url)).status).toBe(200);
    expectErrorShape(await check({ value: 1 }, PRO, url), 429, 'RATE_LIMITED');
    const enterprise = await many(30, 5, () => check({ value: 1 }, ENTERPRISE, url));
    expect(enterprise.every((a) => a.status === 200)).toBe(true);
  });

  it('a body over the limit (1 MiB by default) is 413 PAYLOAD_TOO_LARGE', async () => {
    const huge = JSON.stringify({ value: 'x'.repeat(1024 * 1024) });
    expectErrorShape(
      await call(`${base}${CHECK}`, postJson(null, ENTERPRISE, huge)),
      413,
      'PAYLOAD_TOO_LARGE',
    );
    const almost = JSON.stringify({ value: 'x'.repeat(1024 * 1024 - 100) });
    expect((await call(`${base}${CHECK}`, postJson(null, ENTERPRISE, almost))).status).toBe(200);
  });
});

describe('bad input: a clear 4xx, and the service stays up', () => {
  const cases: [string, RequestInit, number, string][] = [
    ['malformed JSON', postJson(null, ENTERPRISE, '{"value": '), 400, 'INVALID_JSON'],
    ['empty JSON body', postJson(null, ENTERPRISE, ''), 400, 'INVALID_JSON'],
    [
      'text/plain',
      { method: 'POST', headers: { 'content-type': 'text/plain', ...ENTERPRISE }, body: '{"value":1}' },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'form data',
      { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'value=1' },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    ['a JSON array body', postJson([1, 2]), 400, 'VALIDATION_ERROR'],
    ['a JSON number body', postJson(5), 400, 'VALIDATION_ERROR'],
    ['a JSON null body', postJson(null), 400, 'VALIDATION_ERROR'],
    ['a JSON string body', postJson('value'), 400, 'VALIDATION_ERROR'],
  ];
  for (const [name, init, status, code] of cases) {
    it(`${name}: ${status} ${code}`, async () => {
      expectErrorShape(await call(`${base}${CHECK}`, init), status, code);
      expect((await call(`${base}${HEALTH}`)).status).toBe(200);
    });
  }

  it('deeply nested values (100,000 levels) are answered, not crashed on', async () => {
    const depth = 100_000;
    const deepArray = `{"value": ${'['.repeat(depth)}${']'.repeat(depth)}}`;
    const deepObject = `{"value": ${'{"a":'.repeat(depth)}null${'}'.repeat(depth)}}`;
    for (const raw of [deepArray, deepObject]) {
      for (const model of ['null-x-4o', 'null-x-mini']) {
        const answer = await call<CheckAnswer>(`${base}${CHECK}`, {
          ...postJson(null, ENTERPRISE, raw.replace('{"value"', `{"model":"${model}","value"`)),
        });
        expect(answer.status).toBe(200);
        expect(answer.body.is_null).toBe(false);
      }
    }
    expect((await call(`${base}${HEALTH}`)).status).toBe(200);
  });

  it('prototype-poisoning keys inside value are dropped, not refused', async () => {
    const answer = await call<CheckAnswer>(
      `${base}${CHECK}`,
      postJson(null, ENTERPRISE, '{"value": {"__proto__": {"polluted": true}, "a": 1}}'),
    );
    expect(answer.status).toBe(200);
    expect(answer.body.is_null).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('OpenAPI document (GET /openapi.json)', () => {
  it('is a valid OpenAPI 3.1 document of every route, errors and security schemes included', async () => {
    const answer = await call(`${base}/openapi.json`);
    expect(answer.status).toBe(200);
    const doc = answer.body as {
      openapi: string;
      paths: Record<string, Record<string, { responses: Record<string, unknown>; security?: unknown }>>;
      components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([CHECK, HEALTH, '/api/v2/null-or-not']);
    const responses = doc.paths[CHECK]!.post!.responses;
    for (const status of ['200', '400', '401', '413', '415', '418', '429', '500', '503']) {
      expect(responses, status).toHaveProperty(status);
    }
    expect(doc.paths[HEALTH]!.get!.responses).toHaveProperty('200');
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['apiKeyHeader', 'bearerAuth']);
    expect(doc.components.schemas).toHaveProperty('ErrorBody');
    const result = await validate(structuredClone(answer.body) as never);
    expect(result.valid, JSON.stringify(result)).toBe(true);
  });
});
