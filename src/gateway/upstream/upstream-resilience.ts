/**
 * Retries and the circuit breaker of one upstream.
 *
 * The breaker is cockatiel's `CircuitBreakerPolicy` with a `ConsecutiveBreaker`, and the backoff is
 * cockatiel's `ExponentialBackoff` with full jitter. The retry LOOP is ours: cockatiel 3.2.1's
 * `RetryPolicy` waits out its backoff without looking at the AbortSignal (a cancelled call would sit
 * in a backoff sleep), and the decision to retry depends on facts only the loop has (attempt, the
 * remaining deadline against `Retry-After`, whether a 500 was already retried).
 *
 * Retry policy (attempts ≤ retryMaxAttempts, all modes):
 * - 'idempotent' (GET /pi, POST /check — a pure read): 503, refused/reset/socket errors, 429 (waits
 *   `Retry-After` only if it fits in the remaining time, else fails at once with RATE_LIMITED;
 *   without the header, the normal backoff), 500 at most once per call. Never 4xx, timeouts
 *   (a hanging upstream would eat the whole deadline again), bad bodies, an open circuit.
 * - 'unsent-only' (POST /inference, which costs money): only a refused connection, the one failure
 *   that proves the request never reached the service.
 *
 * Breaker: consecutive failures (5xx, timeouts, refused/broken connections; not 4xx, not 429, not
 * bad bodies, not the caller's own aborts) open it; while open, calls fail at once with
 * UPSTREAM_UNAVAILABLE and no network. After `halfOpenAfter` the next call first probes the
 * upstream's health endpoint: success closes the circuit and the call proceeds, failure re-opens it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BrokenCircuitError,
  type CircuitBreakerPolicy,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker,
  ExponentialBackoff,
  fullJitterGenerator,
  handleWhen,
  type IBackoff,
  IsolatedCircuitError,
} from 'cockatiel';
import { errorFromFailure } from './error-mapping.js';
import type { HealthProbe, UpstreamName } from './types.js';
import { UpstreamFailure } from './upstream-failure.js';

export type RetryMode = 'idempotent' | 'unsent-only';
export type BreakerState = HealthProbe<unknown>['breaker'];

export interface UpstreamResilienceOptions {
  upstream: UpstreamName;
  /** Resolves true when the upstream's health endpoint answered 2xx; used by the half-open probe. */
  probe: () => Promise<boolean>;
  /** @default 5; 0 disables the breaker */
  breakerThreshold?: number;
  /** @default 5000 */
  breakerHalfOpenAfterMs?: number;
  /** @default 3 — attempts in total, the first included */
  retryMaxAttempts?: number;
  /** @default 50 */
  backoffBaseMs?: number;
  /** @default 1000 */
  backoffCapMs?: number;
  /** Called when the circuit opens, half-opens or closes (for logs and metrics). */
  onBreakerStateChange?: (state: BreakerState) => void;
}

/** The facts of one logical call the loop needs. */
export interface RunOptions {
  signal?: AbortSignal | undefined;
  /** Absolute deadline (Date.now() ms) of the whole call, retries included. */
  deadline?: number | undefined;
  /** Per-attempt timeout before the deadline shortens it. */
  timeoutMs: number;
}

/** One attempt: `timeoutMs` is this attempt's share of the time. */
export type AttemptFn<T> = (attempt: number, timeoutMs: number) => Promise<T>;

/** A failure that says the upstream itself is unwell (not the caller, not the body). */
export function countsAsBreakerFailure(error: unknown): boolean {
  if (!(error instanceof UpstreamFailure)) return false;
  switch (error.kind) {
    case 'refused':
    case 'connection':
    case 'timeout':
    case 'circuit-open': // only thrown inside the breaker by a failed half-open probe
      return true;
    case 'status':
      return error.statusCode !== undefined && error.statusCode >= 500;
    default:
      return false;
  }
}

const STATE_NAMES: Record<CircuitState, BreakerState> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half-open',
  [CircuitState.Isolated]: 'open',
};

/** Returned by the half-open test run when the probe succeeded: the real call still has to happen. */
const PROBED = Symbol('probed');

function raceAbort<T>(
  promise: Promise<T>,
  signal: AbortSignal | undefined,
  upstream: UpstreamName,
): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(errorFromFailure('aborted', upstream, { cause: signal.reason }));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

export class UpstreamResilience {
  readonly upstream: UpstreamName;
  readonly maxAttempts: number;
  readonly #breaker: CircuitBreakerPolicy | undefined;
  readonly #backoff: ExponentialBackoff<unknown>;
  readonly #probe: () => Promise<boolean>;
  /** Set by the breaker's half-open event: the next run inside the breaker is the test run. */
  #probeNext = false;

  constructor(options: UpstreamResilienceOptions) {
    this.upstream = options.upstream;
    this.maxAttempts = Math.max(1, options.retryMaxAttempts ?? 3);
    this.#probe = options.probe;
    this.#backoff = new ExponentialBackoff({
      generator: fullJitterGenerator,
      initialDelay: options.backoffBaseMs ?? 50,
      maxDelay: options.backoffCapMs ?? 1000,
    });
    const threshold = options.breakerThreshold ?? 5;
    if (threshold > 0) {
      const breaker = circuitBreaker(handleWhen(countsAsBreakerFailure), {
        halfOpenAfter: options.breakerHalfOpenAfterMs ?? 5000,
        breaker: new ConsecutiveBreaker(threshold),
      });
      // cockatiel emits this synchronously right before it invokes the test run.
      breaker.onHalfOpen(() => {
        this.#probeNext = true;
      });
      const onChange = options.onBreakerStateChange;
      if (onChange !== undefined) breaker.onStateChange((state) => onChange(STATE_NAMES[state]));
      this.#breaker = breaker;
    }
  }

  breakerState(): BreakerState {
    return this.#breaker === undefined ? 'disabled' : STATE_NAMES[this.#breaker.state];
  }

  /** Runs `fn` with the retry policy of `mode`, each attempt through the breaker. */
  async run<T>(mode: RetryMode, fn: AttemptFn<T>, options: RunOptions): Promise<T> {
    let serverErrorRetried = false;
    let backoff: IBackoff<unknown> | undefined;
    for (let attempt = 1; ; attempt++) {
      const remaining =
        options.deadline === undefined ? Number.POSITIVE_INFINITY : options.deadline - Date.now();
      if (remaining <= 0) throw errorFromFailure('timeout', this.upstream);
      const timeoutMs = Math.min(options.timeoutMs, remaining);
      let failure: unknown;
      try {
        return await this.#once(fn, attempt, timeoutMs, options.signal);
      } catch (error) {
        failure = error;
      }
      if (attempt >= this.maxAttempts || !(failure instanceof UpstreamFailure)) throw failure;
      if (options.signal?.aborted) throw failure;

      const left = options.deadline === undefined ? Number.POSITIVE_INFINITY : options.deadline - Date.now();
      let delay: number;
      if (!this.#retryable(mode, failure, serverErrorRetried)) throw failure;
      if (failure.statusCode === 500) serverErrorRetried = true;
      if (failure.statusCode === 429 && failure.retryAfterSeconds !== undefined) {
        // Without a deadline, one attempt's timeout is the most a rate-limit wait may take.
        const budget = options.deadline === undefined ? options.timeoutMs : left;
        delay = failure.retryAfterSeconds * 1000;
        if (delay >= budget) throw failure;
      } else {
        backoff = backoff === undefined ? this.#backoff.next() : backoff.next(undefined);
        delay = backoff.duration;
        if (delay >= left) throw failure;
      }
      if (delay > 0) {
        try {
          await sleep(
            delay,
            undefined,
            options.signal === undefined ? undefined : { signal: options.signal },
          );
        } catch {
          throw errorFromFailure('aborted', this.upstream, { cause: options.signal?.reason });
        }
      }
    }
  }

  #retryable(mode: RetryMode, failure: UpstreamFailure, serverErrorRetried: boolean): boolean {
    if (failure.kind === 'refused') return true;
    if (mode !== 'idempotent') return false;
    if (failure.kind === 'connection') {
      // A name that does not resolve will not resolve 50 ms later either.
      const code = (failure.cause as { code?: unknown } | undefined)?.code;
      return code !== 'ENOTFOUND';
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

  async #once<T>(
    fn: AttemptFn<T>,
    attempt: number,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    const breaker = this.#breaker;
    if (breaker === undefined) return fn(attempt, timeoutMs);
    const run = () => this.#insideBreaker(fn, attempt, timeoutMs);
    let result: T | UpstreamFailure | typeof PROBED;
    try {
      // Closed: the plain path. Otherwise this call may become the half-open probe (or wait for
      // another call's probe), and the caller must still be able to walk away promptly.
      result =
        breaker.state === CircuitState.Closed
          ? await breaker.execute(run)
          : await raceAbort(breaker.execute(run), signal, this.upstream);
      if (result === PROBED) result = await breaker.execute(run);
    } catch (error) {
      if (error instanceof BrokenCircuitError || error instanceof IsolatedCircuitError) {
        throw errorFromFailure('circuit-open', this.upstream, { cause: error });
      }
      throw error;
    }
    // Failures that do not count against the upstream come back as values so that the breaker
    // records a success (the upstream answered properly, e.g. a 418), then are thrown here.
    if (result instanceof UpstreamFailure) throw result;
    return result as T;
  }

  async #insideBreaker<T>(
    fn: AttemptFn<T>,
    attempt: number,
    timeoutMs: number,
  ): Promise<T | UpstreamFailure | typeof PROBED> {
    if (this.#probeNext) {
      this.#probeNext = false;
      if (await this.#probe().catch(() => false)) return PROBED;
      throw errorFromFailure('circuit-open', this.upstream);
    }
    try {
      return await fn(attempt, timeoutMs);
    } catch (error) {
      // The caller's own abort says nothing about the upstream: thrown as is, cockatiel counts
      // it neither way.
      if (error instanceof UpstreamFailure && error.kind !== 'aborted' && !countsAsBreakerFailure(error)) {
        return error;
      }
      throw error;
    }
  }
}
