/**
 * How a metric area declares its metrics: prom-client's own Counter, Histogram and Gauge, on the one
 * registry the area was given (the gateway's, or a test's), each with its help text from the area's
 * table of help texts by metric name. The table is the area's /metrics documentation, read in one
 * place (as schema/field-table.ts does for GraphQL fields), and the declarations below it say only
 * what differs: name, labels, buckets, what a gauge reads at a scrape.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** What a gauge reads at each scrape (prom-client's `collect`), given the gauge to set. */
export type GaugeCollect<Label extends string> = (gauge: Gauge<Label>) => void;

/** The declarations of one metric area, every metric on the same registry. */
export interface MetricDeclarations<Name extends string> {
  /** A counter, labelled by `labelNames` (none: one series). */
  counter<Label extends string = never>(name: Name, labelNames?: readonly Label[]): Counter<Label>;
  /** A histogram with these bucket bounds. */
  histogram<Label extends string = never>(
    name: Name,
    labelNames: readonly Label[],
    buckets: readonly number[],
  ): Histogram<Label>;
  /** A gauge set at each scrape by `collect` (never stale between events). */
  gauge<Label extends string = never>(
    name: Name,
    labelNames: readonly Label[],
    collect: GaugeCollect<Label>,
  ): Gauge<Label>;
}

/**
 * The declarations of a metric area on `registry`; `help` gives each metric name's help text (typed:
 * a name without one does not compile). prom-client refuses a name twice on one registry.
 */
export function createMetricDeclarations<Name extends string>(
  registry: Registry,
  help: Readonly<Record<Name, string>>,
): MetricDeclarations<Name> {
  const registers = [registry];
  return {
    counter: (name, labelNames = []) => new Counter({ name, help: help[name], labelNames, registers }),
    histogram: (name, labelNames, buckets) =>
      new Histogram({ name, help: help[name], labelNames, buckets: [...buckets], registers }),
    gauge: (name, labelNames, collect) =>
      new Gauge({
        name,
        help: help[name],
        labelNames,
        registers,
        collect() {
          collect(this);
        },
      }),
  };
}
