/**
 * Routing by quality (docs/graphql.md, Models): a field that asks for `minAccuracy` instead of a
 * model is answered by the cheapest model of its service whose Wilson lower bound at the request's
 * temperature band is at least `minAccuracy`, over at least MODEL_MIN_SAMPLES answers; when none
 * qualifies yet, by the model with the highest lower bound among those measured; when nothing is
 * measured, by the service's default model.
 *
 * Cheapest by the cost model's expected price of this very call (the price table, then the running
 * means of what the upstream charged): the same figure the estimate, the cap and the budget use, so
 * routing and the estimate never disagree about what is cheap.
 *
 * Exploration (MODEL_EXPLORATION, off by default): with that probability, a routed call for which a
 * cheaper model than the chosen one still has fewer than MODEL_MIN_SAMPLES answers at its band goes
 * to the cheapest such model instead, so a cheap model that nobody asks for by name can still earn a
 * place. It is bounded by the share (at most 0.2) and by the samples (a model stops being explored once
 * measured), and an explored field says so (`explored: true` in `extensions.cost.routing`).
 */
import type { UpstreamName } from '../errors.js';
import type { ModelCall } from '../operation/operation-plan.js';
import { DEFAULT_NULL_MODEL } from '../upstream/null-check-client.js';
import { DEFAULT_PI_MODEL } from '../upstream/pi-digits-client.js';
import { type Band, bandOf, type ModelScore, type Scoreboard } from './scoreboard.js';
import { SERVICE_MODELS } from './service-models.js';

/** Each service's default model (the clients' own: what a call without a model is priced as). */
const DEFAULT_MODEL: Record<UpstreamName, string> = {
  'null-check': DEFAULT_NULL_MODEL,
  'pi-digits': DEFAULT_PI_MODEL,
};

/** The router's choice for one call. */
export interface RouteChoice {
  model: string;
  /** The chosen model's Wilson lower bound at the band; null when it has no answers there. */
  accuracyLowerBound: number | null;
  /** Answers of the chosen model at the band. */
  answers: number;
  band: Band;
  /** Chosen to measure it (exploration), not because it qualified. */
  explored: boolean;
  /** What the service's default model is expected to cost for this call, minus the chosen one's. */
  savedUsd: number;
}

export interface ModelRouterOptions {
  scoreboard: Scoreboard;
  /** The expected price of a call (cost/cost-model.ts). */
  price: (call: ModelCall) => number;
  /** Answers a model needs at a band before its lower bound counts (MODEL_MIN_SAMPLES). @default 30 */
  minSamples?: number;
  /** Share of routed calls that may explore an under-measured cheaper model (MODEL_EXPLORATION). @default 0 */
  exploration?: number;
  /** @default Math.random */
  random?: () => number;
}

export interface ModelRouter {
  /** The model for a call that asked for `minAccuracy` (its `route`); the call's own model otherwise. */
  choose(call: ModelCall): RouteChoice;
}

/** A candidate model, priced for the call and scored at its band. */
interface Measured {
  model: string;
  usd: number;
  score: ModelScore | undefined;
}

export function createModelRouter(options: ModelRouterOptions): ModelRouter {
  const { scoreboard, price } = options;
  const minSamples = options.minSamples ?? 30;
  const exploration = options.exploration ?? 0;
  const random = options.random ?? Math.random;

  return {
    choose(call) {
      const band = bandOf(call.route?.temperature);
      const defaultModel = DEFAULT_MODEL[call.upstream];
      const priceOf = (model: string) => price({ ...call, model, route: undefined });
      /** A model for this call: its expected price and its score at the band, each looked up once. */
      const measure = (model: string): Measured => ({
        model,
        usd: priceOf(model),
        score: scoreboard.score(call.upstream, model, band),
      });
      const minAccuracy = call.route?.minAccuracy;
      // Cheapest first (ties: the service's order, dearest first, so the later cheaper one wins nothing).
      const byPrice =
        minAccuracy === undefined
          ? []
          : SERVICE_MODELS[call.upstream].map(measure).sort((a, b) => a.usd - b.usd);
      const byDefault = byPrice.find((m) => m.model === defaultModel);
      const defaultPrice = byDefault?.usd ?? priceOf(defaultModel);
      const pick = ({ model, usd, score }: Measured, explored = false): RouteChoice => ({
        model,
        accuracyLowerBound: score?.accuracyLowerBound ?? null,
        answers: score?.answers ?? 0,
        band,
        explored,
        savedUsd: defaultPrice - usd,
      });
      if (minAccuracy === undefined) return pick(measure(call.model));
      let chosen = byPrice.find(
        (m) =>
          m.score !== undefined && m.score.answers >= minSamples && m.score.accuracyLowerBound >= minAccuracy,
      );
      if (chosen === undefined) {
        let best: Measured | undefined;
        for (const m of byPrice)
          if (
            m.score !== undefined &&
            (best?.score === undefined || m.score.accuracyLowerBound > best.score.accuracyLowerBound)
          )
            best = m;
        chosen = best ?? byDefault ?? measure(defaultModel);
      }
      if (exploration > 0) {
        const chosenUsd = chosen.usd;
        const candidate = byPrice.find((m) => m.usd < chosenUsd && (m.score?.answers ?? 0) < minSamples);
        if (candidate !== undefined && random() < exploration) return pick(candidate, true);
      }
      return pick(chosen);
    },
  };
}
