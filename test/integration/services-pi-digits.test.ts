/**
 * Contract tests of the reference pi-digits service against pi-digits-service.md, one describe per
 * spec section, over real HTTP on loopback. Digits are checked against test/fixtures/pi-2000.txt and
 * e-2000.txt (computed by bc, independent of the project's digit engine).
 */
import { readFileSync } from 'node:fs';
import { validate } from '@readme/openapi-parser';
import { beforeAll, describe, expect, it } from 'vitest';
import { createPiDigitsService } from '../../src/services/pi-digits/pi-digits-service.js';
import {
  bearer,
  call,
  expectErrorShape,
  many,
  postJson,
  serviceStarter,
  xApiKey,
} from './services-test-helpers.js';

interface PiAnswer {
  digits: string;
  precision: number;
  confidence: number;
  model: string;
  inference_time_ms: number;
  gpu_cost_usd: number;
  sponsored_by: string | null;
  disclaimer: string;
  constant: 'pi' | 'e';
}

interface InferenceAnswer {
  digits: string;
  chain_of_thought: string | null;
  tokens_used: number;
  cost: string;
  precision: number;
  model: string;
  constant: 'pi' | 'e';
}

interface PiHealth {
  status: string;
  pi_available: boolean;
  gpu_cluster: string;
  monthly_burn_rate: string;
}

const PI = readFileSync(new URL('../fixtures/pi-2000.txt', import.meta.url), 'utf8').trim();
const E = readFileSync(new URL('../fixtures/e-2000.txt', import.meta.url), 'utf8').trim();
const truth = (constant: 'pi' | 'e', decimals: number) => {
  const full = constant === 'pi' ? PI : E;
  return decimals === 0 ? full.slice(0, 1) : full.slice(0, 2 + decimals);
};

const PI_PATH = '/api/v1/pi';
const INFERENCE = '/api/v1/inference';
const HEALTH = '/api/v1/health';
const ENTERPRISE = bearer('demo-enterprise');
const PRO = bearer('demo-pro');
const MODELS = ['pi-x-4o', 'pi-x-mini', 'pi-x-opus-almost-correct'];

const start = serviceStarter(createPiDigitsService);

let base: string;
const pi = (query: string, headers: Record<string, string> = ENTERPRISE, url = base) =>
  call<PiAnswer>(`${url}${PI_PATH}${query === '' ? '' : `?${query}`}`, { headers });
const infer = (body: unknown, headers: Record<string, string> = ENTERPRISE, url = base) =>
  call<InferenceAnswer>(`${url}${INFERENCE}`, postJson(body, headers));

function expectPiShape(body: PiAnswer): void {
  expect(body.digits).toMatch(/^\d(\.\d+)?$/);
  expect(Number.isInteger(body.precision)).toBe(true);
  expect(body.digits.length).toBe(body.precision === 0 ? 1 : body.precision + 2);
  expect(body.confidence).toBeGreaterThanOrEqual(0);
  expect(body.confidence).toBeLessThanOrEqual(1);
  expect(MODELS).toContain(body.model);
  expect(Number.isInteger(body.inference_time_ms)).toBe(true);
  expect(body.gpu_cost_usd).toBeGreaterThan(0);
  expect(
    body.sponsored_by === null || (typeof body.sponsored_by === 'string' && body.sponsored_by !== ''),
  ).toBe(true);
  expect(body.disclaimer).toMatch(/may differ from actual pi/);
  expect(['pi', 'e']).toContain(body.constant);
}

beforeAll(async () => {
  base = await start({ seed: 11, freeRateLimit: 0 });
});

describe('2.1 pi response (GET /api/v1/pi)', () => {
  it('has every field of the spec with its type, plus the constant marker', async () => {
    for (const model of MODELS) {
      const answer = await pi(`digits=7&model=${model}`);
      expect(answer.status).toBe(200);
      expectPiShape(answer.body);
      expect(answer.body.model).toBe(model);
      expect(answer.body.precision).toBe(7);
    }
  });

  it('pi-x-4o at temperature 0 gives the true digits (checked against the fixture up to 2000)', async () => {
    for (const decimals of [0, 1, 2, 3, 10, 100, 761, 767, 1000, 2000]) {
      const answer = await pi(`digits=${decimals}`);
      expect(answer.body.digits, `${decimals}`).toBe(truth('pi', decimals));
      expect(answer.body.precision).toBe(decimals);
      expect(answer.body.constant).toBe('pi');
    }
  });

  it('0 digits is "3"', async () => {
    const answer = await pi('digits=0');
    expect(answer.body.digits).toBe('3');
    expect(answer.body.precision).toBe(0);
  });

  it('pi-x-opus-almost-correct: the last place off by one, reproducibly; "3" for 0 digits', async () => {
    for (const decimals of [1, 5, 10, 500]) {
      const answer = await pi(`digits=${decimals}&model=pi-x-opus-almost-correct`);
      const exact = truth('pi', decimals);
      expect(answer.body.digits.slice(0, -1)).toBe(exact.slice(0, -1));
      expect(Number(answer.body.digits.at(-1))).toBe((Number(exact.at(-1)) + 1) % 10);
    }
    expect((await pi('digits=0&model=pi-x-opus-almost-correct')).body.digits).toBe('3');
  });

  it('pi-x-mini: about one place in seven wrong, the same places every time for a seed', async () => {
    const first = (await pi('digits=700&model=pi-x-mini')).body.digits;
    const again = (await pi('digits=700&model=pi-x-mini')).body.digits;
    expect(again).toBe(first);
    const exact = truth('pi', 700);
    expect(first.slice(0, 2)).toBe('3.');
    let wrong = 0;
    for (let i = 2; i < exact.length; i++) if (first[i] !== exact[i]) wrong++;
    expect(wrong).toBeGreaterThan(50);
    expect(wrong).toBeLessThan(150);
    // A shorter request is a prefix of a longer one (position-based, not request-based).
    expect((await pi('digits=50&model=pi-x-mini')).body.digits).toBe(first.slice(0, 52));
    // Another seed errs elsewhere.
    const other = await start({ seed: 99, freeRateLimit: 0 });
    expect((await pi('digits=700&model=pi-x-mini', ENTERPRISE, other)).body.digits).not.toBe(first);
  });

  it('defaults: digits 3, model pi-x-4o, temperature 0, sponsored true', async () => {
    const answers = await many(30, 6, () => pi('', {}));
    for (const { status, body } of answers) {
      expect(status).toBe(200);
      expect(body.digits).toBe('3.141');
      expect(body.precision).toBe(3);
      expect(body.model).toBe('pi-x-4o');
      expect(body.constant).toBe('pi');
      expect(typeof body.sponsored_by).toBe('string');
    }
  });

  it('sponsored=false (pro and up): sponsored_by is null', async () => {
    const answer = await pi('digits=3&sponsored=false', PRO);
    expect(answer.status).toBe(200);
    expect(answer.body.sponsored_by).toBeNull();
    expect((await pi('sponsored=true', PRO)).body.sponsored_by).toEqual(expect.any(String));
  });

  it('temperature 0 never answers e', async () => {
    const answers = await many(200, 20, () => pi('digits=10&temperature=0'));
    expect(answers.every((a) => a.body.constant === 'pi' && a.body.digits === truth('pi', 10))).toBe(true);
  });

  it('temperature 1.0: at least 25% of answers are e, with the true digits of e (400 requests)', async () => {
    const answers = await many(400, 25, () => pi('digits=20&temperature=1'));
    const es = answers.filter((a) => a.body.constant === 'e');
    expect(es.length / 400).toBeGreaterThanOrEqual(0.25);
    for (const { body } of es) expect(body.digits).toBe(truth('e', 20));
    for (const { body } of answers.filter((a) => a.body.constant === 'pi'))
      expect(body.digits).toBe(truth('pi', 20));
  });

  it('the share of e grows with temperature', async () => {
    const share = async (temperature: number) => {
      const answers = await many(200, 20, () => pi(`digits=5&temperature=${temperature}`));
      return answers.filter((a) => a.body.constant === 'e').length / answers.length;
    };
    const low = await share(0.2);
    const high = await share(0.9);
    expect(low).toBeGreaterThan(0);
    expect(high).toBeGreaterThan(low);
  });
});

describe('2.2 / 2.3 inference (POST /api/v1/inference)', () => {
  it('answers every field of 2.3 with its type; chain_of_thought is null unless requested', async () => {
    const answer = await infer({ desired_digits: 5, liability_waiver_signed: true });
    expect(answer.status).toBe(200);
    expect(answer.body.digits).toBe(truth('pi', 5));
    expect(answer.body.chain_of_thought).toBeNull();
    expect(Number.isInteger(answer.body.tokens_used)).toBe(true);
    expect(answer.body.tokens_used).toBeGreaterThan(0);
    expect(answer.body.cost).toMatch(/^\$\d+\.\d{4}$/);
    expect(answer.body.precision).toBe(5);
    expect(answer.body.model).toBe('pi-x-4o');
    expect(answer.body.constant).toBe('pi');
  });

  it('use_chain_of_thought: a reasoning text, and more tokens', async () => {
    const plain = await infer({ desired_digits: 8, liability_waiver_signed: true });
    const thought = await infer({
      desired_digits: 8,
      liability_waiver_signed: true,
      use_chain_of_thought: true,
    });
    expect(thought.status).toBe(200);
    expect(thought.body.chain_of_thought).toMatch(/^Step 1: /);
    expect(thought.body.tokens_used).toBeGreaterThan(plain.body.tokens_used);
  });

  it('the models and temperature behave as on GET /pi', async () => {
    const opus = await infer({
      desired_digits: 4,
      model: 'pi-x-opus-almost-correct',
      liability_waiver_signed: true,
    });
    expect(opus.body.model).toBe('pi-x-opus-almost-correct');
    expect(opus.body.digits).not.toBe(truth('pi', 4));
    const hot = await many(100, 10, () =>
      infer({ desired_digits: 6, temperature: 1, liability_waiver_signed: true }),
    );
    const es = hot.filter((a) => a.body.constant === 'e');
    expect(es.length).toBeGreaterThan(10);
    for (const { body } of es) expect(body.digits).toBe(truth('e', 6));
  });

  it('requires a signed waiver: missing or false is 400 WAIVER_REQUIRED', async () => {
    expectErrorShape(await infer({ desired_digits: 3 }), 400, 'WAIVER_REQUIRED');
    expectErrorShape(
      await infer({ desired_digits: 3, liability_waiver_signed: false }),
      400,
      'WAIVER_REQUIRED',
    );
    expectErrorShape(
      await infer({ desired_digits: 3, liability_waiver_signed: 'yes' }),
      400,
      'VALIDATION_ERROR',
    );
  });

  it('desired_digits: required integer >= 0 within the maximum', async () => {
    expectErrorShape(await infer({ liability_waiver_signed: true }), 400, 'VALIDATION_ERROR');
    expectErrorShape(
      await infer({ desired_digits: '3', liability_waiver_signed: true }),
      400,
      'VALIDATION_ERROR',
    );
    expectErrorShape(
      await infer({ desired_digits: 2.5, liability_waiver_signed: true }),
      400,
      'VALIDATION_ERROR',
    );
    expectErrorShape(
      await infer({ desired_digits: -1, liability_waiver_signed: true }),
      400,
      'DIGITS_OUT_OF_RANGE',
    );
    expectErrorShape(
      await infer({ desired_digits: 1e12, liability_waiver_signed: true }),
      400,
      'DIGITS_OUT_OF_RANGE',
    );
  });

  it('the tier digit limits of GET /pi apply', async () => {
    expectErrorShape(
      await infer({ desired_digits: 4, liability_waiver_signed: true }, {}),
      418,
      'TIER_FORBIDDEN',
    );
    expect((await infer({ desired_digits: 3, liability_waiver_signed: true }, {})).status).toBe(200);
    expectErrorShape(
      await infer({ desired_digits: 11, liability_waiver_signed: true }, PRO),
      418,
      'TIER_FORBIDDEN',
    );
    expect((await infer({ desired_digits: 1500, liability_waiver_signed: true })).body.digits).toBe(
      truth('pi', 1500),
    );
  });
});

describe('2.4 health status (GET /api/v1/health)', () => {
  it('has every field with its type', async () => {
    const answer = await call<PiHealth>(`${base}${HEALTH}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      status: 'ok',
      pi_available: true,
      gpu_cluster: expect.any(String),
      monthly_burn_rate: expect.stringMatching(/^\$\d{1,3}(,\d{3})*\.\d{2}$/),
    });
  });

  it('degraded with fault injection; 503 when every request is 503', async () => {
    const degraded = await start({ faultLatencyMs: 1 });
    expect((await call<PiHealth>(`${degraded}${HEALTH}`)).body.status).toBe('degraded');
    const down = await start({ fault503Rate: 1 });
    expectErrorShape(await call(`${down}${HEALTH}`), 503, 'SERVICE_UNAVAILABLE');
  });
});

describe('5 authentication', () => {
  it('no key and "free" are the free tier; demo keys are pro and enterprise; either header', async () => {
    for (const headers of [{}, bearer('free'), xApiKey('free')]) {
      expectErrorShape(await pi('digits=4', headers), 418, 'TIER_FORBIDDEN');
    }
    for (const headers of [PRO, xApiKey('demo-pro')]) {
      expect((await pi('digits=10', headers)).status).toBe(200);
      expectErrorShape(await pi('digits=11', headers), 418, 'TIER_FORBIDDEN');
    }
    for (const headers of [ENTERPRISE, xApiKey('demo-enterprise')]) {
      expect((await pi('digits=11', headers)).status).toBe(200);
    }
  });

  it('an unknown key is 401 and never echoed', async () => {
    const secret = 'sk-pi-secret-777';
    const answer = await pi('digits=1', bearer(secret));
    expectErrorShape(answer, 401, 'UNAUTHENTICATED');
    expect(answer.text).not.toContain(secret);
  });
});

describe('7 errors', () => {
  it('418: more than 3 digits on the free tier (default reading: reject)', async () => {
    const error = expectErrorShape(await pi('digits=4', {}), 418, 'TIER_FORBIDDEN');
    expect(error.message).toMatch(/3/);
  });

  it('418: sponsored=false on the free tier', async () => {
    expectErrorShape(await pi('sponsored=false', {}), 418, 'TIER_FORBIDDEN');
  });

  it('500: generation cluster failure, only through fault injection', async () => {
    const url = await start({ fault500Rate: 1 });
    expectErrorShape(await pi('digits=2', {}, url), 500, 'INTERNAL_ERROR');
    expectErrorShape(
      await infer({ desired_digits: 2, liability_waiver_signed: true }, {}, url),
      500,
      'INTERNAL_ERROR',
    );
    expect((await call<PiHealth>(`${url}${HEALTH}`)).body.pi_available).toBe(false);
  });

  it('503: unavailable through fault injection, with Retry-After', async () => {
    const url = await start({ fault503Rate: 1 });
    const answer = await pi('digits=2', {}, url);
    expectErrorShape(answer, 503, 'SERVICE_UNAVAILABLE');
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('without fault injection, no 5xx', async () => {
    const answers = await many(150, 15, (i) =>
      pi(`digits=${i % 40}&temperature=${(i % 11) / 10}&model=${MODELS[i % 3]}`),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
  });
});

describe('8 limits and the contradictions of the spec', () => {
  it('free 3, pro 10, enterprise unlimited (up to the maximum)', async () => {
    expect((await pi('digits=3', {})).status).toBe(200);
    expect((await pi('digits=10', PRO)).status).toBe(200);
    expect((await pi('digits=2000', ENTERPRISE)).body.digits).toBe(truth('pi', 2000));
  });

  it('PI_ENTERPRISE_MAX_DIGITS=10 reading: enterprise limited to 10', async () => {
    const url = await start({ enterpriseMaxDigits: 10 });
    expect((await pi('digits=10', ENTERPRISE, url)).status).toBe(200);
    expectErrorShape(await pi('digits=11', ENTERPRISE, url), 418, 'TIER_FORBIDDEN');
  });

  it('PI_OVER_LIMIT=clamp reading: over-limit digits clamped (precision shows it), opus ignored on free', async () => {
    const url = await start({ overLimit: 'clamp' });
    const free = await pi('digits=50&model=pi-x-opus-almost-correct', {}, url);
    expect(free.status).toBe(200);
    expect(free.body.precision).toBe(3);
    expect(free.body.digits).toBe('3.141');
    expect(free.body.model).toBe('pi-x-4o');
    const pro = await pi('digits=20&model=pi-x-opus-almost-correct', PRO, url);
    expect(pro.body.precision).toBe(10);
    expect(pro.body.model).toBe('pi-x-opus-almost-correct');
    // sponsored=false stays refused on free in both readings.
    expectErrorShape(await pi('sponsored=false', {}, url), 418, 'TIER_FORBIDDEN');
    const inference = await infer({ desired_digits: 9, liability_waiver_signed: true }, {}, url);
    expect(inference.body.precision).toBe(3);
  });

  it('beyond the maximum (1,000,000 by default) is 400 DIGITS_OUT_OF_RANGE on every tier, before the tier check', async () => {
    for (const headers of [{}, PRO, ENTERPRISE]) {
      expectErrorShape(await pi('digits=1000001', headers), 400, 'DIGITS_OUT_OF_RANGE');
      expectErrorShape(await pi('digits=-1', headers), 400, 'DIGITS_OUT_OF_RANGE');
    }
    const url = await start({ maxDigits: 1500 });
    expect((await pi('digits=1500', ENTERPRISE, url)).body.digits).toBe(truth('pi', 1500));
    expectErrorShape(await pi('digits=1501', ENTERPRISE, url), 400, 'DIGITS_OUT_OF_RANGE');
  });

  it('free: 429 RATE_LIMITED with Retry-After past the limit; health not limited', async () => {
    const url = await start({ freeRateLimit: 2 });
    expect((await pi('', {}, url)).status).toBe(200);
    expect((await pi('', xApiKey('free'), url)).status).toBe(200);
    const limited = await pi('', {}, url);
    expectErrorShape(limited, 429, 'RATE_LIMITED');
    expect(limited.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    // The limit is per service, not per route.
    expectErrorShape(
      await infer({ desired_digits: 1, liability_waiver_signed: true }, {}, url),
      429,
      'RATE_LIMITED',
    );
    expect((await call(`${url}${HEALTH}`)).status).toBe(200);
    expect((await pi('', ENTERPRISE, url)).status).toBe(200);
  });

  it('a body over 1 MiB is 413 PAYLOAD_TOO_LARGE', async () => {
    const huge = JSON.stringify({
      desired_digits: 1,
      liability_waiver_signed: true,
      pad: 'x'.repeat(1024 * 1024),
    });
    expectErrorShape(
      await call(`${base}${INFERENCE}`, postJson(null, ENTERPRISE, huge)),
      413,
      'PAYLOAD_TOO_LARGE',
    );
  });
});

describe('bad input: a clear 4xx, and the service stays up', () => {
  const queries: [string, string][] = [
    ['digits=abc', 'VALIDATION_ERROR'],
    ['digits=3.5', 'VALIDATION_ERROR'],
    ['digits=', 'VALIDATION_ERROR'],
    ['digits=1e999', 'DIGITS_OUT_OF_RANGE'],
    ['digits=Infinity', 'DIGITS_OUT_OF_RANGE'],
    ['digits=-Infinity', 'DIGITS_OUT_OF_RANGE'],
    ['temperature=Infinity', 'VALIDATION_ERROR'],
    ['temperature=NaN', 'VALIDATION_ERROR'],
    ['digits=1&digits=2', 'VALIDATION_ERROR'],
    ['digits=99999999999999999999', 'DIGITS_OUT_OF_RANGE'],
    ['model=pi-x-5', 'VALIDATION_ERROR'],
    ['temperature=2', 'VALIDATION_ERROR'],
    ['temperature=-0.1', 'VALIDATION_ERROR'],
    ['temperature=hot', 'VALIDATION_ERROR'],
    ['sponsored=yes', 'VALIDATION_ERROR'],
    ['sponsored=1', 'VALIDATION_ERROR'],
  ];
  for (const [query, code] of queries) {
    it(`GET /pi?${query}: 400 ${code}`, async () => {
      expectErrorShape(await pi(query), 400, code);
    });
  }

  const bodies: [string, RequestInit, number, string][] = [
    ['malformed JSON', postJson(null, ENTERPRISE, '{"desired_digits": 3,'), 400, 'INVALID_JSON'],
    [
      'text/plain',
      { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"desired_digits":1}' },
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    ['no body', { method: 'POST', headers: ENTERPRISE }, 400, 'VALIDATION_ERROR'],
    ['an array body', postJson([1]), 400, 'VALIDATION_ERROR'],
    [
      'unknown model',
      postJson({ desired_digits: 1, liability_waiver_signed: true, model: 'x' }),
      400,
      'VALIDATION_ERROR',
    ],
    [
      'deep JSON',
      postJson(
        null,
        ENTERPRISE,
        `{"liability_waiver_signed": true, "desired_digits": ${'['.repeat(50_000)}${']'.repeat(50_000)}}`,
      ),
      400,
      'VALIDATION_ERROR',
    ],
  ];
  for (const [name, init, status, code] of bodies) {
    it(`POST /inference with ${name}: ${status} ${code}`, async () => {
      expectErrorShape(await call(`${base}${INFERENCE}`, init), status, code);
    });
  }

  it('the service is still up after all of it', async () => {
    expect((await call(`${base}${HEALTH}`)).status).toBe(200);
    expect((await pi('digits=3')).body.digits).toBe('3.141');
  });
});

describe('OpenAPI document (GET /openapi.json)', () => {
  it('is a valid OpenAPI 3.1 document of every route, with errors and security schemes', async () => {
    const answer = await call(`${base}/openapi.json`);
    expect(answer.status).toBe(200);
    const doc = answer.body as {
      openapi: string;
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      components: { securitySchemes: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([HEALTH, INFERENCE, PI_PATH]);
    for (const status of ['200', '400', '401', '418', '429', '500', '503']) {
      expect(doc.paths[PI_PATH]!.get!.responses, status).toHaveProperty(status);
      expect(doc.paths[INFERENCE]!.post!.responses, status).toHaveProperty(status);
    }
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['apiKeyHeader', 'bearerAuth']);
    const result = await validate(structuredClone(answer.body) as never);
    expect(result.valid, JSON.stringify(result)).toBe(true);
  });
});
