/**
 * The upstream clients and their layers, per upstream, outermost first:
 *
 *   observe → response cache (opt-in) → single flight → API versions → retry → circuit breaker → attempts → transport
 *
 * Observation is outermost so it sees every logical call, cache hits and shared calls included; the
 * cache sits above single flight so a hit never waits for anything; versions sit above retries so a
 * retired endpoint (404/410, never retried) switches at once; the breaker wraps each attempt. Health
 * probes take only observation and a transport of their own (a small pool: they never queue
 * behind business calls).
 *
 * This file only composes: what a layer decides lives with it (the start version's discovery in
 * `interceptors/api-versions.ts`, the pi waiver in `pi-digits-client.ts`, the probe in
 * `health-probe.ts`). It imports nothing of observability: the observation and the metrics it reports
 * to are the ports below, which `observability/upstream-observer.ts` and `observability/metrics.ts`
 * fit, so observability may depend on this layer and never the other way round.
 */
import type { Logger } from 'pino';
import type { GroupValues } from '../../shared/settings.js';
import type { UpstreamName } from '../errors.js';
import type { Operation } from '../operation/operation.js';
import type { resilienceSettings, upstreamSettings } from '../settings.js';
import { compose, type Dispatch, type Interceptor } from './dispatch.js';
import { createHealthProbe } from './health-probe.js';
import {
  type ApiVersionsOptions,
  type ApiVersionsState,
  createApiVersions,
  openApiDiscovery,
} from './interceptors/api-versions.js';
import { type BreakerState, createCircuitBreaker } from './interceptors/circuit-breaker.js';
import { type AnswerStore, responseCache } from './interceptors/response-cache.js';
import { retry } from './interceptors/retry.js';
import { type FlightCoordinator, singleFlight } from './interceptors/single-flight.js';
import { createNullCheckClient, NULL_CHECK_V2, type NullCheckClient } from './null-check-client.js';
import { createPiDigitsClient, type PiDigitsClient, piWaiverCheck } from './pi-digits-client.js';
import { parseNullHealth, parsePiHealth } from './response-schemas.js';
import { createTransport } from './transport.js';
import type { HealthProbe, NullHealthBody, PiHealthBody } from './types.js';

/** How the upstream calls are observed (observability/upstream-observer.ts): two interceptors. */
export interface UpstreamObservation {
  /** The outermost layer of every stack, health probes' included: sees every logical call. */
  readonly interceptor: Interceptor;
  /** The innermost layer, right above each transport: sees every HTTP attempt (interceptors/attempts.ts). */
  readonly attempts: Interceptor;
}

/** What the layers count (observability/metrics.ts). */
export interface UpstreamMetrics {
  recordCacheLookup(upstream: UpstreamName, result: 'hit' | 'miss'): void;
  recordDedupHit(upstream: UpstreamName, source: 'inflight' | 'replicas' | 'cache'): void;
  recordDeprecated(upstream: UpstreamName, endpoint: string): void;
  addBreakerSource(upstream: UpstreamName, read: () => BreakerState): void;
}

export interface UpstreamClientsOptions {
  /** The upstreams group of the settings, with both base URLs resolved. */
  upstreams: GroupValues<typeof upstreamSettings> & { nullBaseUrl: string; piBaseUrl: string };
  resilience: Omit<GroupValues<typeof resilienceSettings>, 'operationDeadlineMs'>;
  observer: UpstreamObservation;
  metrics: UpstreamMetrics;
  logger: Logger;
  /** The response cache's store and TTL; undefined: no response cache (RESPONSE_CACHE=false). */
  cache?: { store: AnswerStore; ttlMs: number } | undefined;
  /** Cross-replica single flight (Redis); undefined: this process only. */
  flights?: FlightCoordinator | undefined;
  /** Backoff of retries, in ms (tests shorten it). @default { baseMs: 50, capMs: 1000 } */
  backoff?: { baseMs: number; capMs: number };
}

/** What the gateway knows of one upstream right now (the `health` query, /ready, /metrics). */
export interface UpstreamState extends ApiVersionsState {
  breaker: BreakerState;
}

export interface UpstreamClients {
  readonly nullCheck: NullCheckClient;
  readonly piDigits: PiDigitsClient;
  readonly health: {
    nullCheck(operation?: Operation): Promise<HealthProbe<NullHealthBody>>;
    piDigits(operation?: Operation): Promise<HealthProbe<PiHealthBody>>;
  };
  state(upstream: UpstreamName): UpstreamState;
  /** Settles once each upstream's start version is known (its discovery answered or failed). */
  ready(): Promise<void>;
  /** Closes both connection pools (in-flight calls finish first). */
  close(): Promise<void>;
}

/** Connections of each upstream's probe pool: probes are rare (reused for 1 s) and small. */
const PROBE_CONNECTIONS = 2;

/** One upstream's layers: its business dispatch, its health probe and its state. */
interface UpstreamStack<Health> {
  readonly dispatch: Dispatch;
  health(operation?: Operation): Promise<HealthProbe<Health>>;
  state(): UpstreamState;
  /** Settles once the start version is known. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

interface StackOptions<Health> {
  upstream: UpstreamName;
  baseUrl: string;
  versions: Pick<ApiVersionsOptions, 'setting' | 'initial' | 'refuse'>;
  decodeHealth: (json: unknown) => Health;
}

function createUpstreamStack<Health>(
  options: UpstreamClientsOptions,
  { upstream, baseUrl, versions: versionOptions, decodeHealth }: StackOptions<Health>,
): UpstreamStack<Health> {
  const { upstreams, resilience, observer, metrics, logger } = options;
  const transport = (connections: number) =>
    createTransport({
      upstream,
      baseUrl,
      authHeader: upstreams.authHeader,
      timeoutMs: upstreams.timeoutMs,
      connections,
    });
  const business = transport(upstreams.connections);
  // Health probes (/ready, the health query, the breaker's half-open test) have a small pool of
  // their own: under load every business connection may be busy, and a readiness probe that
  // queues behind business calls would make a load balancer pull a healthy gateway.
  const probes = transport(PROBE_CONNECTIONS);
  const probe = createHealthProbe({
    upstream,
    dispatch: compose(probes.dispatch, observer.interceptor, observer.attempts),
    decode: decodeHealth,
    timeoutMs: upstreams.healthTimeoutMs,
  });
  const versions = createApiVersions({
    ...versionOptions,
    upstream,
    logger,
    onDeprecated: (endpoint) => metrics.recordDeprecated(upstream, endpoint),
  });
  const breaker = createCircuitBreaker({
    upstream,
    probe: () => probe().then((found) => found.reachable),
    threshold: resilience.breakerThreshold,
    halfOpenAfterMs: resilience.breakerHalfOpenAfterMs,
    onStateChange: (state) =>
      logger[state === 'closed' ? 'info' : 'warn'](
        { upstream, breaker: state },
        'upstream circuit breaker state changed',
      ),
  });
  metrics.addBreakerSource(upstream, breaker.state);

  const layers: Interceptor[] = [observer.interceptor];
  if (options.cache !== undefined) {
    layers.push(
      responseCache({
        store: options.cache.store,
        ttlMs: options.cache.ttlMs,
        onLookup: (request, result) => {
          metrics.recordCacheLookup(request.upstream, result);
          if (result === 'hit') metrics.recordDedupHit(request.upstream, 'cache');
        },
      }),
    );
  }
  layers.push(
    singleFlight({
      coordinator: options.flights,
      onShared: (request, across) =>
        metrics.recordDedupHit(request.upstream, across === 'process' ? 'inflight' : 'replicas'),
    }),
    versions.interceptor,
    retry({
      maxAttempts: resilience.retryMaxAttempts,
      backoffBaseMs: options.backoff?.baseMs,
      backoffCapMs: options.backoff?.capMs,
    }),
    breaker.interceptor,
    observer.attempts,
  );

  const state = (): UpstreamState => ({ ...versions.state(), breaker: breaker.state() });
  return {
    dispatch: compose(business.dispatch, ...layers),
    // The state is read once the probe has answered: what it says is as of the answer.
    health: (operation) => probe(operation).then((found) => ({ ...found, ...state() })),
    state,
    ready: versions.ready,
    close() {
      versions.close();
      return Promise.all([business.close(), probes.close()]).then(() => undefined);
    },
  };
}

export function createUpstreamClients(options: UpstreamClientsOptions): UpstreamClients {
  const { upstreams } = options;
  const nullCheck = createUpstreamStack(options, {
    upstream: 'null-check',
    baseUrl: upstreams.nullBaseUrl,
    versions: {
      setting: upstreams.nullApiVersion,
      initial: openApiDiscovery({
        upstream: 'null-check',
        v2: NULL_CHECK_V2,
        timeoutMs: upstreams.healthTimeoutMs,
      }),
    },
    decodeHealth: parseNullHealth,
  });
  const piDigits = createUpstreamStack(options, {
    upstream: 'pi-digits',
    baseUrl: upstreams.piBaseUrl,
    versions: { setting: upstreams.piApiVersion, refuse: piWaiverCheck(upstreams.piWaiverAccepted) },
    decodeHealth: parsePiHealth,
  });
  const stacks = { 'null-check': nullCheck, 'pi-digits': piDigits } as const;

  let closing: Promise<void> | undefined;
  return {
    nullCheck: createNullCheckClient(nullCheck.dispatch),
    piDigits: createPiDigitsClient(piDigits.dispatch),
    health: { nullCheck: nullCheck.health, piDigits: piDigits.health },
    state: (upstream) => stacks[upstream].state(),
    ready: () => Promise.all([nullCheck.ready, piDigits.ready]).then(() => undefined),
    close() {
      closing ??= Promise.all([nullCheck.close(), piDigits.close()]).then(() => undefined);
      return closing;
    },
  };
}
