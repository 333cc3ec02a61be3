/**
 * The upstream clients with every layer, as `createApp` builds them, for tests of the upstream layer
 * on its own: in front of given URLs, observed into a metrics registry and a logger of the test's.
 */
import type { Logger } from 'pino';
import { loadConfig } from '../../src/config.js';
import { createGatewayMetrics, type GatewayMetrics } from '../../src/gateway/observability/metrics.js';
import { createSponsorLog } from '../../src/gateway/observability/sponsor-log.js';
import { createUpstreamObserver } from '../../src/gateway/observability/upstream-observer.js';
import { Operation, type OperationInit } from '../../src/gateway/operation.js';
import { createSharedState } from '../../src/gateway/shared-state/index.js';
import { createUpstreamClients, type UpstreamClients } from '../../src/gateway/upstream/clients.js';
import { createLogger } from '../../src/shared/logger.js';

export interface TestClientsOptions {
  nullBaseUrl: string;
  piBaseUrl: string;
  /** Settings as environment variables (UPSTREAM_TIMEOUT_MS, RETRY_MAX_ATTEMPTS, RESPONSE_CACHE, ...). */
  env?: Record<string, string>;
  /** @default silent */
  logger?: Logger;
  /** Retry backoff in ms. @default { baseMs: 1, capMs: 5 } (fast tests) */
  backoff?: { baseMs: number; capMs: number };
}

export interface TestClients extends UpstreamClients {
  readonly metrics: GatewayMetrics;
}

export function createTestClients(options: TestClientsOptions): TestClients {
  const config = loadConfig({
    NODE_ENV: 'test',
    NULL_BASE_URL: options.nullBaseUrl,
    PI_BASE_URL: options.piBaseUrl,
    ...options.env,
  });
  const logger = options.logger ?? createLogger({ level: 'silent' });
  const metrics = createGatewayMetrics({ defaultMetrics: false });
  const sharedState = createSharedState({ logger, keyPrefix: 'test:', timeoutMs: 25 });
  const clients = createUpstreamClients({
    upstreams: { ...config.upstreams, nullBaseUrl: options.nullBaseUrl, piBaseUrl: options.piBaseUrl },
    resilience: config.resilience,
    observer: createUpstreamObserver({
      logger,
      metrics,
      sponsorLog: createSponsorLog({ logger, intervalMs: config.observability.sponsorLogIntervalMs }),
      tracer: undefined,
    }),
    metrics,
    logger,
    cache: config.cache.responseCache
      ? { store: sharedState.cache, ttlMs: config.cache.responseCacheTtlMs }
      : undefined,
    backoff: options.backoff ?? { baseMs: 1, capMs: 5 },
  });
  return { ...clients, metrics };
}

/** An operation for direct client calls (its key, request id and deadline). */
export function testOperation(init: Partial<OperationInit> = {}): Operation {
  return new Operation({ apiKey: undefined, requestId: 'test-request', deadlineMs: 15_000, ...init });
}
