/**
 * COST_BUDGETS (docs/contract.md, Cost): the setting's format and its one-line errors (never a key),
 * which scope applies to whom, and budgets in several windows at once over the memory store with a
 * clock of the test: each window refuses at its own limit and says when it will fit, the `budget`
 * figures, and the warning ratio.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { parseBudgets, windowMs } from '../../src/gateway/budget-settings.js';
import { budgetPolicy } from '../../src/gateway/cost/budget-policy.js';
import {
  type BudgetReservation,
  type BudgetWarningEvent,
  type BudgetWindowStatus,
  createCostBudget,
} from '../../src/gateway/cost/cost-budget.js';
import { keyCaller, type Tier } from '../../src/gateway/identity.js';
import { createBudgetStore } from '../../src/gateway/shared-state/budget-store.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** A day-aligned instant: every bucket length divides it. */
const T0 = Date.UTC(2030, 0, 1);
const sha = (key: string) => createHash('sha256').update(key).digest('hex');

/** Tiers as API_KEYS would give them (identity.ts decides a caller's tier; the policy reads it). */
const TIERS: ReadonlyMap<string, Tier> = new Map<string, Tier>([
  ['sk-pro', 'pro'],
  ['sk-vip', 'pro'],
  ['sk-ent', 'enterprise'],
]);
const who = (key: string | undefined) => keyCaller(key, key === undefined ? undefined : TIERS.get(key));

describe('COST_BUDGETS, the setting', () => {
  it('reads scopes of windows, inline or from @file', () => {
    const text = JSON.stringify({
      default: { '1h': 0.05, '24h': 0.5 },
      anonymous: { '1h': 0.01 },
      'tier:pro': { '1h': 1 },
      [`key:${sha('sk-vip')}`]: { '30d': 100 },
    });
    const inline = parseBudgets(text);
    expect(inline.get('default')).toEqual(
      new Map([
        ['1h', 0.05],
        ['24h', 0.5],
      ]),
    );
    expect(inline.get(`key:${sha('sk-vip')}`)).toEqual(new Map([['30d', 100]]));
    const dir = mkdtempSync(join(tmpdir(), 'budgets-'));
    writeFileSync(join(dir, 'budgets.json'), text);
    expect(parseBudgets(`@${join(dir, 'budgets.json')}`)).toEqual(inline);
  });

  it('knows windows of minutes, hours and days, up to 400 days', () => {
    expect(windowMs('1m')).toBe(MINUTE);
    expect(windowMs('90m')).toBe(90 * MINUTE);
    expect(windowMs('24h')).toBe(DAY);
    expect(windowMs('30d')).toBe(30 * DAY);
    expect(windowMs('400d')).toBe(400 * DAY);
    for (const bad of ['0h', '1s', '1.5h', 'h', '01h', '1H', '401d', ' 1h', '1w'])
      expect(windowMs(bad)).toBeUndefined();
  });

  it.each([
    ['not JSON', '{"default": {"1h": 0.05}', /^not valid JSON/],
    ['an array', '[1]', /must be a JSON object of scopes/],
    [
      'an unknown scope',
      '{"tier:gold":{"1h":1}}',
      /^scope "tier:gold" is not "default", "anonymous", "tier:free\|pro\|enterprise"/,
    ],
    ['a scope that is not an object', '{"default":5}', /^scope "default" must map windows to dollars/],
    ['a bad window', '{"default":{"1w":5}}', /^scope "default": window "1w" is not <n>m, <n>h or <n>d/],
    [
      'a negative limit',
      '{"default":{"1h":-1}}',
      /^scope "default": window "1h" must be a number of dollars/,
    ],
    ['a limit that is text', '{"default":{"1h":"5"}}', /window "1h" must be a number of dollars/],
    [
      'two windows of one length',
      '{"default":{"1h":1,"60m":2}}',
      /windows "1h" and "60m" are the same length/,
    ],
    [
      'too many windows',
      `{"default":{${Array.from({ length: 9 }, (_, i) => `"${i + 1}h":1`).join(',')}}}`,
      /more than 8 windows/,
    ],
    [
      'a cannot-read file',
      '@/nonexistent/budgets.json',
      /^cannot read \/nonexistent\/budgets\.json \(ENOENT\)$/,
    ],
  ])('refuses %s, in one line', (_what, value, message) => {
    expect(() => parseBudgets(value)).toThrow(message);
    try {
      parseBudgets(value);
    } catch (error) {
      expect((error as Error).message).not.toContain('\n');
    }
  });

  it('never prints a key: neither one pasted as a scope, nor the JSON around it, nor a key scope in full', () => {
    const secret = 'sk-live-SECRET-0123456789';
    for (const value of [
      `{"${secret}":{"1h":1}}`,
      `{"key:${secret}":{"1h":1}}`,
      `{"default":{"1h":1}, "${secret}"`,
      `{"key:${sha(secret)}":{"1h":"x"}}`,
    ]) {
      let message = '';
      try {
        parseBudgets(value);
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).not.toBe('');
      expect(message).not.toContain('SECRET');
      expect(message).not.toContain(sha(secret));
    }
    // Through the settings loader: one line, the value hidden.
    let line = '';
    try {
      loadConfig({ COST_BUDGETS: `{"${secret}":{"1h":1}}` });
    } catch (error) {
      line = (error as Error).message;
    }
    expect(line).toMatch(/^invalid configuration: COST_BUDGETS=\(value hidden\): scope #1 is not/);
    expect(line).not.toContain('SECRET');
  });

  it('says when COST_BUDGET_USD_PER_HOUR and a default scope are both set; either alone is fine', () => {
    const budgets = parseBudgets('{"default":{"24h":1}}');
    expect(() => budgetPolicy({ budgets, usdPerHour: 0.5 })).toThrow(
      /COST_BUDGET_USD_PER_HOUR and the "default" scope of COST_BUDGETS are both set/,
    );
    expect(budgetPolicy({ usdPerHour: 0.5 })?.scopes.get('default')?.windows).toMatchObject([
      { label: '1h', ms: HOUR, bucketMs: MINUTE, limitUsd: 0.5, warnUsd: 0.4 },
    ]);
    // The shorthand fills the default of a COST_BUDGETS without one.
    const both = budgetPolicy({ budgets: parseBudgets('{"tier:pro":{"1h":2}}'), usdPerHour: 0.5 });
    expect([...(both?.scopes.keys() ?? [])].sort()).toEqual(['default', 'tier:pro']);
    expect(budgetPolicy({})).toBeUndefined();
    expect(budgetPolicy({ budgets: parseBudgets('{"default":{}}') })).toBeUndefined();
  });
});

describe('which scope applies', () => {
  const policy = budgetPolicy({
    budgets: parseBudgets(
      JSON.stringify({
        default: { '1h': 0.05 },
        anonymous: { '1h': 0.01 },
        'tier:pro': { '1h': 1, '24h': 5 },
        [`key:${sha('sk-vip')}`]: { '30d': 100 },
        [`key:${sha('sk-exempt')}`]: {},
      }),
    ),
  });
  if (policy === undefined) throw new Error('a policy');

  it('the key’s own scope, then its tier’s (API_KEYS), then default; anonymous for no key and the key "free"', () => {
    expect(policy.callerOf(who('sk-vip'))?.scope.name).toBe(`key:${sha('sk-vip')}`);
    expect(policy.callerOf(who('sk-vip'))?.scope.kind).toBe('key');
    expect(policy.callerOf(who('sk-pro'))?.scope.name).toBe('tier:pro');
    // No tier:enterprise scope: the default.
    expect(policy.callerOf(who('sk-ent'))?.scope.name).toBe('default');
    expect(policy.callerOf(who('sk-unknown'))?.scope.name).toBe('default');
    expect(policy.callerOf(who(undefined))?.scope.name).toBe('anonymous');
    expect(policy.callerOf(who('free'))?.scope.name).toBe('anonymous');
    // A key scope without windows exempts the key.
    expect(policy.callerOf(who('sk-exempt'))).toBeUndefined();
  });

  it('each key has its own spend, stored under the name its key scope has (`key:<sha256 hex>`, never the key); anonymous callers share one', () => {
    const pro = policy.callerOf(who('sk-pro'));
    // One digest for the setting, the store and the logs (src/gateway/identity.ts).
    expect(pro).toMatchObject({ id: `key:${sha('sk-pro')}` });
    expect(pro?.id).not.toBe(policy.callerOf(who('sk-vip'))?.id);
    expect(policy.callerOf(who('sk-vip'))?.id).toBe(policy.callerOf(who('sk-vip'))?.scope.name);
    expect(policy.callerOf(who(undefined))).toMatchObject({ id: 'anonymous' });
    expect(policy.callerOf(who('free'))).toBe(policy.callerOf(who(undefined)));
  });

  it('windows shortest first, in buckets of a sixtieth', () => {
    expect(policy.callerOf(who('sk-pro'))?.scope.windows.map((w) => [w.label, w.bucketMs])).toEqual([
      ['1h', MINUTE],
      ['24h', 24 * MINUTE],
    ]);
    expect(policy.callerOf(who('sk-vip'))?.scope.windows.map((w) => [w.label, w.bucketMs])).toEqual([
      ['30d', 12 * HOUR],
    ]);
  });
});

describe('budgets in several windows at once (memory store, a clock of the test)', () => {
  let now = T0;
  const warnings: BudgetWarningEvent[] = [];
  beforeEach(() => {
    now = T0;
    warnings.length = 0;
  });
  const budgetOf = (budgets: object, warningRatio?: number) =>
    createCostBudget({
      store: createBudgetStore(undefined, 100),
      policy: budgetPolicy({ budgets: parseBudgets(JSON.stringify(budgets)), warningRatio }),
      now: () => now,
      onWarning: (warning) => warnings.push(warning),
    });
  const sync = (verdict: BudgetReservation | Promise<BudgetReservation>) => {
    if (verdict instanceof Promise) throw new Error('the memory store answers synchronously');
    return verdict;
  };
  const spend = (budget: ReturnType<typeof budgetOf>, key: string, usd: number) => {
    const verdict = sync(budget.reserve(keyCaller(key), usd));
    if (!verdict.ok || verdict.hold === undefined) throw new Error(`refused: ${JSON.stringify(verdict)}`);
    budget.settle(verdict.hold, usd);
  };

  it('each window refuses at its own limit, and the refusal’s retry time is that window’s', () => {
    const budget = budgetOf({ default: { '10m': 0.3, '1h': 0.5 } });
    spend(budget, 'sk-a', 0.1);
    now += MINUTE;
    spend(budget, 'sk-a', 0.1);
    now += MINUTE;
    spend(budget, 'sk-a', 0.1);
    // 0.3 in the last 10 minutes: the 10m window refuses, and frees 0.1 when the first leaves it.
    expect(sync(budget.reserve(keyCaller('sk-a'), 0.1))).toMatchObject({
      ok: false,
      window: { label: '10m' },
      spentUsd: 0.3,
      retryAfterSeconds: 10 * 60 - 2 * 60,
    });
    now = T0 + 10 * MINUTE;
    spend(budget, 'sk-a', 0.1);
    now += MINUTE;
    spend(budget, 'sk-a', 0.1);
    // 0.5 in the hour (0.2 in the last 10 minutes): now the hour refuses, until its first 0.1 leaves.
    now += MINUTE;
    expect(sync(budget.reserve(keyCaller('sk-a'), 0.1))).toMatchObject({
      ok: false,
      window: { label: '1h' },
      spentUsd: 0.5,
      retryAfterSeconds: 60 * 60 - 12 * 60,
    });
    // Refused in one window, booked in none: the 10m window still has room for 0.1 once the hour has.
    now = T0 + HOUR;
    expect(sync(budget.reserve(keyCaller('sk-a'), 0.1))).toMatchObject({ ok: true });
  });

  it('of two refusing windows, the one that frees room last; never, before any time', () => {
    const budget = budgetOf({ default: { '10m': 0.2, '1h': 0.2 } });
    spend(budget, 'sk-b', 0.2);
    now += 5 * MINUTE;
    // Both full: the 10m window frees room in 5 minutes, the hour in 55: the hour is the answer.
    expect(sync(budget.reserve(keyCaller('sk-b'), 0.1))).toMatchObject({
      ok: false,
      window: { label: '1h' },
      retryAfterSeconds: 55 * 60,
    });
    const never = budgetOf({ default: { '10m': 0.2, '1h': 1 } });
    expect(sync(never.reserve(keyCaller('sk-b'), 0.5))).toMatchObject({
      ok: false,
      window: { label: '10m' },
      retryAfterSeconds: undefined,
    });
  });

  it('a 30-day window in 12-hour buckets: spend leaves it 30 days after the start of its bucket', () => {
    const budget = budgetOf({ default: { '30d': 1 } });
    now = T0 + 5 * HOUR;
    spend(budget, 'sk-c', 1);
    now = T0 + 10 * DAY;
    expect(sync(budget.reserve(keyCaller('sk-c'), 0.5))).toMatchObject({
      ok: false,
      retryAfterSeconds: 20 * 24 * 3600,
    });
    now = T0 + 30 * DAY;
    expect(sync(budget.reserve(keyCaller('sk-c'), 0.5))).toMatchObject({ ok: true });
  });

  it('status: per window its limit, spend, reservations in flight, what is left and when it comes back', () => {
    const budget = budgetOf({ 'tier:free': {}, default: { '1h': 1, '24h': 2 } });
    expect(budget.status(keyCaller('sk-d'))).toEqual([
      {
        scope: 'default',
        window: '1h',
        windowSeconds: 3600,
        limitUsd: 1,
        spentUsd: 0,
        reservedUsd: 0,
        remainingUsd: 1,
        resetSeconds: 0,
        refillSeconds: 0,
      },
      {
        scope: 'default',
        window: '24h',
        windowSeconds: 86400,
        limitUsd: 2,
        spentUsd: 0,
        reservedUsd: 0,
        remainingUsd: 2,
        resetSeconds: 0,
        refillSeconds: 0,
      },
    ]);
    spend(budget, 'sk-d', 0.25);
    now += 10 * MINUTE;
    const held = sync(budget.reserve(keyCaller('sk-d'), 0.3));
    now += MINUTE;
    expect(budget.status(keyCaller('sk-d'))).toEqual([
      expect.objectContaining({
        window: '1h',
        spentUsd: 0.25,
        reservedUsd: 0.3,
        remainingUsd: 0.45,
        refillSeconds: 49 * 60,
        resetSeconds: 59 * 60,
      }),
      expect.objectContaining({ window: '24h', spentUsd: 0.25, reservedUsd: 0.3, remainingUsd: 1.45 }),
    ]);
    // Settled for less: the reservation goes, the actual cost stays.
    if (!held.ok || held.hold === undefined) throw new Error('reserved');
    budget.settle(held.hold, 0.1);
    expect((budget.status(keyCaller('sk-d')) as BudgetWindowStatus[])[0]).toMatchObject({
      spentUsd: 0.35,
      reservedUsd: 0,
      remainingUsd: 0.65,
    });
    // Another key: its own figures.
    expect((budget.status(keyCaller('sk-other')) as BudgetWindowStatus[])[0]).toMatchObject({
      spentUsd: 0,
      remainingUsd: 1,
    });
  });

  it('status is undefined where no budget applies', () => {
    const budget = budgetOf({ 'tier:pro': { '1h': 1 } });
    expect(budget.status(keyCaller('sk-unknown'))).toBeUndefined();
    expect(budget.status(keyCaller(undefined))).toBeUndefined();
    expect(sync(budget.reserve(keyCaller(undefined), 100))).toEqual({ ok: true, hold: undefined });
  });

  it('warns once per key and window when spend and reservations reach the ratio, again only a window later', () => {
    const budget = budgetOf({ default: { '10m': 1, '1h': 4 } }, 0.8);
    spend(budget, 'sk-e', 0.5);
    spend(budget, 'sk-e', 0.3);
    expect(warnings.map((w) => [w.window.label, w.totalUsd])).toEqual([['10m', expect.closeTo(0.8, 9)]]);
    expect(warnings[0]?.caller.id).toBe(`key:${sha('sk-e')}`);
    spend(budget, 'sk-e', 0.1);
    // 0.9 in both windows: past the 10m window's 0.8, but it warned already.
    expect(warnings).toHaveLength(1);
    // 11 minutes later, late spend (no reservation) counts too: the hour reaches 3.2, and the 10m
    // window, a window length after its warning, may warn again.
    now += 11 * MINUTE;
    budget.add(keyCaller('sk-e'), 2.3);
    expect(warnings.map((w) => w.window.label)).toEqual(['10m', '10m', '1h']);
    // Within a window length of the last warning: nothing, though still past the ratio.
    now += 5 * MINUTE;
    budget.add(keyCaller('sk-e'), 0.1);
    expect(warnings).toHaveLength(3);
    // Another key warns on its own.
    spend(budget, 'sk-f', 0.8);
    const who = (key: string) => `key:${sha(key).slice(0, 8)}`;
    expect(warnings.map((w) => [w.window.label, w.caller.id.slice(0, 12)])).toEqual([
      ['10m', who('sk-e')],
      ['10m', who('sk-e')],
      ['1h', who('sk-e')],
      ['10m', who('sk-f')],
    ]);
  });

  it('no warnings with a ratio of 0', () => {
    const budget = budgetOf({ default: { '1h': 1 } }, 0);
    spend(budget, 'sk-g', 1);
    expect(warnings).toEqual([]);
  });
});
