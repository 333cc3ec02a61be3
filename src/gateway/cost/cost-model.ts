/**
 * The expected cost of one upstream call, for the estimate of X-Max-Cost-Usd (cost-control.ts).
 *
 * The expected cost of a model starts at the price table and becomes the running mean of what that
 * model actually cost (an exponentially weighted mean: recent prices count most, one odd answer
 * does not swing it). Estimates are cheap: a table lookup per call, never an upstream call.
 */
import type { ModelCall } from '../operation-plan.js';
import { listPrice } from './price-table.js';

/** Weight of the newest observation in the running mean. */
const MEAN_WEIGHT = 0.2;
/** At most this many distinct models are tracked (model names come from the upstreams). */
const MAX_MODELS = 100;

export interface CostModel {
  /** Expected US dollars of one call. */
  expected(call: ModelCall): number;
  /** A cost actually reported for a call of `kind` answered by `model`. */
  observe(kind: ModelCall['kind'], model: string | null, usd: number): void;
}

export function createCostModel(): CostModel {
  const means = new Map<string, number>();
  const expected = (call: ModelCall) => means.get(`${call.kind}\n${call.model}`) ?? listPrice(call);
  return {
    expected,
    observe(kind, model, usd) {
      if (model === null || !Number.isFinite(usd) || usd < 0) return;
      const key = `${kind}\n${model}`;
      const mean = means.get(key);
      if (mean === undefined) {
        if (means.size >= MAX_MODELS) return;
        means.set(key, usd);
      } else {
        means.set(key, mean + MEAN_WEIGHT * (usd - mean));
      }
    },
  };
}
