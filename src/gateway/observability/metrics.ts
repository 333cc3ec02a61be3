/**
 * The gateway's Prometheus metrics (prom-client), on a registry of their own.
 *
 * Why a registry per gateway: tests (and a host embedding several gateways) create many instances;
 * prom-client's global registry would reject the second registration of every metric name.
 *
 * Why tallies behind the hot counters: prom-client hashes the label values on every `inc()`, even on
 * a bound child. The hot path (an operation, an upstream attempt, an answer's cost, sponsor and
 * estimate) bumps plain numbers, and the latency histograms are tallied too (tallied-histogram.ts:
 * prom-client's `observe()` hashes its labels as well); both are read when /metrics is scraped.
 */
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { UpstreamName } from '../errors.js';
import type { BreakerState } from '../upstream/interceptors/circuit-breaker.js';
import { type HistogramSeries, TalliedHistogram } from './tallied-histogram.js';

/** How an operation ended (label `outcome`). */
export type OperationOutcome = 'ok' | 'partial' | 'error' | 'invalid' | 'cancelled';

const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half-open', 'disabled'];
const UPSTREAMS: readonly UpstreamName[] = ['null-check', 'pi-digits'];

/** Where a saved upstream call was served from (label `source`). */
export type DedupSource = 'dataloader' | 'inflight' | 'replicas' | 'cache';

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

/** Histogram buckets in seconds: a cached pi answer is sub-millisecond, a million digits is seconds. */
const OPERATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const UPSTREAM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Label value of operations without a name. */
export const ANONYMOUS_OPERATION = '(anonymous)';
/** Label value of operation names beyond `maxOperationNames`, and of unknown model names. */
export const OTHER_OPERATION = '(other)';
const MAX_LABEL_LENGTH = 100;

/** A bounded set of label values chosen by others (clients' operation names, upstreams' model names). */
function boundedLabel(max: number, empty: string): (value: string | null) => string {
  const known = new Set<string>();
  return (value) => {
    if (value === null || value === '') return empty;
    if (known.has(value)) return value;
    if (known.size >= max || value.length > MAX_LABEL_LENGTH) return OTHER_OPERATION;
    known.add(value);
    return value;
  };
}

export interface GatewayMetrics {
  readonly registry: Registry;
  /** One finished GraphQL operation. */
  recordOperation(name: string | null, type: string, outcome: OperationOutcome, durationMs: number): void;
  /** One HTTP attempt to an upstream. */
  recordUpstreamCall(
    upstream: string,
    endpoint: string,
    statusCode: number | null,
    outcome: string,
    durationMs: number,
  ): void;
  /** Dollars an upstream reported for one of its answers (validated by the caller). */
  recordGpuCost(upstream: UpstreamName, model: string | null, usd: number): void;
  /**
   * The estimate of one upstream call of an operation that touched an upstream (what its budget
   * reservation and X-Max-Cost-Usd were judged on), beside the reported cost: estimate quality.
   */
  recordEstimatedCost(upstream: UpstreamName, model: string, usd: number): void;
  /** An answer carried a sponsor message. */
  recordSponsorMessage(upstream: UpstreamName): void;
  /** An upstream call not made because an identical one was shared or cached. */
  recordDedupHit(upstream: UpstreamName, source: DedupSource): void;
  /** A cacheable call looked up in the response cache. */
  recordCacheLookup(upstream: UpstreamName, result: 'hit' | 'miss'): void;
  /** An upstream answer marked its endpoint deprecated. */
  recordDeprecated(upstream: UpstreamName, endpoint: string): void;
  /** A call abandoned in flight by a client that left, billed at its estimate (docs/contract.md, Cost). */
  recordAbandonedCall(upstream: UpstreamName, model: string, usd: number): void;
  /** An operation refused by a cost cap or budget. */
  recordBudgetRefusal(reason: 'max-cost' | 'hourly-budget'): void;
  /**
   * Budget reservations whose replica never settled them, lapsed into spend at their estimates
   * (`usd` in all), counted by the replica that noticed (each lease once across replicas).
   */
  recordLapsedReservations(count: number, usd: number): void;
  /** A key's spend reached COST_BUDGET_WARNING_RATIO of a window's limit (once per key and window). */
  recordBudgetWarning(scope: string, window: string): void;
  /** An operation whose document is not in the trusted-documents manifest (TRUSTED_DOCUMENTS_MODE=log). */
  recordUntrustedOperation(): void;
  /** A model answer scored against the truth (models/scoreboard.ts), by band and outcome. */
  recordModelAnswer(upstream: UpstreamName, model: string, band: string, outcome: string): void;
  /** A routed field admitted: what it is expected to save against its service's default model (≥ 0 counted). */
  recordRoutingSaving(upstream: UpstreamName, usd: number): void;
  /** Where the breaker state of an upstream is read at each scrape. */
  addBreakerSource(upstream: UpstreamName, read: () => BreakerState): void;
  /** Where the number of cached answers is read at each scrape. */
  setCacheSizeSource(read: () => number): void;
  /** Where the executions by executor (graphql-js, graphql-jit) are read at each scrape. */
  setExecutionsSource(read: () => Readonly<Record<string, number>>): void;
  /** Text exposition of every metric of this gateway. */
  render(): Promise<string>;
  readonly contentType: string;
}

export function createGatewayMetrics(options: GatewayMetricsOptions = {}): GatewayMetrics {
  const registry = options.registry ?? new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const operationLabel = boundedLabel(options.maxOperationNames ?? 200, ANONYMOUS_OPERATION);
  const modelLabel = boundedLabel(50, 'unknown');

  const operationsOf = talliedCounter(
    {
      name: 'gateway_operations_total',
      help: 'GraphQL operations by operation name, type and outcome (ok, partial, error, invalid, cancelled).',
      labelNames: ['operation', 'type', 'outcome'] as const,
      registers,
    },
    {
      name: 'gateway_operation_duration_seconds',
      help: 'GraphQL operation latency from parameters parsed to result ready, by operation name, type and outcome.',
      labelNames: ['operation', 'type', 'outcome'] as const,
      buckets: OPERATION_BUCKETS,
    },
  );
  const upstreamRequestsOf = talliedCounter(
    {
      name: 'gateway_upstream_requests_total',
      help: 'HTTP requests (attempts, retries included) to the upstream services by upstream, endpoint, status and outcome.',
      labelNames: ['upstream', 'endpoint', 'status', 'outcome'] as const,
      registers,
    },
    {
      name: 'gateway_upstream_request_duration_seconds',
      help: 'Latency of HTTP requests to the upstream services by upstream and endpoint.',
      labelNames: ['upstream', 'endpoint'] as const,
      buckets: UPSTREAM_BUCKETS,
    },
  );
  const gpuCostOf = talliedCounter({
    name: 'gateway_gpu_cost_usd_total',
    help: 'US dollars the upstreams reported for the answers the gateway received (gpu_cost_usd, or the inference cost), by upstream and model. Cache hits and shared calls add nothing.',
    labelNames: ['upstream', 'model'] as const,
    registers,
  });
  const estimatedCostOf = talliedCounter({
    name: 'gateway_cost_estimated_usd_total',
    help: 'US dollars the gateway estimated for the upstream calls of operations that touched an upstream (what budgets reserve and X-Max-Cost-Usd caps), by upstream and model; compare with gateway_gpu_cost_usd_total (cache hits and shared calls are estimated but cost nothing).',
    labelNames: ['upstream', 'model'] as const,
    registers,
  });
  const sponsorMessagesOf = talliedCounter({
    name: 'gateway_sponsor_messages_total',
    help: 'Upstream answers that carried a sponsor message (sponsored_by), by upstream.',
    labelNames: ['upstream'] as const,
    registers,
  });
  const dedupHitsOf = talliedCounter({
    name: 'gateway_dedup_hits_total',
    help: 'Upstream calls saved because an identical call was shared (dataloader: same operation; inflight: same process; replicas: another replica via Redis) or cached.',
    labelNames: ['upstream', 'source'] as const,
    registers,
  });
  const cacheLookupsOf = talliedCounter({
    name: 'gateway_response_cache_requests_total',
    help: 'Cacheable upstream calls by how the response cache served them: hit (stored answer) or miss (called the upstream).',
    labelNames: ['upstream', 'result'] as const,
    registers,
  });
  let cacheSize: () => number = () => 0;
  new Gauge({
    name: 'gateway_response_cache_entries',
    help: 'Answers kept by the response cache in this process (0 when RESPONSE_CACHE is off).',
    registers,
    collect() {
      this.set(cacheSize());
    },
  });
  const deprecated = new Counter({
    name: 'gateway_upstream_deprecated_total',
    help: 'Upstream answers that marked their endpoint deprecated (Deprecation header), by upstream and endpoint.',
    labelNames: ['upstream', 'endpoint'] as const,
    registers,
  });
  const budgetRefusals = new Counter({
    name: 'gateway_budget_refusals_total',
    help: 'Operations refused with BUDGET_EXCEEDED before any upstream call, by reason (max-cost: X-Max-Cost-Usd; hourly-budget: a window of COST_BUDGETS or COST_BUDGET_USD_PER_HOUR, whatever its length).',
    labelNames: ['reason'] as const,
    registers,
  });
  const lapsedReservations = new Counter({
    name: 'gateway_budget_lapsed_reservations_total',
    help: 'Budget reservations never settled by their replica (killed, crashed, cut off) that lapsed at their operation deadline plus BUDGET_LEASE_MARGIN_MS and were counted as spent at their estimate. Counted once, by whichever replica noticed.',
    registers,
  });
  const lapsedUsd = new Counter({
    name: 'gateway_budget_lapsed_usd_total',
    help: 'US dollars of the lapsed budget reservations (their estimates), counted as spent.',
    registers,
  });
  const budgetWarnings = new Counter({
    name: 'gateway_budget_warnings_total',
    help: 'A key’s spend and reservations in a budget window reached COST_BUDGET_WARNING_RATIO of its limit (once per key and window per window length), by scope (default, anonymous, tier:<tier>, key) and window.',
    labelNames: ['scope', 'window'] as const,
    registers,
  });
  const modelAnswersOf = talliedCounter({
    name: 'gateway_model_answers_total',
    help: 'Model answers the upstreams gave, scored against the truth the gateway computes, by upstream, model, temperature band ("0", "(0, 0.7]", "(0.7, 1]") and outcome (correct, incorrect, maybe, existential, e_instead_of_pi). Cache hits and shared calls are not counted.',
    labelNames: ['upstream', 'model', 'band', 'outcome'] as const,
    registers,
  });
  const routingSavedOf = talliedCounter({
    name: 'gateway_routing_saved_usd_total',
    help: 'US dollars routing by quality (minAccuracy) is expected to have saved against each service’s default model, per admitted routed field, by upstream (fields routed to a dearer model add nothing).',
    labelNames: ['upstream'] as const,
    registers,
  });
  const abandonedCalls = new Counter({
    name: 'gateway_upstream_calls_abandoned_total',
    help: 'Upstream calls in flight when their client went away: aborted, not retried, and billed at their estimate (the upstream may bill them).',
    labelNames: ['upstream'] as const,
    registers,
  });
  const abandonedUsd = new Counter({
    name: 'gateway_abandoned_cost_usd_total',
    help: 'US dollars billed for upstream calls abandoned in flight by a client that went away (their estimates).',
    labelNames: ['upstream'] as const,
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
  const breakerSources = new Map<UpstreamName, () => BreakerState>();
  new Gauge({
    name: 'gateway_upstream_breaker_state',
    help: 'Circuit breaker state per upstream: 1 for the current state, 0 for the others.',
    labelNames: ['upstream', 'state'] as const,
    registers,
    // Read at scrape time, so the gauge is never stale between upstream calls.
    collect() {
      for (const upstream of UPSTREAMS) {
        const state = breakerSources.get(upstream)?.() ?? 'closed';
        for (const s of BREAKER_STATES) this.labels(upstream, s).set(s === state ? 1 : 0);
      }
    },
  });

  // Known label sets start at 0, so dashboards and alerts see the series before the first event.
  for (const upstream of UPSTREAMS) {
    sponsorMessagesOf(upstream);
    for (const source of ['dataloader', 'inflight', 'replicas', 'cache'] as const)
      dedupHitsOf(upstream, source);
    for (const result of ['hit', 'miss'] as const) cacheLookupsOf(upstream, result);
  }
  for (const reason of ['max-cost', 'hourly-budget'] as const) budgetRefusals.labels(reason).inc(0);

  return {
    registry,
    contentType: registry.contentType,
    recordOperation(name, type, outcome, durationMs) {
      const tally = operationsOf(operationLabel(name), type, outcome);
      tally.n++;
      tally.duration.observe(durationMs / 1000);
    },
    recordUpstreamCall(upstream, endpoint, statusCode, outcome, durationMs) {
      const status = statusCode === null ? 'none' : String(statusCode);
      const tally = upstreamRequestsOf(upstream, endpoint, status, outcome);
      tally.n++;
      tally.duration.observe(durationMs / 1000);
    },
    recordGpuCost(upstream, model, usd) {
      // A counter throws on a negative value; the caller validates, this guards.
      if (usd > 0 && Number.isFinite(usd)) gpuCostOf(upstream, modelLabel(model)).n += usd;
    },
    recordEstimatedCost(upstream, model, usd) {
      if (usd > 0 && Number.isFinite(usd)) estimatedCostOf(upstream, modelLabel(model)).n += usd;
    },
    recordSponsorMessage(upstream) {
      sponsorMessagesOf(upstream).n++;
    },
    recordDedupHit(upstream, source) {
      dedupHitsOf(upstream, source).n++;
    },
    recordCacheLookup(upstream, result) {
      cacheLookupsOf(upstream, result).n++;
    },
    recordDeprecated(upstream, endpoint) {
      deprecated.labels(upstream, endpoint).inc();
    },
    recordAbandonedCall(upstream, _model, usd) {
      abandonedCalls.labels(upstream).inc();
      abandonedUsd.labels(upstream).inc(usd);
    },
    recordBudgetRefusal(reason) {
      budgetRefusals.labels(reason).inc();
    },
    recordLapsedReservations(count, usd) {
      lapsedReservations.inc(count);
      lapsedUsd.inc(usd);
    },
    recordBudgetWarning(scope, window) {
      budgetWarnings.labels(scope, window).inc();
    },
    recordUntrustedOperation() {
      untrusted.inc();
    },
    recordModelAnswer(upstream, model, band, outcome) {
      modelAnswersOf(upstream, modelLabel(model), band, outcome).n++;
    },
    recordRoutingSaving(upstream, usd) {
      if (usd > 0 && Number.isFinite(usd)) routingSavedOf(upstream).n += usd;
    },
    addBreakerSource(upstream, read) {
      breakerSources.set(upstream, read);
    },
    setCacheSizeSource(read) {
      cacheSize = read;
    },
    setExecutionsSource(read) {
      executions = read;
    },
    render: () => registry.metrics(),
  };
}

interface CounterConfig<L extends string> {
  name: string;
  help: string;
  /** One to four labels. */
  labelNames: readonly L[];
  registers: Registry[];
}

/** A latency histogram beside a tallied counter, over the first of the counter's labels. */
interface HistogramConfig<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  buckets: number[];
}

interface Tally<L extends string> {
  labels: Partial<Record<L, string>>;
  n: number;
}

interface TimedTally<L extends string> extends Tally<L> {
  /** The histogram's child of this label set (observe seconds). */
  readonly duration: HistogramSeries;
}

type TallyOf<T> = (a: string, b?: string, c?: string, d?: string) => T;

/** The map under `key` in `map`, made empty the first time. */
function branch<V>(map: Map<string, Map<string, V>>, key: string): Map<string, V> {
  let next = map.get(key);
  if (next === undefined) {
    next = new Map();
    map.set(key, next);
  }
  return next;
}

/**
 * A counter bumped on the hot path (every operation, upstream attempt, upstream answer, estimate): a
 * plain number per label set, found through one Map lookup per label value (no key string built, no
 * hashing by prom-client), read into the counter at each scrape. A label set made here is exported
 * from the start, at 0. With `histogram`, each label set also holds its child of that histogram, so
 * an event's latency is observed without prom-client looking the labels up either.
 */
function talliedCounter<L extends string>(config: CounterConfig<L>): TallyOf<Tally<L>>;
function talliedCounter<L extends string>(
  config: CounterConfig<L>,
  histogram: HistogramConfig<L>,
): TallyOf<TimedTally<L>>;
function talliedCounter<L extends string>(
  config: CounterConfig<L>,
  histogram?: HistogramConfig<L>,
): TallyOf<Tally<L> | TimedTally<L>> {
  const names = config.labelNames;
  const tallies = new Map<string, Map<string, Map<string, Map<string, Tally<L> | TimedTally<L>>>>>();
  new Counter<L>({
    ...config,
    collect() {
      this.reset();
      for (const byB of tallies.values())
        for (const byC of byB.values())
          for (const byD of byC.values()) for (const tally of byD.values()) this.inc(tally.labels, tally.n);
    },
  });
  const durations =
    histogram === undefined
      ? undefined
      : new TalliedHistogram<L>({ ...histogram, registers: config.registers });
  return (a, b = '', c = '', d = '') => {
    const byD = branch(branch(branch(tallies, a), b), c);
    let tally = byD.get(d);
    if (tally === undefined) {
      const values = [a, b, c, d];
      const labels: Partial<Record<L, string>> = {};
      for (const [i, name] of names.entries()) labels[name] = values[i];
      const duration = durations?.labels(...values.slice(0, histogram?.labelNames.length));
      tally = duration === undefined ? { labels, n: 0 } : { labels, n: 0, duration };
      byD.set(d, tally);
    }
    return tally;
  };
}

/** One Redis connection of the shared state as /metrics reports it. */
export interface RedisConnectionReport {
  /** What it holds: `budgets` (REDIS_URL) or `cache` (REDIS_CACHE_URL: cache, APQ documents, flights). */
  role: 'budgets' | 'cache';
  /** `single`, `sentinel` or `cluster` (the URL's form). */
  topology: string;
  /** Connected and answering: the state is shared. */
  up: boolean;
}

/** The shared state's metrics (src/gateway/shared-state), on the gateway's registry. */
export interface SharedStateMetrics {
  /** A failed (or timed-out) Redis command or a connection error, by operation. */
  redisError(operation: string): void;
  /** A Redis' primary changed (Sentinel failover) or a Cluster's masters changed. */
  redisTopologyChanged(role: RedisConnectionReport['role']): void;
  /** An APQ document not registered because of a bound. */
  apqDocumentDropped(reason: 'size' | 'owner'): void;
  /** Where the Redis connections are read at each scrape. */
  setRedisSource(read: () => readonly RedisConnectionReport[]): void;
}

/**
 * The shared state's metrics. The Redis ones only with `redis` (a Redis URL is set): in memory mode
 * there is no Redis to report on, and a constant `gateway_redis_up 0` would page whoever alerts on it.
 * One per registry (prom-client refuses a metric name twice).
 */
export function createSharedStateMetrics(
  registry: Registry,
  options: { redis: boolean },
): SharedStateMetrics {
  const registers = [registry];
  const dropped = new Counter({
    name: 'gateway_apq_documents_dropped_total',
    help: 'APQ documents not registered because of a bound: size (APQ_MAX_DOCUMENT_BYTES) or client (APQ_MAX_DOCUMENTS_PER_CLIENT). They still ran.',
    labelNames: ['reason'] as const,
    registers,
  });
  const noop = () => {};
  if (!options.redis)
    return {
      redisError: noop,
      redisTopologyChanged: noop,
      apqDocumentDropped: (reason) => dropped.labels(reason).inc(),
      setRedisSource: noop,
    };
  let connections: () => readonly RedisConnectionReport[] = () => [];
  const errors = new Counter({
    name: 'gateway_redis_errors_total',
    help: 'Failed Redis commands (timeouts included) and connection errors, by operation. Each one was answered from memory.',
    labelNames: ['operation'] as const,
    registers,
  });
  new Gauge({
    name: 'gateway_redis_up',
    help: '1 while the shared state is in Redis (every Redis the gateway uses), 0 while the gateway uses its in-memory fallback.',
    registers,
    collect() {
      this.set(connections().every((connection) => connection.up) ? 1 : 0);
    },
  });
  new Gauge({
    name: 'gateway_redis_topology',
    help: 'The kind of Redis each role uses (1): single (one server), sentinel or cluster, by role (budgets: REDIS_URL; cache: REDIS_CACHE_URL, the response cache, APQ documents and flights).',
    labelNames: ['role', 'topology'] as const,
    registers,
    collect() {
      this.reset();
      for (const { role, topology } of connections()) this.labels(role, topology).set(1);
    },
  });
  const changes = new Counter({
    name: 'gateway_redis_topology_changes_total',
    help: 'Changes seen in a Redis deployment, by role: a Sentinel failover to a new primary, or a change of a Cluster’s masters (each is also logged).',
    labelNames: ['role'] as const,
    registers,
  });
  for (const role of ['budgets', 'cache'] as const) changes.labels(role).inc(0);
  return {
    redisError: (operation) => errors.labels(operation).inc(),
    redisTopologyChanged: (role) => changes.labels(role).inc(),
    apqDocumentDropped: (reason) => dropped.labels(reason).inc(),
    setRedisSource(read) {
      connections = read;
    },
  };
}
