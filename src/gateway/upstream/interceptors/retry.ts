/**
 * Retries of one upstream call, by its form's retry mode:
 * - 'idempotent' (a read: the null check, GET /pi): 503, refused/reset/socket errors, 429 (waits
 *   `Retry-After` only if it fits in the time left, else fails at once with RATE_LIMITED; without the
 *   header, the normal backoff), 500 at most once per call. Never 4xx, timeouts (a hanging upstream
 *   would eat the whole deadline again), bad bodies, an open circuit.
 * - 'unsent-only' (POST /inference, which costs money): only a refused connection, the one failure
 *   that proves the request never reached the service.
 * - 'none': never.
 *
 * Backoff: cockatiel's exponential backoff with full jitter. The loop is ours: cockatiel 3's
 * RetryPolicy sleeps without looking at cancellation, and the decision needs facts only the loop
 * has (the attempt, the time left against Retry-After, whether a 500 was retried already).
 */
import { ExponentialBackoff, fullJitterGenerator, type IBackoff } from 'cockatiel';
import { UpstreamCallError } from '../../errors.js';
import type { Operation } from '../../operation/operation.js';
import type { Interceptor, RetryMode } from '../dispatch.js';
import { errorFromFailure } from '../status-mapping.js';

export interface RetryOptions {
  /** Attempts in total, the first included. @default 3 */
  maxAttempts?: number;
  /** First backoff step in ms. @default 50 */
  backoffBaseMs?: number;
  /** Longest backoff step in ms. @default 1000 */
  backoffCapMs?: number;
  /** Without an operation deadline, the longest Retry-After worth waiting for, in ms. @default 5000 */
  maxRateLimitWaitMs?: number;
}

function retryable(mode: RetryMode, failure: UpstreamCallError, serverErrorRetried: boolean): boolean {
  if (mode === 'none') return false;
  if (failure.kind === 'refused') return true;
  if (mode !== 'idempotent') return false;
  if (failure.kind === 'connection') {
    // A name that does not resolve will not resolve 50 ms later either.
    return (failure.cause as { code?: unknown } | undefined)?.code !== 'ENOTFOUND';
  }
  if (failure.kind !== 'status') return false;
  switch (failure.statusCode) {
    case 503:
    case 429:
      return true;
    case 500:
      return !serverErrorRetried;
    default:
      return false;
  }
}

/** Waits `ms`, or rejects as cancelled as soon as the operation is. */
function pause(ms: number, operation: Operation | undefined, failure: UpstreamCallError): Promise<void> {
  return new Promise((resolve, reject) => {
    let unsubscribe: (() => void) | undefined;
    const timer = setTimeout(() => {
      unsubscribe?.();
      resolve();
    }, ms);
    unsubscribe = operation?.onCancel((reason) => {
      clearTimeout(timer);
      reject(errorFromFailure('cancelled', failure.upstream, { cause: reason }));
    });
  });
}

export function retry(options: RetryOptions = {}): Interceptor {
  const maxAttempts = Math.max(1, options.maxAttempts ?? 3);
  const maxRateLimitWaitMs = options.maxRateLimitWaitMs ?? 5000;
  const backoffPolicy = new ExponentialBackoff({
    generator: fullJitterGenerator,
    initialDelay: options.backoffBaseMs ?? 50,
    maxDelay: options.backoffCapMs ?? 1000,
  });
  return (next) =>
    async function retrying(request) {
      let serverErrorRetried = false;
      let backoff: IBackoff<unknown> | undefined;
      for (let attempt = 1; ; attempt++) {
        try {
          return await next(attempt === 1 ? request : { ...request, attempt });
        } catch (failure) {
          const operation = request.operation;
          if (attempt >= maxAttempts || !(failure instanceof UpstreamCallError) || operation?.cancelled)
            throw failure;
          if (!retryable(request.form.retry, failure, serverErrorRetried)) throw failure;
          if (failure.statusCode === 500) serverErrorRetried = true;
          const left = (operation?.deadline ?? Number.POSITIVE_INFINITY) - Date.now();
          let delay: number;
          if (failure.statusCode === 429 && failure.retryAfterSeconds !== undefined) {
            delay = failure.retryAfterSeconds * 1000;
            if (delay >= Math.min(left, operation === undefined ? maxRateLimitWaitMs : left)) throw failure;
          } else {
            backoff = backoff === undefined ? backoffPolicy.next() : backoff.next(undefined);
            delay = backoff.duration;
            if (delay >= left) throw failure;
          }
          if (delay > 0) await pause(delay, operation, failure);
        }
      }
    };
}
