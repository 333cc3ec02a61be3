/**
 * Pieces of the route schemas shared by both services. The route schemas are at the same time the
 * request validation and the OpenAPI 3.1 document (`/openapi.json`), so what is documented here is
 * what the services really do.
 */
import type { ServiceErrorCode } from './service-error.js';

const ERROR_CODES: readonly ServiceErrorCode[] = [
  'UNDEFINED_VALUE',
  'VALIDATION_ERROR',
  'INVALID_JSON',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'UNAUTHENTICATED',
  'TIER_FORBIDDEN',
  'WAIVER_REQUIRED',
  'DIGITS_OUT_OF_RANGE',
  'RATE_LIMITED',
  'NULL_PARADOX',
  'INTERNAL_ERROR',
  'SERVICE_UNAVAILABLE',
  'NOT_FOUND',
  'ENDPOINT_RETIRED',
];

/** The error body schema, added to each service with `addSchema` and referenced as `ErrorBody#`. */
export const ERROR_BODY_SCHEMA = {
  $id: 'ErrorBody',
  type: 'object',
  description: 'The body of every non-2xx answer.',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['status', 'code', 'message'],
      properties: {
        status: { type: 'integer', description: 'The HTTP status, repeated.', examples: [418] },
        code: { type: 'string', enum: ERROR_CODES, description: 'Stable machine-readable code.' },
        message: { type: 'string', description: 'Human-readable explanation (never contains the API key).' },
      },
    },
  },
} as const;

/** Security requirement of the model routes: no key (free tier), a bearer key, or an X-API-Key key. */
export const OPTIONAL_API_KEY = [{}, { bearerAuth: [] }, { apiKeyHeader: [] }] as const;

/** The security schemes of both documents. */
export const SECURITY_SCHEMES = {
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    description: 'API key as `Authorization: Bearer <key>`. No key, or the key `free`, is the free tier.',
  },
  apiKeyHeader: {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Key',
    description: 'API key as `X-API-Key: <key>` (alternative to the bearer header).',
  },
} as const;

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Bad request (see `error.code`).',
  401: 'UNAUTHENTICATED: the API key is not known.',
  404: 'NOT_FOUND.',
  413: 'PAYLOAD_TOO_LARGE: the body is larger than the body limit.',
  415: 'UNSUPPORTED_MEDIA_TYPE: the body is not application/json.',
  410: 'ENDPOINT_RETIRED: the endpoint is retired; the message and the `Link` header name its successor.',
  418: 'TIER_FORBIDDEN: the request needs a higher tier.',
  429: 'RATE_LIMITED: too many requests in this minute for this key.',
  500: 'Internal failure (fault injection only).',
  503: 'SERVICE_UNAVAILABLE (fault injection only).',
};

/** Response schemas for the listed error statuses, with per-status descriptions where given. */
export function errorResponses(statuses: Record<number, string | true>): Record<number, object> {
  const out: Record<number, object> = {};
  for (const [key, text] of Object.entries(statuses)) {
    const status = Number(key);
    const description = text === true ? (ERROR_DESCRIPTIONS[status] ?? 'Error.') : text;
    const response: Record<string, unknown> = { description, $ref: 'ErrorBody#' };
    if (status === 429 || status === 503) {
      response.headers = {
        'retry-after': { type: 'integer', minimum: 1, description: 'Whole seconds to wait before retrying.' },
      };
    }
    out[status] = response;
  }
  return out;
}

/**
 * The route schema of GET /api/v1/health: `status` plus the service's own fields, every one required.
 * `spec` is the response's description (the spec section the body follows).
 */
export function healthRouteSchema(spec: string, properties: Record<string, object>) {
  return {
    summary: 'Service health',
    operationId: 'health',
    tags: ['health'],
    security: [],
    response: {
      200: {
        description: spec,
        type: 'object',
        required: ['status', ...Object.keys(properties)],
        properties: {
          status: {
            type: 'string',
            enum: ['ok', 'degraded'],
            description: 'degraded while fault injection is on.',
          },
          ...properties,
        },
      },
      ...errorResponses({ 503: 'SERVICE_UNAVAILABLE: fault injection answers every request with 503.' }),
    },
  };
}
