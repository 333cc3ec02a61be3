/**
 * COST_BUDGET_USD_PER_HOUR: the most one API key (the free tier counting as one key) may spend
 * through the gateway in any sliding hour, counted from what the upstreams actually reported.
 *
 * Spend is kept in per-minute buckets in a `BudgetStore` (memory, or Redis shared by every replica:
 * src/gateway/shared-state). An operation is refused while the last hour's spend is at or over the
 * budget, with `retryAfterSeconds` = when enough of the oldest spend leaves the hour. Keys are
 * stored hashed: an API key never sits in Redis in clear.
 */
import { createHash } from 'node:crypto';

const HOUR_MS = 3_600_000;

/** Where spend is kept (src/gateway/shared-state). */
export interface BudgetStore {
  add(budgetKey: string, usd: number, now: number): void;
  /** Per-minute buckets of the hour ending at `now`: [bucketStartMs, usd], oldest first. */
  window(budgetKey: string, now: number): Array<[number, number]> | Promise<Array<[number, number]>>;
}

export type BudgetVerdict = { ok: true } | { ok: false; spentUsd: number; retryAfterSeconds: number };

export interface CostBudgetOptions {
  store: BudgetStore;
  /** Dollars per sliding hour per API key. */
  usdPerHour: number;
  /** @default Date.now */
  now?: () => number;
}

export interface CostBudget {
  readonly usdPerHour: number;
  check(apiKey: string | undefined): BudgetVerdict | Promise<BudgetVerdict>;
  add(apiKey: string | undefined, usd: number): void;
}

/** The store key of a caller: a hash of its API key, or `free`. */
export function budgetKeyOf(apiKey: string | undefined): string {
  if (apiKey === undefined || apiKey === 'free') return 'free';
  return createHash('sha256').update(apiKey).digest('base64url').slice(0, 22);
}

/** The verdict for this window at `now`. */
export function judge(buckets: Array<[number, number]>, usdPerHour: number, now: number): BudgetVerdict {
  let spent = 0;
  for (const [start, usd] of buckets) if (start > now - HOUR_MS) spent += usd;
  if (spent < usdPerHour) return { ok: true };
  // Oldest first: find the bucket whose departure brings the hour's spend under the budget.
  let left = spent;
  for (const [start, usd] of buckets) {
    if (start <= now - HOUR_MS) continue;
    left -= usd;
    if (left < usdPerHour) {
      const seconds = Math.ceil((start + HOUR_MS - now) / 1000);
      return { ok: false, spentUsd: spent, retryAfterSeconds: Math.max(1, seconds) };
    }
  }
  return { ok: false, spentUsd: spent, retryAfterSeconds: 3600 };
}

export function createCostBudget(options: CostBudgetOptions): CostBudget {
  const { store, usdPerHour } = options;
  const now = options.now ?? Date.now;
  return {
    usdPerHour,
    check(apiKey) {
      const at = now();
      const buckets = store.window(budgetKeyOf(apiKey), at);
      return Array.isArray(buckets)
        ? judge(buckets, usdPerHour, at)
        : buckets.then((resolved) => judge(resolved, usdPerHour, at));
    },
    add(apiKey, usd) {
      if (usd > 0 && Number.isFinite(usd)) store.add(budgetKeyOf(apiKey), usd, now());
    },
  };
}
