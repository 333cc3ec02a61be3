/**
 * The gateway's Prometheus metrics (prom-client), on a registry of their own.
 *
 * Why a registry per gateway: tests (and a host embedding several gateways) create many instances;
 * prom-client's global registry would reject the second registration of every metric name.
 *
 * Why tallies behind the counters: prom-client hashes the label values on every `inc()`/`observe()`.
 * The hot path (one operation, one upstream attempt) does a single histogram `observe()` and bumps a
 * plain number on a cached entry; the counters read those numbers when /metrics is scraped.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { UpstreamName } from '../upstream/types.js';

/** How an operation ended (label `outcome`). */
export type OperationOutcome = 'ok' | 'partial' | 'error' | 'invalid';

/** Circuit breaker states as the upstream clients report them. */
export type BreakerState = 'closed' | 'open' | 'half-open' | 'disabled';

const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half-open', 'disabled'];

/** Where a deduplicated upstream call was served from (label `source`). */
export type DedupSource = 'dataloader' | 'inflight' | 'cache';

export interface GatewayMetricsOptions {
  /**
   * The registry the metrics are registered on.
   * @default a new Registry (never prom-client's global one)
   */
  registry?: Registry;
  /**
   * Also collect prom-client's default process metrics (CPU, memory, event loop lag, GC).
   * @default true
   */
  defaultMetrics?: boolean;
  /**
   * Most distinct operation names kept as label values; later names are counted as `(other)`.
   * Operation names are chosen by clients: without a cap, a client could grow /metrics without bound.
   * @default 200
   */
  maxOperationNames?: number;
}

/** Histogram buckets in seconds: a cached pi answer is sub-millisecond, a million digits is seconds. */
const OPERATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const UPSTREAM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Label value of operations without a name. */
export const ANONYMOUS_OPERATION = '(anonymous)';
/** Label value of operation names beyond `maxOperationNames`. */
export const OTHER_OPERATION = '(other)';
/** Longest operation name used as a label value as is. */
const MAX_OPERATION_NAME_LENGTH = 100;

/** One label set of a counter that is counted in plain numbers and exported at scrape time. */
interface Tally<L extends string> {
  labels: Record<L, string>;
  n: number;
}

interface OperationEntry extends Tally<'operation' | 'type' | 'outcome'> {
  duration: Histogram.Internal<string>;
}

interface UpstreamEntry extends Tally<'upstream' | 'endpoint' | 'status' | 'outcome'> {
  duration: Histogram.Internal<string>;
}

/** A prom-client counter whose values come from `tallies` at each scrape. */
function tallyCounter<L extends string>(
  config: { name: string; help: string; labelNames: readonly L[]; registers: Registry[] },
  tallies: Map<string, Tally<L>>,
): Counter<L> {
  return new Counter<L>({
    ...config,
    collect() {
      this.reset();
      for (const tally of tallies.values()) this.inc(tally.labels as Partial<Record<L, string>>, tally.n);
    },
  });
}

/** The metrics of one gateway instance and the cheap recording methods the hot path uses. */
export interface GatewayMetrics {
  readonly registry: Registry;
  /** One finished GraphQL operation. */
  recordOperation(name: string | null, type: string, outcome: OperationOutcome, durationMs: number): void;
  /** One HTTP attempt to an upstream (the upstream clients' `onCall`). */
  recordUpstreamCall(
    upstream: string,
    endpoint: string,
    statusCode: number | null,
    outcome: string,
    durationMs: number,
  ): void;
  /** GPU cost an upstream reported in an answer. */
  recordGpuCost(upstream: UpstreamName, usd: number): void;
  /** An answer carried a sponsor message. */
  recordSponsorMessage(upstream: UpstreamName): void;
  /** An upstream call that was not made because an identical one was shared or cached. */
  recordDedupHit(upstream: UpstreamName, source: DedupSource): void;
  /** The breaker state of an upstream as last seen (pushed by health probes). */
  setBreakerState(upstream: UpstreamName, state: BreakerState): void;
  /** Where the breaker state of an upstream is read at each scrape (the client's `breakerState()`). */
  addBreakerSource(upstream: UpstreamName, read: () => BreakerState): void;
  /** Text exposition of every metric of this gateway. */
  render(): Promise<string>;
  /** The Content-Type of {@link render}'s output. */
  readonly contentType: string;
}

export function createGatewayMetrics(options: GatewayMetricsOptions = {}): GatewayMetrics {
  const registry = options.registry ?? new Registry();
  const maxOperationNames = options.maxOperationNames ?? 200;
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const operationEntries = new Map<string, OperationEntry>();
  tallyCounter(
    {
      name: 'gateway_operations_total',
      help: 'GraphQL operations by operation name, type and outcome (ok, partial, error, invalid).',
      labelNames: ['operation', 'type', 'outcome'] as const,
      registers,
    },
    operationEntries,
  );
  const operationDuration = new Histogram({
    name: 'gateway_operation_duration_seconds',
    help: 'GraphQL operation latency from parameters parsed to result ready, by operation name, type and outcome.',
    labelNames: ['operation', 'type', 'outcome'] as const,
    buckets: OPERATION_BUCKETS,
    registers,
  });
  const upstreamEntries = new Map<string, UpstreamEntry>();
  tallyCounter(
    {
      name: 'gateway_upstream_requests_total',
      help: 'HTTP requests (attempts, retries included) to the upstream services by upstream, endpoint, status and outcome.',
      labelNames: ['upstream', 'endpoint', 'status', 'outcome'] as const,
      registers,
    },
    upstreamEntries,
  );
  const upstreamDuration = new Histogram({
    name: 'gateway_upstream_request_duration_seconds',
    help: 'Latency of HTTP requests to the upstream services by upstream and endpoint.',
    labelNames: ['upstream', 'endpoint'] as const,
    buckets: UPSTREAM_BUCKETS,
    registers,
  });
  const gpuCost = new Counter({
    name: 'gateway_upstream_gpu_cost_usd_total',
    help: 'Cumulative GPU cost in US dollars reported by the upstreams (gpu_cost_usd of each answer).',
    labelNames: ['upstream'] as const,
    registers,
  });
  const sponsorMessages = new Counter({
    name: 'gateway_sponsor_messages_total',
    help: 'Upstream answers that carried a sponsor message (sponsored_by), by upstream.',
    labelNames: ['upstream'] as const,
    registers,
  });
  const dedupHits = new Counter({
    name: 'gateway_dedup_hits_total',
    help: 'Upstream calls saved because an identical call was shared (dataloader, in-flight) or cached.',
    labelNames: ['upstream', 'source'] as const,
    registers,
  });
  const breakerSources = new Map<UpstreamName, () => BreakerState>();
  const setBreakerState = (upstream: UpstreamName, state: BreakerState) => {
    for (const s of BREAKER_STATES) breakerState.labels(upstream, s).set(s === state ? 1 : 0);
  };
  const breakerState: Gauge<'upstream' | 'state'> = new Gauge({
    name: 'gateway_upstream_breaker_state',
    help: 'Circuit breaker state per upstream: 1 for the current state, 0 for the others.',
    labelNames: ['upstream', 'state'] as const,
    registers,
    // Read at scrape time, so the gauge is never stale between upstream calls.
    collect() {
      for (const [upstream, read] of breakerSources) setBreakerState(upstream, read());
    },
  });

  // The known label sets start at 0 so that dashboards and alerts see the series before the first event.
  for (const upstream of ['null-check', 'pi-digits'] as const) {
    gpuCost.labels(upstream).inc(0);
    sponsorMessages.labels(upstream).inc(0);
    for (const source of ['dataloader', 'inflight', 'cache'] as const)
      dedupHits.labels(upstream, source).inc(0);
    setBreakerState(upstream, 'closed');
  }

  const operationNames = new Set<string>();
  const operationLabel = (name: string | null): string => {
    if (name === null || name === '') return ANONYMOUS_OPERATION;
    if (operationNames.has(name)) return name;
    if (operationNames.size >= maxOperationNames || name.length > MAX_OPERATION_NAME_LENGTH)
      return OTHER_OPERATION;
    operationNames.add(name);
    return name;
  };

  return {
    registry,
    contentType: registry.contentType,
    recordOperation(name, type, outcome, durationMs) {
      const label = operationLabel(name);
      const key = `${label}\n${type}\n${outcome}`;
      let entry = operationEntries.get(key);
      if (entry === undefined) {
        entry = {
          labels: { operation: label, type, outcome },
          n: 0,
          duration: operationDuration.labels(label, type, outcome),
        };
        operationEntries.set(key, entry);
      }
      entry.n++;
      entry.duration.observe(durationMs / 1000);
    },
    recordUpstreamCall(upstream, endpoint, statusCode, outcome, durationMs) {
      const status = statusCode === null ? 'none' : String(statusCode);
      const key = `${upstream}\n${endpoint}\n${status}\n${outcome}`;
      let entry = upstreamEntries.get(key);
      if (entry === undefined) {
        entry = {
          labels: { upstream, endpoint, status, outcome },
          n: 0,
          duration: upstreamDuration.labels(upstream, endpoint),
        };
        upstreamEntries.set(key, entry);
      }
      entry.n++;
      entry.duration.observe(durationMs / 1000);
    },
    recordGpuCost(upstream, usd) {
      // A negative or non-finite cost would make a counter throw (or lie); the clients validate, this guards.
      if (usd > 0 && Number.isFinite(usd)) gpuCost.labels(upstream).inc(usd);
    },
    recordSponsorMessage(upstream) {
      sponsorMessages.labels(upstream).inc();
    },
    recordDedupHit(upstream, source) {
      dedupHits.labels(upstream, source).inc();
    },
    setBreakerState,
    addBreakerSource(upstream, read) {
      breakerSources.set(upstream, read);
    },
    render() {
      return registry.metrics();
    },
  };
}
