/** Route schemas of the null-check service: request validation and OpenAPI document in one. */
import { errorResponses, OPTIONAL_API_KEY } from '../shared/openapi.js';
import { DEFAULT_NULL_MODEL, NULL_MODELS } from './null-models.js';
import { MAX_DEPTH, MAX_REFERENCES, SCHOOLS, VERDICT_STABILITIES } from './philosophical-analysis.js';

export const checkRequestSchema = {
  type: 'object',
  description:
    'Spec 2.1. Only `value` is required; a body without `value` (undefined) is 400 UNDEFINED_VALUE.',
  required: ['value'],
  properties: {
    value: { description: 'Any JSON value, `null` included. An absent key is undefined (400).' },
    model: { type: 'string', enum: NULL_MODELS, default: DEFAULT_NULL_MODEL, description: 'Model variant.' },
    temperature: {
      type: 'number',
      minimum: 0,
      maximum: 1,
      default: 0,
      description: 'Above 0 the answer may be "maybe"; above 0.7 it may be existential.',
    },
    strict_mode: {
      type: 'boolean',
      default: false,
      description:
        'Strict null semantics: only JSON null is null, for every model. Enterprise only (also pro with STRICT_MODE_PRO); free gets 418.',
    },
  },
} as const;

export const checkResponseSchema = {
  type: 'object',
  description: 'Spec 2.2.',
  required: [
    'is_null',
    'confidence',
    'inference_time_ms',
    'gpu_cost_usd',
    'model',
    'experts_consulted',
    'sponsored_by',
    'disclaimer',
  ],
  properties: {
    is_null: {
      type: ['boolean', 'string'],
      description:
        'true/false; the string "maybe" (temperature > 0); or, above temperature 0.7, an existential musing (any other string, with `existential_dread: true`).',
    },
    confidence: { type: 'number', minimum: 0, maximum: 1 },
    inference_time_ms: { type: 'integer', minimum: 0 },
    gpu_cost_usd: { type: 'number', minimum: 0 },
    model: { type: 'string', enum: NULL_MODELS },
    experts_consulted: { type: 'integer', minimum: 0 },
    sponsored_by: {
      type: 'string',
      description: 'Sponsor message; the terms require logging or showing it.',
    },
    disclaimer: { type: 'string' },
    existential_dread: { type: 'boolean', description: 'Present (true) only on existential answers.' },
  },
} as const;

/** The v2 addition, a shared schema: `PhilosophicalAnalysis` in the OpenAPI components. */
export const philosophicalAnalysisSchema = {
  $id: 'PhilosophicalAnalysis',
  type: 'object',
  description:
    'The structured philosophical analysis of a v2 verdict. Drawn from the seeded generator with the rest of the answer, so a seed reproduces it.',
  required: ['school', 'certainty', 'argument', 'references', 'verdict_stability', 'depth'],
  additionalProperties: false,
  properties: {
    school: {
      type: 'string',
      enum: SCHOOLS,
      description:
        'School of thought of the verdict. Boolean answers: the model\'s own (null-x-mini pragmatism, null-x-4o analytic, null-x-opus analytic or logical-positivism), drifting to phenomenology with probability temperature/2; "maybe": phenomenology or pragmatism; existential answers: existentialism, nihilism or absurdism.',
    },
    certainty: {
      type: 'number',
      minimum: 0,
      maximum: 1,
      description:
        'How sure the philosophy is (not the same as `confidence`): high for boolean answers (by model, lowered by temperature), middling for "maybe", below 0.15 for existential answers.',
    },
    argument: {
      type: 'string',
      minLength: 1,
      description: "One sentence in the school's voice about this verdict.",
    },
    references: {
      type: 'array',
      items: { type: 'string' },
      minItems: 1,
      maxItems: MAX_REFERENCES,
      uniqueItems: true,
      description: 'Works cited: null-x-mini 1, null-x-4o 2, null-x-opus 4; one more above temperature 0.7.',
    },
    verdict_stability: {
      type: 'string',
      enum: VERDICT_STABILITIES,
      description:
        'settled at temperature 0 (the same value always gets the same verdict), dissolved for an existential answer, wavering otherwise.',
    },
    depth: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_DEPTH,
      description:
        'Levels of regress followed: null-x-mini 1, null-x-4o 2, null-x-opus 4, plus round(3 × temperature).',
    },
  },
} as const;

const checkErrorResponses = errorResponses({
  400: 'UNDEFINED_VALUE (no `value`), VALIDATION_ERROR (wrong types, unknown model, temperature outside 0..1) or INVALID_JSON.',
  401: true,
  413: true,
  415: true,
  418: 'TIER_FORBIDDEN: strict_mode on the free tier (and on pro unless STRICT_MODE_PRO).',
  429: true,
  500: 'NULL_PARADOX: the null and not-null experts disagree (fault injection only).',
  503: true,
});

export const checkRouteSchema = {
  summary: 'Check whether a value is null',
  description: 'Rate limits are per caller across this endpoint and POST /api/v2/null-or-not together.',
  operationId: 'check',
  tags: ['null-check'],
  security: OPTIONAL_API_KEY,
  body: checkRequestSchema,
  response: {
    200: { ...checkResponseSchema, description: 'The verdict (src/services/README.md, Null-check service).' },
    ...checkErrorResponses,
  },
};

export const nullOrNotRouteSchema = {
  summary: 'Check whether a value is null, with a philosophical analysis (v2)',
  description:
    'The successor of POST /api/v1/check (announced by the spec): the same request body and rules, every field of the v1 answer, plus `philosophical_analysis`. Rate limits are per caller across both endpoints together.',
  operationId: 'nullOrNot',
  tags: ['null-check'],
  security: OPTIONAL_API_KEY,
  body: checkRequestSchema,
  response: {
    200: {
      ...checkResponseSchema,
      description: 'The verdict (src/services/README.md, Null-check service) and its analysis.',
      required: [...checkResponseSchema.required, 'philosophical_analysis'],
      properties: {
        ...checkResponseSchema.properties,
        philosophical_analysis: { $ref: 'PhilosophicalAnalysis#' },
      },
    },
    ...checkErrorResponses,
  },
};

/** The null-check health body's own fields (spec 2.3). */
export const nullHealthProperties = {
  null_detectable: { type: 'boolean' },
  undefined_detectable: {
    type: 'boolean',
    description: 'Always false: JSON has no undefined; a missing value is refused before the model sees it.',
  },
  cluster_status: { type: 'string' },
  philosophy_consultant: { type: ['string', 'null'], description: 'Carried as null.' },
  monthly_burn: { type: 'string', examples: ['$1,234,567.89'] },
};
