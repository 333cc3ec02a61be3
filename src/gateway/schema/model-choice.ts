/**
 * Which model a model-calling field sends: the one its admission chose (a routed field's, or a
 * cheaper one when the budget asked: cost/cost-control.ts), else the one the caller named. A field that
 * asks for `minAccuracy` and has no admission entry (the plan counts identical fields once, so a
 * second alias of the same field shares the first one's entry by arguments, not by name) is routed
 * here, by the same router.
 */
import type { ModelCall } from '../operation/operation-plan.js';
import type { GatewayContext } from './context.js';

export function modelToSend(
  context: GatewayContext,
  responseKey: string | number,
  model: string | null | undefined,
  minAccuracy: number | undefined,
  call: () => ModelCall,
): string | undefined {
  const admitted = context.operation.admission?.modelFor(String(responseKey));
  if (admitted !== undefined) return admitted;
  if (minAccuracy !== undefined) return context.models.route(call());
  return model ?? undefined;
}
