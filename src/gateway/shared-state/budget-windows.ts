/**
 * The budget store's arithmetic, shared by its memory and Redis halves (budget-store.ts says what a
 * budget is): a window's buckets in this process, the figures that replies of the Lua scripts carry,
 * and the constants the scripts repeat (budget-helpers.lua names them).
 */
import type { BudgetBucket, BudgetWarning, BudgetWindowSpec } from './types.js';

/**
 * Slack of the fit test, in dollars: sums of binary fractions (0.0042 × 12) must not refuse an
 * operation that fits exactly.
 */
export const FIT_EPSILON_USD = 1e-9;
/** An amount left in a bucket below this after a settlement is float noise: the field is dropped. */
export const NOISE_USD = 1e-12;
/** The longest OPERATION_DEADLINE_MS: the lease of an operation without a deadline runs this long. */
export const LONGEST_DEADLINE_MS = 600_000;
/** The longest BUDGET_LEASE_MARGIN_MS, and its default. */
export const DEFAULT_LEASE_MARGIN_MS = 30_000;
/**
 * A reservation's lease when the caller gives none: the longest OPERATION_DEADLINE_MS plus the
 * longest margin.
 */
export const DEFAULT_LEASE_MS = LONGEST_DEADLINE_MS + DEFAULT_LEASE_MARGIN_MS;

/** Spent and reserved dollars of one bucket. */
export interface Amounts {
  s: number;
  r: number;
}

/** One window of one key, in this process. */
export interface LocalWindow {
  buckets: Map<number, Amounts>;
  /** When this process last gave the window's warning (memory mode and outages). */
  warnedAt: number;
}

/**
 * One move of budget amounts: into the buckets of `at` of each window of a key, `reservedUsd` to the
 * reservations and `spentUsd` to the spend (either may be negative: a settlement).
 */
export interface Move {
  budgetKey: string;
  windows: readonly BudgetWindowSpec[];
  at: number;
  reservedUsd: number;
  spentUsd: number;
}

export const bucketOf = (at: number, spec: BudgetWindowSpec) => at - (at % spec.bucketMs);
export const windowKeyOf = (budgetKey: string, spec: BudgetWindowSpec) => `${budgetKey}\n${spec.ms}`;

export function prune(window: LocalWindow, spec: BudgetWindowSpec, now: number) {
  for (const start of window.buckets.keys()) if (!(start > now - spec.ms)) window.buckets.delete(start);
}

export function totalOf(buckets: Map<number, Amounts>): number {
  let total = 0;
  for (const { s, r } of buckets.values()) total += s + r;
  return total;
}

export function move(buckets: Map<number, Amounts>, start: number, reservedUsd: number, spentUsd: number) {
  let amounts = buckets.get(start);
  if (amounts === undefined) {
    amounts = { s: 0, r: 0 };
    buckets.set(start, amounts);
  }
  amounts.r += reservedUsd;
  amounts.s += spentUsd;
  if (Math.abs(amounts.r) < NOISE_USD) amounts.r = 0;
  if (Math.abs(amounts.s) < NOISE_USD) amounts.s = 0;
  if (amounts.r === 0 && amounts.s === 0) buckets.delete(start);
}

export function listOf(buckets: Map<number, Amounts>): BudgetBucket[] {
  return [...buckets].map(([start, { s, r }]): BudgetBucket => [start, s, r]).sort((a, b) => a[0] - b[0]);
}

/** A hash's flat field list (`s<start>`, `r<start>`, …) as buckets in the window ending at `at`. */
export function bucketsOfFields(fields: unknown, spec: BudgetWindowSpec, at: number): Map<number, Amounts> {
  const buckets = new Map<number, Amounts>();
  if (!Array.isArray(fields)) return buckets;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = String(fields[i]);
    const kind = name[0];
    if (kind !== 's' && kind !== 'r') continue;
    const start = Number(name.slice(1));
    const usd = Number(fields[i + 1]);
    if (!(start > at - spec.ms) || !Number.isFinite(usd)) continue;
    let amounts = buckets.get(start);
    if (amounts === undefined) {
      amounts = { s: 0, r: 0 };
      buckets.set(start, amounts);
    }
    amounts[kind] += usd;
  }
  return buckets;
}

/** `{index, total, …}` (1-based index) as warnings. */
export function warningsOf(reply: unknown): BudgetWarning[] {
  const warnings: BudgetWarning[] = [];
  if (!Array.isArray(reply)) return warnings;
  for (let i = 0; i + 1 < reply.length; i += 2)
    warnings.push({ index: Number(reply[i]) - 1, totalUsd: Number(reply[i + 1]) });
  return warnings;
}

/** Every window's span and bucket: the first arguments of every budget script. */
export function windowArgs(windows: readonly BudgetWindowSpec[]): Array<string | number> {
  const args: Array<string | number> = [];
  for (const spec of windows) args.push(spec.ms, spec.bucketMs);
  return args;
}
