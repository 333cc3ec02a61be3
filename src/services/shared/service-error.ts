/**
 * The one error type of the reference services. Every failure, whatever raised it, leaves the
 * service as `{"error": {"status", "code", "message"}}` (src/services/README.md), so callers can branch on a
 * stable `code` and never see a stack trace.
 */

/** Every error code the reference services answer with. */
export type ServiceErrorCode =
  | 'UNDEFINED_VALUE'
  | 'VALIDATION_ERROR'
  | 'INVALID_JSON'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'UNAUTHENTICATED'
  | 'TIER_FORBIDDEN'
  | 'WAIVER_REQUIRED'
  | 'DIGITS_OUT_OF_RANGE'
  | 'RATE_LIMITED'
  | 'NULL_PARADOX'
  | 'INTERNAL_ERROR'
  | 'SERVICE_UNAVAILABLE'
  | 'NOT_FOUND'
  | 'ENDPOINT_RETIRED';

/** The error body of every non-2xx answer. */
export interface ErrorBody {
  error: { status: number; code: ServiceErrorCode; message: string };
}

export class ServiceError extends Error {
  readonly code: ServiceErrorCode;
  readonly statusCode: number;

  constructor(statusCode: number, code: ServiceErrorCode, message: string) {
    super(message);
    this.name = 'ServiceError';
    this.statusCode = statusCode;
    this.code = code;
  }

  get body(): ErrorBody {
    return errorBody(this.statusCode, this.code, this.message);
  }
}

export function errorBody(status: number, code: ServiceErrorCode, message: string): ErrorBody {
  return { error: { status, code, message } };
}
