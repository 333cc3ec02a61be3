/**
 * The cost metrics: what the upstreams reported and what the gateway estimated, by upstream and
 * model; calls abandoned in flight; budget refusals, warnings and lapsed reservations; and what
 * routing by quality saved.
 */
import type { Registry } from 'prom-client';
import type { UpstreamName } from '../errors.js';
import { createMetricDeclarations } from './metric-declarations.js';
import { type BoundedLabel, keptChildren, perUpstream } from './metric-labels.js';

export interface CostMetrics {
  /** Dollars an upstream reported for one of its answers (validated by the caller). */
  recordGpuCost(upstream: UpstreamName, model: string | null, usd: number): void;
  /**
   * The estimate of one upstream call of an operation that touched an upstream (what its budget
   * reservation and X-Max-Cost-Usd were judged on), beside the reported cost: estimate quality.
   */
  recordEstimatedCost(upstream: UpstreamName, model: string, usd: number): void;
  /** A call abandoned in flight by a client that left, billed at its estimate (docs/contract.md, Cost). */
  recordAbandonedCall(upstream: UpstreamName, model: string, usd: number): void;
  /** An operation refused by a cost cap or budget. */
  recordBudgetRefusal(reason: 'max-cost' | 'hourly-budget'): void;
  /**
   * Budget reservations whose replica never settled them, lapsed into spend at their estimates
   * (`usd` in all), counted by the replica that noticed (each lease once across replicas).
   */
  recordLapsedReservations(count: number, usd: number): void;
  /** A key's spend reached COST_BUDGET_WARNING_RATIO of a window's limit (once per key and window). */
  recordBudgetWarning(scope: string, window: string): void;
  /** A routed field admitted: what it is expected to save against its service's default model (≥ 0 counted). */
  recordRoutingSaving(upstream: UpstreamName, usd: number): void;
}

export interface CostMetricsOptions {
  /** The label value of an upstream's model name (bounded: the upstreams name their models). */
  modelLabel: BoundedLabel;
}

/** A counter throws on a negative value, and NaN or Infinity would poison its sum: the callers validate, this guards. */
const countable = (usd: number): boolean => usd > 0 && Number.isFinite(usd);

/** The help texts of the cost metrics, by name, in the order they are declared. */
const HELP = {
  gateway_gpu_cost_usd_total:
    'US dollars the upstreams reported for the answers the gateway received (gpu_cost_usd, or the inference cost), by upstream and model. Cache hits and shared calls add nothing.',
  gateway_cost_estimated_usd_total:
    'US dollars the gateway estimated for the upstream calls of operations that touched an upstream (what budgets reserve and X-Max-Cost-Usd caps), by upstream and model; compare with gateway_gpu_cost_usd_total (cache hits and shared calls are estimated but cost nothing).',
  gateway_budget_refusals_total:
    'Operations refused with BUDGET_EXCEEDED before any upstream call, by reason (max-cost: X-Max-Cost-Usd; hourly-budget: a window of COST_BUDGETS or COST_BUDGET_USD_PER_HOUR, whatever its length).',
  gateway_budget_lapsed_reservations_total:
    'Budget reservations never settled by their replica (killed, crashed, cut off) that lapsed at their operation deadline plus BUDGET_LEASE_MARGIN_MS and were counted as spent at their estimate. Counted once, by whichever replica noticed.',
  gateway_budget_lapsed_usd_total:
    'US dollars of the lapsed budget reservations (their estimates), counted as spent.',
  gateway_budget_warnings_total:
    'A key’s spend and reservations in a budget window reached COST_BUDGET_WARNING_RATIO of its limit (once per key and window per window length), by scope (default, anonymous, tier:<tier>, key) and window.',
  gateway_routing_saved_usd_total:
    'US dollars routing by quality (minAccuracy) is expected to have saved against each service’s default model, per admitted routed field, by upstream (fields routed to a dearer model add nothing).',
  gateway_upstream_calls_abandoned_total:
    'Upstream calls in flight when their client went away: aborted, not retried, and billed at their estimate (the upstream may bill them).',
  gateway_abandoned_cost_usd_total:
    'US dollars billed for upstream calls abandoned in flight by a client that went away (their estimates).',
};

export function createCostMetrics(registry: Registry, options: CostMetricsOptions): CostMetrics {
  const { counter } = createMetricDeclarations(registry, HELP);
  const { modelLabel } = options;
  const gpuCost = counter('gateway_gpu_cost_usd_total', ['upstream', 'model']);
  const estimatedCost = counter('gateway_cost_estimated_usd_total', ['upstream', 'model']);
  const budgetRefusals = counter('gateway_budget_refusals_total', ['reason']);
  const lapsedReservations = counter('gateway_budget_lapsed_reservations_total');
  const lapsedUsd = counter('gateway_budget_lapsed_usd_total');
  const budgetWarnings = counter('gateway_budget_warnings_total', ['scope', 'window']);
  const routingSaved = counter('gateway_routing_saved_usd_total', ['upstream']);
  const abandonedCalls = counter('gateway_upstream_calls_abandoned_total', ['upstream']);
  const abandonedUsd = counter('gateway_abandoned_cost_usd_total', ['upstream']);

  // Fixed label sets: each child looked up once and kept. The refusals start at 0 (dashboards and
  // alerts see them before the first); the others appear with their first event.
  const refusalOf = {
    'max-cost': budgetRefusals.labels('max-cost'),
    'hourly-budget': budgetRefusals.labels('hourly-budget'),
  };
  refusalOf['max-cost'].inc(0);
  refusalOf['hourly-budget'].inc(0);
  const routingSavedOf = perUpstream((upstream) => routingSaved.labels(upstream));
  const abandonedCallsOf = perUpstream((upstream) => abandonedCalls.labels(upstream));
  const abandonedUsdOf = perUpstream((upstream) => abandonedUsd.labels(upstream));
  // Models are named by the upstreams: bounded by `modelLabel`, each (upstream, model) child kept.
  const gpuCostOf = keptChildren((...values) => gpuCost.labels(...values));
  const estimatedCostOf = keptChildren((...values) => estimatedCost.labels(...values));

  return {
    recordGpuCost(upstream, model, usd) {
      if (countable(usd)) gpuCostOf(upstream, modelLabel(model)).inc(usd);
    },
    recordEstimatedCost(upstream, model, usd) {
      if (countable(usd)) estimatedCostOf(upstream, modelLabel(model)).inc(usd);
    },
    recordAbandonedCall(upstream, _model, usd) {
      abandonedCallsOf[upstream].inc();
      abandonedUsdOf[upstream].inc(usd);
    },
    recordBudgetRefusal(reason) {
      refusalOf[reason].inc();
    },
    recordLapsedReservations(count, usd) {
      lapsedReservations.inc(count);
      lapsedUsd.inc(usd);
    },
    recordBudgetWarning(scope, window) {
      budgetWarnings.labels(scope, window).inc();
    },
    recordRoutingSaving(upstream, usd) {
      if (countable(usd)) routingSavedOf[upstream].inc(usd);
    },
  };
}
