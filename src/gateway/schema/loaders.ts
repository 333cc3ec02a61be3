/**
 * Per-operation loaders (DataLoader): identical upstream calls within one operation reach the
 * upstream once. One DataLoader per call kind, made at the kind's first call: an operation that
 * selects only `health`, or fails validation, makes none.
 *
 * The upstreams have no batch endpoint: a batch of keys is as many calls, started together, their
 * answers (or failures) returned in key order, as DataLoader asks. DataLoader's per-operation cache
 * makes an identical key share the first call; each share is counted in
 * `gateway_dedup_hits_total{source="dataloader"}` (the cache map counts its hits: only it knows
 * whether a key was there, and DataLoader asks it once per `load()`).
 */
import DataLoader from 'dataloader';
import type { UpstreamName } from '../errors.js';
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

/** What a loader calls, for one operation. */
interface CallContext {
  clients: UpstreamClients;
  operation: Operation;
  onDedup: OnDedup;
}

/** One kind of upstream call: which upstream, how a request is keyed, and the call. */
interface CallKind<Request, Answer> {
  upstream: UpstreamName;
  /** Stable key: the request fields in a fixed order. */
  key(request: Request): string;
  call(context: CallContext, request: Request): Promise<Answer>;
}

/** A DataLoader cache map that reports its hits. */
class CountingMap<V> extends Map<string, V> {
  constructor(private readonly onHit: () => void) {
    super();
  }

  override get(key: string): V | undefined {
    const value = super.get(key);
    if (value !== undefined) this.onHit();
    return value;
  }
}

/** What a loader does: load a request's answer (DataLoader's `load`). */
export interface Loader<Request, Answer> {
  load(request: Request): Promise<Answer>;
}

/** The calls of one kind within one operation, made when first needed. */
function loaderOf<Request, Answer>(
  kind: CallKind<Request, Answer>,
  context: CallContext,
): Loader<Request, Answer> {
  let loader: DataLoader<Request, Answer, string> | undefined;
  return {
    load(request) {
      loader ??= new DataLoader<Request, Answer, string>(
        (requests) =>
          Promise.all(
            requests.map((r) =>
              kind.call(context, r).then(
                (answer) => answer,
                // An Error in the result array is that key's rejection.
                (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
              ),
            ),
          ),
        {
          cacheKeyFn: kind.key,
          cacheMap: new CountingMap<Promise<Answer>>(() => context.onDedup(kind.upstream)),
        },
      );
      return loader.load(request);
    },
  };
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
  /** Both health probes, concurrently, once per operation. Never rejects. */
  health(): Promise<HealthPair>;
}

/** The loaders of one operation over `clients`. */
export function createLoaders(clients: UpstreamClients, operation: Operation, onDedup: OnDedup): Loaders {
  const context: CallContext = { clients, operation, onDedup };
  let health: Promise<HealthPair> | undefined;
  return {
    nullCheck: loaderOf(NULL_CHECK, context),
    pi: loaderOf(PI, context),
    inference: loaderOf(INFERENCE, context),
    health: () =>
      (health ??= Promise.all([clients.health.nullCheck(operation), clients.health.piDigits(operation)])),
  };
}
