/**
 * `COST_BUDGETS`, read and checked (docs/contract.md, Cost): a scope maps to its sliding windows,
 * `{ "default": { "1h": 0.05, "24h": 0.5 }, "anonymous": { "1h": 0.01 }, "tier:pro": { "1h": 1 },
 * "key:<sha256 hex of the key>": { "30d": 100 } }`, inline or from `@<file>`. A window is `<n>m`,
 * `<n>h` or `<n>d`. `"user:<sub>": {…}` gives one user of the identity provider (AUTH_ISSUER) windows
 * of its own, by the token's subject. The settings (settings.ts) validate it at start; which scope applies to whom is
 * cost/budget-policy.ts's.
 *
 * Keys are never printed: errors name a scope by its position unless it is one of the fixed names.
 */
import { inlineOrFile } from '../shared/settings.js';

const MINUTE_MS = 60_000;
const UNIT_MS = { m: MINUTE_MS, h: 60 * MINUTE_MS, d: 24 * 60 * MINUTE_MS } as const;
/** The longest window: 400 days. */
const MAX_WINDOW_MS = 400 * UNIT_MS.d;
/** Most windows in one scope (each is a Redis hash the reservation script reads). */
export const MAX_WINDOWS_PER_SCOPE = 8;
const MAX_LIMIT_USD = 1_000_000;
const WINDOW = /^([1-9][0-9]{0,5})([mhd])$/;
const KEY_SCOPE = /^key:([0-9a-fA-F]{64})$/;
const TIER_SCOPE = /^tier:(free|pro|enterprise)$/;
/** A verified token's subject (`sub`), as the identity provider writes it: 1 to 255 characters. */
const USER_SCOPE = /^user:\P{Cc}{1,255}$/u;

/** What `COST_BUDGETS` says, checked: scope → window as written → US dollars. */
export type BudgetsSetting = ReadonlyMap<string, ReadonlyMap<string, number>>;

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
  // A subject may be an e-mail address: named by its position only.
  return `scope #${index + 1}`;
}

/**
 * Reads `COST_BUDGETS` (JSON, or `@<file>` holding it) and checks every scope and window. Throws an
 * Error whose message is one line naming what is wrong, never a key nor the JSON text.
 */
export function parseBudgets(value: string): BudgetsSetting {
  const text = inlineOrFile(value);
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
    if (
      !(
        name === 'default' ||
        name === 'anonymous' ||
        TIER_SCOPE.test(name) ||
        KEY_SCOPE.test(name) ||
        USER_SCOPE.test(name)
      )
    )
      throw new Error(
        `${where} is not "default", "anonymous", "tier:free|pro|enterprise", "key:<sha256 hex of the key>" or "user:<subject>"`,
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
