/**
 * Per-operation loaders (DataLoader): identical upstream calls within one operation reach the
 * upstream once. Created lazily: an operation that selects only `health`, or fails validation, pays
 * for no DataLoader at all.
 *
 * Batching is off: the upstreams have no batch endpoint, so a batch would only add a tick of latency.
 * The per-operation cache still makes identical keys share one call; each share is counted in
 * `gateway_dedup_hits_total{source="dataloader"}`.
 */
import DataLoader from 'dataloader';
import type { UpstreamName } from './errors.js';
import type { Operation } from './operation.js';
import type { UpstreamClients } from './upstream/clients.js';
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
} from './upstream/types.js';

export type HealthPair = [HealthProbe<NullHealthBody>, HealthProbe<PiHealthBody>];

export interface Loaders {
  readonly nullCheck: DataLoader<NullCheckRequest, NullCheckResponse, string>;
  readonly pi: DataLoader<PiRequest, PiResponse, string>;
  readonly inference: DataLoader<InferenceRequest, InferenceResponse, string>;
  /** Both health probes, concurrently, once per operation. Never rejects. */
  health(): Promise<HealthPair>;
}

/** Told of each upstream call a loader saved. */
export type OnDedup = (upstream: UpstreamName) => void;

/** Stable keys: the request fields in a fixed order (undefined ≠ null survives JSON.stringify). */
export const nullCheckKey = (r: NullCheckRequest): string =>
  JSON.stringify([r.hasValue, r.hasValue ? r.value : 0, r.model, r.temperature, r.strictMode]);
export const piKey = (r: PiRequest): string =>
  JSON.stringify([r.digits, r.model, r.temperature, r.sponsored]);
export const inferenceKey = (r: InferenceRequest): string =>
  JSON.stringify([r.desiredDigits, r.model, r.temperature, r.useChainOfThought, r.liabilityWaiverSigned]);

/**
 * A DataLoader cache map that reports its hits: only the cache knows whether a key was already
 * there, and DataLoader asks it exactly once per `load()`.
 */
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

function loader<K, V>(call: (key: K) => Promise<V>, cacheKeyFn: (key: K) => string, onHit: () => void) {
  return new DataLoader<K, V, string>(
    // batch: false, so every batch holds one key; values come back in key order as DataLoader needs.
    (keys) =>
      Promise.all(
        keys.map((key) =>
          call(key).then(
            (value) => value,
            // An Error in the result array is that key's rejection.
            (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
          ),
        ),
      ),
    { batch: false, cacheKeyFn, cacheMap: new CountingMap<Promise<V>>(onHit) },
  );
}

class OperationLoaders implements Loaders {
  #nullCheck?: Loaders['nullCheck'];
  #pi?: Loaders['pi'];
  #inference?: Loaders['inference'];
  #health?: Promise<HealthPair>;

  constructor(
    private readonly clients: UpstreamClients,
    private readonly operation: Operation,
    private readonly onDedup: OnDedup,
  ) {}

  get nullCheck() {
    this.#nullCheck ??= loader(
      (r) => this.clients.nullCheck.check(r, this.operation),
      nullCheckKey,
      () => this.onDedup('null-check'),
    );
    return this.#nullCheck;
  }

  get pi() {
    this.#pi ??= loader(
      (r) => this.clients.piDigits.pi(r, this.operation),
      piKey,
      () => this.onDedup('pi-digits'),
    );
    return this.#pi;
  }

  get inference() {
    this.#inference ??= loader(
      (r) => this.clients.piDigits.inference(r, this.operation),
      inferenceKey,
      () => this.onDedup('pi-digits'),
    );
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

/** The loaders of one operation over `clients`. */
export function createLoaders(clients: UpstreamClients, operation: Operation, onDedup: OnDedup): Loaders {
  return new OperationLoaders(clients, operation, onDedup);
}
