/**
 * Bursts of checks from one key against a budget (docs/contract.md, Cost), shared by the budget
 * tests on one server, a Cluster and Sentinel: the scripted upstream holds the answers of a burst
 * until every operation of it has reserved (reached the upstream) or been refused, so the whole burst
 * is in flight before the first cost is known, whatever the machine's speed; it reports a fixed cost,
 * and counts what reached it.
 */
import { beforeEach, expect } from 'vitest';
import { listPrice } from '../../src/gateway/cost/price-table.js';
import type { GqlResult } from './graphql-client.js';
import type { ScriptedGateways } from './scripted-gateways.js';
import { nullBody } from './upstream-bodies.js';
import { gate, until } from './waits.js';

/** What the scripted upstream charges per check. */
export const CHECK_USD = 0.004;
/** The gateway's first estimate of a check (null-x-4o, from its price table). */
export const FIRST_ESTIMATE = listPrice({ upstream: 'null-check', kind: 'check', model: 'null-x-4o' });
/** The largest error of one operation's estimate against its bill (estimates lie between both). */
export const MAX_ESTIMATE_ERROR = Math.abs(FIRST_ESTIMATE - CHECK_USD);

/**
 * A burst's gateway settings: one attempt and no breaker (a failed call is the test's, not retried),
 * the budget, and bounds a loaded machine cannot reach while a burst's answers are held (a held answer
 * is a slow upstream to the gateway; the timeouts are not what is tested).
 */
export const burstEnv = (budgetUsd: number): Record<string, string> => ({
  BREAKER_THRESHOLD: '0',
  RETRY_MAX_ATTEMPTS: '1',
  COST_BUDGET_USD_PER_HOUR: String(budgetUsd),
  UPSTREAM_TIMEOUT_MS: '30000',
  OPERATION_DEADLINE_MS: '60000',
});

/** A check of `value` (the scripted upstream: `hang`, `fail-500` and `fail-503` do what they say). */
export const check = (value: string) => `{ isNull(value: ${JSON.stringify(value)}) { __typename } }`;

export interface Cost {
  gpuCostUsd: number;
  estimatedCostUsd?: number;
}

/** What a burst came to: the bill (what the upstream reported), answered and refused counts. */
export function tally(results: GqlResult[]) {
  let billed = 0;
  let answered = 0;
  let refused = 0;
  const other: unknown[] = [];
  for (const result of results) {
    billed += (result.extensions?.cost as Cost | undefined)?.gpuCostUsd ?? 0;
    const codes = (result.errors ?? []).map((e) => e.extensions?.code);
    if (codes.length === 0 && result.data?.isNull != null) answered++;
    else if (codes.length === 1 && codes[0] === 'BUDGET_EXCEEDED') {
      refused++;
      // Refused before anything: no data, no cost.
      expect(result.data).toBeUndefined();
      expect(result.extensions?.cost).toBeUndefined();
    } else other.push(result.errors ?? result.data);
  }
  return { billed: Math.round(billed * 1e8) / 1e8, answered, refused, other };
}

export interface BurstUpstream {
  /** Checks that reached the upstream so far (since the test began). */
  checks(): number;
  /**
   * Sends `count` operations together (`send(i)`), their upstream answers held until every one has
   * either reached the upstream (reserved, admitted) or been answered (refused, before any call): the
   * whole burst has reserved before the first cost is known. `meanwhile` runs once all are sent, before
   * that wait. Then the answers go; resolves to every result.
   */
  burst(
    count: number,
    send: (i: number) => Promise<GqlResult>,
    meanwhile?: () => Promise<void>,
  ): Promise<GqlResult[]>;
  /**
   * Asserts that a burst spent one budget of `budgetUsd` as one process would: every operation was
   * answered or refused (never failed), as many were answered as the first estimate fits in the
   * budget (each reserved it before any cost was known), the bill is within the budget plus the
   * estimation error, and refused operations called nothing (the upstream saw exactly the answered
   * ones). Returns the tally for further checks.
   */
  expectOneBudget(results: GqlResult[], budgetUsd: number): Tally;
  /**
   * Asserts what a burst across two replicas that lost their shared state meanwhile may do: every
   * operation answered or refused (never failed), each replica holding the budget on its own figures
   * (billed at most twice the budget plus the estimation error), and refused operations called
   * nothing. Returns the tally for further checks.
   */
  expectSplitBudget(results: GqlResult[], budgetUsd: number): Tally;
}

/** What {@link tally} counts. */
export type Tally = ReturnType<typeof tally>;

/** Routes the scripted upstream's checks for bursts, before each test of the file. */
export function useBurstUpstream(scripted: ScriptedGateways): BurstUpstream {
  /** While a burst is being sent: its checks' answers wait for this. */
  let held: Promise<void> | undefined;
  beforeEach(() => {
    held = undefined;
    scripted.upstream.reset();
    scripted.upstream.route('POST', '/api/v1/check', (req) => {
      const value = (req.body as { value?: unknown }).value;
      if (value === 'hang') return { hang: true };
      if (value === 'fail-500') return { status: 500 };
      if (value === 'fail-503') return { status: 503 };
      return { holdUntil: held, body: nullBody({ gpu_cost_usd: CHECK_USD }) };
    });
  });
  const checks = () => scripted.upstream.count('POST', '/api/v1/check');
  return {
    checks,
    async burst(count, send, meanwhile) {
      const answers = gate();
      held = answers.opened;
      const before = checks();
      let settled = 0;
      const results = Array.from({ length: count }, (_, i) =>
        send(i).finally(() => {
          settled++;
        }),
      );
      try {
        await meanwhile?.();
        const reserved = await until(() => settled + checks() - before === count, 400);
        expect(reserved, 'every operation of the burst reached the upstream or was refused').toBe(true);
      } finally {
        held = undefined;
        answers.open();
      }
      return Promise.all(results);
    },
    expectOneBudget(results, budgetUsd) {
      const counted = tally(results);
      expect(counted.other).toEqual([]);
      expect(counted.answered + counted.refused).toBe(results.length);
      expect(counted.answered).toBe(Math.floor((budgetUsd + 1e-9) / FIRST_ESTIMATE));
      expect(counted.billed).toBeLessThanOrEqual(budgetUsd + MAX_ESTIMATE_ERROR);
      expect(checks()).toBe(counted.answered);
      return counted;
    },
    expectSplitBudget(results, budgetUsd) {
      const counted = tally(results);
      expect(counted.other).toEqual([]);
      expect(counted.answered + counted.refused).toBe(results.length);
      expect(counted.billed).toBeLessThanOrEqual(2 * (budgetUsd + MAX_ESTIMATE_ERROR));
      expect(checks()).toBe(counted.answered);
      return counted;
    },
  };
}
