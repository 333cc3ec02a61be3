/**
 * Validation of the services' JSON answers (snake_case) into the seam's camelCase shapes, v1 and v2
 * alike, so the schema never knows which version answered:
 * - null-check `POST /api/v2/null-or-not`: the v1 answer plus `philosophical_analysis`;
 * - pi-digits `POST /api/v1/inference` serving `pi` (v2.0): the inference answer as a pi answer.
 *   Fields the inference answer lacks are null, never invented (its `cost` is the cost of the call).
 *
 * zod reads every field of every answer, with no hand-written reader in front of it: a field is
 * added or changed in its schema only. Every schema is built once at module load (zod 4 compiles
 * object schemas on first use); the body is parsed once with JSON.parse by the caller. Extra fields are ignored; a field with the
 * wrong type is an `UPSTREAM_BAD_RESPONSE`. Model strings are passed through whatever they are:
 * the enum mapping (and what to do with a model the enum does not know) belongs to the schema.
 */
import { z } from 'zod';
import { decimalsOf } from '../../shared/decimals.js';
import type {
  InferenceResponse,
  NullAnswer,
  NullCheckResponse,
  NullHealthBody,
  PhilosophicalAnalysis,
  PiHealthBody,
  PiResponse,
} from './types.js';

/** Thrown by the parse functions; the caller turns it into an `UPSTREAM_BAD_RESPONSE`. */
export class ResponseShapeError extends Error {
  /** Client-safe: field paths and expected types only, never upstream values. */
  readonly detail: string;

  constructor(detail: string) {
    super(`body does not fit the interface: ${detail}`);
    this.name = 'ResponseShapeError';
    this.detail = detail;
  }
}

/** Integer part, optionally a point and decimals: what the spec calls "a decimal string". */
export const DIGITS_PATTERN = /^\d+(\.\d+)?$/;

const int = z.number().int();
/**
 * An optional field: absent or JSON null is "not said" (null), never a default; present, it must have
 * the type (a string `confidence` is not an absent one). Written as zod's `nullable().default(null)`
 * (absent gives null) rather than a transform: the same outputs and issues without the pipe and the
 * transform's call on every field of every answer.
 */
const optional = <T extends z.ZodType>(schema: T) => schema.nullable().default(null);
const nullableText = optional(z.string());

/**
 * The spec's fields of a boolean or `maybe` answer: the measured facts of the answer (confidence,
 * model, timing, cost, experts) are required, since a documented answer without them does not fit the
 * interface; the texts (sponsor, disclaimer) may be absent, as `sponsored=false` removes the sponsor.
 */
const nullCheckStrictSchema = z.object({
  confidence: z.number(),
  model: z.string(),
  inference_time_ms: int,
  gpu_cost_usd: z.number(),
  experts_consulted: int,
  sponsored_by: nullableText,
  disclaimer: nullableText,
});

/**
 * The existential answer's shape is not in the spec ("not shown"), so none of its fields is required:
 * a missing one is null. A field that is there must still have its type: a string `confidence` is a
 * broken body (`UPSTREAM_BAD_RESPONSE`), not an answer with confidence 0.
 */
const nullCheckExistentialSchema = z.object({
  confidence: optional(z.number()),
  model: optional(z.string()),
  inference_time_ms: optional(int),
  gpu_cost_usd: optional(z.number()),
  experts_consulted: optional(int),
  sponsored_by: nullableText,
  disclaimer: nullableText,
});

/**
 * The constant marker of the reference pi service (`"pi"` or `"e"`): optional, a string when present.
 * An unknown text is no marker (the gateway then decides from the digits); a number is a broken body.
 */
const constantField = nullableText;

const piSchema = z.object({
  digits: z.string().regex(DIGITS_PATTERN, 'expected a decimal string of digits'),
  /**
   * Required by the spec; when absent or null (the e case is "not shown") it is counted from `digits`,
   * whose decimal places it is by definition: read from the upstream's own answer, not invented.
   */
  precision: optional(int.nonnegative()),
  confidence: z.number(),
  model: z.string(),
  inference_time_ms: int,
  gpu_cost_usd: z.number(),
  sponsored_by: nullableText,
  disclaimer: nullableText,
  constant: constantField,
});

const inferenceSchema = z.object({
  digits: z.string().regex(DIGITS_PATTERN, 'expected a decimal string of digits'),
  /** "Response when use_chain_of_thought is false: not shown": absent or null both mean none. */
  chain_of_thought: nullableText,
  tokens_used: int.nonnegative(),
  cost: z.string(),
  /** Not in the spec's inference answer: optional, counted from `digits` when absent (as for pi). */
  precision: optional(int.nonnegative()),
  /** Not in the spec's inference answer: optional, null when absent. */
  model: nullableText,
  constant: constantField,
});

/**
 * `philosophical_analysis` of a v2 null check: absent or null is none; present, it must be an object
 * whose known fields have their types (a missing one is null, never invented); unknown ones are kept
 * in `raw` only.
 */
const nullCheckV2Schema = z.object({
  philosophical_analysis: optional(
    z.looseObject(
      {
        school: nullableText,
        certainty: optional(z.number()),
        argument: nullableText,
        references: optional(z.array(z.string())),
        verdict_stability: nullableText,
        depth: optional(int),
      },
      { error: 'expected an object' },
    ),
  ),
});

/**
 * An inference answer serving `pi` (v2.0): the inference fields, plus the pi answer's own facts where
 * the service sends them (a wrong type is a bad answer; absent is null).
 */
const piFromInferenceSchema = inferenceSchema.extend({
  confidence: optional(z.number({ error: 'expected a number' })),
  inference_time_ms: optional(z.number({ error: 'expected a number' })),
  gpu_cost_usd: optional(z.number({ error: 'expected a number' })),
  sponsored_by: optional(z.string({ error: 'expected a string' })),
  disclaimer: optional(z.string({ error: 'expected a string' })),
});

const nullHealthSchema = z.object({
  status: z.string(),
  null_detectable: z.boolean(),
  undefined_detectable: z.boolean(),
  cluster_status: z.string(),
  philosophy_consultant: nullableText,
  monthly_burn: z.string(),
});

const piHealthSchema = z.object({
  status: z.string(),
  pi_available: z.boolean(),
  gpu_cluster: z.string(),
  monthly_burn_rate: z.string(),
});

function describe(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue === undefined) return 'invalid body';
  const path = issue.path.length > 0 ? issue.path.join('.') : '(body)';
  // Only the path and zod's own message: zod 4 messages name types, never the received value.
  return `field ${path}: ${issue.message}`;
}

function asObject(json: unknown): Record<string, unknown> {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new ResponseShapeError('expected a JSON object');
  }
  return json as Record<string, unknown>;
}

function check<T>(schema: z.ZodType<T>, json: unknown): T {
  const result = schema.safeParse(json);
  if (!result.success) throw new ResponseShapeError(describe(result.error));
  return result.data;
}

/** Upstream text fields that may carry the musing of an existential answer, in order of preference. */
const MUSING_FIELDS = ['musing', 'existential_dread', 'message', 'answer', 'text', 'thought'] as const;

function pickText(object: Record<string, unknown>): string | null {
  for (const field of MUSING_FIELDS) {
    const value = object[field];
    if (typeof value === 'string') return value;
  }
  return null;
}

function musingOf(isNull: unknown, body: Record<string, unknown>): string | null {
  if (typeof isNull === 'string') return isNull;
  if (isNull !== null && typeof isNull === 'object' && !Array.isArray(isNull)) {
    const inner = pickText(isNull as Record<string, unknown>);
    if (inner !== null) return inner;
  }
  return pickText(body);
}

/** Validates a POST /api/v1/check answer. */
export function parseNullCheckResponse(json: unknown): NullCheckResponse {
  const body = asObject(json);
  const isNull = body.is_null;
  // The shape of `is_null` is the answer itself; zod reads the rest of the body.
  if (typeof isNull === 'boolean')
    return nullCheckOf({ kind: 'boolean', isNull }, check(nullCheckStrictSchema, body), json);
  if (typeof isNull === 'string' && isNull.trim().toLowerCase() === 'maybe')
    return nullCheckOf({ kind: 'maybe' }, check(nullCheckStrictSchema, body), json);
  // Existential answers are held to a looser schema (the service may omit metadata while musing).
  return nullCheckOf(
    { kind: 'existential', musing: musingOf(isNull, body) },
    check(nullCheckExistentialSchema, body),
    json,
  );
}

function nullCheckOf(
  answer: NullAnswer,
  meta: z.infer<typeof nullCheckStrictSchema> | z.infer<typeof nullCheckExistentialSchema>,
  raw: unknown,
): NullCheckResponse {
  return {
    answer,
    confidence: meta.confidence,
    model: meta.model,
    inferenceTimeMs: meta.inference_time_ms,
    gpuCostUsd: meta.gpu_cost_usd,
    expertsConsulted: meta.experts_consulted,
    sponsoredBy: meta.sponsored_by,
    disclaimer: meta.disclaimer,
    raw,
  };
}

function markerFromText(text: string): 'pi' | 'e' | null {
  const t = text.trim().toLowerCase();
  if (t === 'pi' || t === 'π') return 'pi';
  if (t === 'e' || t === 'euler' || t === "euler's number" || t === 'eulers_number' || t === 'euler_number') {
    return 'e';
  }
  return null;
}

/**
 * The explicit "which constant is this" marker, if the upstream sent one. The spec does not show
 * the e case, so the names a service plausibly uses are all read; none → null (the schema then
 * decides from the digits themselves).
 */
export function readConstantMarker(body: Record<string, unknown>): 'pi' | 'e' | null {
  for (const field of ['constant', 'constant_name', 'returned_constant']) {
    const value = body[field];
    if (typeof value === 'string') {
      const marker = markerFromText(value);
      if (marker !== null) return marker;
    }
  }
  for (const field of ['is_e', 'e_instead_of_pi', 'returned_e']) {
    const value = body[field];
    if (typeof value === 'boolean') return value ? 'e' : 'pi';
  }
  return null;
}

/** The fields of a pi answer, from GET /pi or from the inference endpoint serving pi. */
type PiFields = z.output<typeof piSchema> | z.output<typeof piFromInferenceSchema>;

function piResponseOf(data: PiFields, body: Record<string, unknown>): PiResponse {
  return {
    digits: data.digits,
    precision: data.precision ?? decimalsOf(data.digits),
    confidence: data.confidence,
    model: data.model,
    inferenceTimeMs: data.inference_time_ms,
    gpuCostUsd: data.gpu_cost_usd,
    sponsoredBy: data.sponsored_by,
    disclaimer: data.disclaimer,
    constantMarker: readConstantMarker(body),
    raw: body,
  };
}

/** Validates a GET /api/v1/pi answer. */
export function parsePiResponse(json: unknown): PiResponse {
  const body = asObject(json);
  return piResponseOf(check(piSchema, body), body);
}

/**
 * "$0.0042", "$1,234.50", "USD 3.20", "3.20 USD", "US$ 7" → a number; anything else (another
 * currency, words) → null, since guessing an exchange rate would be worse than no number.
 */
export function parseUsd(cost: string): number | null {
  let text = cost.trim();
  const prefix = /^(US\$|USD|\$)\s*/i.exec(text);
  const suffix = /\s*(USD|US\$|\$)$/i.exec(text);
  if (prefix) text = text.slice(prefix[0].length);
  else if (suffix) text = text.slice(0, text.length - suffix[0].length);
  else return null;
  let negative = false;
  if (text.startsWith('-')) {
    negative = true;
    text = text.slice(1);
  }
  if (!/^(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$|^\.\d+$/.test(text)) return null;
  const value = Number(text.replaceAll(',', ''));
  if (!Number.isFinite(value)) return null;
  return negative ? -value : value;
}

/** Validates a POST /api/v1/inference answer. */
export function parseInferenceResponse(json: unknown): InferenceResponse {
  const body = asObject(json);
  const data = check(inferenceSchema, body);
  return {
    digits: data.digits,
    chainOfThought: data.chain_of_thought,
    tokensUsed: data.tokens_used,
    cost: data.cost,
    costUsd: parseUsd(data.cost),
    precision: data.precision ?? decimalsOf(data.digits),
    model: data.model ?? null,
    constantMarker: readConstantMarker(body),
    raw: json,
  };
}

/** Validates a `POST /api/v2/null-or-not` answer. */
export function parseNullCheckV2Response(json: unknown): NullCheckResponse {
  const answer = parseNullCheckResponse(json);
  const analysis = check(nullCheckV2Schema, json).philosophical_analysis;
  let philosophicalAnalysis: PhilosophicalAnalysis | null = null;
  if (analysis !== null) {
    philosophicalAnalysis = {
      school: analysis.school,
      certainty: analysis.certainty,
      argument: analysis.argument,
      references: analysis.references,
      verdictStability: analysis.verdict_stability,
      depth: analysis.depth,
      raw: (json as { philosophical_analysis: Record<string, unknown> }).philosophical_analysis,
    };
  }
  return { ...answer, philosophicalAnalysis };
}

/** Validates a `POST /api/v1/inference` answer that serves `pi` (v2.0). */
export function parsePiFromInference(json: unknown): PiResponse {
  const body = asObject(json);
  const data = check(piFromInferenceSchema, body);
  return { ...piResponseOf(data, body), costUsd: parseUsd(data.cost) };
}

type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** `data` with its snake_case keys in camelCase, the seam's spelling (`null_detectable` → `nullDetectable`). */
function camelKeys<T extends object>(data: T): { [K in keyof T as CamelCase<K & string>]: T[K] } {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(data)) {
    out[key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase())] = value;
  }
  return out as { [K in keyof T as CamelCase<K & string>]: T[K] };
}

/** Validates a null-check GET /api/v1/health body. */
export function parseNullHealth(json: unknown): NullHealthBody {
  return camelKeys(check(nullHealthSchema, asObject(json)));
}

/** Validates a pi-digits GET /api/v1/health body. */
export function parsePiHealth(json: unknown): PiHealthBody {
  return camelKeys(check(piHealthSchema, asObject(json)));
}
