/**
 * A DataLoader `cacheMap` that reports its hits: each hit is an upstream call the per-request loaders
 * saved (the `gateway_dedup_hits_total{source="dataloader"}` metric).
 *
 * Why a cacheMap and not a counter around `load()`: only the cache knows whether a key was already
 * there; DataLoader asks it exactly once per `load()`.
 */
export class CountingCacheMap<K, V> extends Map<K, V> {
  readonly #onHit: () => void;

  /** `onHit` should be created once per gateway (not per request), e.g. `observability.dedupHitCounter(...)`. */
  constructor(onHit: () => void) {
    super();
    this.#onHit = onHit;
  }

  override get(key: K): V | undefined {
    const value = super.get(key);
    if (value !== undefined) this.#onHit();
    return value;
  }
}
