/**
 * Cost budgets (COST_BUDGETS, or the shorthand COST_BUDGET_USD_PER_HOUR; docs/contract.md, Cost):
 * the most one API key (anonymous callers counting as one) may spend through the gateway in each
 * sliding window of its scope (budget-policy.ts says which scope applies).
 *
 * Reserve, then settle: before its first upstream call an operation reserves its estimate
 * (cost-model.ts) in every window of the caller's scope, atomically (`BudgetStore.reserve`: memory, or
 * one Redis script across replicas); it is refused when, in any window, spend plus reservations in
 * flight plus this estimate would pass the window's limit, and the refusal's retry time is that of
 * the window that refused (the latest, when several did). When it ends it settles: the reservation
 * becomes what it actually cost (unspent estimate back at once, spend above the estimate billed
 * too). A cost reported after that (a late answer) is added as spend. So the bill of any window
 * exceeds its limit by no more than the estimation error of the operations in flight, however many
 * arrive at once.
 *
 * `status` is what the `budget` query field (and the RateLimit headers) show: per window, its limit,
 * spend, reservations, what is left, and when spend leaves it.
 *
 * Keys are stored hashed: an API key never sits in Redis in clear.
 */

import { isPromise } from '../../shared/is-promise.js';
import { roundUsd } from '../../shared/usd.js';
import type { Caller } from '../identity.js';
import {
  DEFAULT_LEASE_MARGIN_MS,
  FIT_EPSILON_USD,
  LONGEST_DEADLINE_MS,
} from '../shared-state/budget-store.js';
import type { BudgetBucket, BudgetRead, BudgetReserveResult, BudgetStore } from '../shared-state/types.js';
import {
  type BudgetCaller,
  type BudgetPolicy,
  type BudgetScope,
  type BudgetWindow,
  budgetPolicy,
} from './budget-policy.js';

export type { BudgetStore } from '../shared-state/types.js';

const HOUR_MS = 3_600_000;

/** A reservation in the store, until its operation settles. */
export interface BudgetHold {
  readonly caller: BudgetCaller;
  /** The store's time of the reservation (its bucket in each window). */
  readonly at: number;
  /** What was reserved (the estimate). */
  readonly usd: number;
  /** The store's lease of it. */
  readonly lease: string;
}

export type BudgetReservation =
  /** Reserved (`hold`), or no budget applies to this caller (`hold` undefined). */
  | { ok: true; hold: BudgetHold | undefined }
  /**
   * Does not fit in `window` of `scope`. `spentUsd`: that window's spend and reservations.
   * `retryAfterSeconds`: when enough of its oldest spend leaves it for this estimate to fit;
   * undefined when it never fits (the estimate alone is over the window's limit).
   */
  | {
      ok: false;
      scope: BudgetScope;
      window: BudgetWindow;
      spentUsd: number;
      retryAfterSeconds: number | undefined;
    };

/** One window of a caller's budget, as the `budget` field and the RateLimit headers show it. */
export interface BudgetWindowStatus {
  /** The scope that applies: `default`, `anonymous`, `tier:<tier>` or `key` (the caller's own). */
  readonly scope: string;
  /** As written in the settings, e.g. `1h`. */
  readonly window: string;
  readonly windowSeconds: number;
  readonly limitUsd: number;
  /** Settled spend in the window. */
  readonly spentUsd: number;
  /** Estimates reserved by operations in flight. */
  readonly reservedUsd: number;
  /** limit − spent − reserved, at least 0. */
  readonly remainingUsd: number;
  /** Seconds until everything now in the window has left it (the full limit is back); 0: empty. */
  readonly resetSeconds: number;
  /** Seconds until the oldest spend or reservation in the window leaves it (some budget comes back); 0: empty. */
  readonly refillSeconds: number;
}

/** A window reached its warning ratio for a caller (one per caller and window per window length). */
export interface BudgetWarningEvent {
  readonly caller: BudgetCaller;
  readonly window: BudgetWindow;
  /** Spend and reservations in the window when it did. */
  readonly totalUsd: number;
}

export interface CostBudgetOptions {
  store: BudgetStore;
  /** The scopes (budget-policy.ts). */
  policy?: BudgetPolicy | undefined;
  /** Without `policy`: one window, `{ "default": { "1h": usdPerHour } }`. */
  usdPerHour?: number | undefined;
  /** @default Date.now (the clock of memory mode and Redis outages; Redis has its own) */
  now?: () => number;
  onWarning?: ((warning: BudgetWarningEvent) => void) | undefined;
  /**
   * How long after its operation's deadline an unsettled reservation lapses into spend, in ms
   * (BUDGET_LEASE_MARGIN_MS, at most 30 s: docs/contract.md, More than one machine).
   * @default 30000
   */
  leaseMarginMs?: number;
}

export interface CostBudget {
  /**
   * Reserves `usd` for this caller, or says why not. Synchronous in memory; a promise with Redis.
   * `deadline`: the operation's (absolute, `Date.now()` ms; Infinity or undefined: none, then the
   * longest OPERATION_DEADLINE_MS): the reservation lapses at it plus the lease margin.
   */
  reserve(caller: Caller, usd: number, deadline?: number): BudgetReservation | Promise<BudgetReservation>;
  /** The reservation becomes `actualUsd` (the estimate not spent goes back). Once per hold. */
  settle(hold: BudgetHold, actualUsd: number): void;
  /** Spend without a reservation (a late answer, a call outside any reserved operation). */
  add(caller: Caller, usd: number): void;
  /**
   * The caller's windows (shortest first), undefined when no budget applies to it. Synchronous in
   * memory; a promise with Redis (every replica's figures).
   */
  status(caller: Caller): BudgetWindowStatus[] | undefined | Promise<BudgetWindowStatus[] | undefined>;
}

type Amounts = ReadonlyArray<readonly [start: number, spent: number, reserved?: number]>;

/**
 * Why `usd` does not fit in a window at `now`: the window's spend and reservations, and in how many
 * seconds enough of the oldest leaves it for `usd` to fit (undefined: never, `usd` alone is over the
 * limit).
 */
export function refusalOf(
  buckets: Amounts,
  limitUsd: number,
  usd: number,
  now: number,
  windowMs = HOUR_MS,
): { spentUsd: number; retryAfterSeconds: number | undefined } {
  let spent = 0;
  for (const [start, amount, reserved = 0] of buckets) if (start > now - windowMs) spent += amount + reserved;
  const spentUsd = roundUsd(spent);
  if (usd > limitUsd + FIT_EPSILON_USD) return { spentUsd, retryAfterSeconds: undefined };
  // Oldest first: the bucket whose departure makes room for this estimate.
  let left = spent;
  for (const [start, amount, reserved = 0] of buckets) {
    if (start <= now - windowMs) continue;
    left -= amount + reserved;
    if (left + usd <= limitUsd + FIT_EPSILON_USD) {
      return { spentUsd, retryAfterSeconds: Math.max(1, Math.ceil((start + windowMs - now) / 1000)) };
    }
  }
  // Only when the store raced (the window changed between its verdict and its buckets): soon.
  return { spentUsd, retryAfterSeconds: 1 };
}

/** One window's figures from its buckets, at the store's time `at`. */
export function windowStatus(
  scope: BudgetScope,
  window: BudgetWindow,
  buckets: readonly BudgetBucket[],
  at: number,
): BudgetWindowStatus {
  let spent = 0;
  let reserved = 0;
  let oldest: number | undefined;
  let newest: number | undefined;
  for (const [start, s, r] of buckets) {
    if (!(start > at - window.ms)) continue;
    spent += s;
    reserved += r;
    if (roundUsd(s + r) > 0) {
      oldest = Math.min(oldest ?? start, start);
      newest = Math.max(newest ?? start, start);
    }
  }
  const leaves = (start: number | undefined) =>
    start === undefined ? 0 : Math.max(1, Math.ceil((start + window.ms - at) / 1000));
  return {
    scope: scope.kind,
    window: window.label,
    windowSeconds: window.ms / 1000,
    limitUsd: window.limitUsd,
    spentUsd: roundUsd(Math.max(0, spent)),
    reservedUsd: roundUsd(Math.max(0, reserved)),
    remainingUsd: roundUsd(Math.max(0, window.limitUsd - spent - Math.max(0, reserved))),
    resetSeconds: leaves(newest),
    refillSeconds: leaves(oldest),
  };
}

export function createCostBudget(options: CostBudgetOptions): CostBudget {
  const { store, onWarning } = options;
  const now = options.now ?? Date.now;
  const leaseMarginMs = options.leaseMarginMs ?? DEFAULT_LEASE_MARGIN_MS;
  const policy = options.policy ?? budgetPolicy({ usdPerHour: options.usdPerHour });
  if (policy === undefined) throw new Error('createCostBudget: no budget (neither policy nor usdPerHour)');

  const warn = (caller: BudgetCaller) =>
    onWarning === undefined
      ? undefined
      : ({ index, totalUsd }: { index: number; totalUsd: number }) => {
          const window = caller.scope.windows[index];
          if (window !== undefined) onWarning({ caller, window, totalUsd });
        };

  const verdictOf = (caller: BudgetCaller, usd: number, answer: BudgetReserveResult): BudgetReservation => {
    const { scope } = caller;
    if (answer.ok) {
      const heard = warn(caller);
      if (heard !== undefined) for (const warning of answer.warnings) heard(warning);
      return { ok: true, hold: { caller, at: answer.at, usd, lease: answer.lease } };
    }
    // The window that refused; of several, the one that frees room last (never, first of all).
    let worst: Extract<BudgetReservation, { ok: false }> | undefined;
    scope.windows.forEach((window, i) => {
      const buckets = answer.windows[i] ?? [];
      const refusal = refusalOf(buckets, window.limitUsd, usd, answer.at, window.ms);
      if (
        refusal.spentUsd + usd <= window.limitUsd + FIT_EPSILON_USD &&
        refusal.retryAfterSeconds !== undefined
      )
        return;
      const candidate = { ok: false as const, scope, window, ...refusal };
      if (
        worst === undefined ||
        (worst.retryAfterSeconds !== undefined &&
          (refusal.retryAfterSeconds === undefined || refusal.retryAfterSeconds > worst.retryAfterSeconds))
      )
        worst = candidate;
    });
    const first = scope.windows[0] as BudgetWindow;
    // Only when the store raced (its verdict and its buckets disagree): soon.
    return worst ?? { ok: false, scope, window: first, spentUsd: 0, retryAfterSeconds: 1 };
  };

  const statusOf = (caller: BudgetCaller, read: BudgetRead): BudgetWindowStatus[] =>
    caller.scope.windows.map((window, i) =>
      windowStatus(caller.scope, window, read.windows[i] ?? [], read.at),
    );

  return {
    reserve(who, usd, deadline) {
      const caller = policy.callerOf(who);
      if (caller === undefined) return { ok: true, hold: undefined };
      const at = now();
      // The time left to the deadline, by the clock it was set with; the store adds it to its own.
      const left =
        deadline === undefined || !Number.isFinite(deadline)
          ? LONGEST_DEADLINE_MS
          : Math.min(LONGEST_DEADLINE_MS, Math.max(0, deadline - Date.now()));
      const answer = store.reserve(caller.id, caller.scope.windows, usd, at, left + leaseMarginMs);
      return isPromise(answer)
        ? answer.then((resolved) => verdictOf(caller, usd, resolved))
        : verdictOf(caller, usd, answer);
    },
    settle(hold, actualUsd) {
      const actual = actualUsd > 0 && Number.isFinite(actualUsd) ? actualUsd : 0;
      const { caller } = hold;
      store.settle(
        caller.id,
        caller.scope.windows,
        hold.at,
        hold.usd,
        actual,
        now(),
        warn(caller),
        hold.lease,
      );
    },
    add(who, usd) {
      if (!(usd > 0) || !Number.isFinite(usd)) return;
      const caller = policy.callerOf(who);
      if (caller !== undefined) store.add(caller.id, caller.scope.windows, usd, now(), warn(caller));
    },
    status(who) {
      const caller = policy.callerOf(who);
      if (caller === undefined) return undefined;
      const read = store.read(caller.id, caller.scope.windows, now());
      return isPromise(read) ? read.then((resolved) => statusOf(caller, resolved)) : statusOf(caller, read);
    },
  };
}
