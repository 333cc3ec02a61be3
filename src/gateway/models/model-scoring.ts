/**
 * The scoreboard and the router together, as the composition root (app.ts) wires them: the
 * scoreboard scores the observer's answers into the shared score store, the router reads it and
 * prices models with the cost model the estimate uses, and the schema sees both through `view`.
 */
import type { DigitEngine } from '../../digits/digit-engine.js';
import type { CostModel } from '../cost/cost-model.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { ModelsView } from '../schema/context.js';
import type { ScoreStore } from '../shared-state/types.js';
import { createModelRouter, type ModelRouter } from './router.js';
import { createScoreboard, type Scoreboard } from './scoreboard.js';

export interface ModelScoringOptions {
  store: ScoreStore;
  digits: DigitEngine;
  /** Most decimal places compared with the true constant. */
  maxCompareDigits: number;
  /** The estimate's prices (routing picks the cheapest by the same figures). */
  costModel: CostModel;
  metrics: GatewayMetrics;
  /** MODEL_MIN_SAMPLES. */
  minSamples: number;
  /** MODEL_EXPLORATION. */
  exploration: number;
  /** Told of an answer that could not be judged (logged by the caller). */
  onError?: ((error: unknown) => void) | undefined;
}

export interface ModelScoring {
  readonly scoreboard: Scoreboard;
  readonly router: ModelRouter;
  /** The cost model routing prices by (the estimate's: cost control is given this one). */
  readonly costModel: CostModel;
  /** What the schema reads: the `models` rows, and routing for a field its admission did not route. */
  readonly view: ModelsView;
}

export function createModelScoring(options: ModelScoringOptions): ModelScoring {
  const { metrics, costModel } = options;
  const scoreboard = createScoreboard({
    store: options.store,
    digits: options.digits,
    maxCompareDigits: options.maxCompareDigits,
    onScored: (service, model, band, outcome) => metrics.recordModelAnswer(service, model, band, outcome),
    onError: options.onError,
  });
  const router = createModelRouter({
    scoreboard,
    price: (call) => costModel.expected(call),
    minSamples: options.minSamples,
    exploration: options.exploration,
  });
  return {
    scoreboard,
    router,
    costModel,
    view: { rows: () => scoreboard.read(), route: (call) => router.choose(call).model },
  };
}
