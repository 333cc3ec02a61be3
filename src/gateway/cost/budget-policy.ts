/**
 * Who gets which budget (docs/contract.md, Cost): the scopes of `COST_BUDGETS` (read and checked by
 * budget-settings.ts, below every component: settings.ts validates it at start), or the shorthand
 * `COST_BUDGET_USD_PER_HOUR=x` for `{ "default": { "1h": x } }`.
 *
 * The most specific scope applies: the caller's own (`key:<sha256 hex>` for an API key,
 * `user:<subject>` for a verified token's user), else its tier's (`tier:free|pro|enterprise`: a key
 * `API_KEYS` lists, a user's claim), else `anonymous` for a caller without a key (or with the key
 * `free`), else `default`; none: no budget. A scope's windows hold per caller (anonymous callers share
 * one): `tier:pro` gives each pro key and each pro user its own dollar an hour. A scope written `{}`
 * is a scope without a budget (a key exempted from the default, say).
 *
 * Buckets: each window is counted in sixty buckets of a sixtieth of its length (1m: seconds, 1h:
 * minutes, 24h: 24 minutes, 30d: 12 hours); a bucket counts while its start is within the window, so
 * the window is between 59/60 and all of its length long (errs towards the caller by one bucket), and
 * a refusal's retry time is exact to a bucket.
 *
 * Keys are never printed: a key scope names the key's sha256. Who a caller is (its key's name,
 * anonymity, tier) is identity.ts's.
 */
import { type BudgetsSetting, windowMs } from '../budget-settings.js';
import { ANONYMOUS, type Caller } from '../identity.js';

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
  /** `default`, `anonymous`, `tier:<tier>`, `key:<sha256 hex>` or `user:<subject>`. */
  readonly name: string;
  /** The name for metrics and logs: `key` for every key scope, `user` for every user's (bounded label values). */
  readonly kind: string;
  /** Shortest first; empty: no budget. */
  readonly windows: readonly BudgetWindow[];
}

/** A caller as budgets see it. */
export interface BudgetCaller {
  /**
   * The caller's name (identity.ts), `anonymous`, `key:<sha256 hex of the key>` or `user:<sha256
   * hex>`: the budget store's key and how logs name the caller.
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
}

export interface BudgetPolicy {
  /** Every scope, by name. */
  readonly scopes: ReadonlyMap<string, BudgetScope>;
  /** The caller's scope and store key; undefined when no scope with a window applies. */
  callerOf(caller: Caller): BudgetCaller | undefined;
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
    const kind = name.startsWith('key:') ? 'key' : name.startsWith('user:') ? 'user' : name;
    scopes.set(name, { name, kind, windows: list });
  }
  if (![...scopes.values()].some((scope) => scope.windows.length > 0)) return undefined;

  const anonymousScope = scopes.get('anonymous') ?? scopes.get('default');
  const anonymous: BudgetCaller | undefined =
    anonymousScope === undefined || anonymousScope.windows.length === 0
      ? undefined
      : { id: ANONYMOUS, scope: anonymousScope };
  // Resolved once per caller (identity.ts keeps one object per key and per verified token), not per
  // operation; a user's next token, with another tier perhaps, is a caller of its own.
  const known = new WeakMap<Caller, BudgetCaller | 'none'>();
  return {
    scopes,
    callerOf(who) {
      if (who.kind === 'anonymous') return anonymous;
      const { id, tier } = who;
      const cached = known.get(who);
      if (cached !== undefined) return cached === 'none' ? undefined : cached;
      const scope =
        (who.scope === undefined ? undefined : scopes.get(who.scope)) ??
        (tier === undefined ? undefined : scopes.get(`tier:${tier}`)) ??
        scopes.get('default');
      const caller = scope === undefined || scope.windows.length === 0 ? undefined : { id, scope };
      known.set(who, caller ?? 'none');
      return caller;
    },
  };
}
