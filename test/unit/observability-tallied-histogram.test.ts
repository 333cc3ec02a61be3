import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { TalliedHistogram } from '../../src/gateway/observability/tallied-histogram.js';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const config = {
  name: 'test_duration_seconds',
  help: 'A latency with a \\ backslash and a\nnewline in its help.',
  labelNames: ['upstream', 'endpoint'] as const,
  buckets: BUCKETS,
};

/** A deterministic spread of values: on bounds, between them, beyond the last, zero. */
function values(n: number): number[] {
  let seed = 7;
  const out: number[] = [0, 0.001, 10, 10.5, 1e-9, 2.5];
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    out.push((seed / 2147483648) ** 3 * 12);
  }
  return out;
}

describe('TalliedHistogram', () => {
  it('exports the bytes prom-client’s Histogram exports for the same observations', async () => {
    const reference = new Registry();
    const tallied = new Registry();
    const a = new Histogram({ ...config, buckets: [...BUCKETS], registers: [reference] });
    const b = new TalliedHistogram({ ...config, registers: [tallied] });
    const sets = [
      ['pi-digits', 'pi'],
      ['null-check', 'check'],
      ['null-check', 'null-or-"not"\\'],
    ] as const;
    const series = sets.map((labels) => b.labels(...labels));
    // Before any observation neither exports a series.
    expect(await tallied.metrics()).toBe(await reference.metrics());
    // Interleaved, the second label set first: series appear in the order of their first observation.
    for (const [i, value] of values(500).entries()) {
      const k = (i + 1) % 3;
      a.labels(...sets[k]!).observe(value);
      series[k]!.observe(value);
    }
    expect(await tallied.metrics()).toBe(await reference.metrics());
    expect(await tallied.getMetricsAsJSON()).toEqual(await reference.getMetricsAsJSON());
    // A reset forgets every series until observed again, as prom-client does.
    reference.resetMetrics();
    tallied.resetMetrics();
    expect(await tallied.metrics()).toBe(await reference.metrics());
    a.labels(...sets[2]!).observe(0.3);
    series[2]!.observe(0.3);
    expect(await tallied.metrics()).toBe(await reference.metrics());
  });

  it('refuses a non-finite value as prom-client does', () => {
    const series = new TalliedHistogram(config).labels('pi-digits', 'pi');
    expect(() => series.observe(Number.NaN)).toThrow(TypeError);
    expect(() => series.observe(Number.POSITIVE_INFINITY)).toThrow(TypeError);
  });
});
