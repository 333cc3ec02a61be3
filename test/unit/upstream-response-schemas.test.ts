import { describe, expect, it } from 'vitest';
import {
  parseInferenceResponse,
  parseNullCheckResponse,
  parseNullCheckV2Response,
  parseNullHealth,
  parsePiFromInference,
  parsePiHealth,
  parsePiResponse,
  parseUsd,
  ResponseShapeError,
  readConstantMarker,
} from '../../src/gateway/upstream/response-schemas.js';
import { errorCodeOf, errorFromStatus, parseRetryAfter } from '../../src/gateway/upstream/status-mapping.js';
import { nullBody, nullMeta, piAnswer } from '../support/upstream-bodies.js';

describe('parseNullCheckResponse', () => {
  it('maps a boolean answer and its metadata to camelCase, keeping the raw body', () => {
    const body = { ...nullMeta, is_null: false, extra_field: { nested: true } };
    const result = parseNullCheckResponse(body);
    expect(result).toEqual({
      answer: { kind: 'boolean', isNull: false },
      confidence: 0.97,
      model: 'null-x-4o',
      inferenceTimeMs: 12,
      gpuCostUsd: 0.0021,
      expertsConsulted: 2,
      sponsoredBy: 'NullCorp',
      disclaimer: 'May differ from strict equality.',
      raw: body,
    });
    expect(result.raw).toBe(body);
  });

  it.each(['maybe', 'MAYBE', '  Maybe \n'])('reads %j as the maybe answer', (word) => {
    expect(parseNullCheckResponse({ ...nullMeta, is_null: word }).answer).toEqual({ kind: 'maybe' });
  });

  it('passes an unknown model string through', () => {
    expect(parseNullCheckResponse({ ...nullMeta, is_null: true, model: 'null-x-5-preview' }).model).toBe(
      'null-x-5-preview',
    );
  });

  it('treats absent sponsor and disclaimer as null', () => {
    const { sponsored_by: _s, disclaimer: _d, ...rest } = nullMeta;
    const result = parseNullCheckResponse({ ...rest, is_null: true, disclaimer: null });
    expect(result.sponsoredBy).toBeNull();
    expect(result.disclaimer).toBeNull();
  });

  it.each([
    [
      'a string musing',
      { is_null: 'What is null, if not the absence of meaning?' },
      'What is null, if not the absence of meaning?',
    ],
    [
      'an object with existential_dread',
      { is_null: { existential_dread: 'The void stares back.' } },
      'The void stares back.',
    ],
    ['null with a top-level musing', { is_null: null, musing: 'Nothing, or less.' }, 'Nothing, or less.'],
    ['missing is_null', { message: 'I cannot say.' }, 'I cannot say.'],
    ['an array', { is_null: [1, 2] }, null],
    ['a number', { is_null: 0.5 }, null],
  ])('reads %s as an existential answer', (_name, shape, musing) => {
    const body = { ...nullMeta, ...shape };
    const result = parseNullCheckResponse(body);
    expect(result.answer).toEqual({ kind: 'existential', musing });
    expect(result.raw).toBe(body);
    expect(result.confidence).toBe(nullMeta.confidence);
  });

  it("reads an existential answer's missing metadata as null and refuses wrong-typed metadata", () => {
    // Field by field, in every body: test/unit/upstream-response-bodies.test.ts.
    const body = { is_null: 'Who is asking?', sponsored_by: 'Acme' };
    expect(parseNullCheckResponse(body)).toMatchObject({
      answer: { kind: 'existential', musing: 'Who is asking?' },
      confidence: null,
      model: null,
      inferenceTimeMs: null,
      gpuCostUsd: null,
      expertsConsulted: null,
      sponsoredBy: 'Acme',
      disclaimer: null,
    });
    expect(() => parseNullCheckResponse({ ...body, confidence: 'infinite' })).toThrow(ResponseShapeError);
  });

  it.each([
    ['confidence', 'high'],
    ['model', 5],
    ['inference_time_ms', 1.5],
    ['experts_consulted', '2'],
    ['gpu_cost_usd', null],
    ['sponsored_by', 7],
  ])('rejects a boolean answer whose %s has the wrong type', (field, value) => {
    const body = { ...nullMeta, is_null: true, [field]: value };
    let error: unknown;
    try {
      parseNullCheckResponse(body);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ResponseShapeError);
    expect((error as ResponseShapeError).detail).toContain(field);
    expect((error as ResponseShapeError).detail).not.toContain(String(value === null ? 'null-value' : value));
  });

  it('rejects a maybe answer without its required fields', () => {
    expect(() => parseNullCheckResponse({ is_null: 'maybe' })).toThrow(ResponseShapeError);
  });

  it.each([[null], [[]], ['true'], [42], [true]])('rejects the non-object body %j', (body) => {
    expect(() => parseNullCheckResponse(body)).toThrow(ResponseShapeError);
  });
});

describe('parsePiResponse', () => {
  it('maps the spec fields and finds no marker when none is sent', () => {
    const result = parsePiResponse(piAnswer);
    expect(result).toMatchObject({
      digits: '3.14159',
      precision: 5,
      confidence: 0.99,
      model: 'pi-x-4o',
      inferenceTimeMs: 40,
      gpuCostUsd: 0.3,
      sponsoredBy: 'PiCorp',
      constantMarker: null,
    });
    expect(result.raw).toBe(piAnswer);
  });

  it.each([
    [{ constant: 'e' }, 'e'],
    [{ constant: 'PI' }, 'pi'],
    [{ is_e: true }, 'e'],
    [{ is_e: false }, 'pi'],
    [{ e_instead_of_pi: true }, 'e'],
    [{ constant_name: "Euler's number" }, 'e'],
    [{ constant: 'tau' }, null],
  ])('reads the marker %j', (marker, expected) => {
    expect(parsePiResponse({ ...piAnswer, ...marker }).constantMarker).toBe(expected);
  });

  it('derives a missing precision from the digits', () => {
    const { precision: _p, ...rest } = piAnswer;
    expect(parsePiResponse({ ...rest, digits: '2.718' }).precision).toBe(3);
    expect(parsePiResponse({ ...rest, digits: '3' }).precision).toBe(0);
  });

  it.each([['3.14abc'], ['3.'], ['.14'], ['-3.14'], [''], [314]])('rejects digits %j', (digits) => {
    expect(() => parsePiResponse({ ...piAnswer, digits })).toThrow(ResponseShapeError);
  });

  it('rejects a non-integer precision', () => {
    expect(() => parsePiResponse({ ...piAnswer, precision: 2.5 })).toThrow(ResponseShapeError);
  });
});

describe('parseInferenceResponse', () => {
  it('parses cost, derives precision, and reads a missing chain of thought as null', () => {
    const body = { digits: '3.1415', tokens_used: 120, cost: '$0.0042' };
    const result = parseInferenceResponse(body);
    expect(result).toEqual({
      digits: '3.1415',
      chainOfThought: null,
      tokensUsed: 120,
      cost: '$0.0042',
      costUsd: 0.0042,
      precision: 4,
      model: null,
      constantMarker: null,
      raw: body,
    });
  });

  it('keeps an upstream precision, model, chain of thought and marker', () => {
    const result = parseInferenceResponse({
      digits: '2.71828',
      tokens_used: 9,
      cost: 'USD 3.20',
      precision: 5,
      model: 'pi-x-opus-almost-correct',
      chain_of_thought: 'First, I considered e.',
      constant: 'e',
    });
    expect(result).toMatchObject({
      precision: 5,
      model: 'pi-x-opus-almost-correct',
      chainOfThought: 'First, I considered e.',
      costUsd: 3.2,
      constantMarker: 'e',
    });
  });

  it.each([[{ cost: 42 }], [{ tokens_used: '120' }], [{ chain_of_thought: 7 }], [{ digits: 'three' }]])(
    'rejects the wrong type %j',
    (patch) => {
      expect(() => parseInferenceResponse({ digits: '3.14', tokens_used: 1, cost: '$1', ...patch })).toThrow(
        ResponseShapeError,
      );
    },
  );
});

describe('v2 answers', () => {
  const detailOf = (parse: () => unknown): string => {
    try {
      parse();
    } catch (error) {
      expect(error).toBeInstanceOf(ResponseShapeError);
      return (error as ResponseShapeError).detail;
    }
    throw new Error('parsed');
  };

  it('reads philosophical_analysis: its known fields typed, a missing one null, the object kept', () => {
    const analysis = { school: 'stoic', depth: 3, references: ['Seneca'], mood: 'calm' };
    const result = parseNullCheckV2Response(nullBody({ philosophical_analysis: analysis }));
    expect(result.philosophicalAnalysis).toEqual({
      school: 'stoic',
      certainty: null,
      argument: null,
      references: ['Seneca'],
      verdictStability: null,
      depth: 3,
      raw: analysis,
    });
    expect(result.answer).toEqual({ kind: 'boolean', isNull: true });
    expect(parseNullCheckV2Response(nullBody()).philosophicalAnalysis).toBeNull();
    expect(
      parseNullCheckV2Response(nullBody({ philosophical_analysis: null })).philosophicalAnalysis,
    ).toBeNull();
  });

  it('rejects an analysis that is not an object, or a known field of the wrong type', () => {
    expect(detailOf(() => parseNullCheckV2Response(nullBody({ philosophical_analysis: 'deep' })))).toBe(
      'field philosophical_analysis: expected an object',
    );
    expect(detailOf(() => parseNullCheckV2Response(nullBody({ philosophical_analysis: [] })))).toBe(
      'field philosophical_analysis: expected an object',
    );
    expect(
      detailOf(() => parseNullCheckV2Response(nullBody({ philosophical_analysis: { depth: 1.5 } }))),
    ).toMatch(/^field philosophical_analysis\.depth: /);
    // The v1 fields are checked first, as over v1.
    expect(
      detailOf(() => parseNullCheckV2Response(nullBody({ confidence: 'high', philosophical_analysis: 1 }))),
    ).toMatch(/^field confidence: /);
  });

  it('reads an inference answer as a pi answer: the pi facts when sent, null when not, the cost parsed', () => {
    const body = { digits: '3.14', tokens_used: 9, cost: '$0.0042', confidence: 0.8, sponsored_by: 'Pi Hut' };
    expect(parsePiFromInference(body)).toEqual({
      digits: '3.14',
      precision: 2,
      confidence: 0.8,
      model: null,
      inferenceTimeMs: null,
      gpuCostUsd: null,
      costUsd: 0.0042,
      sponsoredBy: 'Pi Hut',
      disclaimer: null,
      constantMarker: null,
      raw: body,
    });
  });

  it('rejects a pi fact of the wrong type, after the inference fields', () => {
    const body = { digits: '3.14', tokens_used: 9, cost: '$0.0042' };
    expect(detailOf(() => parsePiFromInference({ ...body, confidence: '0.8' }))).toBe(
      'field confidence: expected a number',
    );
    expect(detailOf(() => parsePiFromInference({ ...body, disclaimer: 1 }))).toBe(
      'field disclaimer: expected a string',
    );
    expect(detailOf(() => parsePiFromInference({ ...body, tokens_used: 'x', confidence: '0.8' }))).toMatch(
      /^field tokens_used: /,
    );
  });
});

describe('health bodies', () => {
  it('maps the null-check health body', () => {
    expect(
      parseNullHealth({
        status: 'ok',
        null_detectable: true,
        undefined_detectable: false,
        cluster_status: 'warm',
        philosophy_consultant: null,
        monthly_burn: '$1,000,000',
      }),
    ).toEqual({
      status: 'ok',
      nullDetectable: true,
      undefinedDetectable: false,
      clusterStatus: 'warm',
      philosophyConsultant: null,
      monthlyBurn: '$1,000,000',
    });
  });

  it('maps the pi-digits health body and rejects a wrong type', () => {
    const body = { status: 'ok', pi_available: true, gpu_cluster: 'hot', monthly_burn_rate: '$3.14M' };
    expect(parsePiHealth(body)).toEqual({
      status: 'ok',
      piAvailable: true,
      gpuCluster: 'hot',
      monthlyBurnRate: '$3.14M',
    });
    expect(() => parsePiHealth({ ...body, pi_available: 'yes' })).toThrow(ResponseShapeError);
  });
});

describe('helpers', () => {
  it.each([
    ['$0.0042', 0.0042],
    ['$1,234.50', 1234.5],
    ['USD 3.20', 3.2],
    ['3.20 USD', 3.2],
    ['US$ 7', 7],
    ['$-1.5', -1.5],
    ['€3.20', null],
    ['three dollars', null],
    ['$1,23', null],
    ['$', null],
  ])('parseUsd(%j) = %j', (text, expected) => {
    expect(parseUsd(text)).toBe(expected);
  });

  it('reads no marker from an object without one', () => {
    expect(readConstantMarker({ digits: '3.14' })).toBeNull();
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    expect(parseRetryAfter('7', now)).toBe(7);
    expect(parseRetryAfter(['3'], now)).toBe(3);
    expect(parseRetryAfter('Tue, 01 Jan 2030 00:00:10 GMT', now)).toBe(10);
    expect(parseRetryAfter('Mon, 31 Dec 2029 00:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
  });

  it('reads error.code from an error body, and nothing from junk', () => {
    expect(errorCodeOf('{"error":{"status":400,"code":"UNDEFINED_VALUE","message":"x"}}')).toBe(
      'UNDEFINED_VALUE',
    );
    expect(errorCodeOf('<html>')).toBeUndefined();
    expect(errorCodeOf(undefined)).toBeUndefined();
    // Past 64 KiB the body is not read at all.
    expect(errorCodeOf(`{"code":"${'x'.repeat(70_000)}"}`)).toBeUndefined();
  });

  it.each([
    ['{"code":"WAIVER_REQUIRED"}', 'WAIVER_REQUIRED'],
    ['{"error":{"code":"UNDEFINED_VALUE"},"code":"OTHER"}', 'UNDEFINED_VALUE'],
    ['{"error":{"code":3},"code":"OTHER"}', 'OTHER'],
    ['{"error":"broken","code":"OTHER"}', 'OTHER'],
    ['{"error":{"code":null}}', undefined],
    ['{"code":3}', undefined],
    ['[{"code":"A"}]', undefined],
    ['"UNDEFINED_VALUE"', undefined],
    ['null', undefined],
  ])('reads the code of %s as %j: error.code first, then a top-level code, a string only', (text, code) => {
    expect(errorCodeOf(text)).toBe(code);
  });

  it('keeps the raw body on a status error but out of its message', () => {
    const text = '{"error":{"code":"SECRET_INTERNAL","message":"db at 10.0.0.7 exploded"}}';
    const error = errorFromStatus({
      upstream: 'pi-digits',
      endpoint: 'pi',
      statusCode: 500,
      text,
      retryAfter: undefined,
    });
    expect(error.code).toBe('UPSTREAM_ERROR');
    expect(error.body).toBe(text);
    expect(error.message).not.toContain('10.0.0.7');
    expect(error.toExtensions()).toEqual({
      code: 'UPSTREAM_ERROR',
      upstream: 'pi-digits',
      upstreamStatus: 500,
    });
  });
});
