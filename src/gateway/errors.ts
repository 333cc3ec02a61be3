/**
 * Every error code a client of the gateway can see, in one table, and the error classes that carry
 * them. docs/contract.md lists the same table for people; a test keeps the two equal.
 *
 * Classes are branded (`Symbol.for` + `static [Symbol.hasInstance]`, as undici does): `instanceof`
 * holds across two copies of this module (ESM and CJS under vitest, a bundled copy), where a plain
 * class check would silently fail and an upstream error would be masked as "Unexpected error.".
 */
import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';

/** The codes, with the HTTP status of a request-level answer where one applies. */
export const ERROR_CODES = {
  // Field errors: the operation goes on, other fields still resolve (partial results).
  UNDEFINED_VALUE: { field: true, when: 'isNull without a value (upstream 400)' },
  TIER_FORBIDDEN: {
    field: true,
    when: "strict mode, more digits, or sponsored: false beyond the caller's tier (upstream 418)",
  },
  RATE_LIMITED: { field: true, when: 'upstream 429; extensions.retryAfterSeconds when known' },
  NULL_PARADOX: { field: true, when: 'null-check upstream 500' },
  UPSTREAM_ERROR: { field: true, when: 'pi-digits upstream 500, or any other unexpected upstream status' },
  UPSTREAM_UNAVAILABLE: {
    field: true,
    when: "upstream 503, connection refused, or the gateway's circuit is open; or, for the whole request (HTTP 503 with Retry-After, nothing called, upstream: identity-provider), the identity provider (AUTH_ISSUER) unreachable while a bearer token needs its keys",
  },
  UPSTREAM_TIMEOUT: {
    field: true,
    when: 'the upstream did not answer in time (or the operation deadline passed)',
  },
  UPSTREAM_BAD_RESPONSE: {
    field: true,
    when: 'the upstream answered with a body that does not fit its interface',
  },
  UNAUTHENTICATED: {
    field: true,
    when: 'the upstream rejected the API key; or, for the whole request (HTTP 401, nothing called or billed), an Authorization header that is not Bearer <credential>, a bearer token that fails verification (WWW-Authenticate: Bearer error="invalid_token": expired, not yet valid, another issuer or audience, an unknown key, an algorithm other than an asymmetric one, a bad signature, over 8 KB), or an API key with AUTH_MODE=tokens',
  },
  WAIVER_REQUIRED: {
    field: true,
    when: 'inference without liabilityWaiverSigned: true, or pi over the v2 endpoint without PI_WAIVER_ACCEPTED',
  },
  BAD_USER_INPUT: {
    field: true,
    when: 'arguments out of range, bad variables, a malformed X-Max-Cost-Usd, or an operation over MAX_UPSTREAM_CALLS',
  },
  BUDGET_EXCEEDED: {
    field: false,
    when: "the estimate is over X-Max-Cost-Usd (for a batch: the batch's), or does not fit in what is left of a window of the API key's budget, COST_BUDGETS or COST_BUDGET_USD_PER_HOUR (retryAfterSeconds and budgetWindow of the window that refused)",
  },
  // Request-level errors: no data at all.
  GRAPHQL_PARSE_FAILED: { field: false, when: 'the document is not valid GraphQL (HTTP 400)' },
  GRAPHQL_VALIDATION_FAILED: {
    field: false,
    when: 'the document does not fit the schema or the limits (depth, aliases, directives, introspection off) (HTTP 422)',
  },
  OPERATION_RESOLUTION_FAILURE: {
    field: false,
    when: 'the operation to run cannot be determined: several operations and no operationName, or a name the document does not define (HTTP 422)',
  },
  BAD_REQUEST: {
    field: false,
    when: 'a body that is not JSON (HTTP 400); a request that is not a well-formed GraphQL-over-HTTP request (no query, variables not an object, an unexpected parameter), or a batch while BATCH_LIMIT is 0 (HTTP 422); a batch longer than BATCH_LIMIT (HTTP 413)',
  },
  PERSISTED_QUERY_NOT_FOUND: {
    field: false,
    when: 'a documentId or APQ hash the gateway does not know (message PersistedQueryNotFound, HTTP 404): an APQ client then sends the text',
  },
  PERSISTED_QUERY_NOT_IN_LIST: {
    field: false,
    when: 'TRUSTED_DOCUMENTS_MODE=enforce and the document is not in the manifest (HTTP 403); nothing is called',
  },
  METHOD_NOT_ALLOWED: {
    field: false,
    when: 'a method other than GET, POST and QUERY (HTTP 405, Allow: GET, POST, QUERY); a mutation sent by QUERY (HTTP 405, Allow: POST)',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    field: false,
    when: 'a POST whose Content-Type no parser takes (text/plain, none, XML) (HTTP 415, before any CSRF check)',
  },
  REQUEST_ENTITY_TOO_LARGE: { field: false, when: 'a body over MAX_REQUEST_BODY_BYTES (HTTP 413)' },
  CSRF_PREVENTED: {
    field: false,
    when: 'a form or multipart POST a browser could send cross-site without a preflight, without a CSRF header (HTTP 403)',
  },
  INTERNAL_SERVER_ERROR: {
    field: true,
    when: 'anything unexpected; the message is masked as "Unexpected error."',
  },
} as const satisfies Record<string, { field: boolean; when: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Which upstream a call or an error belongs to (`extensions.upstream`). */
export type UpstreamName = 'null-check' | 'pi-digits';

/**
 * How an upstream call failed: decides retries and the circuit breaker; clients only see the code.
 * A refused connection and a 503 are both UPSTREAM_UNAVAILABLE, but only the refused connection
 * provably never reached the service, which decides whether a paid call may be retried.
 */
export type FailureKind =
  /** The upstream answered with a non-2xx status. */
  | 'status'
  /** TCP connection refused: the request provably never reached the service. */
  | 'refused'
  /** Reset, DNS, socket closed before the answer's headers: it may or may not have arrived. */
  | 'connection'
  /** Connect, headers or body did not complete within the attempt's time. */
  | 'timeout'
  /** The operation was cancelled (the client went away); nothing to report to anyone. */
  | 'cancelled'
  /** The circuit breaker is open: no network at all. */
  | 'circuit-open'
  /** A 2xx answer whose body was unreadable, too large, not JSON, or of the wrong shape. */
  | 'bad-response'
  /** The request could not be sent as built (an invalid header value, an unserializable value). */
  | 'invalid-request'
  /** The gateway refused before calling (waiver not accepted for the v2 endpoint). */
  | 'refused-by-gateway';

const UPSTREAM_CALL_ERROR = Symbol.for('null-pi.gateway.UpstreamCallError');

export interface UpstreamCallErrorOptions {
  kind: FailureKind;
  upstream: UpstreamName;
  /** HTTP status of the upstream answer, when there was one. */
  statusCode?: number | undefined;
  /** Raw upstream body: for the log only, never sent to a client. */
  body?: string | undefined;
  retryAfterSeconds?: number | undefined;
  cause?: unknown;
}

/**
 * One failed upstream call. `message` is client-safe: never an upstream address, an API key or the
 * upstream's raw body; those stay on the error (`body`, `cause`) for the log only.
 */
export class UpstreamCallError extends Error {
  readonly code: ErrorCode;
  readonly kind: FailureKind;
  readonly upstream: UpstreamName;
  readonly statusCode: number | undefined;
  readonly body: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: UpstreamCallErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'UpstreamCallError';
    this.code = code;
    this.kind = options.kind;
    this.upstream = options.upstream;
    this.statusCode = options.statusCode;
    this.body = options.body;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get [UPSTREAM_CALL_ERROR](): true {
    return true;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && UPSTREAM_CALL_ERROR in value;
  }

  /** The GraphQL `extensions` of the field error (docs/contract.md, Errors). */
  toExtensions(): Record<string, unknown> {
    const ext: Record<string, unknown> = { code: this.code, upstream: this.upstream };
    if (this.statusCode !== undefined) ext.upstreamStatus = this.statusCode;
    if (this.retryAfterSeconds !== undefined) ext.retryAfterSeconds = this.retryAfterSeconds;
    return ext;
  }
}

/**
 * A client-facing GraphQL error with a code from the table. Only errors made here (or by graphql-js
 * and Yoga for requests) reach clients; anything else is masked.
 */
export function gatewayError(
  code: ErrorCode,
  message: string,
  extensions: Record<string, unknown> = {},
): GraphQLError {
  return createGraphQLError(message, { extensions: { ...extensions, code } });
}

/** The field error for a failed upstream call, or the error itself when it is something else (masked). */
export function fieldErrorOf(error: unknown): unknown {
  return error instanceof UpstreamCallError
    ? createGraphQLError(error.message, { extensions: error.toExtensions() })
    : error;
}
