/**
 * An `UpstreamError` that also says HOW the call failed, for the retry and breaker decisions.
 *
 * Why a subclass and not more codes: the contract's codes are what clients see; the kind is an
 * internal fact (a refused connection and a 503 are both UPSTREAM_UNAVAILABLE to a client, but only
 * the refused connection provably never reached the service, which decides whether a paid
 * inference may be retried).
 */
import { UpstreamError, type UpstreamErrorCode, type UpstreamErrorOptions } from './errors.js';

export type FailureKind =
  /** The upstream answered with a non-2xx status. */
  | 'status'
  /** TCP connection refused: the request provably never reached the service. */
  | 'refused'
  /** Reset, DNS, socket closed before the answer's headers, ...: it may or may not have arrived. */
  | 'connection'
  /** Connect, headers or body did not complete within the attempt's time. */
  | 'timeout'
  /** The caller's signal aborted the call. */
  | 'aborted'
  /** The circuit breaker is open: no network at all. */
  | 'circuit-open'
  /** A 2xx answer whose body was unreadable, too large, not JSON, or of the wrong shape. */
  | 'bad-response'
  /** The request could not be sent as built (an invalid header value, an unserializable value). */
  | 'invalid-request';

export interface UpstreamFailureOptions extends UpstreamErrorOptions {
  kind: FailureKind;
}

export class UpstreamFailure extends UpstreamError {
  readonly kind: FailureKind;

  constructor(code: UpstreamErrorCode, message: string, options: UpstreamFailureOptions) {
    super(code, message, options);
    this.kind = options.kind;
  }
}
