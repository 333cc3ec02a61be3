/**
 * A latency histogram fed on the hot path without prom-client's per-observation work, exported as
 * prom-client's own `Histogram` exports it.
 *
 * Why: prom-client's `observe()`, even on a bound child, builds a labels object and hashes the label
 * values on every observation (~1.5-2 % of a request's CPU, two per request: the operation and its
 * upstream attempt). Here each label set is one `HistogramSeries` the caller keeps (found once, like
 * the tallied counters of metrics.ts): an observation is a bucket bump, a sum and a count. The series
 * are read only when /metrics is scraped, through the metric interface a registry reads
 * (`registerMetric`, `get()`), in the same order, with the same values, labels and float sums
 * (added in the same order) as prom-client's Histogram: the exposition bytes do not change
 * (test/unit/observability-tallied-histogram.test.ts compares the two).
 */
import type { Histogram, MetricValueWithName, Registry } from 'prom-client';

/** What a registry reads of a metric (prom-client's `MetricObjectWithValues`, its `type` as the string it is). */
export interface TalliedHistogramReading {
  name: string;
  help: string;
  type: 'histogram';
  aggregator: 'sum';
  values: (MetricValueWithName<string> & { exemplar: null | undefined })[];
}

export interface TalliedHistogramOptions<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  /** Upper bounds, ascending, in the observed unit. */
  buckets: readonly number[];
  /** Registered on each (`registerMetric`). @default [] */
  registers?: Registry[];
}

/** One label set of a tallied histogram. */
export interface HistogramSeries {
  /** Observes one value (as prom-client's `observe`: a non-finite value throws). */
  observe(value: number): void;
}

class Series implements HistogramSeries {
  /** Per bucket, not cumulative (prom-client keeps them so too). */
  readonly counts: number[];
  sum = 0;
  count = 0;
  /** In the export from the first observation on, as a prom-client series is. */
  exported = false;

  constructor(
    private readonly owner: TalliedHistogram<string>,
    readonly labels: Readonly<Record<string, string>>,
  ) {
    this.counts = owner.bounds.map(() => 0);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${String(value)}`);
    if (!this.exported) this.owner.export(this);
    this.sum += value;
    this.count += 1;
    const bounds = this.owner.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= (bounds[i] as number)) {
        (this.counts[i] as number)++;
        return;
      }
    }
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
    this.exported = false;
  }
}

export class TalliedHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  readonly bounds: readonly number[];
  private readonly labelNames: readonly L[];
  private readonly series = new Map<string, Series>();
  /** Series in the order of their first observation (prom-client's order). */
  private exported: Series[] = [];

  constructor(options: TalliedHistogramOptions<L>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.bounds = [...options.buckets];
    // A registry reads a metric through `name`, `get()` and `reset()`; its type names only its own
    // four classes, whose shape this one has where the registry looks.
    for (const registry of options.registers ?? []) registry.registerMetric(this as unknown as Histogram<L>);
  }

  /** The series of these label values (in `labelNames` order); found once, kept by the caller. */
  labels(...values: string[]): HistogramSeries {
    const key = values.join('\u0000');
    let series = this.series.get(key);
    if (series === undefined) {
      const labels: Record<string, string> = {};
      for (const [i, name] of this.labelNames.entries()) labels[name] = values[i] as string;
      series = new Series(this as TalliedHistogram<string>, labels);
      this.series.set(key, series);
    }
    return series;
  }

  /** @internal Called by a series at its first observation. */
  export(series: Series): void {
    series.exported = true;
    this.exported.push(series);
  }

  /** As prom-client's Histogram: every series forgotten until observed again. */
  reset(): void {
    for (const series of this.exported) series.reset();
    this.exported = [];
  }

  async get(): Promise<TalliedHistogramReading> {
    const bucketName = `${this.name}_bucket`;
    const values: TalliedHistogramReading['values'] = [];
    for (const series of this.exported) {
      let cumulative = 0;
      for (const [i, le] of this.bounds.entries()) {
        cumulative += series.counts[i] as number;
        values.push({
          labels: { le, ...series.labels },
          value: cumulative,
          metricName: bucketName,
          exemplar: null,
        });
      }
      values.push(
        {
          labels: { le: '+Inf', ...series.labels },
          value: series.count,
          metricName: bucketName,
          exemplar: null,
        },
        // (prom-client's JSON carries these keys too: `getMetricsAsJSON` stays the same.)
        {
          labels: { ...series.labels },
          value: series.sum,
          metricName: `${this.name}_sum`,
          exemplar: undefined,
        },
        {
          labels: { ...series.labels },
          value: series.count,
          metricName: `${this.name}_count`,
          exemplar: undefined,
        },
      );
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
