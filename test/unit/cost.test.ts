/**
 * src/gateway/cost on its own: the price table, the running mean per model, the X-Max-Cost-Usd header
 * (request/facts.ts), the budget (refusalOf, reserve and settle) and cost control. In a gateway, on
 * both lanes: test/integration/cost-lanes.test.ts.
 */
import { createHash } from 'node:crypto';
import { type GraphQLError, parse } from 'graphql';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  type BudgetReservation,
  type BudgetStore,
  createCostBudget,
  refusalOf,
} from '../../src/gateway/cost/cost-budget.js';
import { createCostControl } from '../../src/gateway/cost/cost-control.js';
import { createCostModel } from '../../src/gateway/cost/cost-model.js';
import { listPrice } from '../../src/gateway/cost/price-table.js';
import { callerIdOf, keyCaller } from '../../src/gateway/identity.js';
import { Operation } from '../../src/gateway/operation/operation.js';
import { type ModelCall, planOperation } from '../../src/gateway/operation/operation-plan.js';
import { MAX_COST_CAP_USD, maxCostOf } from '../../src/gateway/request/facts.js';
import { schema } from '../../src/gateway/schema/index.js';
import { createBudgetStore } from '../../src/gateway/shared-state/budget-store.js';
import { NULL_MODEL_PROFILES, NULL_MODELS } from '../../src/services/null-check/null-models.js';
import { PI_MODEL_PROFILES, PI_MODELS } from '../../src/services/pi-digits/pi-models.js';

const HOUR = 3_600_000;
const MINUTE = 60_000;
/** A minute-aligned instant (budget buckets are per minute). */
const T0 = Date.UTC(2030, 0, 1, 12, 0, 0);

describe('price table', () => {
  it('prices a null check per model as the reference service charges it', () => {
    for (const model of NULL_MODELS) {
      expect(listPrice({ upstream: 'null-check', kind: 'check', model }), model).toBe(
        NULL_MODEL_PROFILES[model].costUsd,
      );
    }
  });

  it('prices pi as base + per digit, as the reference service charges it (3 digits when omitted)', () => {
    for (const model of PI_MODELS) {
      const { base, perDigit } = PI_MODEL_PROFILES[model].costUsd;
      for (const digits of [0, 3, 1000]) {
        expect(listPrice({ upstream: 'pi-digits', kind: 'pi', model, digits })).toBeCloseTo(
          base + perDigit * digits,
          12,
        );
      }
      expect(listPrice({ upstream: 'pi-digits', kind: 'pi', model })).toBeCloseTo(base + perDigit * 3, 12);
    }
  });

  it('prices inference per token: a fixed prompt plus about three digits a token', () => {
    for (const model of PI_MODELS) {
      const perToken = PI_MODEL_PROFILES[model].usdPerToken;
      // The service counts ceil(len("3.xxx") / 3) + 12 tokens without a chain of thought.
      expect(listPrice({ upstream: 'pi-digits', kind: 'inference', model, digits: 7 })).toBeCloseTo(
        (12 + Math.ceil(9 / 3)) * perToken,
        12,
      );
    }
  });

  it('prices an unknown model as the dearest of its service: an estimate must not be low', () => {
    expect(listPrice({ upstream: 'null-check', kind: 'check', model: 'null-x-9000' })).toBe(
      NULL_MODEL_PROFILES['null-x-opus'].costUsd,
    );
    expect(listPrice({ upstream: 'pi-digits', kind: 'pi', model: 'PI_X_MINI', digits: 10 })).toBeCloseTo(
      listPrice({ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-opus-almost-correct', digits: 10 }),
      12,
    );
  });
});

describe('cost model: the table until observations, then the running mean of observed ÷ table price', () => {
  const pi4o: ModelCall = { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 };
  const piMini: ModelCall = { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-mini', digits: 3 };
  const check4o: ModelCall = { upstream: 'null-check', kind: 'check', model: 'null-x-4o' };
  const inference4o: ModelCall = { upstream: 'pi-digits', kind: 'inference', model: 'pi-x-4o', digits: 3 };

  it('starts at the price table', () => {
    const model = createCostModel();
    for (const call of [pi4o, piMini, check4o, inference4o])
      expect(model.expected(call)).toBe(listPrice(call));
  });

  it('follows the observed price of one (kind, model), moving by a fifth of each difference', () => {
    const model = createCostModel();
    const price = listPrice(pi4o);
    model.observe(pi4o, 2 * price);
    expect(model.expected(pi4o)).toBeCloseTo(2 * price, 12);
    model.observe(pi4o, 3 * price);
    expect(model.expected(pi4o)).toBeCloseTo(2.2 * price, 12);
    model.observe(pi4o, 0.2 * price);
    expect(model.expected(pi4o)).toBeCloseTo((2.2 + 0.2 * (0.2 - 2.2)) * price, 12);
    // Other models and other kinds of call of the same model keep the table.
    expect(model.expected(piMini)).toBe(listPrice(piMini));
    expect(model.expected(inference4o)).toBe(listPrice(inference4o));
    expect(model.expected(check4o)).toBe(listPrice(check4o));
  });

  it('keeps the price of digits: cheap short calls never make a million digits look cheap', () => {
    const model = createCostModel();
    for (let i = 0; i < 10; i++) model.observe(pi4o, listPrice(pi4o));
    const million: ModelCall = { ...pi4o, digits: 1_000_000 };
    expect(model.expected(million)).toBeCloseTo(listPrice(million), 12);
    expect(model.expected(million)).toBeGreaterThan(100 * model.expected(pi4o));
  });

  it('ignores negative or non-finite observations', () => {
    const model = createCostModel();
    model.observe(pi4o, -1);
    model.observe(pi4o, Number.NaN);
    model.observe(pi4o, Number.POSITIVE_INFINITY);
    expect(model.expected(pi4o)).toBe(listPrice(pi4o));
    // A free answer is an observation like any other.
    model.observe(check4o, 0);
    expect(model.expected(check4o)).toBe(0);
  });

  it('tracks a bounded number of models (model names come from requests)', () => {
    const model = createCostModel();
    const madeUp = (i: number): ModelCall => ({
      upstream: 'null-check',
      kind: 'check',
      model: `made-up-${i}`,
    });
    for (let i = 0; i < 100; i++) model.observe(madeUp(i), listPrice(madeUp(i)) * 2);
    const mini: ModelCall = { upstream: 'null-check', kind: 'check', model: 'null-x-mini' };
    model.observe(mini, 0.5);
    expect(model.expected(madeUp(99))).toBeCloseTo(2 * listPrice(madeUp(99)), 12);
    expect(model.expected(mini)).toBe(NULL_MODEL_PROFILES['null-x-mini'].costUsd);
  });
});

describe('X-Max-Cost-Usd parsing (maxCostOf)', () => {
  it.each([
    ['0.05', 0.05],
    ['0', 0],
    ['  1.5 ', 1.5],
    ['0.000000000001', 1e-12],
    [String(MAX_COST_CAP_USD), MAX_COST_CAP_USD],
  ])('%j → %s', (header, value) => {
    expect(maxCostOf(header)).toBe(value);
  });

  it('is undefined without the header', () => {
    expect(maxCostOf(undefined)).toBeUndefined();
    expect(maxCostOf(null)).toBeUndefined();
  });

  it.each([
    ['negative', '-1'],
    ['negative zero', '-0'],
    ['NaN', 'NaN'],
    ['Infinity', 'Infinity'],
    ['huge', '1000000.01'],
    ['far too huge', '1'.repeat(400)],
    ['exponent', '1e3'],
    ['hex', '0x10'],
    ['non-numeric', 'five dollars'],
    ['a currency sign', '$0.05'],
    ['empty', ''],
    ['blank', '   '],
    ['a bare point', '.5'],
    ['a trailing point', '5.'],
    ['a comma decimal', '0,05'],
    ['repeated (as HTTP joins repeated headers)', '0.05, 0.10'],
  ])('%s (%j) → BAD_USER_INPUT, HTTP 400', (_what, header) => {
    const result = maxCostOf(header);
    expect(typeof result).toBe('object');
    const error = result as GraphQLError;
    expect(error.extensions.code).toBe('BAD_USER_INPUT');
    expect(error.extensions.http).toEqual({ status: 400 });
    expect(error.message).toMatch(/X-Max-Cost-Usd/);
  });
});

describe('hourly budget: refusalOf (why an estimate does not fit, and when it will)', () => {
  const buckets: Array<[number, number]> = [
    [T0, 0.4],
    [T0 + MINUTE, 0.4],
    [T0 + 2 * MINUTE, 0.3],
  ];
  const now = T0 + 3 * MINUTE;

  it('says when enough of the oldest spend leaves the hour for this estimate', () => {
    // 1.1 spent, budget 1: an estimate of 0.1 fits once the first 0.4 leaves (0.7 + 0.1 <= 1).
    expect(refusalOf(buckets, 1, 0.1, now)).toEqual({ spentUsd: 1.1, retryAfterSeconds: 3600 - 180 });
    // An estimate of 0.5 needs the two oldest gone (0.3 + 0.5 <= 1).
    expect(refusalOf(buckets, 1, 0.5, now)).toEqual({ spentUsd: 1.1, retryAfterSeconds: 3600 - 180 + 60 });
    // 0.8 needs all three gone.
    expect(refusalOf(buckets, 1, 0.8, now)).toEqual({ spentUsd: 1.1, retryAfterSeconds: 3600 - 180 + 120 });
  });

  it('an estimate over the whole budget never fits: no retry time', () => {
    expect(refusalOf(buckets, 1, 1.01, now)).toEqual({ spentUsd: 1.1, retryAfterSeconds: undefined });
    expect(refusalOf([], 0, 0.001, now)).toEqual({ spentUsd: 0, retryAfterSeconds: undefined });
  });

  it('ignores buckets older than the hour, and never says to retry in less than a second', () => {
    expect(
      refusalOf(
        [
          [T0 - HOUR, 100],
          [T0, 2],
        ],
        1,
        0.5,
        T0 + HOUR - 1,
      ),
    ).toEqual({ spentUsd: 2, retryAfterSeconds: 1 });
  });
});

describe('hourly budget: reserve and settle over the memory store, with a clock of the test', () => {
  let now = T0;
  const clock = () => now;
  beforeEach(() => {
    now = T0;
  });
  const memoryBudget = (usdPerHour: number) =>
    createCostBudget({ store: createBudgetStore(undefined, 100), usdPerHour, now: clock });
  const reserved = (verdict: BudgetReservation | Promise<BudgetReservation>) => {
    if (verdict instanceof Promise) throw new Error('the memory store answers synchronously');
    if (!verdict.ok) throw new Error(`refused: ${JSON.stringify(verdict)}`);
    if (verdict.hold === undefined) throw new Error('no budget applies');
    return verdict.hold;
  };

  it('reservations in flight count: the one that does not fit is refused, synchronously', () => {
    const budget = memoryBudget(1);
    const holds = [0, 1, 2].map(() => reserved(budget.reserve(keyCaller('sk-a'), 0.3)));
    // 0.9 reserved: 0.1 fits, 0.2 does not.
    const refused = budget.reserve(keyCaller('sk-a'), 0.2);
    expect(refused).toMatchObject({ ok: false, retryAfterSeconds: 3600 });
    expect(reserved(budget.reserve(keyCaller('sk-a'), 0.1)).usd).toBe(0.1);
    expect(holds).toHaveLength(3);
  });

  it('settling returns what was not spent at once, and bills spend above the estimate', () => {
    const budget = memoryBudget(1);
    const a = reserved(budget.reserve(keyCaller('sk-a'), 0.5));
    const b = reserved(budget.reserve(keyCaller('sk-a'), 0.5));
    expect(budget.reserve(keyCaller('sk-a'), 0.1)).toMatchObject({ ok: false });
    // a cost nothing (a cache hit, a failed call): its 0.5 is back.
    budget.settle(a, 0);
    expect(reserved(budget.reserve(keyCaller('sk-a'), 0.4)).usd).toBe(0.4);
    // b cost 0.6, more than it reserved: 0.4 + 0.6 = 1.0, nothing left.
    budget.settle(b, 0.6);
    expect(budget.reserve(keyCaller('sk-a'), 0.01)).toMatchObject({ ok: false });
  });

  it('late spend (after settling) is billed; the hour slides', () => {
    const budget = memoryBudget(1);
    const hold = reserved(budget.reserve(keyCaller('sk-a'), 0.4));
    budget.settle(hold, 0.4);
    now += MINUTE;
    budget.add(keyCaller('sk-a'), 0.5);
    const refused = budget.reserve(keyCaller('sk-a'), 0.2) as BudgetReservation;
    expect(refused).toMatchObject({ ok: false, retryAfterSeconds: 3600 - 60 });
    expect(refused.ok === false && refused.spentUsd).toBeCloseTo(0.9, 12);
    now = T0 + HOUR;
    expect(reserved(budget.reserve(keyCaller('sk-a'), 0.2)).usd).toBe(0.2);
  });

  it('an estimate exactly at what is left fits (sums of binary fractions are not a refusal)', () => {
    const budget = memoryBudget(0.05);
    for (let i = 0; i < 11; i++) reserved(budget.reserve(keyCaller('sk-a'), 0.0042));
    // 11 × 0.0042 = 0.0462; a 12th would be 0.0504.
    expect(budget.reserve(keyCaller('sk-a'), 0.0042)).toMatchObject({ ok: false });
    expect(reserved(budget.reserve(keyCaller('sk-a'), 0.0038)).usd).toBe(0.0038);
  });

  it('keeps keys apart; no key and the key "free" are the same free tier', () => {
    const budget = memoryBudget(0.5);
    budget.add(keyCaller('sk-a'), 0.6);
    budget.add(keyCaller(undefined), 0.6);
    expect(budget.reserve(keyCaller('sk-a'), 0.01)).toMatchObject({ ok: false });
    expect(budget.reserve(keyCaller('sk-b'), 0.01)).toMatchObject({ ok: true });
    expect(budget.reserve(keyCaller(undefined), 0.01)).toMatchObject({ ok: false });
    expect(budget.reserve(keyCaller('free'), 0.01)).toMatchObject({ ok: false });
  });

  it('ignores spend that is not a positive finite number', () => {
    const budget = memoryBudget(0.5);
    for (const usd of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) budget.add(keyCaller('sk-a'), usd);
    expect(reserved(budget.reserve(keyCaller('sk-a'), 0.5)).usd).toBe(0.5);
  });

  it('stores keys hashed: the API key never reaches the store in clear', () => {
    const seen: string[] = [];
    const memory = createBudgetStore(undefined, 100);
    const recording: BudgetStore = {
      add(key, windows, usd, at) {
        seen.push(key);
        memory.add(key, windows, usd, at);
      },
      reserve(key, windows, usd, at) {
        seen.push(key);
        return memory.reserve(key, windows, usd, at);
      },
      settle(key, windows, at, reserved, spent, time) {
        seen.push(key);
        memory.settle(key, windows, at, reserved, spent, time);
      },
      read(key, windows, at) {
        seen.push(key);
        return memory.read(key, windows, at);
      },
    };
    const secret = 'sk-live-SECRET-0123456789';
    const budget = createCostBudget({ store: recording, usdPerHour: 1, now: clock });
    budget.add(keyCaller(secret), 0.5);
    budget.settle(reserved(budget.reserve(keyCaller(secret), 0.2)), 0.1);
    expect(seen).toHaveLength(3);
    for (const key of seen) {
      expect(key).toBe(seen[0]);
      expect(key).not.toContain(secret);
      expect(key).not.toContain('SECRET');
      // The name COST_BUDGETS gives the key's own scope: `key:<sha256 hex of the key>`.
      expect(key).toBe(`key:${createHash('sha256').update(secret).digest('hex')}`);
    }
    expect(callerIdOf(secret)).toBe(seen[0]);
    expect(callerIdOf(`${secret}x`)).not.toBe(seen[0]);
    expect(callerIdOf(undefined)).toBe('anonymous');
    expect(callerIdOf('free')).toBe('anonymous');
  });
});

describe('cost control: admit and spent', () => {
  const plan = (query: string) => planOperation(schema, parse(query));
  const operation = (maxCostUsd?: number, apiKey?: string) =>
    new Operation({ caller: keyCaller(apiKey), requestId: 'r', deadlineMs: 0, maxCostUsd });
  const PI = '{ pi { __typename } }';

  it('admits an estimate at the cap (rounded sums) and refuses one over it, saying both figures', () => {
    const refusals: string[] = [];
    const control = createCostControl({ model: createCostModel(), onRefusal: (r) => refusals.push(r) });
    const twoChecks = plan('{ a: isNull(value: 1) { __typename } b: isNull(value: 2) { __typename } }');
    // 0.0042 + 0.0042 in binary floating point is not 0.0084; the cap of 0.0084 still admits it.
    expect(control.admit(operation(0.0084), twoChecks, undefined)).toBeUndefined();
    const refused = control.admit(operation(0.0083), twoChecks, undefined) as GraphQLError;
    expect(refused.extensions).toMatchObject({
      code: 'BUDGET_EXCEEDED',
      estimatedCostUsd: 0.0084,
      maxCostUsd: 0.0083,
    });
    expect(refused.message).toMatch(/nothing was called/);
    expect(refusals).toEqual(['max-cost']);
    // No cap: no estimate at all.
    expect(control.admit(operation(), twoChecks, undefined)).toBeUndefined();
  });

  it('estimates from the variables (enum names and variable defaults included)', () => {
    const control = createCostControl({ model: createCostModel() });
    const query = plan(
      'query($m: PiModel = PI_X_OPUS_ALMOST_CORRECT, $d: Int) { pi(model: $m, digits: $d) { __typename } }',
    );
    const mini = listPrice({ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-mini', digits: 100 });
    expect(control.admit(operation(mini), query, { m: 'PI_X_MINI', d: 100 })).toBeUndefined();
    const opus = listPrice({
      upstream: 'pi-digits',
      kind: 'pi',
      model: 'pi-x-opus-almost-correct',
      digits: 3,
    });
    expect(
      (control.admit(operation(mini), query, {}) as GraphQLError).extensions.estimatedCostUsd,
    ).toBeCloseTo(opus, 8);
  });

  it('lets operations that call no model through, even with a cap of 0', () => {
    const control = createCostControl({ model: createCostModel() });
    expect(control.admit(operation(0), plan('{ health { status } }'), undefined)).toBeUndefined();
    expect(control.admit(operation(0), plan('{ __typename }'), undefined)).toBeUndefined();
  });

  it('learns from what was spent: the next estimate follows the observed price', () => {
    const control = createCostControl({ model: createCostModel() });
    const call: ModelCall = { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 };
    expect(control.admit(operation(0.001), plan(PI), undefined)).toBeDefined();
    control.spent(undefined, call, 0.0005);
    expect(control.admit(operation(0.001), plan(PI), undefined)).toBeUndefined();
    // Another model's price does not move this one's.
    control.spent(undefined, { ...call, model: 'pi-x-mini' }, 5);
    expect(control.admit(operation(0.001), plan(PI), undefined)).toBeUndefined();
  });

  it('refuses a key over its hourly budget with 429 and Retry-After, and only operations that call a model', async () => {
    let now = T0;
    const refusals: string[] = [];
    const control = createCostControl({
      model: createCostModel(),
      budget: createCostBudget({
        store: createBudgetStore(undefined, 100),
        usdPerHour: 0.01,
        now: () => now,
      }),
      onRefusal: (r) => refusals.push(r),
    });
    expect(await control.admit(operation(undefined, 'sk-a'), plan(PI), undefined)).toBeUndefined();
    control.spent(
      operation(undefined, 'sk-a'),
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 },
      0.009,
    );
    now += 30_000;
    const refused = (await control.admit(operation(undefined, 'sk-a'), plan(PI), undefined)) as GraphQLError;
    expect(refused.extensions).toMatchObject({
      code: 'BUDGET_EXCEEDED',
      retryAfterSeconds: 3570,
      budgetUsdPerHour: 0.01,
      http: { status: 429, headers: { 'retry-after': '3570' } },
    });
    expect(refusals).toEqual(['hourly-budget']);
    expect(
      await control.admit(operation(undefined, 'sk-a'), plan('{ health { status } }'), undefined),
    ).toBeUndefined();
    expect(await control.admit(operation(undefined, 'sk-b'), plan(PI), undefined)).toBeUndefined();
  });

  it('reserves the estimate at admission, bills the actual cost when the operation settles, once', () => {
    const now = T0;
    const usd = listPrice({ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 });
    const estimates: Array<[string, string, number]> = [];
    const budget = createCostBudget({
      store: createBudgetStore(undefined, 100),
      usdPerHour: usd * 3,
      now: () => now,
    });
    const control = createCostControl({
      model: createCostModel(),
      budget,
      onEstimate: (...call) => estimates.push(call),
    });
    const call: ModelCall = { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 };
    const ops = [0, 1, 2].map(() => operation(undefined, 'sk-r'));
    for (const op of ops) {
      expect(control.admit(op, plan(PI), undefined)).toBeUndefined();
      expect(op.admission?.reserving).toBe(true);
      expect(op.admission?.estimate().usd).toBe(Math.round(usd * 1e8) / 1e8);
    }
    // Three estimates reserved: a fourth does not fit, synchronously (memory store).
    const fourth = control.admit(operation(undefined, 'sk-r'), plan(PI), undefined) as GraphQLError;
    expect(fourth.extensions).toMatchObject({ code: 'BUDGET_EXCEEDED', http: { status: 429 } });
    // The first is cancelled before any cost and settles (the pipeline's end): its reservation is back.
    ops[0]?.cancel(new Error('client went away'));
    control.settle(ops[0] as Operation);
    expect(ops[0]?.admission?.reserving).toBe(false);
    const fifth = operation(undefined, 'sk-r');
    expect(control.admit(fifth, plan(PI), undefined)).toBeUndefined();
    const admitted = () => control.admit(operation(undefined, 'sk-r'), plan(PI), undefined) === undefined;
    // The second reports its cost while running (not billed again when it settles), then settles twice.
    const second = ops[1] as Operation;
    second.ledger.spent(usd);
    control.spent(second, call, usd);
    second.ledger.record({
      upstream: 'pi-digits',
      endpoint: '/pi',
      status: 200,
      durationMs: 1,
      source: 'upstream',
    });
    control.settle(second);
    control.settle(second);
    expect(second.admission?.reserving).toBe(false);
    // Its estimate is counted once, though it settled twice.
    expect(estimates).toEqual([['pi-digits', 'pi-x-4o', usd]]);
    expect(admitted()).toBe(false);
    // The third cost nothing (a cache hit, a failed call): its estimate is back, room for one.
    control.settle(ops[2] as Operation);
    expect(admitted()).toBe(true);
    expect(admitted()).toBe(false);
    // A late cost of the settled second is billed as it comes: the fifth's refund does not make room.
    control.spent(second, call, usd);
    control.settle(fifth);
    expect(admitted()).toBe(false);
  });

  it('a client that left is billed its answered calls plus the estimate of each call abandoned in flight', () => {
    const usd = listPrice({ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 });
    const abandoned: number[] = [];
    const control = createCostControl({
      model: createCostModel(),
      budget: createCostBudget({
        store: createBudgetStore(undefined, 100),
        usdPerHour: usd * 2,
        now: () => T0,
      }),
      onAbandoned: (_upstream, _model, estimate) => abandoned.push(estimate),
    });
    const call: ModelCall = { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 };
    const admitted = () => control.admit(operation(undefined, 'sk-gone'), plan(PI), undefined) === undefined;
    const gone = operation(undefined, 'sk-gone');
    expect(control.admit(gone, plan(PI), undefined)).toBeUndefined();
    const inFlight = gone.ledger.begin(call);
    gone.cancel(new Error('client went away'));
    gone.ledger.end(inFlight, false); // the abort unwound: no answer
    control.settle(gone);
    expect(abandoned).toEqual([usd]);
    // Billed the estimate, not refunded: one more estimate fits the budget of two, not two more.
    expect(admitted()).toBe(true);
    expect(admitted()).toBe(false);
  });

  it('a call that answered before the abort took effect is billed as reported, not estimated again', () => {
    const control = createCostControl({
      model: createCostModel(),
      budget: createCostBudget({ store: createBudgetStore(undefined, 100), usdPerHour: 1, now: () => T0 }),
    });
    const call: ModelCall = { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 };
    const op = operation(undefined, 'sk-late');
    expect(control.admit(op, plan(PI), undefined)).toBeUndefined();
    const inFlight = op.ledger.begin(call);
    op.cancel(new Error('client went away'));
    op.ledger.end(inFlight, true);
    expect(op.ledger.abandoned).toEqual([]);
  });

  it('an estimate over the whole hourly budget is refused as never fitting (HTTP 400, no retry time)', () => {
    const control = createCostControl({
      model: createCostModel(),
      budget: createCostBudget({ store: createBudgetStore(undefined, 100), usdPerHour: 0.01, now: () => T0 }),
    });
    const refused = control.admit(
      operation(undefined, 'sk-x'),
      plan('{ isNull(value: 1, model: NULL_X_OPUS) { __typename } }'),
      undefined,
    ) as GraphQLError;
    expect(refused.extensions).toMatchObject({
      code: 'BUDGET_EXCEEDED',
      estimatedCostUsd: 0.042,
      budgetUsdPerHour: 0.01,
      http: { status: 400 },
    });
    expect(refused.extensions.retryAfterSeconds).toBeUndefined();
    expect(refused.message).toMatch(/can never run under this budget/);
  });
});
