/**
 * A budget store in this process (budget-store.ts says what a budget is): every window of a key in
 * buckets, and the reservations this replica made as leases on the callers' clock (`now`), swept at
 * each call of their key. It is the whole store in memory mode; with Redis it is each replica's own
 * figure (what it decides on when Redis is away) and holds the replica's leases either way.
 */
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import {
  type Amounts,
  bucketOf,
  DEFAULT_LEASE_MS,
  FIT_EPSILON_USD,
  type LocalWindow,
  listOf,
  type Move,
  move,
  prune,
  totalOf,
  windowKeyOf,
} from './budget-windows.js';
import type {
  BudgetRead,
  BudgetReserveResult,
  BudgetStore,
  BudgetWarning,
  BudgetWindowSpec,
} from './types.js';

/** A reservation this replica made, until it settles or lapses. */
export interface Lease {
  readonly budgetKey: string;
  readonly windows: readonly BudgetWindowSpec[];
  /** Its bucket time in this replica's buckets (Redis' time when Redis booked it). */
  readonly at: number;
  readonly usd: number;
  /** When it lapses here, in the callers' clock (`now`). */
  readonly expiresAt: number;
  /** Its member in Redis' lease set; undefined: booked in this replica only (memory, outage). */
  readonly member: string | undefined;
}

export interface MemoryBudgetOptions {
  /** Hears of leases that lapsed here (count, their estimates in USD), those Redis does not hold. */
  onLapse?: ((count: number, usd: number) => void) | undefined;
  /** Hears of each lease held here only that lapsed: its estimate now counts as spent (Redis owed it). */
  onLocalLapse?: ((lease: Lease) => void) | undefined;
}

/** This replica's buckets and leases. */
export interface MemoryBudget {
  /** Random per process: lease ids are unique across replicas. */
  readonly token: string;
  newLeaseId(): string;
  /**
   * Moves amounts in this process' buckets of `at`; `decide`: it is the figure that decides (no
   * Redis), so the warnings are this process' to give.
   */
  book(moved: Move, now: number, decide: boolean): BudgetWarning[];
  /** Lapses the leases of `budgetKey` that expired by `now` (reservation to spend at the estimate). */
  sweep(budgetKey: string, now: number): void;
  /** Keeps a lease; answers its id. */
  hold(lease: Lease): string;
  /**
   * Takes the lease of a settlement out of this replica's: by id, else (callers that kept none) one
   * of the same time and amount.
   */
  release(budgetKey: string, at: number, usd: number, id: string | undefined): Lease | undefined;
  /**
   * This replica's decision, on its own buckets, with a lease. `limitOf`: each window's limit here
   * (default its own; during a Redis outage, this replica's part of it).
   */
  reserve(
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
    leaseMs: number,
    limitOf?: (spec: BudgetWindowSpec) => number,
  ): BudgetReserveResult;
  /** A copy of this replica's buckets of the windows ending at `now`. */
  read(budgetKey: string, windows: readonly BudgetWindowSpec[], now: number): Map<number, Amounts>[];
}

export function createMemoryBudget(maxKeys: number, options: MemoryBudgetOptions = {}): MemoryBudget {
  const { onLapse, onLocalLapse } = options;
  // Bounded: budget keys are API keys (and the free tier); the least recently used go first. A key
  // has a few windows.
  const local = new LRUCache<string, LocalWindow>({ max: maxKeys * 4 });
  /** This replica's reservations in flight, per budget key, by lease id. */
  const leases = new Map<string, Map<string, Lease>>();
  const token = randomBytes(6).toString('base64url');
  let leaseCount = 0;

  const windowOf = (budgetKey: string, spec: BudgetWindowSpec): LocalWindow => {
    const key = windowKeyOf(budgetKey, spec);
    let window = local.get(key);
    if (window === undefined) {
      window = { buckets: new Map(), warnedAt: Number.NEGATIVE_INFINITY };
      local.set(key, window);
    }
    return window;
  };

  /** Whether this process' window is due its warning at `total` (memory mode and outages). */
  const dueLocally = (window: LocalWindow, spec: BudgetWindowSpec, total: number, now: number) => {
    if (spec.warnUsd < 0 || total + FIT_EPSILON_USD < spec.warnUsd || window.warnedAt > now - spec.ms)
      return false;
    window.warnedAt = now;
    return true;
  };

  const memory: MemoryBudget = {
    token,
    // Short: a random token per process and a counter.
    newLeaseId: () => `${token}${(leaseCount++).toString(36)}`,

    book({ budgetKey, windows, at, reservedUsd, spentUsd }, now, decide) {
      const warnings: BudgetWarning[] = [];
      windows.forEach((spec, index) => {
        const start = bucketOf(at, spec);
        if (!(start > now - spec.ms)) return;
        const window = windowOf(budgetKey, spec);
        prune(window, spec, now);
        move(window.buckets, start, reservedUsd, spentUsd);
        if (!decide || reservedUsd + spentUsd <= 0) return;
        const total = totalOf(window.buckets);
        if (dueLocally(window, spec, total, now)) warnings.push({ index, totalUsd: total });
      });
      return warnings;
    },

    // Those Redis holds lapse there too (its sweep counts them); those only here are counted now and
    // owed to Redis as spend.
    sweep(budgetKey, now) {
      const mine = leases.get(budgetKey);
      if (mine === undefined) return;
      let count = 0;
      let usd = 0;
      for (const [id, lease] of mine) {
        if (lease.expiresAt > now) continue;
        mine.delete(id);
        memory.book(
          { budgetKey, windows: lease.windows, at: lease.at, reservedUsd: -lease.usd, spentUsd: lease.usd },
          now,
          false,
        );
        if (lease.member !== undefined) continue;
        onLocalLapse?.(lease);
        count++;
        usd += lease.usd;
      }
      if (mine.size === 0) leases.delete(budgetKey);
      if (count > 0) onLapse?.(count, usd);
    },

    hold(lease) {
      const id = memory.newLeaseId();
      let mine = leases.get(lease.budgetKey);
      if (mine === undefined) {
        mine = new Map();
        leases.set(lease.budgetKey, mine);
      }
      mine.set(id, lease);
      return id;
    },

    release(budgetKey, at, usd, id) {
      const mine = leases.get(budgetKey);
      if (mine === undefined) return undefined;
      let key = id;
      if (key === undefined)
        for (const [candidate, lease] of mine) {
          if (lease.usd !== usd) continue;
          key ??= candidate;
          if (lease.at !== at) continue;
          key = candidate;
          break;
        }
      const lease = key === undefined ? undefined : mine.get(key);
      if (key === undefined || lease === undefined) return undefined;
      mine.delete(key);
      if (mine.size === 0) leases.delete(budgetKey);
      return lease;
    },

    reserve(budgetKey, windows, usd, now, leaseMs, limitOf) {
      let fits = true;
      const views = windows.map((spec) => {
        const window = windowOf(budgetKey, spec);
        prune(window, spec, now);
        const limit = limitOf === undefined ? spec.limitUsd : limitOf(spec);
        if (totalOf(window.buckets) + usd > limit + FIT_EPSILON_USD) fits = false;
        return window;
      });
      if (!fits) return { ok: false, at: now, windows: views.map((window) => listOf(window.buckets)) };
      const warnings = memory.book({ budgetKey, windows, at: now, reservedUsd: usd, spentUsd: 0 }, now, true);
      const lease = memory.hold({
        budgetKey,
        windows,
        at: now,
        usd,
        expiresAt: now + leaseMs,
        member: undefined,
      });
      return { ok: true, at: now, shared: false, warnings, lease };
    },

    read: (budgetKey, windows, now) =>
      windows.map((spec) => {
        const window = local.get(windowKeyOf(budgetKey, spec));
        if (window === undefined) return new Map<number, Amounts>();
        prune(window, spec, now);
        return new Map([...window.buckets].map(([start, { s, r }]) => [start, { s, r }]));
      }),
  };
  return memory;
}

/** The budget store of memory mode (no REDIS_URL): this process' buckets decide, synchronously. */
export function createMemoryBudgetStore(
  maxKeys: number,
  onLapse?: (count: number, usd: number) => void,
): BudgetStore {
  const memory = createMemoryBudget(maxKeys, { onLapse });
  const warnAll = (warnings: BudgetWarning[], onWarning: ((warning: BudgetWarning) => void) | undefined) => {
    if (onWarning !== undefined) for (const warning of warnings) onWarning(warning);
  };
  return {
    reserve(budgetKey, windows, usd, now, leaseMs = DEFAULT_LEASE_MS) {
      memory.sweep(budgetKey, now);
      return memory.reserve(budgetKey, windows, usd, now, leaseMs);
    },
    settle(budgetKey, windows, at, reservedUsd, spentUsd, now, onWarning, leaseId) {
      const spent = spentUsd > 0 && Number.isFinite(spentUsd) ? spentUsd : 0;
      const reserved = Number.isFinite(reservedUsd) ? reservedUsd : 0;
      memory.sweep(budgetKey, now);
      const lease = memory.release(budgetKey, at, reserved, leaseId);
      // Lapsed already: counted at its estimate, once.
      if (lease === undefined) return;
      const moved = { budgetKey, windows, at: lease.at, reservedUsd: -lease.usd, spentUsd: spent };
      warnAll(memory.book(moved, now, true), onWarning);
    },
    add(budgetKey, windows, usd, now, onWarning) {
      if (!(usd > 0) || !Number.isFinite(usd) || !Number.isFinite(now)) return;
      memory.sweep(budgetKey, now);
      warnAll(
        memory.book({ budgetKey, windows, at: now, reservedUsd: 0, spentUsd: usd }, now, true),
        onWarning,
      );
    },
    read(budgetKey, windows, now): BudgetRead {
      memory.sweep(budgetKey, now);
      return { at: now, windows: memory.read(budgetKey, windows, now).map(listOf) };
    },
  };
}
