/**
 * Which model a model-calling field sends: the one its admission chose (a routed field's, or a
 * cheaper one when the budget asked: cost/cost-control.ts), else the one the caller named. A field that
 * asks for `minAccuracy` and has no admission entry (the plan counts identical fields once, so a
 * second alias of the same field shares the first one's entry by arguments, not by name) is routed
 * here, by the same router.
 */
import type { ModelCall } from '../operation/operation-plan.js';
import type { GatewayContext } from './context.js';
import { checkMinAccuracy, checkTemperature } from './errors.js';

/** What a caller asked of the model, checked: a model, or a quality (`minAccuracy`), at a temperature. */
export interface ModelAsked {
  model: string | undefined;
  /** Undefined: not routed by quality. */
  minAccuracy: number | undefined;
  temperature: number | undefined;
}

/** Checks a model-calling field's `temperature`, then its `minAccuracy` (BAD_USER_INPUT). */
export function checkModelAsked(args: {
  model?: string | null | undefined;
  minAccuracy?: number | null | undefined;
  temperature?: number | null | undefined;
}): ModelAsked {
  const temperature = checkTemperature(args.temperature);
  const minAccuracy = checkMinAccuracy(args.minAccuracy, args.model);
  return { model: args.model ?? undefined, minAccuracy, temperature };
}

/**
 * The description of a model-calling field's `minAccuracy`: routed to the cheapest model of `service`
 * measured accurate enough. `measure` says what accuracy is for the field (before the interval's
 * definition, which every such field shares); `said` what the answer shows of the routing.
 */
export function minAccuracyDescription(service: string, measure: string, said: string): string {
  return (
    `Routing by quality, 0 to 1: answered by the cheapest ${service} model whose measured accuracy (${measure}` +
    'the lower bound of its 95 % Wilson interval at this temperature band, over at least MODEL_MIN_SAMPLES ' +
    `answers: see \`models\`) is at least this; none yet: the best measured, or the default. ${said}` +
    'With `model`: BAD_USER_INPUT.'
  );
}

/** What a routed field's answer shows of the routing, for {@link minAccuracyDescription}. */
export const ROUTING_SAID = '`modelName` says which answered, `extensions.cost.routing` why. ';

/**
 * `pricing`: the call as priced with the service's default model, which the router prices its
 * candidates from (made only when the field is routed here).
 */
export function modelToSend(
  context: GatewayContext,
  responseKey: string | number,
  { model, minAccuracy, temperature }: ModelAsked,
  pricing: () => ModelCall,
): string | undefined {
  const admitted = context.operation.admission?.modelFor(String(responseKey));
  if (admitted !== undefined) return admitted;
  if (minAccuracy !== undefined)
    return context.models.route({ ...pricing(), route: { minAccuracy, temperature } });
  return model;
}
