/**
 * The shapes of the gateway's shared state (docs/contract.md, More than one machine): what the response cache, the single flight
 * and the cost budgets see, whether the state lives in this process or in Redis. The callers never
 * learn which: every method has a memory answer, and Redis only ever adds sharing.
 */

import type { RedisTopology } from '../../shared/redis-url.js';

/** Where the state lives now. */
export type SharedStateStatus = 'memory' | 'redis' | 'fallback';

/** A value that may be ready now (memory, local hit) or later (a Redis round trip). */
export type MaybePromise<T> = T | Promise<T>;

/**
 * One bucket of a budget window: [bucket start in ms since the epoch, US dollars spent, US dollars
 * reserved by operations in flight].
 */
export type BudgetBucket = [bucketStartMs: number, spentUsd: number, reservedUsd: number];

/** One window of a budget, as the store needs it (src/gateway/cost/budget-policy.ts makes them). */
export interface BudgetWindowSpec {
  /** Length of the window, in ms. */
  readonly ms: number;
  /** Length of one bucket, in ms (a sixtieth of the window). */
  readonly bucketMs: number;
  readonly limitUsd: number;
  /** Spend plus reservations at which a warning is due (once per window length); -1: none. */
  readonly warnUsd: number;
}

/** A window whose spend plus reservations reached its `warnUsd`: its index in the call's windows. */
export interface BudgetWarning {
  readonly index: number;
  readonly totalUsd: number;
}

/** What a store read of a caller's windows gives. */
export interface BudgetRead {
  /** The store's time of the read (Redis' clock with Redis, else the local one), ms. */
  readonly at: number;
  /** Per window (in the order given), its buckets oldest first, those in the window only. */
  readonly windows: BudgetBucket[][];
}

/** What `SharedState.checkBudgetRedis` found. */
export type BudgetRedisCheck =
  /** No REDIS_URL: budgets in memory. */
  | { verdict: 'memory' }
  /** Redis did not answer in time (the gateway starts anyway; checked again once it connects). */
  | { verdict: 'unreachable' }
  /** Redis answered but did not say (INFO refused, a proxy): the operator's word is needed. */
  | { verdict: 'unknown' }
  | {
      verdict: 'safe' | 'evicting';
      memory: { policy: string; maxmemory: number; server?: string | undefined };
    };

/** The kind of Redis each role uses, as the URLs name it (`/ready`); a role without Redis is absent. */
export interface SharedStateTopology {
  /** REDIS_URL */
  budgets?: RedisTopology;
  /** REDIS_CACHE_URL (default REDIS_URL): response cache, APQ documents, flights. */
  cache?: RedisTopology;
}

export interface SharedState {
  /** Response cache storage. */
  readonly cache: AnswerStore;
  /** APQ documents registered by clients (automatic persisted queries), apart from the cache. */
  readonly documents: AnswerStore;
  /** Single flight of identical in-flight calls across replicas (best effort). */
  readonly flights: FlightCoordinator;
  /** Cost budgets (sliding windows in buckets, spend and reservations), on REDIS_URL's Redis. */
  readonly budgets: BudgetStore;
  /** The model scoreboard's sums (score-store.ts), on REDIS_URL's Redis. */
  readonly scores: ScoreStore;
  /**
   * 'memory' (no REDIS_URL), 'redis' (connected and answering), 'fallback' (REDIS_URL set but Redis
   * unreachable, failing or not connected yet: memory in use). Cheap: no I/O.
   */
  status(): SharedStateStatus;
  /** Which kind of Redis each role uses (no I/O). */
  topology(): SharedStateTopology;
  /**
   * Checks the Redis of the budgets (REDIS_URL): waits for its first connection attempt (at most
   * `waitMs`), then reads its eviction settings. Never rejects.
   */
  checkBudgetRedis(waitMs: number): Promise<BudgetRedisCheck>;
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
   * memory mode). `owner`: who makes the store write it (an API key or a client address), for a
   * store with a per-owner bound (APQ documents); an entry over a bound (size, owner) is not stored.
   * Never throws; fire and forget.
   */
  set(key: string, value: unknown, ttlMs: number, bytes?: number, owner?: string): void;
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
   * Reserved in every window, in the bucket of `at` (the store's time: Redis' clock with Redis).
   * `shared`: whether Redis counted it (false in memory mode, during an outage, or when the Redis call
   * failed). `warnings`: the windows this reservation brought to their warning figure. `lease`: its
   * id, for `settle`.
   */
  | { ok: true; at: number; shared: boolean; warnings: BudgetWarning[]; lease: string }
  /** Did not fit in at least one window: every window as it was judged (buckets oldest first). */
  | { ok: false; at: number; windows: BudgetBucket[][] };

/**
 * Cost budgets: per budget key, several sliding windows at once, each in buckets of its own length.
 * Spend and reservations are kept apart (a reservation is moved to spend when its operation
 * settles), and a window's figure is both together. Every method takes `now` (local ms), which is the
 * clock in memory and while Redis is unavailable; with Redis, Redis' own clock (`TIME`) places
 * buckets and slides the windows, so replicas whose clocks differ still share one window.
 */
export interface BudgetStore {
  /**
   * Reserves `usd` in every window when each window's spend plus reservations (every replica's) plus
   * `usd` stays within its limit; otherwise reserves nothing. Atomic across the windows: in memory
   * synchronously, in Redis with one Lua script (so two replicas never both take the last dollar),
   * or in memory against this replica's share of the key (budget-shares.ts: no round trip; an
   * answer at once). When Redis is unavailable or the script fails, this replica decides on its share
   * and its part of what was left (and what it reserved is pushed to Redis, as spend, once it is
   * back). Never rejects.
   *
   * The reservation is a lease of `leaseMs` (the operation's deadline plus the lease margin; default
   * budget-store.ts' DEFAULT_LEASE_MS): not settled by then, it lapses and counts as spent at `usd`.
   */
  reserve(
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
    leaseMs?: number,
  ): MaybePromise<BudgetReserveResult>;
  /**
   * Settles a reservation made at `at` (the reservation's own `at`): `reservedUsd` leaves the
   * reservations and `spentUsd` is added to the spend, in the bucket the reservation was made in (a
   * bucket already out of a window is left alone there). `onWarning` hears of the windows this
   * brought to their warning figure. `lease`: the reservation's (else one of the same `at` and
   * `reservedUsd`). A lease that lapsed already is not settled again (it counted at its estimate).
   * Never throws; fire and forget.
   */
  settle(
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    at: number,
    reservedUsd: number,
    spentUsd: number,
    now: number,
    onWarning?: (warning: BudgetWarning) => void,
    lease?: string,
  ): void;
  /** Spend without a reservation, now. Ignores non-positive or non-finite amounts. Never throws. */
  add(
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
    onWarning?: (warning: BudgetWarning) => void,
  ): void;
  /**
   * The windows' buckets: memory (and Redis unavailable) synchronously; with Redis, a promise of
   * every replica's figures (per bucket never below this replica's own), this replica's own when
   * Redis fails. Never rejects.
   */
  read(budgetKey: string, windows: readonly BudgetWindowSpec[], now: number): MaybePromise<BudgetRead>;
  /**
   * Writes back what this replica's shares spent and gives back what they hold unused (Redis; memory
   * has nothing to do). Never rejects.
   */
  close?(): Promise<void>;
}

/**
 * Named sums every replica adds to (the model scoreboard: src/gateway/models/scoreboard.ts). Adding
 * never waits; the totals are this process' view (every replica's as of the last write, plus what
 * this one added since).
 */
export interface ScoreStore {
  /** Adds `amount` to the sum `field` (memory now; Redis with the next write). */
  add(field: string, amount: number): void;
  /** The sums now, without I/O. */
  totals(): ReadonlyMap<string, number>;
  /** The sums after writing what waits and reading every replica's (one round trip with Redis). Never rejects. */
  read(): Promise<ReadonlyMap<string, number>>;
  /** Stops the periodic write. */
  close(): void;
}
