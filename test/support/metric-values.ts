/**
 * Reads one series of a metric: from a prom-client registry by metric name and exact labels
 * (scrape-time collectors run), or from the Prometheus text a registry rendered.
 */
import type { Registry } from 'prom-client';

/**
 * The value of the series `name{labels}` (every label given must match, and the series must have no
 * other labels), or undefined when there is no such series. For a histogram, `name` may be its
 * `_count` or `_sum` series.
 */
export async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const base = name.replace(/_(count|sum|bucket)$/, '');
  const metrics = await registry.getMetricsAsJSON();
  const metric = metrics.find((m) => m.name === name) ?? metrics.find((m) => m.name === base);
  if (metric === undefined) return undefined;
  const wanted = Object.entries(labels);
  for (const series of metric.values as Array<{
    labels: Record<string, string | number>;
    value: number;
    metricName?: string;
  }>) {
    if ((series.metricName ?? metric.name) !== name) continue;
    const have = Object.entries(series.labels);
    if (have.length !== wanted.length) continue;
    if (wanted.every(([k, v]) => String(series.labels[k]) === v)) return series.value;
  }
  return undefined;
}

/**
 * The value of the sample line `name{labels}` of a Prometheus text exposition (`labels` as the text
 * has them: `upstream="pi-digits",model="pi-x-4o"`), or undefined when there is no such line.
 */
export function sample(text: string, name: string, labels: string): number | undefined {
  const prefix = `${name}{${labels}} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}
