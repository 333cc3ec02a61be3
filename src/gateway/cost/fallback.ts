/**
 * Degrade before refusing (docs/contract.md, Cost): with `X-Budget-Fallback: cheaper-model` (or
 * COST_BUDGET_FALLBACK=cheaper-model), an operation whose estimate does not fit the X-Max-Cost-Usd cap
 * or what is left of its budget is answered by cheaper models of the same service instead of being
 * refused: opus → 4o → mini. The field that saves the most by one step down goes first, one step at a
 * time, until the operation fits or nothing cheaper is left (then the refusal stands). Nothing falls
 * back silently: the answer's `model` is the model that answered, and `extensions.cost.fallbacks`
 * lists `{ path, requestedModel, usedModel }` per field.
 */
import { SERVICE_MODELS } from '../models/service-models.js';
import type { ModelCall } from '../operation/operation-plan.js';

/** The value of X-Budget-Fallback (and COST_BUDGET_FALLBACK) that asks for it. */
export const CHEAPER_MODEL = 'cheaper-model';

/** One model-calling field of an operation: its response key and its calls as priced. */
export interface PricedFieldCalls {
  readonly key: string;
  readonly calls: readonly ModelCall[];
}

/** A field answered by another model than it asked for. */
export interface Fallback {
  readonly path: string;
  readonly requestedModel: string;
  readonly usedModel: string;
}

/** The next cheaper model of the call's service, if any. */
function cheaper(call: ModelCall): string | undefined {
  const order = SERVICE_MODELS[call.upstream] ?? [];
  const at = order.indexOf(call.model);
  return at === -1 ? undefined : order[at + 1];
}

/**
 * The ways to make the operation cheaper, each one more step down than the last (the field saving
 * most first), as model overrides per response key; empty when nothing is cheaper.
 */
export function cheaperSteps(
  fields: readonly PricedFieldCalls[],
  price: (call: ModelCall) => number,
): Array<ReadonlyMap<string, string>> {
  const current = new Map(fields.map((f) => [f.key, f.calls.map((c) => ({ ...c }))]));
  const steps: Array<ReadonlyMap<string, string>> = [];
  const overrides = new Map<string, string>();
  for (;;) {
    let best: { key: string; model: string; saves: number } | undefined;
    for (const [key, calls] of current) {
      const first = calls[0];
      if (first === undefined) continue;
      const next = cheaper(first);
      if (next === undefined) continue;
      let saves = 0;
      for (const call of calls) saves += price(call) - price({ ...call, model: next });
      if (best === undefined || saves > best.saves) best = { key, model: next, saves };
    }
    if (best === undefined) return steps;
    for (const call of current.get(best.key) ?? []) call.model = best.model;
    overrides.set(best.key, best.model);
    steps.push(new Map(overrides));
  }
}

/** The fallbacks an override map makes, for `extensions.cost.fallbacks`. */
export function fallbacksOf(
  fields: readonly PricedFieldCalls[],
  overrides: ReadonlyMap<string, string>,
): Fallback[] {
  const out: Fallback[] = [];
  for (const field of fields) {
    const used = overrides.get(field.key);
    const requested = field.calls[0]?.model;
    if (used !== undefined && requested !== undefined && used !== requested)
      out.push({ path: field.key, requestedModel: requested, usedModel: used });
  }
  return out;
}
