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
import type { AnswerHandler, Dispatch, Interceptor, UpstreamAnswer, UpstreamRequest } from '../dispatch.js';
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

/** What an attempt resolves to inside the policy: an answer, a failure the upstream is not blamed for, or PROBED. */
type Attempted<T> = UpstreamAnswer<T> | UpstreamCallError | typeof PROBED;

export function createCircuitBreaker(options: CircuitBreakerOptions): CircuitBreaker {
  const { upstream } = options;
  const threshold = options.threshold ?? 5;
  if (threshold <= 0) return { interceptor: (next) => next, state: () => 'disabled' };

  const breaker: CircuitBreakerPolicy = cockatielBreaker(handleWhen(countsAgainstUpstream), {
    halfOpenAfter: options.halfOpenAfterMs ?? 5000,
    breaker: new ConsecutiveBreaker(threshold),
  });
  /** Set by the half-open event (emitted synchronously right before the test run): probe first. */
  let probeNext = false;
  breaker.onHalfOpen(() => {
    probeNext = true;
  });
  const onChange = options.onStateChange;
  if (onChange !== undefined) breaker.onStateChange((state) => onChange(STATE_NAMES[state]));

  /** The half-open test run: the probe first; on success the real call still has to happen. */
  const probeFirst = async (): Promise<typeof PROBED> => {
    if (await options.probe().catch(() => false)) return PROBED;
    throw errorFromFailure('circuit-open', upstream);
  };

  const failedWith = (handler: AnswerHandler<never>, error: unknown): void => {
    if (error instanceof BrokenCircuitError || error instanceof IsolatedCircuitError)
      handler.onError(errorFromFailure('circuit-open', upstream, { cause: error }));
    else handler.onError(error);
  };

  /**
   * One call through the breaker: the function the policy executes (`run`), the handler of its attempt
   * and the callbacks of the policy's outcome, in one object.
   *
   * Failures that do not count against the upstream (a 418, a bad body) come back as values so that
   * the breaker records a success (the upstream did answer), and are passed on as failures after it.
   * A cancellation says nothing about the upstream: thrown as is (cockatiel counts it neither way,
   * `countsAgainstUpstream` says no).
   *
   * Why one object and no async frames around `execute`: a call runs on every model call, and each
   * async layer costs a promise, a frame and microtask turns, each closure an allocation (bench:ab,
   * breaker rows in docs/architecture.md).
   */
  class BreakerCall<T> implements AnswerHandler<T> {
    #attempt: PromiseWithResolvers<Attempted<T>> | undefined = undefined;

    constructor(
      private readonly next: Dispatch,
      private readonly request: UpstreamRequest<T>,
      private readonly handler: AnswerHandler<T>,
    ) {}

    /** The attempt, as the policy executes it (the half-open test run probes first). */
    readonly run = (): Promise<Attempted<T>> => {
      if (probeNext) {
        probeNext = false;
        return probeFirst();
      }
      const attempt = Promise.withResolvers<Attempted<T>>();
      this.#attempt = attempt;
      try {
        this.next(this.request, this);
      } catch (error) {
        // A layer's bug must still settle the caller.
        attempt.reject(error);
      }
      return attempt.promise;
    };

    onAnswer(answer: UpstreamAnswer<T>): void {
      this.#attempt?.resolve(answer);
    }

    onError(error: unknown): void {
      if (error instanceof UpstreamCallError && error.kind !== 'cancelled' && !countsAgainstUpstream(error))
        this.#attempt?.resolve(error);
      else this.#attempt?.reject(error);
    }

    readonly settled = (result: Attempted<T>): void => {
      if (result === PROBED) breaker.execute(this.run).then(this.settled, this.failed);
      else if (result instanceof UpstreamCallError) this.handler.onError(result);
      else this.handler.onAnswer(result);
    };

    readonly failed = (error: unknown): void => failedWith(this.handler, error);
  }

  /**
   * Every attempt runs inside the policy's `execute`, in every state: cockatiel alone decides what an
   * outcome does to the circuit. So a call sent while the circuit was closed and failing after it
   * left that state is counted as cockatiel counts it: against a circuit already open it only counts,
   * during another call's half-open probe it opens the circuit again there (the probe's success then
   * finds it open and does not close it; upstream-interceptors.test.ts, "a late failure").
   */
  const interceptor: Interceptor = (next: Dispatch) =>
    function breaking<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      const call = new BreakerCall(next, request, handler);
      // While closed, the attempt itself watches the operation's cancellation (the transport).
      const pending =
        breaker.state === CircuitState.Closed
          ? breaker.execute(call.run)
          : untilCancelled(breaker.execute(call.run), request);
      pending.then(call.settled, call.failed);
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
