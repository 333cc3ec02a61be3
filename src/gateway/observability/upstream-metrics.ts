/**
 * The upstream calls' metrics: each HTTP attempt (counted by upstream, endpoint, status and outcome,
 * timed by upstream and endpoint), the calls saved by sharing or the response cache, sponsor
 * messages, deprecation marks, the breaker state and the response cache's size.
 */
import type { Registry } from 'prom-client';
import type { UpstreamName } from '../errors.js';
import type { BreakerState } from '../upstream/interceptors/circuit-breaker.js';
import { createMetricDeclarations } from './metric-declarations.js';
import { keptChildren, perUpstream, UPSTREAMS } from './metric-labels.js';

/** Where a saved upstream call was served from (label `source`). */
export type DedupSource = 'dataloader' | 'inflight' | 'replicas' | 'cache';

const DEDUP_SOURCES: readonly DedupSource[] = ['dataloader', 'inflight', 'replicas', 'cache'];
const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half-open', 'disabled'];
const UPSTREAM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface UpstreamCallMetrics {
  /** One HTTP attempt to an upstream. */
  recordUpstreamCall(
    upstream: string,
    endpoint: string,
    statusCode: number | null,
    outcome: string,
    durationMs: number,
  ): void;
  /** An answer carried a sponsor message. */
  recordSponsorMessage(upstream: UpstreamName): void;
  /** An upstream call not made because an identical one was shared or cached. */
  recordDedupHit(upstream: UpstreamName, source: DedupSource): void;
  /** A cacheable call looked up in the response cache. */
  recordCacheLookup(upstream: UpstreamName, result: 'hit' | 'miss'): void;
  /** An upstream answer marked its endpoint deprecated. */
  recordDeprecated(upstream: UpstreamName, endpoint: string): void;
  /** Where the breaker state of an upstream is read at each scrape. */
  addBreakerSource(upstream: UpstreamName, read: () => BreakerState): void;
  /** Where the number of cached answers is read at each scrape. */
  setCacheSizeSource(read: () => number): void;
}

/** The help texts of the upstream calls' metrics, by name, in the order they are declared. */
const HELP = {
  gateway_upstream_requests_total:
    'HTTP requests (attempts, retries included) to the upstream services by upstream, endpoint, status and outcome.',
  gateway_upstream_request_duration_seconds:
    'Latency of HTTP requests to the upstream services by upstream and endpoint.',
  gateway_sponsor_messages_total:
    'Upstream answers that carried a sponsor message (sponsored_by), by upstream.',
  gateway_dedup_hits_total:
    'Upstream calls saved because an identical call was shared (dataloader: same operation; inflight: same process; replicas: another replica via Redis) or cached.',
  gateway_response_cache_requests_total:
    'Cacheable upstream calls by how the response cache served them: hit (stored answer) or miss (called the upstream).',
  gateway_response_cache_entries:
    'Answers kept by the response cache in this process (0 when RESPONSE_CACHE is off).',
  gateway_upstream_deprecated_total:
    'Upstream answers that marked their endpoint deprecated (Deprecation header), by upstream and endpoint.',
  gateway_upstream_breaker_state:
    'Circuit breaker state per upstream: 1 for the current state, 0 for the others.',
};

export function createUpstreamCallMetrics(registry: Registry): UpstreamCallMetrics {
  const { counter, histogram, gauge } = createMetricDeclarations(registry, HELP);
  const requests = counter('gateway_upstream_requests_total', ['upstream', 'endpoint', 'status', 'outcome']);
  const durations = histogram(
    'gateway_upstream_request_duration_seconds',
    ['upstream', 'endpoint'],
    UPSTREAM_BUCKETS,
  );
  const sponsorMessages = counter('gateway_sponsor_messages_total', ['upstream']);
  const dedupHits = counter('gateway_dedup_hits_total', ['upstream', 'source']);
  const cacheLookups = counter('gateway_response_cache_requests_total', ['upstream', 'result']);
  let cacheSize: () => number = () => 0;
  gauge('gateway_response_cache_entries', [], (metric) => metric.set(cacheSize()));
  const deprecated = counter('gateway_upstream_deprecated_total', ['upstream', 'endpoint']);
  const breakerSources = new Map<UpstreamName, () => BreakerState>();
  // Read at scrape time, so the gauge is never stale between upstream calls.
  gauge('gateway_upstream_breaker_state', ['upstream', 'state'], (metric) => {
    for (const upstream of UPSTREAMS) {
      const state = breakerSources.get(upstream)?.() ?? 'closed';
      for (const s of BREAKER_STATES) metric.labels(upstream, s).set(s === state ? 1 : 0);
    }
  });

  // Fixed label sets: each child looked up once and kept. They start at 0, so dashboards and alerts
  // see the series before the first event.
  const sponsorOf = perUpstream((upstream) => sponsorMessages.labels(upstream));
  const dedupOf = perUpstream((upstream) => {
    const bySource = {} as Record<DedupSource, { inc(value?: number): void }>;
    for (const source of DEDUP_SOURCES) bySource[source] = dedupHits.labels(upstream, source);
    return bySource;
  });
  const cacheOf = perUpstream((upstream) => ({
    hit: cacheLookups.labels(upstream, 'hit'),
    miss: cacheLookups.labels(upstream, 'miss'),
  }));
  for (const upstream of UPSTREAMS) {
    sponsorOf[upstream].inc(0);
    for (const source of DEDUP_SOURCES) dedupOf[upstream][source].inc(0);
    cacheOf[upstream].hit.inc(0);
    cacheOf[upstream].miss.inc(0);
  }

  // Endpoints, statuses and outcomes are few: each label set's child kept from its first call.
  const requestsOf = keptChildren((...values) => requests.labels(...values));
  const durationsOf = keptChildren((...values) => durations.labels(...values));

  return {
    recordUpstreamCall(upstream, endpoint, statusCode, outcome, durationMs) {
      const status = statusCode === null ? 'none' : String(statusCode);
      requestsOf(upstream, endpoint, status, outcome).inc();
      durationsOf(upstream, endpoint).observe(durationMs / 1000);
    },
    recordSponsorMessage(upstream) {
      sponsorOf[upstream].inc();
    },
    recordDedupHit(upstream, source) {
      dedupOf[upstream][source].inc();
    },
    recordCacheLookup(upstream, result) {
      cacheOf[upstream][result].inc();
    },
    recordDeprecated(upstream, endpoint) {
      deprecated.labels(upstream, endpoint).inc();
    },
    addBreakerSource(upstream, read) {
      breakerSources.set(upstream, read);
    },
    setCacheSizeSource(read) {
      cacheSize = read;
    },
  };
}
