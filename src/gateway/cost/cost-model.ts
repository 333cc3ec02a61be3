/**
 * The expected cost of one upstream call, for the estimate of X-Max-Cost-Usd (cost-control.ts).
 *
 * It starts at the price table (price-table.ts) and follows what the upstream actually charges: per
 * model (and kind of call), the running mean of the observed cost relative to the table's price for
 * the same call. A call for more digits is therefore still estimated higher than a short one, and a
 * cheap recent call never makes a million digits look cheap. The mean is exponentially weighted:
 * recent prices count most, one odd answer does not swing it. Estimates are a table lookup and a
 * multiplication per call, never an upstream call.
 */
import type { ModelCall } from '../operation/operation-plan.js';
import { listPrice } from './price-table.js';

/** Weight of the newest observation in the running mean. */
const MEAN_WEIGHT = 0.2;
/** At most this many distinct models are tracked (model names come from requests). */
const MAX_MODELS = 100;

export interface CostModel {
  /** Expected US dollars of one call. */
  expected(call: ModelCall): number;
  /** The cost actually reported for a call. */
  observe(call: ModelCall, usd: number): void;
}

export function createCostModel(): CostModel {
  /**
   * Per kind, per model: the mean of observed cost ÷ table price. Two levels rather than one key
   * string: every estimate and every answer looks a mean up, and a key string would be made each time.
   */
  const ratios = new Map<string, Map<string, number>>();
  let tracked = 0;
  return {
    expected(call) {
      return listPrice(call) * (ratios.get(call.kind)?.get(call.model) ?? 1);
    },
    observe(call, usd) {
      const price = listPrice(call);
      if (!Number.isFinite(usd) || usd < 0 || price <= 0) return;
      const ratio = usd / price;
      let byModel = ratios.get(call.kind);
      const mean = byModel?.get(call.model);
      if (mean === undefined) {
        if (tracked >= MAX_MODELS) return;
        if (byModel === undefined) {
          byModel = new Map();
          ratios.set(call.kind, byModel);
        }
        byModel.set(call.model, ratio);
        tracked++;
      } else {
        (byModel as Map<string, number>).set(call.model, mean + MEAN_WEIGHT * (ratio - mean));
      }
    },
  };
}
