/**
 * The shapes of the gateway's shared state (docs/contract.md, More than one machine): what the response cache, the single flight
 * and the cost budgets see, whether the state lives in this process or in Redis. The callers never
 * learn which: every method has a memory answer, and Redis only ever adds sharing.
 */

/** Where the state lives now. */
export type SharedStateStatus = 'memory' | 'redis' | 'fallback';

/** A value that may be ready now (memory, local hit) or later (a Redis round trip). */
export type MaybePromise<T> = T | Promise<T>;

/** One minute of spend: [bucket start in ms since the epoch, US dollars]. */
export type BudgetBucket = [bucketStartMs: number, usd: number];

export interface SharedState {
  /** Response cache storage. */
  readonly cache: AnswerStore;
  /** APQ documents registered by clients (automatic persisted queries), apart from the cache. */
  readonly documents: AnswerStore;
  /** Single flight of identical in-flight calls across replicas (best effort). */
  readonly flights: FlightCoordinator;
  /** Hourly cost budgets (sliding hour, per-minute buckets). */
  readonly budgets: BudgetStore;
  /**
   * 'memory' (no REDIS_URL), 'redis' (connected and answering), 'fallback' (REDIS_URL set but Redis
   * unreachable, failing or not connected yet: memory in use). Cheap: no I/O.
   */
  status(): SharedStateStatus;
  /** Closes the Redis connection (bounded by the command timeout). The stores keep working in memory. */
  close(): Promise<void>;
}

export interface AnswerStore {
  /**
   * The value under key, or undefined. Memory: returned synchronously (the hit path must stay cheap:
   * no promise, no JSON). Redis: the local LRU first, synchronously; on a local miss a promise of Redis'
   * value (JSON-decoded, then kept locally for the rest of its Redis TTL), undefined on a Redis miss,
   * error or timeout. While Redis is unavailable a local miss is a synchronous undefined.
   * Never throws, never rejects.
   */
  get(key: string): MaybePromise<unknown>;
  /**
   * Stores value for ttlMs: locally, and in Redis as JSON with PX ttl. `undefined` is not stored (it
   * means "miss"); a value JSON cannot encode stays local. `bytes` is the caller's estimate of the
   * value's heap size, for the local byte bound (default: the JSON length in Redis mode, 1 KiB in
   * memory mode). Never throws; fire and forget.
   */
  set(key: string, value: unknown, ttlMs: number, bytes?: number): void;
  /** Local entries (expired ones not met yet included). */
  readonly size: number;
  /** Forgets the local entries. Redis entries are shared and left to their TTL. */
  clear(): void;
}

export interface FlightCoordinator {
  /**
   * Memory: always 'lead' (in-process sharing is the response cache's job). Redis: SET NX PX lock;
   * 'lead' when acquired or when Redis is failing, 'follow' when another replica holds it.
   */
  claim(key: string, ttlMs: number): Promise<'lead' | 'follow'>;
  /**
   * Leader: publishes the answer for followers for ttlMs (undefined: no answer, the call failed) and
   * releases the lock if this process still holds it. Never throws; fire and forget.
   */
  settle(key: string, value: unknown, ttlMs: number): void;
  /**
   * Follower: waits up to waitMs for the leader's answer. undefined when none came in time, the lock
   * vanished without an answer, Redis failed, or `signal.cancelled` (checked between polls).
   * Memory: undefined at once. Never rejects.
   */
  await(key: string, waitMs: number, signal?: { readonly cancelled: boolean }): Promise<unknown>;
}

/** The answer of `BudgetStore.reserve`. */
export type BudgetReserveResult =
  /**
   * Reserved: `usd` was added to the bucket starting at `bucketStart`. `shared` says whether Redis
   * counted it (false in memory mode, during an outage, or when the Redis call failed).
   */
  | { ok: true; bucketStart: number; shared: boolean }
  /** Did not fit: the window it was judged on (per-minute buckets, oldest first). */
  | { ok: false; buckets: BudgetBucket[] };

export interface BudgetStore {
  /** Adds usd spent by budgetKey at `now` (ms). Ignores non-positive or non-finite amounts. Never throws. */
  add(budgetKey: string, usd: number, now: number): void;
  /**
   * Reserves `usd` for budgetKey when the hour ending at `now` (spend and reservations of every
   * replica) plus `usd` stays within `limitUsd`; otherwise reserves nothing. Atomic: in memory
   * synchronously, in Redis with one Lua script (so two replicas never both take the last dollar).
   * When Redis is unavailable or the script fails, this replica's own window decides (and what it
   * reserved is pushed to Redis once it is back). Never rejects.
   */
  reserve(budgetKey: string, usd: number, limitUsd: number, now: number): MaybePromise<BudgetReserveResult>;
  /**
   * Corrects a reservation (`usd` may be negative: a refund) in the bucket `reserve` made it in. A
   * bucket already out of the hour is left alone. Never throws.
   */
  adjust(budgetKey: string, bucketStart: number, usd: number, now: number): void;
  /**
   * Spend of budgetKey in the hour ending at `now`: per-minute buckets oldest first; a bucket is in
   * the window while its start is later than now − 1 h. Memory (and Redis unavailable): synchronous.
   * Redis: a promise of every replica's spend, never below this replica's own per bucket; this
   * replica's own buckets when Redis fails. Never rejects.
   */
  window(budgetKey: string, now: number): MaybePromise<BudgetBucket[]>;
}
