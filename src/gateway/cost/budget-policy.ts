/**
 * Who gets which budget (docs/contract.md, Cost): the scopes of `COST_BUDGETS` (read and checked by
 * budget-settings.ts, below every component: settings.ts validates it at start), or the shorthand
 * `COST_BUDGET_USD_PER_HOUR=x` for `{ "default": { "1h": x } }`.
 *
 * The most specific scope applies: the key's own (`key:<sha256 hex>`), else its tier's for a key
 * `API_KEYS` lists (`tier:free|pro|enterprise`), else `anonymous` for a caller without a key (or with
 * the key `free`), else `default`; none: no budget. A scope's windows hold per key (anonymous callers
 * share one): `tier:pro` gives each pro key its own dollar an hour. A scope written `{}` is a scope
 * without a budget (a key exempted from the default, say).
 *
 * Buckets: each window is counted in sixty buckets of a sixtieth of its length (1m: seconds, 1h:
 * minutes, 24h: 24 minutes, 30d: 12 hours); a bucket counts while its start is within the window, so
 * the window is between 59/60 and all of its length long (errs towards the caller by one bucket), and
 * a refusal's retry time is exact to a bucket.
 *
 * Keys are never printed: a key scope names the key's sha256. Who a caller is (its key's name,
 * anonymity, tier) is identity.ts's.
 */
import { LRUCache } from 'lru-cache';
import { type BudgetsSetting, windowMs } from '../budget-settings.js';
import { ANONYMOUS, callerIdOf, isAnonymous, type Tier } from '../identity.js';

/** Buckets per window. */
export const BUCKETS_PER_WINDOW = 60;

/** One sliding window of a scope. */
export interface BudgetWindow {
  /** As written in the settings, e.g. `1h`. */
  readonly label: string;
  readonly ms: number;
  /** A sixtieth of the window. */
  readonly bucketMs: number;
  readonly limitUsd: number;
  /** Spend plus reservations at which the warning is logged (limit × ratio); -1: no warning. */
  readonly warnUsd: number;
}

export interface BudgetScope {
  /** `default`, `anonymous`, `tier:<tier>` or `key:<sha256 hex>`. */
  readonly name: string;
  /** The name for metrics and logs: `key` for every key scope (bounded label values). */
  readonly kind: string;
  /** Shortest first; empty: no budget. */
  readonly windows: readonly BudgetWindow[];
}

/** A caller as budgets see it. */
export interface BudgetCaller {
  /**
   * The caller's name (identity.ts), `anonymous` or `key:<sha256 hex of the key>`: the budget store's
   * key and how logs name the caller.
   */
  readonly id: string;
  readonly scope: BudgetScope;
}

export interface BudgetPolicyOptions {
  /** COST_BUDGETS, parsed. */
  budgets?: BudgetsSetting | undefined;
  /** COST_BUDGET_USD_PER_HOUR: the shorthand for `{ "default": { "1h": x } }`. */
  usdPerHour?: number | undefined;
  /** COST_BUDGET_WARNING_RATIO: 0 turns warnings off. @default 0.8 */
  warningRatio?: number | undefined;
  /** Tiers of the keys the gateway's API_KEYS lists. */
  tiers?: ReadonlyMap<string, Tier> | undefined;
}

export interface BudgetPolicy {
  /** Every scope, by name. */
  readonly scopes: ReadonlyMap<string, BudgetScope>;
  /** The caller's scope and store key; undefined when no scope with a window applies. */
  callerOf(apiKey: string | undefined): BudgetCaller | undefined;
}

/**
 * The scopes in force, or undefined when there is no budget at all. Throws (one line) when
 * COST_BUDGET_USD_PER_HOUR and a `default` scope of COST_BUDGETS are both given.
 */
export function budgetPolicy(options: BudgetPolicyOptions): BudgetPolicy | undefined {
  const setting = new Map(options.budgets ?? []);
  if (options.usdPerHour !== undefined) {
    if (setting.has('default'))
      throw new Error(
        'COST_BUDGET_USD_PER_HOUR and the "default" scope of COST_BUDGETS are both set: COST_BUDGET_USD_PER_HOUR is the shorthand for {"default":{"1h":x}}; keep one',
      );
    setting.set('default', new Map([['1h', options.usdPerHour]]));
  }
  const ratio = options.warningRatio ?? 0.8;
  const scopes = new Map<string, BudgetScope>();
  for (const [name, windows] of setting) {
    const list: BudgetWindow[] = [];
    for (const [label, limitUsd] of windows) {
      const ms = windowMs(label) as number;
      list.push({
        label,
        ms,
        bucketMs: ms / BUCKETS_PER_WINDOW,
        limitUsd,
        warnUsd: ratio > 0 ? limitUsd * ratio : -1,
      });
    }
    list.sort((a, b) => a.ms - b.ms);
    scopes.set(name, { name, kind: name.startsWith('key:') ? 'key' : name, windows: list });
  }
  if (![...scopes.values()].some((scope) => scope.windows.length > 0)) return undefined;

  const tiers = options.tiers ?? new Map<string, Tier>();
  const anonymousScope = scopes.get('anonymous') ?? scopes.get('default');
  const anonymous: BudgetCaller | undefined =
    anonymousScope === undefined || anonymousScope.windows.length === 0
      ? undefined
      : { id: ANONYMOUS, scope: anonymousScope };
  // Resolved once per key (a digest and up to three lookups), not per operation.
  const known = new LRUCache<string, BudgetCaller | 'none'>({ max: 10_000 });
  return {
    scopes,
    callerOf(apiKey) {
      if (isAnonymous(apiKey)) return anonymous;
      const cached = known.get(apiKey);
      if (cached !== undefined) return cached === 'none' ? undefined : cached;
      const id = callerIdOf(apiKey);
      const tier = tiers.get(apiKey);
      const scope =
        scopes.get(id) ??
        (tier === undefined ? undefined : scopes.get(`tier:${tier}`)) ??
        scopes.get('default');
      const caller = scope === undefined || scope.windows.length === 0 ? undefined : { id, scope };
      known.set(apiKey, caller ?? 'none');
      return caller;
    },
  };
}
