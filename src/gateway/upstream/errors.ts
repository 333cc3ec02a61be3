/**
 * Upstream failures as classes with a stable `code` (the contract §2 error code), in undici's style.
 *
 * `message` is client-safe: it never contains an upstream address, an API key or the upstream's raw
 * error body. Those stay on the error (`body`, `cause`) for the log only.
 */
import type { UpstreamName } from './types.js';

/** The GraphQL `extensions.code` values an upstream failure can produce (contract §2). */
export type UpstreamErrorCode =
  | 'UNDEFINED_VALUE'
  | 'TIER_FORBIDDEN'
  | 'RATE_LIMITED'
  | 'NULL_PARADOX'
  | 'UPSTREAM_ERROR'
  | 'UPSTREAM_UNAVAILABLE'
  | 'UPSTREAM_TIMEOUT'
  | 'UPSTREAM_BAD_RESPONSE'
  | 'UNAUTHENTICATED'
  | 'WAIVER_REQUIRED'
  | 'BAD_USER_INPUT';

export interface UpstreamErrorOptions {
  upstream: UpstreamName;
  /** HTTP status of the upstream answer, when there was one. */
  statusCode?: number | undefined;
  /** Raw upstream body (log only; never sent to clients). */
  body?: unknown;
  retryAfterSeconds?: number | undefined;
  cause?: unknown;
}

export class UpstreamError extends Error {
  readonly code: UpstreamErrorCode;
  readonly upstream: UpstreamName;
  readonly statusCode: number | undefined;
  readonly body: unknown;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: UpstreamErrorCode, message: string, options: UpstreamErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'UpstreamError';
    this.code = code;
    this.upstream = options.upstream;
    this.statusCode = options.statusCode;
    this.body = options.body;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** The GraphQL `extensions` the schema layer attaches (contract §2). */
  toExtensions(): Record<string, unknown> {
    const ext: Record<string, unknown> = { code: this.code, upstream: this.upstream };
    if (this.statusCode !== undefined) ext.upstreamStatus = this.statusCode;
    if (this.retryAfterSeconds !== undefined) ext.retryAfterSeconds = this.retryAfterSeconds;
    return ext;
  }
}

/** Type guard usable across module copies (checks the shape, not only `instanceof`). */
export function isUpstreamError(error: unknown): error is UpstreamError {
  return error instanceof UpstreamError;
}
