import { describe, expect, it } from 'vitest';
import {
  parseNullCheckResponse,
  parseNullCheckResponseBySchema,
  parsePiResponse,
  parsePiResponseBySchema,
} from '../../src/gateway/upstream/response-schemas.js';

const FIELDS = [
  'is_null',
  'confidence',
  'model',
  'inference_time_ms',
  'gpu_cost_usd',
  'experts_consulted',
  'sponsored_by',
  'disclaimer',
] as const;

const ABSENT = Symbol('absent');
const VALUES: unknown[] = [
  ABSENT,
  null,
  true,
  false,
  0,
  -0,
  1,
  -3,
  0.25,
  1.5,
  2 ** 53,
  2 ** 53 - 1,
  -(2 ** 53),
  Number.POSITIVE_INFINITY,
  Number.NaN,
  '',
  'null-x-4o',
  '0.001',
  '3',
  '3.14159',
  '3.',
  '.5',
  '-3.14',
  '3.14\n',
  ' 3.14',
  '31415926535897932384626433832795028841971',
  'pi',
  'e',
  {},
  [],
  [1],
];

const base = (): Record<string, unknown> => ({
  is_null: false,
  confidence: 0.99,
  model: 'null-x-4o',
  inference_time_ms: 12,
  gpu_cost_usd: 0.0001,
  experts_consulted: 3,
  sponsored_by: 'Acme',
  disclaimer: 'not legal advice',
  extra: { kept: 'in raw' },
});

/** The outcome of a parse: its answer, or the class and message of what it threw. */
function outcome(parse: (json: unknown) => unknown, body: unknown): unknown {
  try {
    return { answer: parse(body) };
  } catch (error) {
    return { thrown: (error as Error).name, message: (error as Error).message };
  }
}

describe('parseNullCheckResponse, its boolean fast read against zod’s schema', () => {
  it('gives the same answer or the same error for every field of every kind of value', () => {
    let cases = 0;
    for (const isNull of [true, false]) {
      for (const field of FIELDS.slice(1)) {
        for (const value of VALUES) {
          const body = base();
          body.is_null = isNull;
          if (value === ABSENT) delete body[field];
          else body[field] = value;
          expect(outcome(parseNullCheckResponse, body), `${field}: ${String(value)}`).toEqual(
            outcome(parseNullCheckResponseBySchema, body),
          );
          cases++;
        }
      }
    }
    expect(cases).toBeGreaterThan(250);
  });

  it('keeps the body as raw and the texts absent as null', () => {
    const body = base();
    delete body.sponsored_by;
    body.disclaimer = null;
    const answer = parseNullCheckResponse(body);
    expect(answer).toEqual(parseNullCheckResponseBySchema(body));
    expect(answer.raw).toBe(body);
    expect(answer.sponsoredBy).toBeNull();
    expect(answer.disclaimer).toBeNull();
  });

  it('leaves maybe, existential and broken answers to the schema', () => {
    for (const isNull of ['maybe', ' MAYBE ', 'I think therefore', { musing: 'hm' }, null, 0]) {
      const body = { ...base(), is_null: isNull };
      expect(outcome(parseNullCheckResponse, body)).toEqual(outcome(parseNullCheckResponseBySchema, body));
    }
    for (const body of [null, [], 'text', 3]) {
      expect(outcome(parseNullCheckResponse, body)).toEqual(outcome(parseNullCheckResponseBySchema, body));
    }
  });
});

const PI_FIELDS = [
  'digits',
  'precision',
  'confidence',
  'model',
  'inference_time_ms',
  'gpu_cost_usd',
  'sponsored_by',
  'disclaimer',
  'constant',
] as const;

const piBase = (): Record<string, unknown> => ({
  digits: '3.14159',
  precision: 5,
  confidence: 0.97,
  model: 'pi-stral-7b',
  inference_time_ms: 40,
  gpu_cost_usd: 0.002,
  sponsored_by: 'PiCorp',
  disclaimer: 'digits may vary',
  constant: 'pi',
  returned_e: false,
});

describe('parsePiResponse, its fast read against zod’s schema', () => {
  it('gives the same answer or the same error for every field of every kind of value', () => {
    let cases = 0;
    for (const field of PI_FIELDS) {
      for (const value of VALUES) {
        const body = piBase();
        if (value === ABSENT) delete body[field];
        else body[field] = value;
        expect(outcome(parsePiResponse, body), `${field}: ${String(value)}`).toEqual(
          outcome(parsePiResponseBySchema, body),
        );
        cases++;
      }
    }
    expect(cases).toBeGreaterThan(250);
    for (const body of [null, [], 'text', 3, {}]) {
      expect(outcome(parsePiResponse, body)).toEqual(outcome(parsePiResponseBySchema, body));
    }
  });
});
