/**
 * The gateway's two cost checks before an operation calls anything, and the bookkeeping after each
 * call that cost money:
 * - X-Max-Cost-Usd: the estimate (cost-model.ts) over the caller's cap → BUDGET_EXCEEDED with
 *   `estimatedCostUsd` and `maxCostUsd`;
 * - COST_BUDGET_USD_PER_HOUR: the caller's spend in the last hour at or over the budget →
 *   BUDGET_EXCEEDED with `retryAfterSeconds`.
 * Both refuse the whole operation (no data), before any upstream call.
 */
import type { GraphQLError } from 'graphql';
import { gatewayError } from '../errors.js';
import type { Operation } from '../operation.js';
import { type ModelCall, modelCalls, type OperationPlan } from '../operation-plan.js';
import type { CostBudget } from './cost-budget.js';
import type { CostModel } from './cost-model.js';

export interface CostControlOptions {
  model: CostModel;
  /** Undefined: no hourly budget (COST_BUDGET_USD_PER_HOUR unset). */
  budget?: CostBudget | undefined;
  /** Told of every refusal (metrics). */
  onRefusal?: ((reason: 'max-cost' | 'hourly-budget') => void) | undefined;
}

export interface CostControl {
  /** The refusal of this operation, or undefined to let it run. A promise only with a Redis budget. */
  admit(
    operation: Operation,
    plan: OperationPlan,
    variables: Record<string, unknown> | undefined,
  ): GraphQLError | undefined | Promise<GraphQLError | undefined>;
  /** A cost the upstream reported for one of the operation's calls (the running means, the budget). */
  spent(operation: Operation | undefined, call: ModelCall, usd: number): void;
}

/** Per plan, the model calls of each distinct variables text (the arguments are read once). */
const MAX_ARGUMENT_SETS = 64;

export function createCostControl(options: CostControlOptions): CostControl {
  const { model, budget, onRefusal } = options;
  const callsByPlan = new WeakMap<OperationPlan, Map<string, ModelCall[]>>();

  const callsOf = (plan: OperationPlan, variables: Record<string, unknown> | undefined): ModelCall[] => {
    let perVariables = callsByPlan.get(plan);
    if (perVariables === undefined) {
      perVariables = new Map();
      callsByPlan.set(plan, perVariables);
    }
    const key = variables === undefined ? '' : JSON.stringify(variables);
    let calls = perVariables.get(key);
    if (calls === undefined) {
      calls = modelCalls(plan, variables);
      if (perVariables.size >= MAX_ARGUMENT_SETS) perVariables.clear();
      perVariables.set(key, calls);
    }
    return calls;
  };

  const overBudget = (verdict: Awaited<ReturnType<CostBudget['check']>>, usdPerHour: number) => {
    if (verdict.ok) return undefined;
    onRefusal?.('hourly-budget');
    return gatewayError(
      'BUDGET_EXCEEDED',
      `This API key spent its budget of ${usdPerHour} USD in the last hour (COST_BUDGET_USD_PER_HOUR); retry after ${verdict.retryAfterSeconds} s.`,
      {
        retryAfterSeconds: verdict.retryAfterSeconds,
        budgetUsdPerHour: usdPerHour,
        http: { status: 429, spec: true, headers: { 'retry-after': String(verdict.retryAfterSeconds) } },
      },
    );
  };

  return {
    admit(operation, plan, variables) {
      if (plan.fields.length === 0) return undefined;
      const cap = operation.maxCostUsd;
      if (cap !== undefined) {
        let estimated = 0;
        for (const call of callsOf(plan, variables)) estimated += model.expected(call);
        // Sums of binary fractions: rounded, so a cap of 0.0042 admits an estimate of 0.0042.
        estimated = Math.round(estimated * 1e8) / 1e8;
        if (estimated > cap) {
          onRefusal?.('max-cost');
          return gatewayError(
            'BUDGET_EXCEEDED',
            `This operation is expected to cost ${estimated} USD, more than X-Max-Cost-Usd allows (${cap} USD); nothing was called.`,
            { estimatedCostUsd: estimated, maxCostUsd: cap, http: { status: 400, spec: true } },
          );
        }
      }
      if (budget === undefined || !plan.fields.some((f) => f.extension.models !== undefined))
        return undefined;
      const verdict = budget.check(operation.apiKey);
      return verdict instanceof Promise
        ? verdict.then((resolved) => overBudget(resolved, budget.usdPerHour))
        : overBudget(verdict, budget.usdPerHour);
    },
    spent(operation, call, usd) {
      model.observe(call, usd);
      budget?.add(operation?.apiKey, usd);
    },
  };
}
