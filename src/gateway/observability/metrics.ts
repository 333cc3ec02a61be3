/**
 * The gateway's Prometheus metrics (prom-client), on one registry of their own, in one module per
 * area; `createGatewayMetrics` composes them into the `GatewayMetrics` the gateway is given.
 *
 * Why a registry per gateway: tests (and a host embedding several gateways) create many instances;
 * prom-client's global registry would reject the second registration of every metric name.
 *
 * The areas (each `create<Area>Metrics(registry, options)` → an interface of `record*` methods):
 * - operation-metrics.ts: operations by name, type and outcome, their latency, executions, untrusted
 *   documents;
 * - upstream-metrics.ts: upstream attempts and their latency, calls saved (shared, cached), sponsor
 *   messages, deprecation, the breaker state, the response cache's size;
 * - cost-metrics.ts: reported and estimated cost, abandoned calls, budget refusals, warnings and
 *   lapsed reservations, what routing saved;
 * - model-metrics.ts: model answers scored against the truth;
 * - shared-state-metrics.ts: Redis and APQ (`createSharedStateMetrics`, registered by the shared
 *   state on this registry: `metrics.registry`).
 *
 * Adding an area: a new `<area>-metrics.ts` beside these, exporting its interface and
 * `create<Area>Metrics(registry: Registry, options)`, which makes prom-client's own Counter, Gauge
 * and Histogram with `registers: [registry]` (never the global registry, never a metric object of its
 * own making). Compose it here (its interface into `GatewayMetrics`, its methods into the object
 * `createGatewayMetrics` returns), or call it where its area is built with `metrics.registry`, as the
 * shared state does; a consumer that needs one area takes that area's interface. Label values chosen
 * by others (operation names, model names) go through a `boundedLabel` (metric-labels.ts). A label set
 * that is fixed and small (the two upstreams, a few reasons) has its children looked up once with
 * `labels(...)` and kept; open label sets are given to `inc`/`observe` as an object. prom-client
 * refuses a metric name twice on a registry: each area is made once per registry.
 * test/integration/observability-exposition.test.ts holds the exposition's names, labels, help texts
 * and buckets against a record, test/fixtures/metrics-exposition.txt: a new metric adds lines to it
 * (delete the record and run that one test file: it is written afresh; its diff must only add), a
 * changed name, label, help text or bucket must not happen.
 */
import { collectDefaultMetrics, Registry } from 'prom-client';
import { type CostMetrics, createCostMetrics } from './cost-metrics.js';
import { ANONYMOUS_OPERATION, boundedLabel } from './metric-labels.js';
import { createModelMetrics, type ModelMetrics } from './model-metrics.js';
import { createOperationMetrics, type OperationMetrics } from './operation-metrics.js';
import { createUpstreamCallMetrics, type UpstreamCallMetrics } from './upstream-metrics.js';

export type { CostMetrics } from './cost-metrics.js';
export { ANONYMOUS_OPERATION, OTHER_OPERATION } from './metric-labels.js';
export type { ModelMetrics } from './model-metrics.js';
export type { OperationMetrics, OperationOutcome } from './operation-metrics.js';
export {
  createSharedStateMetrics,
  type RedisConnectionReport,
  type SharedStateMetrics,
} from './shared-state-metrics.js';
export type { DedupSource, UpstreamCallMetrics } from './upstream-metrics.js';

export interface GatewayMetricsOptions {
  /** The registry the metrics are registered on. @default a new Registry (never prom-client's global one) */
  registry?: Registry;
  /** Also collect prom-client's default process metrics (CPU, memory, event loop lag, GC). @default true */
  defaultMetrics?: boolean;
  /**
   * Most distinct operation names kept as label values; later names are counted as `(other)`.
   * Operation names are chosen by clients: without a cap, a client could grow /metrics without bound.
   * @default 200
   */
  maxOperationNames?: number;
}

/** The registry and its text exposition (for /metrics). */
export interface MetricsRegistry {
  readonly registry: Registry;
  /** Text exposition of every metric of this gateway. */
  render(): Promise<string>;
  readonly contentType: string;
}

/** Every area's metrics on one registry. */
export type GatewayMetrics = MetricsRegistry &
  OperationMetrics &
  UpstreamCallMetrics &
  CostMetrics &
  ModelMetrics;

/** Most distinct model names kept as label values (the cost and the model areas share the set). */
const MAX_MODEL_NAMES = 50;

export function createGatewayMetrics(options: GatewayMetricsOptions = {}): GatewayMetrics {
  const registry = options.registry ?? new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const operationLabel = boundedLabel(options.maxOperationNames ?? 200, ANONYMOUS_OPERATION);
  // One bound for every metric labelled by model, so they name the same models.
  const modelLabel = boundedLabel(MAX_MODEL_NAMES, 'unknown');
  return {
    registry,
    contentType: registry.contentType,
    render: () => registry.metrics(),
    ...createOperationMetrics(registry, { operationLabel }),
    ...createUpstreamCallMetrics(registry),
    ...createCostMetrics(registry, { modelLabel }),
    ...createModelMetrics(registry, { modelLabel }),
  };
}
