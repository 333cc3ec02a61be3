/**
 * Per-operation loaders (DataLoader): identical upstream calls within one operation reach the
 * upstream once. One DataLoader per call kind, made at the kind's first call: an operation that
 * selects only `health`, or fails validation, makes none. The loaders of an operation are one object
 * (no closure per kind and operation), and a batch of one call (the common one) skips Promise.all.
 *
 * The upstreams have no batch endpoint: a batch of keys is as many calls, started together, their
 * answers (or failures) returned in key order, as DataLoader asks. DataLoader's per-operation cache
 * makes an identical key share the first call; each share is counted in
 * `gateway_dedup_hits_total{source="dataloader"}` (the cache map counts its hits: only it knows
 * whether a key was there, and DataLoader asks it once per `load()`).
 */
import DataLoader from 'dataloader';
import type { UpstreamName } from '../errors.js';
import type { ModelsView } from '../models/model-scoring.js';
import type { ModelScore } from '../models/scoreboard.js';
import type { Operation } from '../operation/operation.js';
import type { UpstreamClients } from '../upstream/clients.js';
import type {
  HealthProbe,
  InferenceRequest,
  InferenceResponse,
  NullCheckRequest,
  NullCheckResponse,
  NullHealthBody,
  PiHealthBody,
  PiRequest,
  PiResponse,
} from '../upstream/types.js';

export type HealthPair = [HealthProbe<NullHealthBody>, HealthProbe<PiHealthBody>];

/** Told of each upstream call a loader saved. */
export type OnDedup = (upstream: UpstreamName) => void;

/** What a loader calls, for one operation: the operation's loaders themselves. */
interface CallContext {
  readonly clients: UpstreamClients;
  readonly operation: Operation;
  readonly onDedup: OnDedup;
}

/** One kind of upstream call: which upstream, how a request is keyed, and the call. */
interface CallKind<Request, Answer> {
  upstream: UpstreamName;
  /** Stable key: the request fields in a fixed order. */
  key(request: Request): string;
  call(context: CallContext, request: Request): Promise<Answer>;
}

/** A DataLoader cache map that reports its hits (the upstream it counts for is a field: no closure). */
class CountingMap<V> extends Map<string, V> {
  constructor(
    private readonly onHit: OnDedup,
    private readonly upstream: UpstreamName,
  ) {
    super();
  }

  override get(key: string): V | undefined {
    const value = super.get(key);
    if (value !== undefined) this.onHit(this.upstream);
    return value;
  }
}

/** What a loader does: load a request's answer (DataLoader's `load`). */
export interface Loader<Request, Answer> {
  load(request: Request): Promise<Answer>;
}

/** An Error in DataLoader's result array is that key's rejection. */
const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));
const one = <Answer>(answer: Answer): Answer[] => [answer];
const oneFailed = (error: unknown): Error[] => [asError(error)];

/** The DataLoader of one kind of call within one operation. */
function loaderOf<Request, Answer>(
  kind: CallKind<Request, Answer>,
  context: CallContext,
): DataLoader<Request, Answer, string> {
  return new DataLoader<Request, Answer, string>(
    (requests) => {
      // The common batch is one call: its answer as an array of one, without Promise.all.
      if (requests.length === 1) return kind.call(context, requests[0] as Request).then(one, oneFailed);
      return Promise.all(
        requests.map((r) => kind.call(context, r).then((answer): Answer | Error => answer, asError)),
      );
    },
    { cacheKeyFn: kind.key, cacheMap: new CountingMap<Promise<Answer>>(context.onDedup, kind.upstream) },
  );
}

const NULL_CHECK: CallKind<NullCheckRequest, NullCheckResponse> = {
  upstream: 'null-check',
  key: (r) => JSON.stringify([r.hasValue, r.hasValue ? r.value : 0, r.model, r.temperature, r.strictMode]),
  call: ({ clients, operation }, r) => clients.nullCheck.check(r, operation),
};

const PI: CallKind<PiRequest, PiResponse> = {
  upstream: 'pi-digits',
  key: (r) => JSON.stringify([r.digits, r.model, r.temperature, r.sponsored]),
  call: ({ clients, operation }, r) => clients.piDigits.pi(r, operation),
};

const INFERENCE: CallKind<InferenceRequest, InferenceResponse> = {
  upstream: 'pi-digits',
  key: (r) =>
    JSON.stringify([r.desiredDigits, r.model, r.temperature, r.useChainOfThought, r.liabilityWaiverSigned]),
  call: ({ clients, operation }, r) => clients.piDigits.inference(r, operation),
};

export interface Loaders {
  readonly nullCheck: Loader<NullCheckRequest, NullCheckResponse>;
  readonly pi: Loader<PiRequest, PiResponse>;
  readonly inference: Loader<InferenceRequest, InferenceResponse>;
  /**
   * A model's scoreboard rows by its name (none for a model not measured yet): every name asked for
   * in one tick is answered by one read of the scoreboard (the `_entities` of a router's batch).
   */
  readonly modelScores: Loader<string, ModelScore[]>;
  /** Both health probes, concurrently, once per operation. Never rejects. */
  health(): Promise<HealthPair>;
}

/**
 * The loaders of one operation: one object, its DataLoaders made at their kind's first call (an
 * operation that selects only `health`, or fails validation, makes none), and the context their
 * calls read.
 */
class OperationLoaders implements Loaders, CallContext {
  #nullCheck: DataLoader<NullCheckRequest, NullCheckResponse, string> | undefined = undefined;
  #pi: DataLoader<PiRequest, PiResponse, string> | undefined = undefined;
  #inference: DataLoader<InferenceRequest, InferenceResponse, string> | undefined = undefined;
  #health: Promise<HealthPair> | undefined = undefined;
  #modelScores: DataLoader<string, ModelScore[]> | undefined = undefined;

  constructor(
    readonly clients: UpstreamClients,
    readonly operation: Operation,
    readonly onDedup: OnDedup,
    readonly models: ModelsView,
  ) {}

  get modelScores(): Loader<string, ModelScore[]> {
    this.#modelScores ??= new DataLoader<string, ModelScore[]>(async (names) => {
      const rows = await this.models.rows();
      return names.map((name) => rows.filter((row) => row.model === name));
    });
    return this.#modelScores;
  }

  get nullCheck(): Loader<NullCheckRequest, NullCheckResponse> {
    this.#nullCheck ??= loaderOf(NULL_CHECK, this);
    return this.#nullCheck;
  }

  get pi(): Loader<PiRequest, PiResponse> {
    this.#pi ??= loaderOf(PI, this);
    return this.#pi;
  }

  get inference(): Loader<InferenceRequest, InferenceResponse> {
    this.#inference ??= loaderOf(INFERENCE, this);
    return this.#inference;
  }

  health(): Promise<HealthPair> {
    this.#health ??= Promise.all([
      this.clients.health.nullCheck(this.operation),
      this.clients.health.piDigits(this.operation),
    ]);
    return this.#health;
  }
}

/** The loaders of one operation over `clients` and the scoreboard's `models`. */
export function createLoaders(
  clients: UpstreamClients,
  operation: Operation,
  onDedup: OnDedup,
  models: ModelsView,
): Loaders {
  return new OperationLoaders(clients, operation, onDedup, models);
}
