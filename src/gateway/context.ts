/**
 * The per-request GraphQL context: who is calling (API key, request id), the operation's abort signal
 * and deadline, and per-request dataloaders so identical upstream calls within one operation reach the
 * upstream once.
 *
 * Why lazily built: a request that selects only `health` (or fails validation) must not pay for three
 * DataLoaders, a timer and an AbortController.
 */
import DataLoader from 'dataloader';
import type { DigitEngine } from '../digits/digit-engine.js';
import type { Logger } from '../shared/logger.js';
import { CountingCacheMap } from './observability/counting-cache-map.js';
import type {
  CallOptions,
  HealthProbe,
  InferenceRequest,
  InferenceResponse,
  NullCheckRequest,
  NullCheckResponse,
  NullHealthBody,
  PiHealthBody,
  PiRequest,
  PiResponse,
  UpstreamClients,
} from './upstream/types.js';

/** Limits the resolvers check before any upstream call (from src/config.ts). */
export interface SchemaLimits {
  /** Most digits a `pi`/`inference` field may ask for (MAX_DIGITS). */
  maxDigits: number;
  /** Most decimal places `correctDigits` compares (MAX_DIGITS, capped by what the digit engine serves). */
  maxCompareDigits: number;
  /** Deepest nesting of a JSON argument. */
  maxJsonDepth: number;
  /** Largest serialized size (UTF-8 bytes) of a JSON argument. */
  maxJsonBytes: number;
}

/**
 * What the resolvers see as `context` (Yoga adds `request`, `params`, ... beside it).
 *
 * A plain object of own properties on purpose: Yoga merges it into its context with Object.assign,
 * which would drop prototype getters and methods (and would call getters eagerly). The lazy parts
 * live on `operation`, copied by reference.
 */
export interface GatewayContext {
  /** The caller's API key; undefined = no key (free tier). Forwarded to the upstreams only, never logged. */
  apiKey: string | undefined;
  /** The caller's sane `x-request-id` or a generated UUID; echoed on the response, sent upstream. */
  requestId: string;
  /** The HTTP request's signal: aborts when the client goes away. */
  signal: AbortSignal | undefined;
  /** The operation's deadline and upstream call options, created on first use. */
  operation: OperationScope;
  clients: UpstreamClients;
  digits: DigitEngine;
  loaders: Loaders;
  limits: SchemaLimits;
  logger: Logger;
}

export type HealthPair = [HealthProbe<NullHealthBody>, HealthProbe<PiHealthBody>];

/** Per-request loaders: one upstream call per distinct request within an operation. */
export interface Loaders {
  readonly nullCheck: DataLoader<NullCheckRequest, NullCheckResponse, string>;
  readonly pi: DataLoader<PiRequest, PiResponse, string>;
  readonly inference: DataLoader<InferenceRequest, InferenceResponse, string>;
  /** Both health probes, concurrently, once per operation. Never rejects. */
  health(): Promise<HealthPair>;
}

/** A DOMException-compatible reason for the operation deadline (what `AbortSignal.timeout` uses). */
function deadlineReason(ms: number): Error {
  return new DOMException(`operation deadline of ${ms} ms passed`, 'TimeoutError');
}

/**
 * DataLoader with batching off: the upstreams have no batch endpoint, so a batch would only add a tick
 * of latency. The per-request cache still makes identical keys share one call.
 */
function dedupingLoader<K, V>(
  call: (key: K) => Promise<V>,
  cacheKeyFn: (key: K) => string,
  onHit: (() => void) | undefined,
) {
  return new DataLoader<K, V, string>(
    // With batch: false every batch holds exactly one key; the map keeps key order anyway.
    (keys) =>
      Promise.all(
        keys.map((key) =>
          call(key).then(
            (value) => value,
            // DataLoader treats an Error in the result array as that key's rejection.
            (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
          ),
        ),
      ),
    // A counting cache map reports each saved upstream call (gateway_dedup_hits_total).
    {
      batch: false,
      cacheKeyFn,
      cacheMap: onHit ? new CountingCacheMap<string, Promise<V>>(onHit) : undefined,
    },
  );
}

/** Stable cache keys: the request fields in a fixed order (undefined ≠ null survives JSON.stringify). */
export function nullCheckKey(r: NullCheckRequest): string {
  return JSON.stringify([r.hasValue, r.hasValue ? r.value : 0, r.model, r.temperature, r.strictMode]);
}
export function piKey(r: PiRequest): string {
  return JSON.stringify([r.digits, r.model, r.temperature, r.sponsored]);
}
export function inferenceKey(r: InferenceRequest): string {
  return JSON.stringify([
    r.desiredDigits,
    r.model,
    r.temperature,
    r.useChainOfThought,
    r.liabilityWaiverSigned,
  ]);
}

// The error itself is not shown: its text may carry an upstream address.
const unreachable = (): HealthProbe<never> => ({
  reachable: false,
  latencyMs: 0,
  statusCode: null,
  body: null,
  error: 'health check failed',
  breaker: 'disabled',
});

class RequestLoaders implements Loaders {
  #nullCheck?: Loaders['nullCheck'];
  #pi?: Loaders['pi'];
  #inference?: Loaders['inference'];
  #health?: Promise<HealthPair>;

  constructor(
    private readonly clients: UpstreamClients,
    private readonly options: () => CallOptions,
    private readonly dedupHits: DedupHitCounters | undefined,
  ) {}

  get nullCheck() {
    this.#nullCheck ??= dedupingLoader(
      (r) => this.clients.nullCheck.check(r, this.options()),
      nullCheckKey,
      this.dedupHits?.nullCheck,
    );
    return this.#nullCheck;
  }

  get pi() {
    this.#pi ??= dedupingLoader(
      (r) => this.clients.piDigits.pi(r, this.options()),
      piKey,
      this.dedupHits?.pi,
    );
    return this.#pi;
  }

  get inference() {
    this.#inference ??= dedupingLoader(
      (r) => this.clients.piDigits.inference(r, this.options()),
      inferenceKey,
      this.dedupHits?.inference,
    );
    return this.#inference;
  }

  health(): Promise<HealthPair> {
    if (!this.#health) {
      const options = this.options();
      // health() never throws by contract; the catch keeps `health` whole even if one did.
      this.#health = Promise.all([
        this.clients.nullCheck.health(options).catch(unreachable),
        this.clients.piDigits.health(options).catch(unreachable),
      ]);
    }
    return this.#health;
  }
}

/**
 * Per-request loaders over `clients`. `callOptions` may be a function so the (lazy) signal is created
 * only when an upstream call is actually made.
 */
export function createLoaders(
  clients: UpstreamClients,
  callOptions: CallOptions | (() => CallOptions),
  dedupHits?: DedupHitCounters,
): Loaders {
  return new RequestLoaders(
    clients,
    typeof callOptions === 'function' ? callOptions : () => callOptions,
    dedupHits,
  );
}

/**
 * Told of each upstream call a loader saved, per loader. Made once per gateway (no closure per
 * request), e.g. from `observability.dedupHitCounter(...)`.
 */
export interface DedupHitCounters {
  nullCheck: () => void;
  pi: () => void;
  inference: () => void;
}

export interface ContextDependencies {
  clients: UpstreamClients;
  digits: DigitEngine;
  limits: SchemaLimits;
  logger: Logger;
  /** Overall deadline of one operation (retries and backoff included); 0 = none. */
  operationDeadlineMs: number;
  /** Counts the upstream calls the per-request loaders saved. @default none */
  dedupHits?: DedupHitCounters | undefined;
}

export interface RequestFacts {
  apiKey: string | undefined;
  requestId: string;
  /** The HTTP request's signal: aborts when the client goes away. */
  signal: AbortSignal | undefined;
}

/**
 * One operation's abort signal (client gone, or OPERATION_DEADLINE_MS passed) and the CallOptions
 * built on it. Nothing is allocated until an upstream call asks for them.
 */
export class OperationScope {
  readonly #apiKey: string | undefined;
  readonly #requestId: string;
  readonly #requestSignal: AbortSignal | undefined;
  readonly #deadlineMs: number;
  #controller?: AbortController;
  #timer?: NodeJS.Timeout;
  #onClientGone?: () => void;
  #callOptions?: CallOptions;

  constructor(facts: RequestFacts, deadlineMs: number) {
    this.#apiKey = facts.apiKey;
    this.#requestId = facts.requestId;
    this.#requestSignal = facts.signal;
    this.#deadlineMs = deadlineMs;
  }

  /** Aborts when the client goes away or the operation deadline passes (reason: a TimeoutError). */
  get signal(): AbortSignal {
    if (!this.#controller) {
      const controller = new AbortController();
      this.#controller = controller;
      const requestSignal = this.#requestSignal;
      if (requestSignal?.aborted) {
        controller.abort(requestSignal.reason);
      } else if (requestSignal) {
        this.#onClientGone = () => controller.abort(requestSignal.reason);
        requestSignal.addEventListener('abort', this.#onClientGone, { once: true });
      }
      if (this.#deadlineMs > 0 && !controller.signal.aborted) {
        const ms = this.#deadlineMs;
        this.#timer = setTimeout(() => controller.abort(deadlineReason(ms)), ms);
        this.#timer.unref?.();
      }
    }
    return this.#controller.signal;
  }

  /** `{ apiKey, requestId, signal }` for the upstream clients. */
  get callOptions(): CallOptions {
    // The absolute deadline lets the clients decide whether a Retry-After wait still fits.
    this.#callOptions ??= {
      apiKey: this.#apiKey,
      requestId: this.#requestId,
      signal: this.signal,
      deadline: this.#deadlineMs > 0 ? Date.now() + this.#deadlineMs : undefined,
    };
    return this.#callOptions;
  }

  /** The call options if an upstream call asked for them, without creating them (the cache plugin). */
  get callOptionsIfCreated(): CallOptions | undefined {
    return this.#callOptions;
  }

  /** Releases the deadline timer and the client-gone listener. Idempotent; called when execution ends. */
  dispose(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#onClientGone) this.#requestSignal?.removeEventListener('abort', this.#onClientGone);
    this.#onClientGone = undefined;
  }
}

/** Builds the context of one request. Cheap: nothing upstream-related is created until first use. */
export function createGatewayContext(deps: ContextDependencies, facts: RequestFacts): GatewayContext {
  const operation = new OperationScope(facts, deps.operationDeadlineMs);
  return {
    apiKey: facts.apiKey,
    requestId: facts.requestId,
    signal: facts.signal,
    operation,
    clients: deps.clients,
    digits: deps.digits,
    loaders: createLoaders(deps.clients, () => operation.callOptions, deps.dedupHits),
    limits: deps.limits,
    logger: deps.logger,
  };
}

// --- request facts from HTTP headers -------------------------------------------------------------

const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** The caller's `x-request-id` when sane (≤128 of [A-Za-z0-9._-]), else a new UUID. */
export function requestIdFrom(headers: Headers): string {
  const given = headers.get('x-request-id');
  return given !== null && SANE_REQUEST_ID.test(given) ? given : crypto.randomUUID();
}

/**
 * The caller's API key: `Authorization: Bearer <key>` first, else `X-API-Key: <key>`. No key (or an
 * empty one) → undefined, the free tier. Other Authorization schemes are not API keys and are ignored.
 */
export function apiKeyFrom(headers: Headers): string | undefined {
  const authorization = headers.get('authorization');
  if (authorization !== null) {
    const match = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match?.[1]) return match[1];
  }
  const apiKey = headers.get('x-api-key')?.trim();
  return apiKey ? apiKey : undefined;
}
