/**
 * The scoreboard and the router together, as the composition root (app.ts) wires them: the
 * scoreboard scores the observer's answers into the shared score store, the router reads it and
 * prices models with the cost model the estimate uses (given as its `expected` price: cost/ sits
 * above models/), and the schema sees both through `view`.
 */
import type { DigitEngine } from '../../digits/digit-engine.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { ModelCall } from '../operation/operation-plan.js';
import type { ScoreStore } from '../shared-state/types.js';
import { createModelRouter, type ModelRouter } from './router.js';
import { createScoreboard, type ModelScore, type Scoreboard } from './scoreboard.js';

/** The model scoreboard as the schema sees it (schema/context.ts: the `models` field, routing). */
export interface ModelsView {
  /** The `models` field's rows (every replica's, one round trip with Redis at most). */
  rows(): Promise<ModelScore[]>;
  /** The model routing chooses for a call that asked for `minAccuracy` (its `route`). */
  route(call: ModelCall): string;
}

export interface ModelScoringOptions {
  store: ScoreStore;
  digits: DigitEngine;
  /** Most decimal places compared with the true constant. */
  maxCompareDigits: number;
  /**
   * The expected price of a call: the estimate's cost model (cost/cost-model.ts `expected`), so
   * routing picks the cheapest by the same figures.
   */
  price: (call: ModelCall) => number;
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
  /** What the schema reads: the `models` rows, and routing for a field its admission did not route. */
  readonly view: ModelsView;
}

export function createModelScoring(options: ModelScoringOptions): ModelScoring {
  const { metrics } = options;
  const scoreboard = createScoreboard({
    store: options.store,
    digits: options.digits,
    maxCompareDigits: options.maxCompareDigits,
    onScored: (service, model, band, outcome) => metrics.recordModelAnswer(service, model, band, outcome),
    onError: options.onError,
  });
  const router = createModelRouter({
    scoreboard,
    price: options.price,
    minSamples: options.minSamples,
    exploration: options.exploration,
  });
  return {
    scoreboard,
    router,
    view: { rows: () => scoreboard.read(), route: (call) => router.choose(call).model },
  };
}
