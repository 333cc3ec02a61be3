/**
 * The operations' metrics: each finished GraphQL operation (counted and timed by name, type and
 * outcome), the untrusted ones, and the executions by executor.
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import { type BoundedLabel, keptChildren } from './metric-labels.js';

/** How an operation ended (label `outcome`). */
export type OperationOutcome = 'ok' | 'partial' | 'error' | 'invalid' | 'cancelled';

const COUNT_NAME = 'gateway_operation_duration_seconds_count';
type OperationLabels = Record<'operation' | 'type' | 'outcome', string>;

/** Histogram buckets in seconds: a cached pi answer is sub-millisecond, a million digits is seconds. */
const OPERATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface OperationMetrics {
  /** One finished GraphQL operation. */
  recordOperation(name: string | null, type: string, outcome: OperationOutcome, durationMs: number): void;
  /** An operation whose document is not in the trusted-documents manifest (TRUSTED_DOCUMENTS_MODE=log). */
  recordUntrustedOperation(): void;
  /** Where the executions by executor (graphql-js, graphql-jit) are read at each scrape. */
  setExecutionsSource(read: () => Readonly<Record<string, number>>): void;
}

export interface OperationMetricsOptions {
  /** The label value of a client's operation name (bounded: clients choose the names). */
  operationLabel: BoundedLabel;
}

export function createOperationMetrics(
  registry: Registry,
  options: OperationMetricsOptions,
): OperationMetrics {
  const registers = [registry];
  const { operationLabel } = options;
  new Counter({
    name: 'gateway_operations_total',
    help: 'GraphQL operations by operation name, type and outcome (ok, partial, error, invalid, cancelled).',
    labelNames: ['operation', 'type', 'outcome'] as const,
    registers,
    // Each operation is one observation of the duration histogram below, labelled alike: the count of
    // each series is prom-client's own histogram `_count`, read at each scrape, so an operation costs
    // one prom-client call and not two (bench:ab, docs/architecture.md). Registered first, as before:
    // the exposition's order is unchanged.
    async collect() {
      const { values } = await durations.get();
      this.reset();
      for (const value of values)
        if (value.metricName === COUNT_NAME) this.inc(value.labels as OperationLabels, value.value);
    },
  });
  const durations = new Histogram({
    name: 'gateway_operation_duration_seconds',
    help: 'GraphQL operation latency from parameters parsed to result ready, by operation name, type and outcome.',
    labelNames: ['operation', 'type', 'outcome'] as const,
    buckets: OPERATION_BUCKETS,
    registers,
  });
  const untrusted = new Counter({
    name: 'gateway_untrusted_operations_total',
    help: 'Operations whose document is not in the trusted-documents manifest (TRUSTED_DOCUMENTS_MODE=log; each distinct document is also logged once).',
    registers,
  });
  let executions: () => Readonly<Record<string, number>> = () => ({
    'graphql-js': 0,
    'graphql-jit': 0,
  });
  new Counter({
    name: 'gateway_executions_total',
    help: 'Operations executed, by executor: graphql-js (a document run for the first time, or one graphql-jit cannot compile) or graphql-jit (a compiled document).',
    labelNames: ['executor'] as const,
    registers,
    collect() {
      this.reset();
      for (const [executor, n] of Object.entries(executions())) this.inc({ executor }, n);
    },
  });

  // Operation names are bounded (`operationLabel`), types and outcomes few: each child kept.
  const durationsOf = keptChildren((...values) => durations.labels(...values));

  return {
    recordOperation(name, type, outcome, durationMs) {
      durationsOf(operationLabel(name), type, outcome).observe(durationMs / 1000);
    },
    recordUntrustedOperation() {
      untrusted.inc();
    },
    setExecutionsSource(read) {
      executions = read;
    },
  };
}
