/**
 * The shared state's metrics (src/gateway/shared-state): Redis errors, whether Redis is up, its
 * topology and changes to it, and the APQ documents a bound dropped.
 */
import type { Registry } from 'prom-client';
import { createMetricDeclarations } from './metric-declarations.js';

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

/** The help texts of the shared state's metrics, by name, in the order they are declared. */
const HELP = {
  gateway_apq_documents_dropped_total:
    'APQ documents not registered because of a bound: size (APQ_MAX_DOCUMENT_BYTES) or client (APQ_MAX_DOCUMENTS_PER_CLIENT). They still ran.',
  gateway_redis_errors_total:
    'Failed Redis commands (timeouts included) and connection errors, by operation. Each one was answered from memory.',
  gateway_redis_up:
    '1 while the shared state is in Redis (every Redis the gateway uses), 0 while the gateway uses its in-memory fallback.',
  gateway_redis_topology:
    'The kind of Redis each role uses (1): single (one server), sentinel or cluster, by role (budgets: REDIS_URL; cache: REDIS_CACHE_URL, the response cache, APQ documents and flights).',
  gateway_redis_topology_changes_total:
    'Changes seen in a Redis deployment, by role: a Sentinel failover to a new primary, or a change of a Cluster’s masters (each is also logged).',
};

/**
 * The shared state's metrics. The Redis ones only with `redis` (a Redis URL is set): in memory mode
 * there is no Redis to report on, and a constant `gateway_redis_up 0` would page whoever alerts on it.
 * One per registry (prom-client refuses a metric name twice).
 */
export function createSharedStateMetrics(
  registry: Registry,
  options: { redis: boolean },
): SharedStateMetrics {
  const { counter, gauge } = createMetricDeclarations(registry, HELP);
  const dropped = counter('gateway_apq_documents_dropped_total', ['reason']);
  // Fixed label sets: each child looked up once and kept.
  const droppedOf = { size: dropped.labels('size'), owner: dropped.labels('owner') };
  const apqDocumentDropped = (reason: 'size' | 'owner') => droppedOf[reason].inc();
  const noop = () => {};
  if (!options.redis)
    return { redisError: noop, redisTopologyChanged: noop, apqDocumentDropped, setRedisSource: noop };
  let connections: () => readonly RedisConnectionReport[] = () => [];
  const errors = counter('gateway_redis_errors_total', ['operation']);
  gauge('gateway_redis_up', [], (metric) =>
    metric.set(connections().every((connection) => connection.up) ? 1 : 0),
  );
  gauge('gateway_redis_topology', ['role', 'topology'], (metric) => {
    metric.reset();
    for (const { role, topology } of connections()) metric.labels(role, topology).set(1);
  });
  const changes = counter('gateway_redis_topology_changes_total', ['role']);
  const changesOf = { budgets: changes.labels('budgets'), cache: changes.labels('cache') };
  changesOf.budgets.inc(0);
  changesOf.cache.inc(0);
  return {
    redisError: (operation) => errors.inc({ operation }),
    redisTopologyChanged: (role) => changesOf[role].inc(),
    apqDocumentDropped,
    setRedisSource(read) {
      connections = read;
    },
  };
}
