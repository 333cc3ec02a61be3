/**
 * Every field of every upstream body, four ways: missing, null, of a wrong type, of the right type, and
 * what the gateway makes of each (src/gateway/upstream/README.md, "Answers", holds the same table with
 * the reasons). The rule of docs/contract.md, Errors: a wrong type is UPSTREAM_BAD_RESPONSE everywhere;
 * only the shape of `is_null` itself makes an existential answer; a missing field is null or a bad
 * response, decided per field, and never a made-up 0 or ''.
 */
import { describe, expect, it } from 'vitest';
import {
  parseInferenceResponse,
  parseNullCheckResponse,
  parseNullHealth,
  parsePiHealth,
  parsePiResponse,
  ResponseShapeError,
} from '../../src/gateway/upstream/response-schemas.js';
import { nullMeta, piAnswer } from '../support/upstream-bodies.js';

/** What parsing a body must give: a field value read from the result, or a bad response. */
type Outcome = { value: unknown } | 'bad';
const BAD = 'bad' as const;
const value = (v: unknown): Outcome => ({ value: v });

interface FieldRow {
  field: string;
  right: unknown;
  /** What the parsed result shows for `right` (the same value, or its mapped form). */
  rightOutcome?: Outcome;
  wrong: unknown;
  /** Missing and null are the same case (JSON null is "no value"), so one outcome serves both. */
  missing: Outcome;
  /** A wrong type is a bad response, except for `is_null` (the answer's own shape). */
  wrongOutcome?: Outcome;
}

interface Body {
  name: string;
  base: Record<string, unknown>;
  parse: (json: unknown) => unknown;
  /** The parsed value of `field` (seam names are camelCase). */
  read: (parsed: Record<string, unknown>, field: string) => unknown;
  rows: FieldRow[];
}

const camel = (field: string) => field.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
const readCamel = (parsed: Record<string, unknown>, field: string) => parsed[camel(field)];

/** The check's metadata, required (boolean and maybe answers) or not (the existential answer). */
function nullMetaRows(required: boolean): FieldRow[] {
  const missing = (absent: unknown): Outcome => (required ? BAD : value(absent));
  return [
    { field: 'confidence', right: 0.5, wrong: 'high', missing: missing(null) },
    { field: 'model', right: 'null-x-mini', wrong: 5, missing: missing(null) },
    { field: 'inference_time_ms', right: 7, wrong: 1.5, missing: missing(null) },
    { field: 'gpu_cost_usd', right: 0.01, wrong: '0.01', missing: missing(null) },
    { field: 'experts_consulted', right: 3, wrong: '3', missing: missing(null) },
    { field: 'sponsored_by', right: 'Acme', wrong: 7, missing: value(null) },
    { field: 'disclaimer', right: 'Text.', wrong: ['Text.'], missing: value(null) },
  ];
}

const readNull = (parsed: Record<string, unknown>, field: string) =>
  field === 'is_null' ? (parsed.answer as { kind: string }).kind : readCamel(parsed, field);

const piBase = { ...piAnswer, constant: 'pi' };

const readPi = (parsed: Record<string, unknown>, field: string) =>
  field === 'constant' ? parsed.constantMarker : readCamel(parsed, field);

const BODIES: Body[] = [
  {
    name: 'check, boolean answer',
    base: { is_null: true, ...nullMeta },
    parse: parseNullCheckResponse,
    read: readNull,
    rows: [
      {
        field: 'is_null',
        right: false,
        rightOutcome: value('boolean'),
        wrong: 42,
        wrongOutcome: value('existential'),
        missing: value('existential'),
      },
      ...nullMetaRows(true),
    ],
  },
  {
    name: 'check, maybe answer',
    base: { is_null: 'maybe', ...nullMeta },
    parse: parseNullCheckResponse,
    read: readNull,
    rows: [
      {
        field: 'is_null',
        right: ' Maybe ',
        rightOutcome: value('maybe'),
        wrong: ['maybe'],
        wrongOutcome: value('existential'),
        missing: value('existential'),
      },
      ...nullMetaRows(true),
    ],
  },
  {
    name: 'check, existential answer',
    base: { is_null: 42, ...nullMeta },
    parse: parseNullCheckResponse,
    read: readNull,
    rows: nullMetaRows(false),
  },
  {
    name: 'pi',
    base: piBase,
    parse: parsePiResponse,
    read: readPi,
    rows: [
      { field: 'digits', right: '2.71', wrong: 3.14, missing: BAD },
      { field: 'precision', right: 4, wrong: '5', missing: value(5) /* counted from digits */ },
      { field: 'confidence', right: 0.5, wrong: 'high', missing: BAD },
      { field: 'model', right: 'pi-x-mini', wrong: false, missing: BAD },
      { field: 'inference_time_ms', right: 9, wrong: 9.5, missing: BAD },
      { field: 'gpu_cost_usd', right: 0.1, wrong: '$0.10', missing: BAD },
      { field: 'sponsored_by', right: 'Acme', wrong: 1, missing: value(null) },
      { field: 'disclaimer', right: 'Text.', wrong: {}, missing: value(null) },
      { field: 'constant', right: 'e', wrong: 1, missing: value(null) },
    ],
  },
  {
    name: 'inference',
    base: {
      digits: '3.14159',
      chain_of_thought: 'First, recall pi.',
      tokens_used: 120,
      cost: '$0.0042',
      precision: 5,
      model: 'pi-x-4o',
      constant: 'pi',
    },
    parse: parseInferenceResponse,
    read: readPi,
    rows: [
      { field: 'digits', right: '3.1', wrong: 3.1, missing: BAD },
      { field: 'chain_of_thought', right: 'Hmm.', wrong: 42, missing: value(null) },
      { field: 'tokens_used', right: 7, wrong: '7', missing: BAD },
      { field: 'cost', right: '$1.00', wrong: 1, missing: BAD },
      { field: 'precision', right: 4, wrong: 4.5, missing: value(5) /* counted from digits */ },
      { field: 'model', right: 'pi-x-mini', wrong: 3, missing: value(null) },
      { field: 'constant', right: 'e', wrong: true, missing: value(null) },
    ],
  },
  {
    name: 'null-check health',
    base: {
      status: 'ok',
      null_detectable: true,
      undefined_detectable: false,
      cluster_status: 'nominal',
      philosophy_consultant: null,
      monthly_burn: '$1,000',
    },
    parse: parseNullHealth,
    read: readCamel,
    rows: [
      { field: 'status', right: 'degraded', wrong: 1, missing: BAD },
      { field: 'null_detectable', right: false, wrong: 'yes', missing: BAD },
      { field: 'undefined_detectable', right: true, wrong: 0, missing: BAD },
      { field: 'cluster_status', right: 'busy', wrong: {}, missing: BAD },
      { field: 'philosophy_consultant', right: 'Socrates', wrong: 5, missing: value(null) },
      { field: 'monthly_burn', right: '$2', wrong: 2, missing: BAD },
    ],
  },
  {
    name: 'pi-digits health',
    base: { status: 'ok', pi_available: true, gpu_cluster: 'warm', monthly_burn_rate: '$3' },
    parse: parsePiHealth,
    read: readCamel,
    rows: [
      { field: 'status', right: 'degraded', wrong: true, missing: BAD },
      { field: 'pi_available', right: false, wrong: 'true', missing: BAD },
      { field: 'gpu_cluster', right: 'cold', wrong: 3, missing: BAD },
      { field: 'monthly_burn_rate', right: '$4', wrong: 4, missing: BAD },
    ],
  },
];

function expectOutcome(body: Body, field: string, json: Record<string, unknown>, outcome: Outcome) {
  if (outcome === BAD) {
    let error: unknown;
    try {
      body.parse(json);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ResponseShapeError);
    // The client-safe detail names the field, never its value.
    expect((error as ResponseShapeError).detail).toContain(field);
    return;
  }
  const parsed = body.parse(json) as Record<string, unknown>;
  expect(body.read(parsed, field)).toEqual(outcome.value);
}

const show = (outcome: Outcome) =>
  outcome === BAD ? 'UPSTREAM_BAD_RESPONSE' : JSON.stringify(outcome.value);

describe.each(BODIES)('$name', (body) => {
  it('the base body parses (every row below changes one field of it)', () => {
    expect(() => body.parse(body.base)).not.toThrow();
  });

  const cases = body.rows.flatMap((row) => {
    const { [row.field]: _dropped, ...without } = body.base;
    return [
      [row.field, 'missing', without, row.missing],
      [row.field, 'null', { ...body.base, [row.field]: null }, row.missing],
      [
        row.field,
        `wrong type ${JSON.stringify(row.wrong)}`,
        { ...body.base, [row.field]: row.wrong },
        row.wrongOutcome ?? BAD,
      ],
      [
        row.field,
        `right ${JSON.stringify(row.right)}`,
        { ...body.base, [row.field]: row.right },
        row.rightOutcome ?? value(row.right),
      ],
    ] as const;
  });

  it.each(cases.map(([field, how, json, outcome]) => ({ field, how, json, outcome, label: show(outcome) })))(
    '$field $how → $label',
    ({ field, json, outcome }) => expectOutcome(body, field, json, outcome),
  );
});

describe('the case of the report', () => {
  it('{"is_null": 42, "confidence": "high", ...} is a bad response, not an existential answer with confidence 0', () => {
    expect(() => parseNullCheckResponse({ ...nullMeta, is_null: 42, confidence: 'high' })).toThrow(
      ResponseShapeError,
    );
  });

  it('an existential answer with no metadata at all: every field null, raw kept', () => {
    const body = { is_null: 'Who is asking?' };
    expect(parseNullCheckResponse(body)).toEqual({
      answer: { kind: 'existential', musing: 'Who is asking?' },
      confidence: null,
      model: null,
      inferenceTimeMs: null,
      gpuCostUsd: null,
      expertsConsulted: null,
      sponsoredBy: null,
      disclaimer: null,
      raw: body,
    });
  });
});
