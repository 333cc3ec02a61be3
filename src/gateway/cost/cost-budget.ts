/**
 * COST_BUDGET_USD_PER_HOUR: the most one API key (the free tier counting as one key) may spend
 * through the gateway in any sliding hour (docs/contract.md, Cost).
 *
 * Reserve, then settle: before its first upstream call an operation reserves its estimate
 * (cost-model.ts) against the key's hour, atomically (`BudgetStore.reserve`: memory, or one Redis
 * script across replicas); it is refused when spend plus reservations in flight plus this estimate
 * would pass the budget. When it ends it settles: the reservation becomes what it actually cost
 * (unspent estimate back at once, spend above the estimate billed too). A cost reported after that
 * (a late answer) is added as spend. So the bill of any hour exceeds the budget by no more than the
 * estimation error of the operations in flight, however many arrive at once.
 *
 * Spend is kept in per-minute buckets in a `BudgetStore` (src/gateway/shared-state). Keys are
 * stored hashed: an API key never sits in Redis in clear.
 */

import { createHash } from 'node:crypto';
import { isPromise } from '../../shared/is-promise.js';
import { roundUsd } from '../../shared/usd.js';
import { FIT_EPSILON_USD } from '../shared-state/budget-store.js';
import type { BudgetBucket, BudgetStore } from '../shared-state/types.js';

export type { BudgetStore } from '../shared-state/types.js';

const HOUR_MS = 3_600_000;

/** A reservation in the store, until its operation settles. */
export interface BudgetHold {
  readonly budgetKey: string;
  readonly bucketStart: number;
  /** What was reserved (the estimate). */
  readonly usd: number;
}

export type BudgetReservation =
  | { ok: true; hold: BudgetHold }
  /**
   * Does not fit. `retryAfterSeconds`: when enough of the oldest spend leaves the hour for this
   * estimate to fit; undefined when it never fits (the estimate alone is over the budget).
   */
  | { ok: false; spentUsd: number; retryAfterSeconds: number | undefined };

export interface CostBudgetOptions {
  store: BudgetStore;
  /** Dollars per sliding hour per API key. */
  usdPerHour: number;
  /** @default Date.now */
  now?: () => number;
}

export interface CostBudget {
  readonly usdPerHour: number;
  /** Reserves `usd` for this key, or says why not. Synchronous in memory; a promise with Redis. */
  reserve(apiKey: string | undefined, usd: number): BudgetReservation | Promise<BudgetReservation>;
  /** The reservation becomes `actualUsd` (the estimate not spent goes back). Once per hold. */
  settle(hold: BudgetHold, actualUsd: number): void;
  /** Spend without a reservation (a late answer, a call outside any reserved operation). */
  add(apiKey: string | undefined, usd: number): void;
}

/** The store key of a caller: a hash of its API key, or `free`. */
export function budgetKeyOf(apiKey: string | undefined): string {
  if (apiKey === undefined || apiKey === 'free') return 'free';
  return createHash('sha256').update(apiKey).digest('base64url').slice(0, 22);
}

/**
 * Why `usd` does not fit in this window at `now`: the hour's spend, and in how many seconds enough of
 * the oldest spend leaves it for `usd` to fit (undefined: never, `usd` alone is over the budget).
 */
export function refusalOf(
  buckets: BudgetBucket[],
  usdPerHour: number,
  usd: number,
  now: number,
): { spentUsd: number; retryAfterSeconds: number | undefined } {
  let spent = 0;
  for (const [start, amount] of buckets) if (start > now - HOUR_MS) spent += amount;
  const spentUsd = roundUsd(spent);
  if (usd > usdPerHour + FIT_EPSILON_USD) return { spentUsd, retryAfterSeconds: undefined };
  // Oldest first: the bucket whose departure makes room for this estimate.
  let left = spent;
  for (const [start, amount] of buckets) {
    if (start <= now - HOUR_MS) continue;
    left -= amount;
    if (left + usd <= usdPerHour + FIT_EPSILON_USD) {
      return { spentUsd, retryAfterSeconds: Math.max(1, Math.ceil((start + HOUR_MS - now) / 1000)) };
    }
  }
  // Only when the store raced (the window changed between its verdict and its buckets): soon.
  return { spentUsd, retryAfterSeconds: 1 };
}

export function createCostBudget(options: CostBudgetOptions): CostBudget {
  const { store, usdPerHour } = options;
  const now = options.now ?? Date.now;
  return {
    usdPerHour,
    reserve(apiKey, usd) {
      const budgetKey = budgetKeyOf(apiKey);
      const at = now();
      const verdict = (answer: Awaited<ReturnType<BudgetStore['reserve']>>): BudgetReservation =>
        answer.ok
          ? { ok: true, hold: { budgetKey, bucketStart: answer.bucketStart, usd } }
          : { ok: false, ...refusalOf(answer.buckets, usdPerHour, usd, at) };
      const answer = store.reserve(budgetKey, usd, usdPerHour, at);
      return isPromise(answer) ? answer.then(verdict) : verdict(answer);
    },
    settle(hold, actualUsd) {
      const actual = actualUsd > 0 && Number.isFinite(actualUsd) ? actualUsd : 0;
      store.adjust(hold.budgetKey, hold.bucketStart, actual - hold.usd, now());
    },
    add(apiKey, usd) {
      if (usd > 0 && Number.isFinite(usd)) store.add(budgetKeyOf(apiKey), usd, now());
    },
  };
}
