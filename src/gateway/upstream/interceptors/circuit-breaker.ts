/**
 * The circuit breaker of one upstream: cockatiel's `CircuitBreakerPolicy` with a
 * `ConsecutiveBreaker`, around every attempt (retries included).
 *
 * Consecutive failures (5xx, timeouts, refused or broken connections; not 4xx, not 429, not bad
 * bodies, not cancellations) open it; while open, calls fail at once with UPSTREAM_UNAVAILABLE and
 * no network. After `halfOpenAfterMs` the next call first probes the upstream's health endpoint:
 * success closes the circuit and the call proceeds, failure re-opens it.
 */
import {
  BrokenCircuitError,
  type CircuitBreakerPolicy,
  CircuitState,
  ConsecutiveBreaker,
  circuitBreaker as cockatielBreaker,
  handleWhen,
  IsolatedCircuitError,
} from 'cockatiel';
import { UpstreamCallError, type UpstreamName } from '../../errors.js';
import {
  type AnswerHandler,
  type Dispatch,
  dispatchPromise,
  type Interceptor,
  type UpstreamAnswer,
  type UpstreamRequest,
} from '../dispatch.js';
import { errorFromFailure } from '../status-mapping.js';

export type BreakerState = 'closed' | 'open' | 'half-open' | 'disabled';

export interface CircuitBreakerOptions {
  upstream: UpstreamName;
  /** Resolves true when the upstream's health endpoint answered 2xx (the half-open probe). */
  probe: () => Promise<boolean>;
  /** Consecutive failures that open the circuit; 0 disables the breaker. @default 5 */
  threshold?: number;
  /** @default 5000 */
  halfOpenAfterMs?: number;
  /** Told when the circuit opens, half-opens or closes. */
  onStateChange?: ((state: BreakerState) => void) | undefined;
}

export interface CircuitBreaker {
  readonly interceptor: Interceptor;
  state(): BreakerState;
}

/** A failure that says the upstream itself is unwell (not the caller, not the body). */
export function countsAgainstUpstream(error: unknown): boolean {
  if (!(error instanceof UpstreamCallError)) return false;
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

export function createCircuitBreaker(options: CircuitBreakerOptions): CircuitBreaker {
  const { upstream } = options;
  const threshold = options.threshold ?? 5;
  if (threshold <= 0) return { interceptor: (next) => next, state: () => 'disabled' };

  // Ours, so that a call that ran while the circuit was closed can tell it its outcome (below).
  const consecutive = new ConsecutiveBreaker(threshold);
  const breaker: CircuitBreakerPolicy = cockatielBreaker(handleWhen(countsAgainstUpstream), {
    halfOpenAfter: options.halfOpenAfterMs ?? 5000,
    breaker: consecutive,
  });
  /** Set by the half-open event (emitted synchronously right before the test run): probe first. */
  let probeNext = false;
  breaker.onHalfOpen(() => {
    probeNext = true;
  });
  const onChange = options.onStateChange;
  if (onChange !== undefined) breaker.onStateChange((state) => onChange(STATE_NAMES[state]));

  // cockatiel's policy runs a promise-returning task: this layer awaits the attempt below it.
  const guarded = async <T>(next: Dispatch, request: UpstreamRequest<T>): Promise<UpstreamAnswer<T>> => {
    // Failures that do not count against the upstream (a 418, a bad body) come back as values so
    // that the breaker records a success (the upstream did answer), and are thrown below.
    const run = async (): Promise<UpstreamAnswer<T> | UpstreamCallError | typeof PROBED> => {
      if (probeNext) {
        probeNext = false;
        if (await options.probe().catch(() => false)) return PROBED;
        throw errorFromFailure('circuit-open', upstream);
      }
      try {
        return await dispatchPromise(next, request);
      } catch (error) {
        // A cancellation says nothing about the upstream: thrown as is, counted neither way.
        if (error instanceof UpstreamCallError && error.kind !== 'cancelled' && !countsAgainstUpstream(error))
          return error;
        throw error;
      }
    };
    let result: UpstreamAnswer<T> | UpstreamCallError | typeof PROBED;
    try {
      result =
        breaker.state === CircuitState.Closed
          ? await breaker.execute(run)
          : await untilCancelled(breaker.execute(run), request);
      if (result === PROBED) result = await breaker.execute(run);
    } catch (error) {
      if (error instanceof BrokenCircuitError || error instanceof IsolatedCircuitError)
        throw errorFromFailure('circuit-open', upstream, { cause: error });
      throw error;
    }
    if (result instanceof UpstreamCallError) throw result;
    return result as UpstreamAnswer<T>;
  };

  /**
   * A call sent while the circuit was closed, without a promise: what cockatiel's policy does in
   * its closed state (CircuitBreakerPolicy.execute: run the task, then `success()` on its breaker, or
   * `failure()` and open at the threshold), with the success side done here, on the answer's way up.
   * A failure that counts against the upstream goes through the policy itself (`execute` of a task
   * that fails with it), which counts it and opens the circuit at the threshold, before the caller
   * hears of it (so its retry sees the open circuit). Only if the circuit left the closed state while
   * this call ran is the failure just counted: the policy would find it open already (its `open` is
   * then a no-op) or, during another call's half-open probe, re-open it there, a race this layer does
   * not reproduce.
   */
  class ClosedCall<T> implements AnswerHandler<T> {
    constructor(private readonly handler: AnswerHandler<T>) {}

    onAnswer(answer: UpstreamAnswer<T>): void {
      consecutive.success();
      this.handler.onAnswer(answer);
    }

    onError(error: unknown): void {
      const handler = this.handler;
      // A cancellation says nothing about the upstream: passed on as is, counted neither way.
      if (error instanceof UpstreamCallError && error.kind === 'cancelled') {
        handler.onError(error);
        return;
      }
      // Failures that do not count against the upstream (a 418, a bad body): the upstream did answer.
      if (!countsAgainstUpstream(error)) {
        if (error instanceof UpstreamCallError) consecutive.success();
        handler.onError(error);
        return;
      }
      if (breaker.state !== CircuitState.Closed) {
        consecutive.failure();
        handler.onError(error);
        return;
      }
      breaker
        .execute(() => {
          throw error;
        })
        .then(undefined, () => handler.onError(error));
    }
  }

  const interceptor: Interceptor = (next: Dispatch) =>
    function breaking<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      if (breaker.state === CircuitState.Closed && !probeNext) {
        next(request, new ClosedCall(handler));
        return;
      }
      // Open or half-open (rare): through cockatiel's policy, which may refuse, probe or make us wait.
      guarded(next, request).then(
        (answer) => handler.onAnswer(answer),
        (error: unknown) => handler.onError(error),
      );
    };

  return { interceptor, state: () => STATE_NAMES[breaker.state] };
}

/**
 * While the circuit is not closed a call may wait for another call's half-open probe; its caller
 * must still be able to walk away at once.
 */
function untilCancelled<T>(promise: Promise<T>, request: UpstreamRequest): Promise<T> {
  const operation = request.operation;
  if (operation === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const unsubscribe = operation.onCancel((reason) =>
      reject(errorFromFailure('cancelled', request.upstream, { cause: reason })),
    );
    promise.then(
      (value) => {
        unsubscribe();
        resolve(value);
      },
      (error: unknown) => {
        unsubscribe();
        reject(error);
      },
    );
  });
}
