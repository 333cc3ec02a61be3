/** Route schemas of the null-check service: request validation and OpenAPI document in one. */
import { errorResponses, OPTIONAL_API_KEY } from '../shared/openapi.js';
import { DEFAULT_NULL_MODEL, NULL_MODELS } from './null-models.js';

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

export const checkRouteSchema = {
  summary: 'Check whether a value is null',
  operationId: 'check',
  tags: ['null-check'],
  security: OPTIONAL_API_KEY,
  body: checkRequestSchema,
  response: {
    200: { ...checkResponseSchema, description: 'The verdict (spec 2.2).' },
    ...errorResponses({
      400: 'UNDEFINED_VALUE (no `value`), VALIDATION_ERROR (wrong types, unknown model, temperature outside 0..1) or INVALID_JSON.',
      401: true,
      413: true,
      415: true,
      418: 'TIER_FORBIDDEN: strict_mode on the free tier (and on pro unless STRICT_MODE_PRO).',
      429: true,
      500: 'NULL_PARADOX: the null and not-null experts disagree (fault injection only).',
      503: true,
    }),
  },
};

export const nullHealthRouteSchema = {
  summary: 'Service health',
  operationId: 'health',
  tags: ['health'],
  security: [],
  response: {
    200: {
      description: 'Spec 2.3.',
      type: 'object',
      required: [
        'status',
        'null_detectable',
        'undefined_detectable',
        'cluster_status',
        'philosophy_consultant',
        'monthly_burn',
      ],
      properties: {
        status: {
          type: 'string',
          enum: ['ok', 'degraded'],
          description: 'degraded while fault injection is on.',
        },
        null_detectable: { type: 'boolean' },
        undefined_detectable: {
          type: 'boolean',
          description:
            'Always false: JSON has no undefined; a missing value is refused before the model sees it.',
        },
        cluster_status: { type: 'string' },
        philosophy_consultant: { type: ['string', 'null'], description: 'Carried as null.' },
        monthly_burn: { type: 'string', examples: ['$1,234,567.89'] },
      },
    },
    ...errorResponses({ 503: 'SERVICE_UNAVAILABLE: fault injection answers every request with 503.' }),
  },
};
