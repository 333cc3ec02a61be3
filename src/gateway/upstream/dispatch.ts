/**
 * The one interface every upstream layer implements: `Dispatch`, which takes a logical upstream
 * request and a handler, and later calls the handler back once, with the answer or the failure, as
 * undici's own `dispatch(options, handler)` does. The transport is a Dispatch; retry, circuit breaker,
 * API versions, single flight, response cache and observation are interceptors `(next) => Dispatch`
 * stacked on it, in the style of undici's interceptors (lib/interceptor/*, lib/handler/*). No layer
 * knows another; each sees only `next` and the handler it was given.
 *
 * Why handlers and not `(request) => Promise<answer>`: an async layer costs a promise, a closure and
 * an async frame per layer per call (seven layers on every model call); a layer with nothing to do on
 * the way back passes its caller's handler down as is, and one that has (observe, time, count) makes
 * one small handler object. Layers that wait on a rare path (retry's backoff, single flight across
 * replicas, the Redis cache's read, the breaker's half-open probe) use promises there only. Callers
 * that need a promise (the clients' `callModel` for the DataLoader, health probes, tests) go through
 * `dispatchPromise`, the one edge adapter.
 */
import type { UpstreamName } from '../errors.js';
import type { Operation } from '../operation/operation.js';
import type { ModelCall } from '../operation/operation-plan.js';

export type EndpointName = 'check' | 'null-or-not' | 'pi' | 'inference' | 'health' | 'openapi';
export type ApiVersion = 'v1' | 'v2';

/**
 * Which failures may be retried: 'idempotent' (a read), 'unsent-only' (a paid call: only a refused
 * connection, which proves nothing reached the service), 'none'.
 */
export type RetryMode = 'idempotent' | 'unsent-only' | 'none';

/** What the status mapping needs to know about the request that was sent (error path only). */
export interface StatusHints {
  /** null-check: whether the request carried a `value`. */
  hadValue?: boolean;
  /** inference: whether the request said the waiver was signed. */
  waiverSigned?: boolean;
}

/** Cost, sponsor and model of a decoded answer. */
export interface AnswerFacts {
  /** US dollars the upstream reported for this answer; null when it did not say (or it did not parse). */
  costUsd: number | null;
  /** The cost as the upstream wrote it, when it is text (the inference `cost`): logged when it does not parse. */
  costText?: string | undefined;
  sponsor: string | null;
  model: string | null;
}

/** One HTTP form of a logical call: what goes on the wire and how its answer is read. */
export interface HttpForm<T = unknown> {
  endpoint: EndpointName;
  version: ApiVersion;
  method: 'GET' | 'POST';
  /** Path from the base URL, with its query string, e.g. `/api/v1/pi?digits=3`. */
  path: string;
  /** JSON text, serialized once. */
  body?: string | undefined;
  retry: RetryMode;
  /** Validates the JSON answer into the seam shape (throws `ResponseShapeError`). */
  decode(json: unknown): T;
  facts(value: T): AnswerFacts;
  hints?: StatusHints | undefined;
}

/**
 * What the gateway knows is the right answer to a model call, for the scoreboard
 * (models/scoreboard.ts): whether the value asked about is null, or how many digits of pi were asked
 * for; and the temperature, which names the band the answer is scored in.
 */
export type AnswerTruth =
  | { question: 'null'; actuallyNull: boolean; temperature: number | undefined }
  | { question: 'digits'; requestedDigits: number; temperature: number | undefined };

/**
 * An answer the upstream itself gave, with what it was asked and what it cost: the upstream observer
 * (observability/upstream-observer.ts) reports it, the model scoreboard (models/scoreboard.ts) scores it.
 */
export interface ObservedAnswer {
  truth: AnswerTruth;
  /** The call as priced: its service (`upstream`) and the model it asked for. */
  call: ModelCall;
  /** The decoded answer (NullCheckResponse, PiResponse or InferenceResponse). */
  value: unknown;
  costUsd: number;
  latencyMs: number;
}

/** A logical upstream call: the same whatever API version ends up serving it. */
export interface UpstreamRequest<T = unknown> {
  upstream: UpstreamName;
  /** The forms this call can take; `form` is the one to send (the API-versions layer picks it). */
  forms: { v1: HttpForm<T>; v2?: HttpForm<T> | undefined };
  form: HttpForm<T>;
  /**
   * Identical calls have the same key (the arguments as sent, without the API key, which the
   * sharing layers add); undefined: never shared with another operation.
   */
  shareKey?: string | undefined;
  /** Whether the response cache may keep this answer (deterministic calls only). */
  cacheable?(value: T): boolean;
  /** The operation the call belongs to (its key, id, cancellation, deadline and report). */
  operation: Operation | undefined;
  /** What the call asks for, as the cost estimate prices it (model calls only; not health). */
  pricing?: ModelCall | undefined;
  /** The true answer, when the gateway knows it (model calls): the upstream's answer is scored against it. */
  truth?: AnswerTruth | undefined;
  /** 1 for the first attempt (set by the retry layer). */
  attempt?: number;
  /** This call's own per-attempt timeout (health probes); default: the upstream's UPSTREAM_TIMEOUT_MS. */
  timeoutMs?: number | undefined;
  /** Send no API key (health is not tier-dependent, and a caller's bad key must not make an upstream look down). */
  anonymous?: boolean | undefined;
  /**
   * A 404/410 answer is an outcome the caller handles, not upstream trouble: the API-versions layer
   * then tries the other version (and logs a switch once), the start-up discovery reads a missing
   * OpenAPI document as "v1". The observer logs such an answer at debug (docs/contract.md, Upstream
   * versions: clients, and the log, never notice a migration).
   */
  mayBeGone?: boolean | undefined;
  /**
   * Headers that carry the call's trace to the upstream (`traceparent`, `tracestate`): set by the
   * observer when the gateway exports its own traces, sent with every attempt.
   */
  traceHeaders?: Readonly<Record<string, string>> | undefined;
}

/** Where an answer came from. */
export type AnswerSource = 'upstream' | 'cache' | 'shared';

export interface UpstreamAnswer<T = unknown> {
  value: T;
  source: AnswerSource;
  /** The endpoint that produced it (after any version switch). */
  endpoint: EndpointName;
  statusCode: number;
  facts: AnswerFacts;
  /** Present when the upstream marked the endpoint deprecated (RFC 9745 / RFC 8594 headers). */
  deprecation?: { sunset: string | null } | undefined;
  /**
   * Characters of the body the answer was decoded from (set by the transport): the response cache's
   * size estimate for its store, whose byte bound would otherwise count every answer as 1 KiB.
   */
  bodyChars?: number | undefined;
}

/**
 * Where a Dispatch reports the outcome of one request: exactly one of the two methods, exactly once,
 * possibly before `dispatch` returns (a cache hit, a refusal without network). A handler's own throw
 * is a bug of the layer above and is not caught for it.
 */
export interface AnswerHandler<T = unknown> {
  onAnswer(answer: UpstreamAnswer<T>): void;
  /** Every layer fails with an `UpstreamCallError`; anything else is a bug, passed up as is. */
  onError(error: unknown): void;
}

export type Dispatch = <T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>) => void;
export type Interceptor = (next: Dispatch) => Dispatch;

/** `transport` wrapped by `interceptors`, the first one outermost. */
export function compose(transport: Dispatch, ...interceptors: Interceptor[]): Dispatch {
  let dispatch = transport;
  for (let i = interceptors.length - 1; i >= 0; i--) dispatch = (interceptors[i] as Interceptor)(dispatch);
  return dispatch;
}

/** A dispatch seen as a promise (the edge adapter's shape). */
export type PromiseDispatch = <T>(request: UpstreamRequest<T>) => Promise<UpstreamAnswer<T>>;

/** The handler of an edge call: settles the caller's promise. */
class Settle<T> implements AnswerHandler<T> {
  constructor(
    private readonly resolve: (answer: UpstreamAnswer<T>) => void,
    private readonly reject: (error: unknown) => void,
  ) {}
  onAnswer(answer: UpstreamAnswer<T>): void {
    this.resolve(answer);
  }
  onError(error: unknown): void {
    this.reject(error);
  }
}

/** One call through `dispatch`, as a promise: the edge where callers (loaders, probes, tests) await. */
export function dispatchPromise<T>(
  dispatch: Dispatch,
  request: UpstreamRequest<T>,
): Promise<UpstreamAnswer<T>> {
  return new Promise<UpstreamAnswer<T>>((resolve, reject) => {
    try {
      dispatch(request, new Settle(resolve, reject));
    } catch (error) {
      // A layer's bug must still settle the caller.
      reject(error);
    }
  });
}

/** `dispatch` as a promise-returning function (callers that hold a dispatch and await each call). */
export function promised(dispatch: Dispatch): PromiseDispatch {
  return (request) => dispatchPromise(dispatch, request);
}

/**
 * A promise-returning function as a Dispatch (a stub upstream in tests, or a layer whose work is
 * all asynchronous): its outcome is reported to the handler.
 */
export function fromPromised(call: PromiseDispatch): Dispatch {
  return function settling<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
    let pending: Promise<UpstreamAnswer<T>>;
    try {
      pending = call(request);
    } catch (error) {
      handler.onError(error);
      return;
    }
    pending.then(
      (answer) => handler.onAnswer(answer),
      (error: unknown) => handler.onError(error),
    );
  };
}

/** A model call (check, pi, inference) as a client makes it. */
export interface ModelCallRequest<T> {
  forms: { v1: HttpForm<T>; v2?: HttpForm<T> | undefined };
  /** Set only for deterministic calls: identical ones are then shared (and may be cached). */
  shareKey?: string | undefined;
  /** Which answers of a call with a share key the response cache may keep. */
  cacheable?: ((value: T) => boolean) | undefined;
  operation: Operation | undefined;
  /** What the call asks for, as the cost estimate prices it (and which upstream it goes to). */
  pricing: ModelCall;
  /** The true answer (the scoreboard scores the upstream's answer against it). */
  truth?: AnswerTruth | undefined;
}

/**
 * The answer's value of one model call, sent in its v1 form: the API-versions layer picks the form
 * that serves it. A call without a share key is neither shared nor cached.
 */
export function callModel<T>(dispatch: Dispatch, call: ModelCallRequest<T>): Promise<T> {
  const { forms, shareKey, pricing } = call;
  return new Promise<T>((resolve, reject) => {
    try {
      dispatch(
        {
          upstream: pricing.upstream,
          forms,
          form: forms.v1,
          shareKey,
          cacheable: shareKey === undefined ? undefined : call.cacheable,
          operation: call.operation,
          pricing,
          truth: call.truth,
          // Present from the start: the API-versions layer sets it on this object (no new shape).
          mayBeGone: undefined,
        },
        new SettleValue(resolve, reject),
      );
    } catch (error) {
      reject(error);
    }
  });
}

/** The handler of a model call: settles the loader's promise with the answer's value. */
class SettleValue<T> implements AnswerHandler<T> {
  constructor(
    private readonly resolve: (value: T) => void,
    private readonly reject: (error: unknown) => void,
  ) {}
  onAnswer(answer: UpstreamAnswer<T>): void {
    this.resolve(answer.value);
  }
  onError(error: unknown): void {
    this.reject(error);
  }
}
