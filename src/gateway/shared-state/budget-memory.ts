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
   * Takes the lease of a settlement out of this replica's (its key swept first): by id, else (callers
   * that kept none) one of the same time and amount. Undefined when it lapsed already (it counted at
   * its estimate, once).
   */
  release(budgetKey: string, at: number, usd: number, id: string | undefined, now: number): Lease | undefined;
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
  /** This replica's figures of the windows ending at `now` (its key swept first): BudgetStore.read's answer. */
  figures(budgetKey: string, windows: readonly BudgetWindowSpec[], now: number): BudgetRead;
}

/** Who hears of the warnings of a budget move (BudgetStore's `onWarning`). */
export type OnWarning = ((warning: BudgetWarning) => void) | undefined;

/** A settlement's spend as booked: positive and finite, else 0. */
export const spendOf = (usd: number): number => (usd > 0 && Number.isFinite(usd) ? usd : 0);

/**
 * The move that settles a released lease: its estimate out of the reservations and `spentUsd` (see
 * {@link spendOf}) into the spend, in the bucket it was reserved in.
 */
export const settlementOf = (lease: Lease, windows: readonly BudgetWindowSpec[], spentUsd: number): Move => ({
  budgetKey: lease.budgetKey,
  windows,
  at: lease.at,
  reservedUsd: -lease.usd,
  spentUsd,
});

/** Whether spend without a reservation counts: a positive, finite amount at a finite time (BudgetStore.add). */
export const isSpend = (usd: number, now: number): boolean =>
  usd > 0 && Number.isFinite(usd) && Number.isFinite(now);

/** Gives `onWarning` the warnings of a move this replica's figure decided. */
export function warnAll(warnings: readonly BudgetWarning[], onWarning: OnWarning): void {
  if (onWarning !== undefined) for (const warning of warnings) onWarning(warning);
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

    release(budgetKey, at, usd, id, now) {
      memory.sweep(budgetKey, now);
      const mine = leases.get(budgetKey);
      if (mine === undefined) return undefined;
      let key = id;
      const reserved = Number.isFinite(usd) ? usd : 0;
      if (key === undefined)
        for (const [candidate, lease] of mine) {
          if (lease.usd !== reserved) continue;
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

    figures(budgetKey, windows, now) {
      memory.sweep(budgetKey, now);
      return { at: now, windows: memory.read(budgetKey, windows, now).map(listOf) };
    },
  };
  return memory;
}

/** The budget store of memory mode (no REDIS_URL): this process' buckets decide, synchronously. */
export function createMemoryBudgetStore(
  maxKeys: number,
  onLapse?: (count: number, usd: number) => void,
): BudgetStore {
  const memory = createMemoryBudget(maxKeys, { onLapse });
  return {
    reserve(budgetKey, windows, usd, now, leaseMs = DEFAULT_LEASE_MS) {
      memory.sweep(budgetKey, now);
      return memory.reserve(budgetKey, windows, usd, now, leaseMs);
    },
    settle(budgetKey, windows, at, reservedUsd, spentUsd, now, onWarning, leaseId) {
      const lease = memory.release(budgetKey, at, reservedUsd, leaseId, now);
      // Lapsed already: counted at its estimate, once.
      if (lease !== undefined)
        warnAll(memory.book(settlementOf(lease, windows, spendOf(spentUsd)), now, true), onWarning);
    },
    add(budgetKey, windows, usd, now, onWarning) {
      if (!isSpend(usd, now)) return;
      memory.sweep(budgetKey, now);
      warnAll(
        memory.book({ budgetKey, windows, at: now, reservedUsd: 0, spentUsd: usd }, now, true),
        onWarning,
      );
    },
    read: (budgetKey, windows, now) => memory.figures(budgetKey, windows, now),
  };
}
