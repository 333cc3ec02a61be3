/**
 * zod, the one reader of every upstream answer, against the documented rule of each field
 * (src/gateway/upstream/README.md, "Answers"), over every kind of JSON value: what it accepts and reads,
 * and what it refuses, naming the field and never the value. The per-field table with its reasons is
 * upstream-response-bodies.test.ts; this file takes each field of the answers nearly every call gets
 * (the boolean and maybe check, the existential check, GET /pi) through the whole value matrix, the
 * edges of zod's own rules included (the infinities, -0, 2^53, a pattern with a trailing newline).
 */
import { describe, expect, it } from 'vitest';
import {
  parseNullCheckResponse,
  parsePiResponse,
  ResponseShapeError,
} from '../../src/gateway/upstream/response-schemas.js';

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
  Number.NEGATIVE_INFINITY,
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

/** A field's documented type, as zod 4 checks it. */
type Rule = 'number' | 'int' | 'count' | 'string' | 'digits';
const ACCEPTS: Record<Rule, (value: unknown) => boolean> = {
  // JSON numbers; zod 4 refuses NaN and the infinities.
  number: (value) => typeof value === 'number' && Number.isFinite(value),
  // zod 4's `.int()` is a safe integer.
  int: (value) => Number.isSafeInteger(value),
  count: (value) => Number.isSafeInteger(value) && (value as number) >= 0,
  string: (value) => typeof value === 'string',
  digits: (value) => typeof value === 'string' && /^\d+(\.\d+)?$/.test(value),
};

interface Field {
  field: string;
  rule: Rule;
  /** What an absent or null field reads as; undefined: it is required (a bad response). */
  missing?: unknown;
  /** The parsed answer's value of the field; undefined: only acceptance is checked here. */
  read?: (answer: Record<string, unknown>) => unknown;
}

const camel = (field: string) => field.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
const field = (name: string, rule: Rule, missing?: unknown): Field => ({
  field: name,
  rule,
  ...(missing === undefined ? {} : { missing }),
  read: (answer) => answer[camel(name)],
});

/** The check's measured facts: required for a boolean or maybe answer, null when absent for an existential one. */
const checkFields = (required: boolean): Field[] => {
  const fact = required ? undefined : null;
  return [
    field('confidence', 'number', fact),
    field('model', 'string', fact),
    field('inference_time_ms', 'int', fact),
    field('gpu_cost_usd', 'number', fact),
    field('experts_consulted', 'int', fact),
    field('sponsored_by', 'string', null),
    field('disclaimer', 'string', null),
  ];
};

const checkBody = (isNull: unknown): Record<string, unknown> => ({
  is_null: isNull,
  confidence: 0.99,
  model: 'null-x-4o',
  inference_time_ms: 12,
  gpu_cost_usd: 0.0001,
  experts_consulted: 3,
  sponsored_by: 'Acme',
  disclaimer: 'not legal advice',
  extra: { kept: 'in raw' },
});

const piBody = (): Record<string, unknown> => ({
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

const PI_FIELDS: Field[] = [
  field('digits', 'digits'),
  // Counted from the digits ('3.14159': 5 places) when absent: read from the answer, never invented.
  field('precision', 'count', 5),
  field('confidence', 'number'),
  field('model', 'string'),
  field('inference_time_ms', 'int'),
  field('gpu_cost_usd', 'number'),
  field('sponsored_by', 'string', null),
  field('disclaimer', 'string', null),
  // The marker it gives is readConstantMarker's (upstream-response-schemas.test.ts); here, its type.
  { field: 'constant', rule: 'string', missing: null },
];

const show = (value: unknown) =>
  value === ABSENT ? 'absent' : typeof value === 'number' ? String(value) : JSON.stringify(value);

/**
 * Sets `field` of `body` to each value of the matrix and holds the parse to the field's rule: accepted
 * and read as sent (a missing optional field as its documented stand-in), or refused with a
 * `ResponseShapeError` that names the field and not the value. Returns the number of cases.
 */
function holdToRules(
  base: () => Record<string, unknown>,
  parse: (json: unknown) => Record<string, unknown>,
  fields: Field[],
): number {
  let cases = 0;
  for (const spec of fields) {
    for (const value of VALUES) {
      const body = base();
      if (value === ABSENT) delete body[spec.field];
      else body[spec.field] = value;
      const missing = value === ABSENT || value === null;
      const accepted = missing ? spec.missing !== undefined : ACCEPTS[spec.rule](value);
      const label = `${spec.field}: ${show(value)}`;
      if (accepted) {
        const answer = parse(body);
        expect(answer.raw, label).toBe(body);
        if (spec.read !== undefined) expect(spec.read(answer), label).toBe(missing ? spec.missing : value);
      } else {
        let error: unknown;
        try {
          parse(body);
        } catch (thrown) {
          error = thrown;
        }
        expect(error, label).toBeInstanceOf(ResponseShapeError);
        const detail = (error as ResponseShapeError).detail;
        expect(detail, label).toMatch(new RegExp(`^field ${spec.field}: `));
        if (typeof value === 'string' && value.length >= 4) expect(detail, label).not.toContain(value);
      }
      cases++;
    }
  }
  return cases;
}

const parseCheck = (json: unknown) => parseNullCheckResponse(json) as unknown as Record<string, unknown>;
const parsePi = (json: unknown) => parsePiResponse(json) as unknown as Record<string, unknown>;

describe('parseNullCheckResponse over every kind of value', () => {
  it.each([
    ['a boolean answer (true)', true, 'boolean', true],
    ['a boolean answer (false)', false, 'boolean', true],
    ['a maybe answer', ' MAYBE ', 'maybe', true],
    ['an existential answer', 'I think, therefore', 'existential', false],
    ['an existential answer (an object)', { musing: 'hm' }, 'existential', false],
  ] as const)('holds each field of %s to its rule', (_name, isNull, kind, required) => {
    const cases = holdToRules(() => checkBody(isNull), parseCheck, checkFields(required));
    expect(cases).toBe(7 * VALUES.length);
    expect(parseNullCheckResponse(checkBody(isNull)).answer.kind).toBe(kind);
  });

  it('reads a boolean answer into the seam shape, the body kept as raw and absent texts null', () => {
    const body = checkBody(false);
    delete body.sponsored_by;
    body.disclaimer = null;
    expect(parseNullCheckResponse(body)).toEqual({
      answer: { kind: 'boolean', isNull: false },
      confidence: 0.99,
      model: 'null-x-4o',
      inferenceTimeMs: 12,
      gpuCostUsd: 0.0001,
      expertsConsulted: 3,
      sponsoredBy: null,
      disclaimer: null,
      raw: body,
    });
  });

  it('says what was expected, in zod’s words, for each kind of refusal', () => {
    const detail = (body: unknown) => {
      try {
        parseNullCheckResponse(body);
      } catch (error) {
        return (error as ResponseShapeError).message;
      }
      return 'parsed';
    };
    expect(detail({ ...checkBody(true), confidence: 'high' })).toBe(
      'body does not fit the interface: field confidence: Invalid input: expected number, received string',
    );
    expect(detail({ ...checkBody(true), inference_time_ms: 1.5 })).toBe(
      'body does not fit the interface: field inference_time_ms: Invalid input: expected int, received number',
    );
    expect(detail({ ...checkBody(true), model: undefined })).toBe(
      'body does not fit the interface: field model: Invalid input: expected string, received undefined',
    );
    expect(detail([])).toBe('body does not fit the interface: expected a JSON object');
  });
});

describe('parsePiResponse over every kind of value', () => {
  it('holds each field to its rule', () => {
    expect(holdToRules(piBody, parsePi, PI_FIELDS)).toBe(PI_FIELDS.length * VALUES.length);
  });

  it('refuses a body that is not an object, and one without digits', () => {
    for (const body of [null, [], 'text', 3, true]) {
      expect(() => parsePiResponse(body)).toThrow('body does not fit the interface: expected a JSON object');
    }
    expect(() => parsePiResponse({})).toThrow(/^body does not fit the interface: field digits: /);
    expect(() => parsePiResponse({ ...piBody(), digits: '3.' })).toThrow(
      'body does not fit the interface: field digits: expected a decimal string of digits',
    );
    expect(() => parsePiResponse({ ...piBody(), precision: -3 })).toThrow(/field precision: Too small/);
  });
});
