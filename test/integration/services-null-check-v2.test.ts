/**
 * POST /api/v2/null-or-not (src/services/README.md, Null-check service; docs/contract.md, Upstream
 * versions): every rule of POST /api/v1/check, run over both paths; every v1 field plus
 * `philosophical_analysis`, its types, its determinism for a seed and its variation with model and
 * temperature; the OpenAPI document; and one rate-limit bucket per caller across v1 and v2. Real HTTP on
 * loopback.
 */
import { validate } from '@readme/openapi-parser';
import { beforeAll, describe, expect, it } from 'vitest';
import { createNullCheckService } from '../../src/services/null-check/null-check-service.js';
import { MUSINGS } from '../../src/services/null-check/null-models.js';
import {
  type PhilosophicalAnalysis,
  REFERENCES,
  SCHOOLS,
  VERDICT_STABILITIES,
} from '../../src/services/null-check/philosophical-analysis.js';
import {
  bearer,
  type CheckAnswer,
  call,
  checkKind,
  expectErrorShape,
  many,
  postJson,
  serviceStarter,
} from './services-test-helpers.js';

/** A check answer, with the analysis v2 adds. */
interface V2Answer extends CheckAnswer {
  philosophical_analysis?: PhilosophicalAnalysis;
}

const V1 = '/api/v1/check';
const V2 = '/api/v2/null-or-not';
const ENTERPRISE = bearer('demo-enterprise');
const PRO = bearer('demo-pro');
const MODELS = ['null-x-4o', 'null-x-mini', 'null-x-opus'] as const;
const V1_FIELDS = [
  'is_null',
  'confidence',
  'inference_time_ms',
  'gpu_cost_usd',
  'model',
  'experts_consulted',
  'sponsored_by',
  'disclaimer',
];

const start = serviceStarter(createNullCheckService);

let base: string;
beforeAll(async () => {
  base = await start({ seed: 5, freeRateLimit: 0 });
});

const post = (path: string, body: unknown, headers: Record<string, string> = ENTERPRISE, url = base) =>
  call<V2Answer>(`${url}${path}`, postJson(body, headers));

function expectAnalysisShape(analysis: PhilosophicalAnalysis | undefined): PhilosophicalAnalysis {
  expect(analysis).toBeDefined();
  const a = analysis as PhilosophicalAnalysis;
  expect(Object.keys(a).sort()).toEqual(
    ['argument', 'certainty', 'depth', 'references', 'school', 'verdict_stability'].sort(),
  );
  expect(SCHOOLS).toContain(a.school);
  expect(typeof a.certainty).toBe('number');
  expect(a.certainty).toBeGreaterThanOrEqual(0);
  expect(a.certainty).toBeLessThanOrEqual(1);
  expect(typeof a.argument).toBe('string');
  expect(a.argument.length).toBeGreaterThan(10);
  expect(Array.isArray(a.references)).toBe(true);
  expect(a.references.length).toBeGreaterThanOrEqual(1);
  expect(new Set(a.references).size).toBe(a.references.length);
  for (const reference of a.references) expect(REFERENCES).toContain(reference);
  expect(VERDICT_STABILITIES).toContain(a.verdict_stability);
  expect(Number.isInteger(a.depth)).toBe(true);
  expect(a.depth).toBeGreaterThanOrEqual(1);
  expect(a.depth).toBeLessThanOrEqual(7);
  return a;
}

describe.each([
  ['v1', V1],
  ['v2', V2],
])('every rule of the check, over %s (%s)', (version, path) => {
  const check = (body: unknown, headers?: Record<string, string>, url?: string) =>
    post(path, body, headers, url);

  it('defaults: model null-x-4o, temperature 0 (always a boolean), strict_mode false', async () => {
    const answers = await many(20, 5, () => check({ value: 'x' }, {}));
    for (const { status, body } of answers) {
      expect(status).toBe(200);
      expect(body.model).toBe('null-x-4o');
      expect(body.is_null).toBe(false);
    }
  });

  it('every field of the v1 answer, with its type; v2 adds only philosophical_analysis', async () => {
    for (const model of MODELS) {
      const { status, body } = await check({ value: null, model });
      expect(status).toBe(200);
      expect(body.model).toBe(model);
      expect(typeof body.is_null).toBe('boolean');
      expect(body.confidence).toBeGreaterThanOrEqual(0);
      expect(body.confidence).toBeLessThanOrEqual(1);
      expect(Number.isInteger(body.inference_time_ms)).toBe(true);
      expect(body.gpu_cost_usd).toBeGreaterThan(0);
      expect(Number.isInteger(body.experts_consulted)).toBe(true);
      expect(body.sponsored_by.length).toBeGreaterThan(0);
      expect(body.disclaimer).toMatch(/strict equality/);
      const expected = version === 'v2' ? [...V1_FIELDS, 'philosophical_analysis'] : V1_FIELDS;
      expect(Object.keys(body).sort()).toEqual([...expected].sort());
    }
  });

  it('absent value (or no body) is 400 UNDEFINED_VALUE; explicit null is null', async () => {
    expectErrorShape(await check({}), 400, 'UNDEFINED_VALUE');
    expectErrorShape(await check({ model: 'null-x-opus', temperature: 1 }), 400, 'UNDEFINED_VALUE');
    expectErrorShape(await call(`${base}${path}`, { method: 'POST' }), 400, 'UNDEFINED_VALUE');
    expect((await check({ value: null })).body.is_null).toBe(true);
  });

  it('validation, JSON and media-type errors', async () => {
    for (const body of [
      { value: 1, model: 'null-x-5' },
      { value: 1, temperature: 1.01 },
      { value: 1, temperature: '0.5' },
      { value: 1, strict_mode: 'true' },
    ]) {
      expectErrorShape(await check(body), 400, 'VALIDATION_ERROR');
    }
    expectErrorShape(
      await call(`${base}${path}`, postJson(null, ENTERPRISE, '{"value": ')),
      400,
      'INVALID_JSON',
    );
    expectErrorShape(await call(`${base}${path}`, postJson([1])), 400, 'VALIDATION_ERROR');
    expectErrorShape(
      await call(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    const huge = JSON.stringify({ value: 'x'.repeat(1024 * 1024) });
    expectErrorShape(
      await call(`${base}${path}`, postJson(null, ENTERPRISE, huge)),
      413,
      'PAYLOAD_TOO_LARGE',
    );
  });

  it('null-x-4o and null-x-opus: strict equality at temperature 0; null-x-mini: loose, exact in strict mode', async () => {
    const values: unknown[] = [null, 0, '', 'null', false, [], {}, 1, 'x', [null], { a: null }];
    for (const value of values) {
      for (const model of ['null-x-4o', 'null-x-opus']) {
        expect((await check({ value, model })).body.is_null, `${model} ${JSON.stringify(value)}`).toBe(
          value === null,
        );
      }
      const loose = (await check({ value, model: 'null-x-mini' })).body.is_null;
      const looksEmpty =
        [null, 0, '', 'null', false].includes(value as never) || JSON.stringify(value).length === 2;
      expect(loose, `mini ${JSON.stringify(value)}`).toBe(looksEmpty);
      expect((await check({ value, model: 'null-x-mini', strict_mode: true })).body.is_null).toBe(
        value === null,
      );
    }
  });

  it('tiers: strict_mode is 418 for free and pro, allowed for enterprise (and pro with strictModePro); unknown key 401', async () => {
    expectErrorShape(await check({ value: 1, strict_mode: true }, {}), 418, 'TIER_FORBIDDEN');
    expectErrorShape(await check({ value: 1, strict_mode: true }, PRO), 418, 'TIER_FORBIDDEN');
    expect((await check({ value: 1, strict_mode: true }, ENTERPRISE)).status).toBe(200);
    const lenient = await start({ strictModePro: true });
    expect((await check({ value: 1, strict_mode: true }, PRO, lenient)).status).toBe(200);
    const secret = 'sk-never-echoed';
    const unknown = await check({ value: 1 }, bearer(secret));
    expectErrorShape(unknown, 401, 'UNAUTHENTICATED');
    expect(unknown.text).not.toContain(secret);
  });

  it('temperature: 0.5 gives "maybe" but never existential; 1.0 gives >= 60% non-boolean, >= 20% existential', async () => {
    const warm = (await many(200, 20, () => check({ value: null, temperature: 0.5 }))).map((a) =>
      checkKind(a.body),
    );
    expect(warm.filter((k) => k === 'maybe').length).toBeGreaterThan(20);
    expect(warm).not.toContain('existential');
    const hot = await many(400, 25, () => check({ value: null, temperature: 1 }));
    const kinds = hot.map((a) => checkKind(a.body));
    expect(kinds.filter((k) => k !== 'boolean').length / 400).toBeGreaterThanOrEqual(0.6);
    expect(kinds.filter((k) => k === 'existential').length / 400).toBeGreaterThanOrEqual(0.2);
    for (const { body } of hot.filter((a) => checkKind(a.body) === 'existential')) {
      expect(MUSINGS).toContain(body.is_null);
      expect(body.existential_dread).toBe(true);
    }
  });

  it('fault injection: 500 NULL_PARADOX and 503 with Retry-After; none without it', async () => {
    const paradox = await start({ fault500Rate: 1 });
    expectErrorShape(await check({ value: 1 }, {}, paradox), 500, 'NULL_PARADOX');
    const down = await start({ fault503Rate: 1 });
    const unavailable = await check({ value: 1 }, {}, down);
    expectErrorShape(unavailable, 503, 'SERVICE_UNAVAILABLE');
    expect(Number(unavailable.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const answers = await many(100, 10, (i) =>
      check({ value: i % 3 === 0 ? null : i, temperature: (i % 11) / 10 }),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
  });

  it('rate limits: free past its limit is 429 RATE_LIMITED with Retry-After; keys have their own buckets', async () => {
    const url = await start({ freeRateLimit: 2, proRateLimit: 1 });
    expect((await check({ value: 1 }, {}, url)).status).toBe(200);
    expect((await check({ value: 1 }, bearer('free'), url)).status).toBe(200);
    const limited = await check({ value: 1 }, {}, url);
    expectErrorShape(limited, 429, 'RATE_LIMITED');
    expect(limited.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect((await check({ value: 1 }, PRO, url)).status).toBe(200);
    expectErrorShape(await check({ value: 1 }, PRO, url), 429, 'RATE_LIMITED');
    expect((await check({ value: 1 }, ENTERPRISE, url)).status).toBe(200);
  });

  it('echoes x-request-id', async () => {
    const answer = await call(`${base}${path}`, postJson({ value: 1 }, { 'x-request-id': `id-${version}` }));
    expect(answer.headers.get('x-request-id')).toBe(`id-${version}`);
  });
});

describe('v2 answers exactly what v1 answers, plus the analysis', () => {
  it('with the same seed, the first answer of a fresh service has the same v1 fields over both paths', async () => {
    const bodies: unknown[] = [
      { value: null },
      { value: 0, model: 'null-x-mini' },
      { value: 'x', model: 'null-x-opus', temperature: 0.6 },
      { value: null, temperature: 1 },
      { value: [], model: 'null-x-mini', temperature: 0.9, strict_mode: true },
    ];
    for (const [i, body] of bodies.entries()) {
      const [v1Url, v2Url] = await Promise.all([start({ seed: 100 + i }), start({ seed: 100 + i })]);
      const v1 = await post(V1, body, ENTERPRISE, v1Url);
      const v2 = await post(V2, body, ENTERPRISE, v2Url);
      expect(v2.status).toBe(200);
      const { philosophical_analysis: analysis, ...v1Fields } = v2.body;
      expect(v1Fields, JSON.stringify(body)).toEqual(v1.body);
      expectAnalysisShape(analysis);
    }
  });
});

describe('philosophical_analysis', () => {
  const analyses = async (body: Record<string, unknown>, count: number, url = base) =>
    (await many(count, 10, () => post(V2, body, ENTERPRISE, url))).map((a) => ({
      kind: checkKind(a.body),
      analysis: expectAnalysisShape(a.body.philosophical_analysis),
    }));

  it('has its typed fields on every answer, for every model and temperature', async () => {
    for (const model of MODELS) {
      for (const temperature of [0, 0.3, 0.8, 1]) {
        const answers = await analyses({ value: 'x', model, temperature }, 10);
        expect(answers).toHaveLength(10);
      }
    }
  });

  it('a seed reproduces the analyses of a run; another seed gives others', async () => {
    const run = async (seed: number) => {
      const url = await start({ seed, freeRateLimit: 0 });
      const out: PhilosophicalAnalysis[] = [];
      for (let i = 0; i < 20; i++) {
        const { body } = await post(V2, { value: i % 2 ? null : i, temperature: (i % 5) / 4 }, {}, url);
        out.push(body.philosophical_analysis as PhilosophicalAnalysis);
      }
      return out;
    };
    const a = await run(77);
    expect(await run(77)).toEqual(a);
    expect(await run(78)).not.toEqual(a);
  });

  it('varies with the model: its school, references and depth at temperature 0', async () => {
    const by = async (model: string) => analyses({ value: null, model }, 12);
    const mini = await by('null-x-mini');
    const o4 = await by('null-x-4o');
    const opus = await by('null-x-opus');
    expect(new Set(mini.map((a) => a.analysis.school))).toEqual(new Set(['pragmatism']));
    expect(new Set(o4.map((a) => a.analysis.school))).toEqual(new Set(['analytic']));
    for (const { analysis } of opus) expect(['analytic', 'logical-positivism']).toContain(analysis.school);
    const refs = (list: typeof mini) => new Set(list.map((a) => a.analysis.references.length));
    expect(refs(mini)).toEqual(new Set([1]));
    expect(refs(o4)).toEqual(new Set([2]));
    expect(refs(opus)).toEqual(new Set([4]));
    const depths = (list: typeof mini) => new Set(list.map((a) => a.analysis.depth));
    expect(depths(mini)).toEqual(new Set([1]));
    expect(depths(o4)).toEqual(new Set([2]));
    expect(depths(opus)).toEqual(new Set([4]));
    const mean = (list: typeof mini) => list.reduce((sum, a) => sum + a.analysis.certainty, 0) / list.length;
    expect(mean(opus)).toBeGreaterThan(mean(mini));
    // Temperature 0: the verdict cannot change, and says so.
    for (const { analysis } of [...mini, ...o4, ...opus]) expect(analysis.verdict_stability).toBe('settled');
  });

  it('varies with the temperature: stability, depth, certainty, and the existential schools', async () => {
    const cold = await analyses({ value: 1, model: 'null-x-4o', temperature: 0 }, 40);
    const hot = await analyses({ value: 1, model: 'null-x-4o', temperature: 1 }, 200);
    expect(new Set(hot.map((a) => a.analysis.depth))).toEqual(new Set([5]));
    expect(new Set(hot.map((a) => a.analysis.references.length))).toEqual(new Set([3]));
    for (const { kind: k, analysis } of hot) {
      if (k === 'existential') {
        expect(['existentialism', 'nihilism', 'absurdism']).toContain(analysis.school);
        expect(analysis.verdict_stability).toBe('dissolved');
        expect(analysis.certainty).toBeLessThan(0.15);
      } else {
        expect(analysis.verdict_stability).toBe('wavering');
        expect(['existentialism', 'nihilism', 'absurdism']).not.toContain(analysis.school);
      }
    }
    expect(hot.some((a) => a.kind === 'existential')).toBe(true);
    const mean = (list: typeof cold) => list.reduce((sum, a) => sum + a.analysis.certainty, 0) / list.length;
    expect(mean(hot)).toBeLessThan(mean(cold));
    // The argument speaks about this verdict.
    for (const { kind: k, analysis } of [...cold, ...hot]) {
      if (k === 'boolean') expect(analysis.argument).toMatch(/is not null/);
      if (k === 'maybe') expect(analysis.argument).toMatch(/may or may not be null/);
    }
  });
});

describe('one rate-limit bucket per caller across v1 and v2', () => {
  for (const last of [V1, V2]) {
    it(`the default free limit (60 a minute) counts both paths: the 61st, over ${last}, is 429`, async () => {
      const url = await start();
      // 60 alternating requests, all granted ...
      const answers = await many(60, 1, (i) => post(i % 2 === 0 ? V1 : V2, { value: null }, {}, url));
      expect(answers.map((a) => a.status)).toEqual(new Array(60).fill(200));
      // ... and the next one is refused, whichever path it takes.
      const limited = await post(last, { value: null }, {}, url);
      expectErrorShape(limited, 429, 'RATE_LIMITED');
      expectErrorShape(await post(last === V1 ? V2 : V1, { value: null }, {}, url), 429, 'RATE_LIMITED');
    });
  }

  it('all of a caller’s limit spent on v2 leaves nothing for v1 (and other callers keep theirs)', async () => {
    const url = await start({ freeRateLimit: 3, proRateLimit: 3 });
    for (let i = 0; i < 3; i++) expect((await post(V2, { value: 1 }, {}, url)).status).toBe(200);
    expectErrorShape(await post(V1, { value: 1 }, {}, url), 429, 'RATE_LIMITED');
    for (let i = 0; i < 3; i++) expect((await post(V1, { value: 1 }, PRO, url)).status).toBe(200);
    expectErrorShape(await post(V2, { value: 1 }, PRO, url), 429, 'RATE_LIMITED');
  });
});

describe('OpenAPI document', () => {
  it('describes v2 fully: its operation, the analysis component with every field, and stays valid', async () => {
    const answer = await call(`${base}/openapi.json`);
    expect(answer.status).toBe(200);
    const doc = answer.body as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
      components: { schemas: Record<string, Record<string, unknown>> };
    };
    expect(Object.keys(doc.paths).sort()).toEqual(['/api/v1/check', '/api/v1/health', V2]);
    const operation = doc.paths[V2]?.post as {
      operationId: string;
      deprecated?: boolean;
      requestBody: { content: Record<string, { schema: { required: string[] } }> };
      responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }>;
    };
    expect(operation.operationId).toBe('nullOrNot');
    expect(operation.deprecated).toBeUndefined();
    expect(operation.requestBody.content['application/json']?.schema.required).toEqual(['value']);
    for (const status of ['200', '400', '401', '413', '415', '418', '429', '500', '503']) {
      expect(operation.responses, status).toHaveProperty(status);
    }
    const ok = operation.responses['200']?.content?.['application/json']?.schema as {
      required: string[];
      properties: Record<string, { $ref?: string }>;
    };
    expect([...ok.required].sort()).toEqual([...V1_FIELDS, 'philosophical_analysis'].sort());
    expect(ok.properties.philosophical_analysis?.$ref).toBe('#/components/schemas/PhilosophicalAnalysis');
    const analysis = doc.components.schemas.PhilosophicalAnalysis as {
      required: string[];
      properties: Record<string, { type: string; enum?: string[]; items?: { type: string } }>;
    };
    expect([...analysis.required].sort()).toEqual(
      ['argument', 'certainty', 'depth', 'references', 'school', 'verdict_stability'].sort(),
    );
    expect(analysis.properties.school).toMatchObject({ type: 'string', enum: [...SCHOOLS] });
    expect(analysis.properties.certainty).toMatchObject({ type: 'number', minimum: 0, maximum: 1 });
    expect(analysis.properties.argument).toMatchObject({ type: 'string' });
    expect(analysis.properties.references).toMatchObject({ type: 'array', items: { type: 'string' } });
    expect(analysis.properties.verdict_stability).toMatchObject({
      type: 'string',
      enum: [...VERDICT_STABILITIES],
    });
    expect(analysis.properties.depth).toMatchObject({ type: 'integer' });
    for (const field of Object.values(analysis.properties)) {
      expect((field as { description?: string }).description ?? '').not.toBe('');
    }
    const errorCodes = (
      doc.components.schemas.ErrorBody as {
        properties: { error: { properties: { code: { enum: string[] } } } };
      }
    ).properties.error.properties.code.enum;
    expect(errorCodes).toContain('ENDPOINT_RETIRED');
    const result = await validate(structuredClone(answer.body) as never);
    expect(result.valid, JSON.stringify(result)).toBe(true);
  });
});
