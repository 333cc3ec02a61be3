/**
 * Upstream status codes and transport failures → the error codes of docs/contract.md (Errors), with client-safe messages.
 *
 * Messages name the service and what happened, never an address, a key or the upstream's body:
 * those stay on the error (`body`, `cause`) for the log.
 */
import { z } from 'zod';
import { type ErrorCode, type FailureKind, UpstreamCallError, type UpstreamName } from '../errors.js';
import type { EndpointName } from './dispatch.js';

const SERVICE: Record<UpstreamName, string> = {
  'null-check': 'The null-check service',
  'pi-digits': 'The pi-digits service',
};

/** What the status mapping needs to know about the request that was sent. */
export interface StatusContext {
  upstream: UpstreamName;
  endpoint: EndpointName;
  statusCode: number;
  /** Raw response text (log only), or undefined when it could not be read. */
  text: string | undefined;
  retryAfter: string | string[] | undefined;
  /** null-check: whether the request carried a `value`. */
  hadValue?: boolean | undefined;
  /** inference: whether the request said the waiver was signed. */
  waiverSigned?: boolean | undefined;
}

/**
 * `Retry-After` as whole seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3).
 * Absent or unparsable → undefined. A date in the past → 0.
 */
export function parseRetryAfter(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.ceil(Number(text));
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - now) / 1000));
}

/**
 * The code of an error body: the reference services' `{"error": {"code": ...}}`, else a top-level
 * `{"code": ...}`; a code that is not a string is none.
 */
const errorCodeSchema = z.union([
  z.object({ error: z.object({ code: z.string() }) }).transform((body) => body.error.code),
  z.object({ code: z.string() }).transform((body) => body.code),
]);

/** `error.code` of the reference services' error body `{"error": {"code": ...}}`, if readable. */
export function errorCodeOf(text: string | undefined): string | undefined {
  if (text === undefined || text.length === 0 || text.length > 65_536) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const code = errorCodeSchema.safeParse(json);
  return code.success ? code.data : undefined;
}

function codeForStatus(ctx: StatusContext): ErrorCode {
  const { statusCode, upstream } = ctx;
  switch (statusCode) {
    case 400: {
      const bodyCode = errorCodeOf(ctx.text);
      if (upstream === 'null-check') {
        return bodyCode === 'UNDEFINED_VALUE' || ctx.hadValue === false
          ? 'UNDEFINED_VALUE'
          : 'BAD_USER_INPUT';
      }
      if (bodyCode === 'WAIVER_REQUIRED') return 'WAIVER_REQUIRED';
      // A service that does not send the reference services' error code: an unsigned waiver is
      // then the likeliest reason, and the one the caller can act on.
      if (bodyCode === undefined && ctx.endpoint === 'inference' && ctx.waiverSigned === false) {
        return 'WAIVER_REQUIRED';
      }
      return 'BAD_USER_INPUT';
    }
    case 401:
      return 'UNAUTHENTICATED';
    case 418:
      return 'TIER_FORBIDDEN';
    case 429:
      return 'RATE_LIMITED';
    case 500:
      return upstream === 'null-check' ? 'NULL_PARADOX' : 'UPSTREAM_ERROR';
    case 503:
      return 'UPSTREAM_UNAVAILABLE';
    default:
      return 'UPSTREAM_ERROR';
  }
}

function messageFor(code: ErrorCode, ctx: StatusContext, retryAfterSeconds: number | undefined): string {
  const service = SERVICE[ctx.upstream];
  switch (code) {
    case 'UNDEFINED_VALUE':
      return `${service} cannot check an undefined value: pass null or any existing value.`;
    case 'WAIVER_REQUIRED':
      return `${service} requires a signed liability waiver (liabilityWaiverSigned: true) for inference.`;
    case 'BAD_USER_INPUT':
      return `${service} rejected the request's arguments as invalid.`;
    case 'UNAUTHENTICATED':
      return `${service} rejected the API key.`;
    case 'TIER_FORBIDDEN':
      return ctx.upstream === 'null-check'
        ? `${service} refused the request for the caller's tier (strictMode needs a higher tier).`
        : `${service} refused the request for the caller's tier (more digits or sponsored: false need a higher tier).`;
    case 'RATE_LIMITED':
      return retryAfterSeconds === undefined
        ? `${service} rate limit was exceeded; retry later.`
        : `${service} rate limit was exceeded; retry after ${retryAfterSeconds} s.`;
    case 'NULL_PARADOX':
      return `${service} hit the null paradox (its experts disagreed) and gave no answer.`;
    case 'UPSTREAM_UNAVAILABLE':
      return `${service} is unavailable (HTTP ${ctx.statusCode}).`;
    default:
      return `${service} failed with HTTP ${ctx.statusCode}.`;
  }
}

/**
 * Whether a failure is the upstream saying the endpoint is not there (any more): a 404 or 410 answer.
 * The API-versions layer then tries the other version, its discovery reads a missing OpenAPI document
 * as v1, and the observer logs such an attempt at debug when its caller handles it (`mayBeGone`).
 */
export function isGone(error: unknown): error is UpstreamCallError {
  return (
    error instanceof UpstreamCallError &&
    error.kind === 'status' &&
    (error.statusCode === 404 || error.statusCode === 410)
  );
}

/** The error for a non-2xx answer. */
export function errorFromStatus(ctx: StatusContext): UpstreamCallError {
  const code = codeForStatus(ctx);
  const retryAfterSeconds = ctx.statusCode === 429 ? parseRetryAfter(ctx.retryAfter) : undefined;
  return new UpstreamCallError(code, messageFor(code, ctx, retryAfterSeconds), {
    kind: 'status',
    upstream: ctx.upstream,
    statusCode: ctx.statusCode,
    body: ctx.text,
    retryAfterSeconds,
  });
}

/** The error for a failure without a usable answer (network, timeout, abort, breaker, bad body). */
export function errorFromFailure(
  kind: Exclude<FailureKind, 'status'>,
  upstream: UpstreamName,
  extra: {
    statusCode?: number | undefined;
    body?: string | undefined;
    cause?: unknown;
    detail?: string;
  } = {},
): UpstreamCallError {
  const service = SERVICE[upstream];
  let code: ErrorCode;
  let message: string;
  switch (kind) {
    case 'refused':
    case 'connection':
      code = 'UPSTREAM_UNAVAILABLE';
      message = `${service} could not be reached.`;
      break;
    case 'circuit-open':
      code = 'UPSTREAM_UNAVAILABLE';
      message = `${service} is unavailable: calls are paused after repeated failures (circuit open).`;
      break;
    case 'timeout':
      code = 'UPSTREAM_TIMEOUT';
      message =
        extra.detail === 'deadline'
          ? `${service} did not answer before the operation's deadline.`
          : `${service} did not answer in time.`;
      break;
    case 'cancelled':
      // The client went away: nobody reads this answer, and it is no upstream failure.
      code = 'UPSTREAM_UNAVAILABLE';
      message = `The call to the ${upstream} service was cancelled: the client went away.`;
      break;
    case 'refused-by-gateway':
      code = 'WAIVER_REQUIRED';
      message = extra.detail ?? `The gateway refused to call the ${upstream} service.`;
      break;
    case 'bad-response':
      code = 'UPSTREAM_BAD_RESPONSE';
      message =
        extra.detail === undefined
          ? `${service} answered with a body that does not fit its interface.`
          : `${service} answered with a body that does not fit its interface (${extra.detail}).`;
      break;
    case 'invalid-request':
      code = 'BAD_USER_INPUT';
      message =
        extra.detail === undefined
          ? `The request to the ${upstream} service could not be sent.`
          : `The request to the ${upstream} service could not be sent (${extra.detail}).`;
      break;
  }
  return new UpstreamCallError(code, message, {
    kind,
    upstream,
    statusCode: extra.statusCode,
    body: extra.body,
    cause: extra.cause,
  });
}
