/**
 * Route schemas of the pi-digits service: request validation and OpenAPI document in one. Built per
 * instance because the digit maximum (PI_MAX_DIGITS) is an option.
 */
import { errorResponses, OPTIONAL_API_KEY } from '../shared/openapi.js';
import { DEFAULT_PI_MODEL, PI_MODELS } from './pi-models.js';

const commonAnswerProperties = {
  digits: {
    type: 'string',
    pattern: '^[0-9](\\.[0-9]+)?$',
    description: 'Integer part, a decimal point, then `precision` decimal places ("3" for 0 decimals).',
    examples: ['3.14159'],
  },
  precision: {
    type: 'integer',
    minimum: 0,
    description: 'Decimal places returned (below the request when the tier limit clamped it).',
  },
  confidence: { type: 'number', minimum: 0, maximum: 1 },
  model: { type: 'string', enum: PI_MODELS, description: 'The model that answered.' },
  inference_time_ms: { type: 'integer', minimum: 0 },
} as const;

const trailingAnswerProperties = {
  constant: {
    type: 'string',
    enum: ['pi', 'e'],
    description:
      'Which constant these digits are of: "e" when the model recalled e instead of pi (temperature > 0).',
  },
  disclaimer: { type: 'string' },
} as const;

const modelProperty = {
  type: 'string',
  enum: PI_MODELS,
  default: DEFAULT_PI_MODEL,
  description:
    'pi-x-4o: true digits; pi-x-mini: about one place in seven wrong; pi-x-opus-almost-correct: last place off by one.',
} as const;

const temperatureProperty = {
  type: 'number',
  minimum: 0,
  maximum: 1,
  default: 0,
  description: 'Above 0 the model may return e instead of pi (probability 0.4 × temperature).',
} as const;

const tierErrors = (extra: string) =>
  `TIER_FORBIDDEN: more digits than the tier allows (free 3, pro 10, enterprise unlimited or 10)${extra}; with PI_OVER_LIMIT=clamp the digits are clamped instead.`;

export function piRouteSchema(maxDigits: number) {
  return {
    summary: 'Digits of pi',
    operationId: 'pi',
    tags: ['pi'],
    security: OPTIONAL_API_KEY,
    querystring: {
      type: 'object',
      properties: {
        digits: {
          type: 'integer',
          minimum: 0,
          maximum: maxDigits,
          default: 3,
          description: `Decimal places wanted. Free tier: at most 3. Outside 0..${maxDigits}: 400 DIGITS_OUT_OF_RANGE.`,
        },
        model: modelProperty,
        temperature: temperatureProperty,
        sponsored: {
          type: 'boolean',
          default: true,
          description: 'Include the sponsor message ("true"/"false"). The free tier requires true.',
        },
      },
    },
    response: {
      200: {
        description: 'Spec 2.1.',
        type: 'object',
        required: [
          'digits',
          'precision',
          'confidence',
          'model',
          'inference_time_ms',
          'gpu_cost_usd',
          'sponsored_by',
          'disclaimer',
          'constant',
        ],
        properties: {
          ...commonAnswerProperties,
          gpu_cost_usd: { type: 'number', minimum: 0 },
          sponsored_by: {
            type: ['string', 'null'],
            description: 'Sponsor message; null when sponsored=false. The terms require logging it.',
          },
          ...trailingAnswerProperties,
        },
      },
      ...errorResponses({
        400: 'DIGITS_OUT_OF_RANGE (digits negative or above the maximum) or VALIDATION_ERROR (not an integer, unknown model, temperature outside 0..1, sponsored not true/false).',
        401: true,
        418: tierErrors(', or sponsored=false on the free tier'),
        429: true,
        500: 'INTERNAL_ERROR: failure of the generation cluster (fault injection only).',
        503: true,
      }),
    },
  };
}

export function inferenceRouteSchema(maxDigits: number) {
  return {
    summary: 'Digits of pi by inference (beta, labelled v2)',
    operationId: 'inference',
    tags: ['pi'],
    security: OPTIONAL_API_KEY,
    body: {
      type: 'object',
      description: 'Spec 2.2.',
      required: ['desired_digits', 'liability_waiver_signed'],
      properties: {
        desired_digits: {
          type: 'integer',
          minimum: 0,
          maximum: maxDigits,
          description: 'Decimal places wanted; same tier limits as GET /api/v1/pi.',
        },
        model: modelProperty,
        temperature: temperatureProperty,
        use_chain_of_thought: { type: 'boolean', default: false, description: 'Return the reasoning text.' },
        liability_waiver_signed: {
          type: 'boolean',
          const: true,
          description: 'Must be true; missing or false is 400 WAIVER_REQUIRED.',
        },
      },
    },
    response: {
      200: {
        description: 'Spec 2.3 (plus precision, model, constant and the common metadata).',
        type: 'object',
        required: [
          'digits',
          'chain_of_thought',
          'tokens_used',
          'cost',
          'precision',
          'model',
          'constant',
          'confidence',
          'inference_time_ms',
          'sponsored_by',
          'disclaimer',
        ],
        properties: {
          ...commonAnswerProperties,
          chain_of_thought: {
            type: ['string', 'null'],
            description: 'The reasoning text when use_chain_of_thought is true, else null.',
          },
          tokens_used: { type: 'integer', minimum: 0 },
          cost: { type: 'string', pattern: '^\\$[0-9]+\\.[0-9]{4}$', examples: ['$0.0042'] },
          sponsored_by: { type: 'string' },
          ...trailingAnswerProperties,
        },
      },
      ...errorResponses({
        400: 'WAIVER_REQUIRED (liability_waiver_signed missing or false), DIGITS_OUT_OF_RANGE, VALIDATION_ERROR or INVALID_JSON.',
        401: true,
        413: true,
        415: true,
        418: tierErrors(''),
        429: true,
        500: 'INTERNAL_ERROR: failure of the generation cluster (fault injection only).',
        503: true,
      }),
    },
  };
}

/** The pi-digits health body's own fields (spec 2.4). */
export const piHealthProperties = {
  pi_available: { type: 'boolean' },
  gpu_cluster: { type: 'string' },
  monthly_burn_rate: { type: 'string', examples: ['$2,718,281.83'] },
};
