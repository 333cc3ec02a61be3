/**
 * The gateway's two cost checks before an operation calls anything, and the bookkeeping of what it
 * cost (docs/contract.md, Cost):
 * - X-Max-Cost-Usd: the estimate (cost-model.ts) over the caller's cap → BUDGET_EXCEEDED with
 *   `estimatedCostUsd` and `maxCostUsd`; in a batch the cap is the whole batch's (the estimates of
 *   the operations admitted before this one count);
 * - COST_BUDGETS (or COST_BUDGET_USD_PER_HOUR): the estimate is reserved in every sliding window of
 *   the caller's scope (cost-budget.ts) and settled to the actual cost when the operation ends; an
 *   estimate that does not fit in a window → BUDGET_EXCEEDED with that window's `retryAfterSeconds`
 *   (or, when it could never fit, without).
 * Both refuse the whole operation (no data), before any upstream call.
 *
 * No cap and no budget: admission records the plan and the variables (two writes), and the estimate
 * that `extensions.cost.estimatedCostUsd` shows is made only when the operation reports, only when it
 * touched an upstream.
 */

import type { GraphQLError } from 'graphql';
import { isPromise } from '../../shared/is-promise.js';
import { roundUsd } from '../../shared/usd.js';
import { gatewayError, type UpstreamName } from '../errors.js';
import { ANONYMOUS_CALLER, type Caller } from '../identity.js';
import type { ModelRouter } from '../models/router.js';
import type { CostEstimate, Operation } from '../operation/operation.js';
import {
  type ModelCall,
  modelCalls,
  modelCallsByField,
  type OperationPlan,
} from '../operation/operation-plan.js';
import { Admission, type Estimator, type RoutedField, type StepDown } from './admission.js';
import type { BudgetReservation, BudgetWindowStatus, CostBudget } from './cost-budget.js';
import type { CostModel } from './cost-model.js';
import { cheaperSteps, fallbacksOf } from './fallback.js';

export interface CostControlOptions {
  model: CostModel;
  /** Undefined: no budget (neither COST_BUDGETS nor COST_BUDGET_USD_PER_HOUR). */
  budget?: CostBudget | undefined;
  /** Told of every refusal (metrics). */
  onRefusal?: ((reason: 'max-cost' | 'hourly-budget') => void) | undefined;
  /** Told of the estimate of each call of an operation that touched an upstream (metrics). */
  onEstimate?: ((upstream: UpstreamName, model: string, usd: number) => void) | undefined;
  /** Told of each call abandoned in flight by a client that left, billed at its estimate (metrics). */
  onAbandoned?: ((upstream: UpstreamName, model: string, usd: number) => void) | undefined;
  /**
   * Routing by quality (models/router.ts): fields that ask for `minAccuracy` get their model from it
   * before the estimate, so the cap, the budget and the fallback apply to the model chosen.
   * @default no routing (such fields are answered by their service's default model)
   */
  router?: ModelRouter | undefined;
  /** Told of each admitted routed field: what it is expected to save against the default model (metrics). */
  onRouted?: ((upstream: UpstreamName, savedUsd: number) => void) | undefined;
}

export interface CostControl {
  /**
   * Admits the operation (its admission is then `operation.admission`, its estimate reserved when
   * there is a budget) or gives its refusal. A promise only with a Redis budget. In a batch
   * (`operation.batch`) the cap is the batch's: the estimates of its operations admitted before this
   * one count.
   */
  admit(
    operation: Operation,
    plan: OperationPlan,
    variables: Record<string, unknown> | undefined,
  ): GraphQLError | undefined | Promise<GraphQLError | undefined>;
  /** A cost the upstream reported for one of the operation's calls (the running means, the budget). */
  spent(operation: Operation | undefined, call: ModelCall, usd: number): void;
  /**
   * Where the operation ends (the pipeline's last step, on both lanes), once: settles its reservation
   * to what its calls cost, and counts its estimate in the estimate metric when it touched an upstream.
   * A client that left (docs/contract.md, Cost: spend stops when the client leaves) is billed what its
   * answered calls cost plus the estimate of each call abandoned in flight: the upstream may bill it.
   */
  settle(operation: Operation): void;
  /**
   * The caller's budget windows, undefined when no budget applies (the `budget` field, the RateLimit
   * headers). Synchronous in memory, a promise with Redis.
   */
  budgetStatus(caller: Caller): BudgetWindowStatus[] | undefined | Promise<BudgetWindowStatus[] | undefined>;
}

/** The model calls of a plan for one text of its priced variables, and the last estimate made of them. */
interface PricedCalls {
  readonly calls: readonly ModelCall[];
  last: CostEstimate | undefined;
}

/** Per plan, the model calls of each distinct text of its priced variables (the arguments are read once). */
const MAX_ARGUMENT_SETS = 64;

export function createCostControl(options: CostControlOptions): CostControl {
  const { model, budget, onRefusal, onEstimate, onAbandoned, router, onRouted } = options;
  const callsByPlan = new WeakMap<OperationPlan, Map<string, PricedCalls>>();

  const callsOf = (plan: OperationPlan, variables: Record<string, unknown> | undefined): PricedCalls => {
    let perVariables = callsByPlan.get(plan);
    if (perVariables === undefined) {
      perVariables = new Map();
      callsByPlan.set(plan, perVariables);
    }
    // Only the variables the estimate reads (operation-plan.ts `pricedBy`): distinct values of the
    // others (isNull's `value`) share one estimate, made once.
    const priced = plan.pricedVariables;
    let key = '';
    if (priced !== undefined && variables !== undefined)
      for (const name of priced) key += `${JSON.stringify(variables[name]) ?? '-'}\n`;
    let calls = perVariables.get(key);
    if (calls === undefined) {
      calls = { calls: modelCalls(plan, variables), last: undefined };
      if (perVariables.size >= MAX_ARGUMENT_SETS) perVariables.clear();
      perVariables.set(key, calls);
    }
    return calls;
  };

  /** An estimate of `calls` at the cost model's prices now. */
  const priceOf = (calls: readonly ModelCall[]): CostEstimate => {
    const priced: Array<readonly [UpstreamName, string, number]> = new Array(calls.length);
    let usd = 0;
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i] as ModelCall;
      const expected = model.expected(call);
      usd += expected;
      priced[i] = [call.upstream, call.model, expected];
    }
    return { usd: roundUsd(usd), calls: priced };
  };

  /**
   * The estimate of a plan's calls for these priced variables: the last one made for them when the
   * cost model still prices every call as it did then (an estimate is read-only data), else a new one.
   */
  const estimateOfCalls = (entry: PricedCalls): CostEstimate => {
    const last = entry.last;
    if (last !== undefined) {
      const { calls } = entry;
      let same = true;
      for (let i = 0; i < calls.length && same; i++)
        same =
          model.expected(calls[i] as ModelCall) ===
          (last.calls[i] as readonly [UpstreamName, string, number])[2];
      if (same) return last;
    }
    const estimate = priceOf(entry.calls);
    entry.last = estimate;
    return estimate;
  };

  const estimateOf: Estimator = (plan, variables, down) => {
    if (down === undefined) return estimateOfCalls(callsOf(plan, variables));
    return priceOf(
      down.fields.flatMap(({ key, calls: of }) => {
        const model = down.overrides.get(key);
        return model === undefined ? of : of.map((call) => ({ ...call, model }));
      }),
    );
  };

  const overBudget = (
    verdict: BudgetReservation,
    operation: Operation,
    admission: Admission,
    estimated: number,
  ): GraphQLError | undefined => {
    if (verdict.ok) {
      if (verdict.hold !== undefined) admission.reserve(verdict.hold);
      return undefined;
    }
    // Not run after all: its estimate leaves the batch's cap.
    if (operation.batch !== undefined && operation.maxCostUsd !== undefined)
      operation.batch.estimatedUsd -= estimated;
    const { window, scope } = verdict;
    const limit = window.limitUsd;
    // Which window, of which scope; `budgetUsdPerHour` too for an hour's window (older clients read it).
    const which = {
      budgetWindow: window.label,
      budgetLimitUsd: limit,
      budgetScope: scope.kind,
      ...(window.ms === 3_600_000 ? { budgetUsdPerHour: limit } : {}),
    };
    const whose =
      scope.kind === 'key'
        ? "this API key's own budget"
        : scope.kind === 'anonymous'
          ? 'the budget of callers without an API key'
          : `this API key's budget (${scope.kind})`;
    const retryAfter = verdict.retryAfterSeconds;
    if (retryAfter === undefined) {
      return gatewayError(
        'BUDGET_EXCEEDED',
        `This operation is expected to cost ${estimated} USD, more than the whole ${window.label} limit of ${whose} (${limit} USD per ${window.label}): it can never run under this budget; ask for fewer or cheaper calls. Nothing was called.`,
        { estimatedCostUsd: estimated, ...which, http: { status: 400, spec: true } },
      );
    }
    return gatewayError(
      'BUDGET_EXCEEDED',
      `This operation is expected to cost ${estimated} USD, more than is left of ${whose}: ${limit} USD per ${window.label}, ${verdict.spentUsd} USD spent or reserved in the last ${window.label}; retry after ${retryAfter} s. Nothing was called.`,
      {
        retryAfterSeconds: retryAfter,
        ...which,
        estimatedCostUsd: estimated,
        http: { status: 429, spec: true, headers: { 'retry-after': String(retryAfter) } },
      },
    );
  };

  /** One admission of the operation, with these models (fallback.ts) or those it asked for. */
  const attempt = (
    operation: Operation,
    plan: OperationPlan,
    variables: Record<string, unknown> | undefined,
    down?: StepDown,
  ): GraphQLError | undefined | Promise<GraphQLError | undefined> => {
    const admission = new Admission(estimateOf, plan, variables, down, budget);
    operation.admit(admission);
    const cap = operation.maxCostUsd;
    if (cap === undefined && budget === undefined) return undefined;
    const estimate = admission.estimate();
    const estimated = estimate.usd;
    const batch = cap === undefined ? undefined : operation.batch;
    if (cap !== undefined) {
      const before = batch?.estimatedUsd ?? 0;
      if (roundUsd(before + estimated) > cap) {
        const message =
          batch === undefined
            ? `This operation is expected to cost ${estimated} USD, more than X-Max-Cost-Usd allows (${cap} USD); nothing was called.`
            : `This operation is expected to cost ${estimated} USD, and the batch's operations admitted before it ${roundUsd(before)} USD: more than X-Max-Cost-Usd allows for the whole batch (${cap} USD); nothing was called for it.`;
        return gatewayError('BUDGET_EXCEEDED', message, {
          estimatedCostUsd: estimated,
          maxCostUsd: cap,
          http: { status: 400, spec: true },
        });
      }
      if (batch !== undefined) batch.estimatedUsd = before + estimated;
    }
    if (budget === undefined || estimate.calls.length === 0) return undefined;
    // The reservation lapses at the operation's deadline plus the lease margin (cost-budget.ts).
    const verdict = budget.reserve(operation.caller, estimated, operation.deadline);
    return isPromise(verdict)
      ? verdict.then((resolved) => overBudget(resolved, operation, admission, estimated))
      : overBudget(verdict, operation, admission, estimated);
  };

  /**
   * The models routing chooses for the fields that ask for `minAccuracy`, as the first step's
   * overrides; undefined when no field does (the document could, these variables do not).
   */
  const routeFields = (
    plan: OperationPlan,
    variables: Record<string, unknown> | undefined,
  ): { down: StepDown; records: RoutedField[]; saved: Array<[UpstreamName, number]> } | undefined => {
    if (router === undefined) return undefined;
    const overrides = new Map<string, string>();
    const records: RoutedField[] = [];
    const saved: Array<[UpstreamName, number]> = [];
    const fields = modelCallsByField(plan, variables).map(({ key, calls }) => {
      const first = calls[0];
      const route = first?.route;
      if (first === undefined || route === undefined) return { key, calls };
      const choice = router.choose(first);
      overrides.set(key, choice.model);
      records.push({
        path: key,
        minAccuracy: route.minAccuracy,
        model: choice.model,
        accuracyLowerBound: choice.accuracyLowerBound,
        answers: choice.answers,
        ...(choice.explored ? { explored: true as const } : {}),
      });
      saved.push([first.upstream, choice.savedUsd]);
      return { key, calls: calls.map((call) => ({ ...call, model: choice.model, route: undefined })) };
    });
    return records.length === 0 ? undefined : { down: { fields, overrides }, records, saved };
  };

  /** The refusal counted (metrics), by what refused. */
  const refused = (refusal: GraphQLError | undefined): GraphQLError | undefined => {
    if (refusal !== undefined)
      onRefusal?.(refusal.extensions?.maxCostUsd === undefined ? 'hourly-budget' : 'max-cost');
    return refusal;
  };

  /**
   * Refused, and the caller asked for cheaper models: each step down (fallback.ts) is tried until one
   * is admitted; else the first refusal stands.
   */
  const fallBack = (
    operation: Operation,
    plan: OperationPlan,
    variables: Record<string, unknown> | undefined,
    refusal: GraphQLError,
    routed: StepDown | undefined,
  ): GraphQLError | undefined | Promise<GraphQLError | undefined> => {
    // Routed fields step down from the model routing chose (it is their "requested" model).
    const fields = routed?.fields ?? modelCallsByField(plan, variables);
    const steps = cheaperSteps(fields, (call) => model.expected(call));
    const tryStep = (index: number): GraphQLError | undefined | Promise<GraphQLError | undefined> => {
      const step = steps[index];
      if (step === undefined) return refusal;
      const overrides = routed === undefined ? step : new Map([...routed.overrides, ...step]);
      const verdict = attempt(operation, plan, variables, { fields, overrides });
      const decided = (again: GraphQLError | undefined) => {
        if (again !== undefined) return tryStep(index + 1);
        const admitted = operation.admission;
        if (admitted instanceof Admission) admitted.fallbacks = fallbacksOf(fields, step);
        return undefined;
      };
      return isPromise(verdict) ? verdict.then(decided) : decided(verdict);
    };
    return tryStep(0);
  };

  return {
    admit(operation, plan, variables) {
      if (plan.fields.length === 0) return undefined;
      // Only a document that may ask for minAccuracy is looked at for routing: the rest pay nothing.
      const routed = plan.routable === true ? routeFields(plan, variables) : undefined;
      const first = attempt(operation, plan, variables, routed?.down);
      // Admitted at once, nothing routed (the common operation): nothing left to decide or count.
      if (first === undefined && routed === undefined) return undefined;
      const admitted = (refusal: GraphQLError | undefined) => {
        const admission = operation.admission;
        if (refusal === undefined && routed !== undefined && admission instanceof Admission) {
          admission.routing = routed.records;
          for (const [upstream, usd] of routed.saved) onRouted?.(upstream, usd);
        }
        return refused(refusal);
      };
      const decided = (refusal: GraphQLError | undefined) => {
        if (refusal === undefined || !operation.fallback) return admitted(refusal);
        const last = fallBack(operation, plan, variables, refusal, routed?.down);
        return isPromise(last) ? last.then(admitted) : admitted(last);
      };
      return isPromise(first) ? first.then(decided) : decided(first);
    },

    spent(operation, call, usd) {
      model.observe(call, usd);
      // Reserved: billed when the operation settles (to its actual cost, this included).
      if (operation?.admission?.reserving === true) return;
      budget?.add(operation?.caller ?? ANONYMOUS_CALLER, usd);
    },

    budgetStatus(caller) {
      return budget?.status(caller);
    },

    settle(operation) {
      const admission = operation.admission;
      // Once: what follows is counted (metrics, the budget), whoever calls it again.
      if (!(admission instanceof Admission) || admission.settled) return;
      let abandonedUsd = 0;
      const abandoned = operation.cancelled ? operation.ledger.abandoned : [];
      for (const call of abandoned) {
        const pricing = call.pricing;
        if (pricing === undefined) continue;
        const usd = model.expected(pricing);
        abandonedUsd += usd;
        onAbandoned?.(pricing.upstream, pricing.model, usd);
      }
      admission.settle(operation.ledger.costUsd + abandonedUsd);
      // Without a reservation, abandoned calls are billed as they are found (a late cost as it comes).
      if (!admission.reservedAtSettle && abandonedUsd > 0) budget?.add(operation.caller, abandonedUsd);
      if (!operation.ledger.touchedUpstream || onEstimate === undefined) return;
      for (const [upstream, callModel, usd] of admission.estimate().calls)
        onEstimate(upstream, callModel, usd);
    },
  };
}
