/** The models' metrics: each model answer scored against the truth (models/scoreboard.ts). */
import type { Registry } from 'prom-client';
import type { UpstreamName } from '../errors.js';
import { createMetricDeclarations } from './metric-declarations.js';
import { type BoundedLabel, keptChildren } from './metric-labels.js';

export interface ModelMetrics {
  /** A model answer scored against the truth (models/scoreboard.ts), by band and outcome. */
  recordModelAnswer(upstream: UpstreamName, model: string, band: string, outcome: string): void;
}

export interface ModelMetricsOptions {
  /** The label value of an upstream's model name (bounded: the upstreams name their models). */
  modelLabel: BoundedLabel;
}

/** The help text of the models' metric, by name. */
const HELP = {
  gateway_model_answers_total:
    'Model answers the upstreams gave, scored against the truth the gateway computes, by upstream, model, temperature band ("0", "(0, 0.7]", "(0.7, 1]") and outcome (correct, incorrect, maybe, existential, e_instead_of_pi). Cache hits and shared calls are not counted.',
};

export function createModelMetrics(registry: Registry, options: ModelMetricsOptions): ModelMetrics {
  const { counter } = createMetricDeclarations(registry, HELP);
  const { modelLabel } = options;
  const answers = counter('gateway_model_answers_total', ['upstream', 'model', 'band', 'outcome']);
  // Bounded label values (`modelLabel`, the bands, the outcomes): each label set's child kept.
  const answersOf = keptChildren((...values) => answers.labels(...values));
  return {
    recordModelAnswer(upstream, model, band, outcome) {
      answersOf(upstream, modelLabel(model), band, outcome).inc();
    },
  };
}
