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
import type {
  AnswerHandler,
  Dispatch,
  Interceptor,
  RetryMode,
  UpstreamAnswer,
  UpstreamRequest,
} from '../dispatch.js';
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

interface RetryPolicy {
  maxAttempts: number;
  maxRateLimitWaitMs: number;
  backoffPolicy: ExponentialBackoff<unknown>;
}

/**
 * One call's attempts: the handler of each. An answer goes up at once; a failure is retried (after
 * the backoff's pause, the one promise of this layer, on the failure path only) or goes up.
 */
class RetryingCall<T> implements AnswerHandler<T> {
  private attempt = 1;
  private serverErrorRetried = false;
  private backoff: IBackoff<unknown> | undefined = undefined;

  constructor(
    private readonly next: Dispatch,
    private readonly request: UpstreamRequest<T>,
    private readonly handler: AnswerHandler<T>,
    readonly policy: RetryPolicy,
  ) {}

  send(): void {
    const attempt = this.attempt;
    this.next(attempt === 1 ? this.request : { ...this.request, attempt }, this);
  }

  onAnswer(answer: UpstreamAnswer<T>): void {
    this.handler.onAnswer(answer);
  }

  onError(failure: unknown): void {
    const delay = this.delayBeforeRetry(failure);
    if (delay === undefined) {
      this.handler.onError(failure);
      return;
    }
    this.attempt++;
    if (delay <= 0) {
      // Not from inside the failed attempt's callback (undici's, for an answered status): after it.
      queueMicrotask(() => this.send());
      return;
    }
    pause(delay, this.request.operation, failure as UpstreamCallError).then(
      () => this.send(),
      (cancelled: unknown) => this.handler.onError(cancelled),
    );
  }

  /** How long to wait before the next attempt; undefined: `failure` is final. */
  private delayBeforeRetry(failure: unknown): number | undefined {
    const { request, policy, attempt } = this;
    const operation = request.operation;
    if (attempt >= policy.maxAttempts || !(failure instanceof UpstreamCallError) || operation?.cancelled)
      return undefined;
    if (!retryable(request.form.retry, failure, this.serverErrorRetried)) return undefined;
    if (failure.statusCode === 500) this.serverErrorRetried = true;
    const left = (operation?.deadline ?? Number.POSITIVE_INFINITY) - Date.now();
    if (failure.statusCode === 429 && failure.retryAfterSeconds !== undefined) {
      const delay = failure.retryAfterSeconds * 1000;
      if (delay >= Math.min(left, operation === undefined ? policy.maxRateLimitWaitMs : left))
        return undefined;
      return delay;
    }
    this.backoff = this.backoff === undefined ? policy.backoffPolicy.next() : this.backoff.next(undefined);
    const delay = this.backoff.duration;
    return delay >= left ? undefined : delay;
  }
}

export function retry(options: RetryOptions = {}): Interceptor {
  const policy: RetryPolicy = {
    maxAttempts: Math.max(1, options.maxAttempts ?? 3),
    maxRateLimitWaitMs: options.maxRateLimitWaitMs ?? 5000,
    backoffPolicy: new ExponentialBackoff({
      generator: fullJitterGenerator,
      initialDelay: options.backoffBaseMs ?? 50,
      maxDelay: options.backoffCapMs ?? 1000,
    }),
  };
  return (next) =>
    function retrying<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      new RetryingCall(next, request, handler, policy).send();
    };
}
