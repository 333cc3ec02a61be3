/**
 * One operation's cost admission (docs/contract.md, Cost): its estimate, made once when first asked,
 * and its budget reservation until it settles; cost-control.ts makes them.
 */
import type { CostAdmission, CostEstimate } from '../operation/operation.js';
import type { OperationPlan } from '../operation/operation-plan.js';
import type { BudgetHold, CostBudget } from './cost-budget.js';
import type { Fallback, PricedFieldCalls } from './fallback.js';

/** A field answered by the model routing chose (`extensions.cost.routing`). */
export interface RoutedField {
  readonly path: string;
  readonly minAccuracy: number;
  readonly model: string;
  /** The chosen model's lower bound at the request's band; null when it has no answers there yet. */
  readonly accuracyLowerBound: number | null;
  readonly answers: number;
  /** Present (true) only when the model was chosen to measure it (MODEL_EXPLORATION). */
  readonly explored?: true;
}

/** A step down (fallback.ts): the operation's fields as priced, read once, and the cheaper models. */
export interface StepDown {
  readonly fields: readonly PricedFieldCalls[];
  readonly overrides: ReadonlyMap<string, string>;
}

/** How an admission's estimate is made: from the plan and variables, with a step's models if any. */
export type Estimator = (
  plan: OperationPlan,
  variables: Record<string, unknown> | undefined,
  down: StepDown | undefined,
) => CostEstimate;

/**
 * An operation's admission: its estimate (made once, when first asked) and its reservation until it
 * settles. What the estimate is made from is kept as fields, not in a closure per admission.
 */
export class Admission implements CostAdmission {
  #estimate: CostEstimate | undefined = undefined;
  #hold: BudgetHold | undefined = undefined;
  #settled = false;
  /** The fields answered by a cheaper model than they asked for (fallback.ts). */
  fallbacks: readonly Fallback[] | undefined = undefined;
  /** The fields whose model routing chose (models/router.ts). */
  routing: readonly RoutedField[] | undefined = undefined;

  constructor(
    private readonly estimator: Estimator,
    private readonly plan: OperationPlan,
    private readonly variables: Record<string, unknown> | undefined,
    private readonly down: StepDown | undefined,
    private readonly budget: CostBudget | undefined,
  ) {}

  modelFor(key: string): string | undefined {
    return this.down?.overrides.get(key);
  }

  estimate(): CostEstimate {
    this.#estimate ??= this.estimator(this.plan, this.variables, this.down);
    return this.#estimate;
  }

  get reserving(): boolean {
    return this.#hold !== undefined;
  }

  reserve(hold: BudgetHold): void {
    this.#hold = hold;
  }

  /** Whether the reservation was still held when the admission settled. */
  reservedAtSettle = false;

  get settled(): boolean {
    return this.#settled;
  }

  /** Settles, once. */
  settle(actualUsd: number): void {
    if (this.#settled) return;
    this.#settled = true;
    const hold = this.#hold;
    this.reservedAtSettle = hold !== undefined;
    this.#hold = undefined;
    if (hold !== undefined) this.budget?.settle(hold, actualUsd);
  }
}
