/**
 * The upstream clients with every layer, as `createApp` builds them, for tests of the upstream layer
 * on its own: in front of given URLs, observed into a metrics registry and a logger of the test's.
 * And what those tests share: the failure of a call, what its message may not contain, a request for
 * the transport alone.
 */
import type { Logger } from 'pino';
import { expect } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { UpstreamCallError } from '../../src/gateway/errors.js';
import { keyCaller } from '../../src/gateway/identity.js';
import { createGatewayMetrics, type GatewayMetrics } from '../../src/gateway/observability/metrics.js';
import { createSponsorLog } from '../../src/gateway/observability/sponsor-log.js';
import { createUpstreamObserver } from '../../src/gateway/observability/upstream-observer.js';
import { Operation, type OperationInit } from '../../src/gateway/operation/operation.js';
import { createSharedState } from '../../src/gateway/shared-state/index.js';
import { createUpstreamClients, type UpstreamClients } from '../../src/gateway/upstream/clients.js';
import type { HttpForm, UpstreamRequest } from '../../src/gateway/upstream/dispatch.js';
import { parsePiResponse } from '../../src/gateway/upstream/response-schemas.js';
import type { PiResponse } from '../../src/gateway/upstream/types.js';
import { createLogger } from '../../src/shared/logger.js';
import { rejection } from './rejections.js';

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
export function testOperation(
  init: Partial<OperationInit> & { apiKey?: string | undefined } = {},
): Operation {
  const { apiKey, ...rest } = init;
  return new Operation({ caller: keyCaller(apiKey), requestId: 'test-request', deadlineMs: 15_000, ...rest });
}

/** Settings for tests of the mapping only: one attempt, no breaker, v1 fixed (no /openapi.json read). */
export const MAPPING_ENV: Readonly<Record<string, string>> = Object.freeze({
  RETRY_MAX_ATTEMPTS: '1',
  BREAKER_THRESHOLD: '0',
  UPSTREAM_TIMEOUT_MS: '2000',
  NULL_API_VERSION: 'v1',
  PI_API_VERSION: 'v1',
});

/** The error a call fails with, which must be an UpstreamCallError (a call that succeeds fails the test). */
export async function failureOf(promise: Promise<unknown>): Promise<UpstreamCallError> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(UpstreamCallError);
  return error as UpstreamCallError;
}

/** What no client-facing message may contain: the upstream's address, the caller's key, the raw body. */
export function expectClientSafe(
  error: UpstreamCallError,
  secrets: { port: number; key: string; rawBody?: string | undefined },
): void {
  expect(error.message).not.toContain('127.0.0.1');
  expect(error.message).not.toContain(String(secrets.port));
  expect(error.message).not.toContain(secrets.key);
  if (secrets.rawBody !== undefined && secrets.rawBody.length > 0)
    expect(error.message).not.toContain(secrets.rawBody);
}

/** A v1 pi call for the transport on its own: GET `path` (query included), no retry, no facts. */
export function piTransportRequest(path = '/api/v1/pi'): UpstreamRequest<PiResponse> {
  const form: HttpForm<PiResponse> = {
    endpoint: 'pi',
    version: 'v1',
    method: 'GET',
    path,
    retry: 'none',
    decode: parsePiResponse,
    facts: () => ({ costUsd: null, sponsor: null, model: null }),
  };
  return { upstream: 'pi-digits', forms: { v1: form }, form, operation: testOperation() };
}
