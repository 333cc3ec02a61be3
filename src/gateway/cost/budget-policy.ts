/**
 * Who gets which budget (docs/contract.md, Cost): `COST_BUDGETS` maps a scope to its sliding windows,
 * `{ "default": { "1h": 0.05, "24h": 0.5 }, "anonymous": { "1h": 0.01 }, "tier:pro": { "1h": 1 },
 * "key:<sha256 hex of the key>": { "30d": 100 } }`, inline or from `@<file>`. A window is `<n>m`,
 * `<n>h` or `<n>d`. `COST_BUDGET_USD_PER_HOUR=x` is the shorthand for `{ "default": { "1h": x } }`.
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
 * Keys are never printed: a key scope names the key's sha256, and errors name a scope by its position
 * unless it is one of the fixed names. Who a caller is (its key's name, anonymity, tier) is identity.ts's.
 */
import { readFileSync } from 'node:fs';
import { LRUCache } from 'lru-cache';
import { ANONYMOUS, callerIdOf, isAnonymous, type Tier } from '../identity.js';

const MINUTE_MS = 60_000;
const UNIT_MS = { m: MINUTE_MS, h: 60 * MINUTE_MS, d: 24 * 60 * MINUTE_MS } as const;
/** Buckets per window. */
export const BUCKETS_PER_WINDOW = 60;
/** The longest window: 400 days. */
const MAX_WINDOW_MS = 400 * UNIT_MS.d;
/** Most windows in one scope (each is a Redis hash the reservation script reads). */
export const MAX_WINDOWS_PER_SCOPE = 8;
const MAX_LIMIT_USD = 1_000_000;
const WINDOW = /^([1-9][0-9]{0,5})([mhd])$/;
const KEY_SCOPE = /^key:([0-9a-fA-F]{64})$/;
const TIER_SCOPE = /^tier:(free|pro|enterprise)$/;

/** What `COST_BUDGETS` says, checked: scope → window as written → US dollars. */
export type BudgetsSetting = ReadonlyMap<string, ReadonlyMap<string, number>>;

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

/** Parses a window (`30m`, `1h`, `7d`) to milliseconds; undefined when it is not one. */
export function windowMs(label: string): number | undefined {
  const match = WINDOW.exec(label);
  if (match === null) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  return ms <= MAX_WINDOW_MS ? ms : undefined;
}

/** How an error may name a scope: fixed names as they are, anything else (a key?) by position. */
function scopeText(name: string, index: number): string {
  if (name === 'default' || name === 'anonymous' || /^tier:[a-z]{1,16}$/.test(name)) return `scope "${name}"`;
  if (KEY_SCOPE.test(name)) return `scope "key:${name.slice(4, 12).toLowerCase()}…"`;
  return `scope #${index + 1}`;
}

/**
 * Reads `COST_BUDGETS` (JSON, or `@<file>` holding it) and checks every scope and window. Throws an
 * Error whose message is one line naming what is wrong, never a key nor the JSON text.
 */
export function parseBudgets(value: string): BudgetsSetting {
  let text = value;
  if (value.startsWith('@')) {
    const file = value.slice(1);
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new Error(`cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    // Not the parser's message: newer ones quote the text, which may hold a key pasted by mistake.
    const at = /position (\d+)/.exec(String((error as Error).message))?.[1];
    throw new Error(`not valid JSON${at === undefined ? '' : ` (at character ${at})`}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new Error('must be a JSON object of scopes, e.g. {"default":{"1h":0.05}}');
  const scopes = new Map<string, Map<string, number>>();
  Object.entries(json).forEach(([rawName, windows], index) => {
    const name = KEY_SCOPE.test(rawName) ? rawName.toLowerCase() : rawName;
    const where = scopeText(rawName, index);
    if (!(name === 'default' || name === 'anonymous' || TIER_SCOPE.test(name) || KEY_SCOPE.test(name)))
      throw new Error(
        `${where} is not "default", "anonymous", "tier:free|pro|enterprise" or "key:<sha256 hex of the key>"`,
      );
    if (scopes.has(name)) throw new Error(`${where} is given twice`);
    if (typeof windows !== 'object' || windows === null || Array.isArray(windows))
      throw new Error(`${where} must map windows to dollars, e.g. {"1h":0.05,"24h":0.5}`);
    const entries = Object.entries(windows);
    if (entries.length > MAX_WINDOWS_PER_SCOPE)
      throw new Error(`${where} has more than ${MAX_WINDOWS_PER_SCOPE} windows`);
    const byLabel = new Map<string, number>();
    const lengths = new Map<number, string>();
    for (const [label, usd] of entries) {
      const ms = windowMs(label);
      if (ms === undefined)
        throw new Error(
          `${where}: window "${label.slice(0, 12)}" is not <n>m, <n>h or <n>d (n from 1, at most 400 days)`,
        );
      const same = lengths.get(ms);
      if (same !== undefined)
        throw new Error(`${where}: windows "${same}" and "${label}" are the same length`);
      if (typeof usd !== 'number' || !Number.isFinite(usd) || usd < 0 || usd > MAX_LIMIT_USD)
        throw new Error(`${where}: window "${label}" must be a number of dollars from 0 to ${MAX_LIMIT_USD}`);
      lengths.set(ms, label);
      byLabel.set(label, usd);
    }
    scopes.set(name, byLabel);
  });
  return scopes;
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
