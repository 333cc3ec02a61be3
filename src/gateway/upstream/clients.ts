/**
 * The upstream clients and their layers, per upstream, outermost first:
 *
 *   observe → response cache (opt-in) → single flight → API versions → retry → circuit breaker → transport
 *
 * Observation is outermost so it sees every logical call, cache hits and shared calls included; the
 * cache sits above single flight so a hit never waits for anything; versions sit above retries so a
 * retired endpoint (404/410, never retried) switches at once; the breaker wraps each attempt. Health
 * probes take only observation and a transport of their own (a small pool: they never queue
 * behind business calls).
 */
import type { Logger } from 'pino';
import type { GroupValues } from '../../shared/settings.js';
import type { UpstreamName } from '../errors.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { UpstreamObserver } from '../observability/upstream-observer.js';
import type { Operation } from '../operation.js';
import type { resilienceSettings, upstreamSettings } from '../settings.js';
import { type ApiVersion, compose, type Dispatch, type HttpForm, type Interceptor } from './dispatch.js';
import { createHealthProbe } from './health-probe.js';
import { type ApiVersions, type ApiVersionsState, createApiVersions } from './interceptors/api-versions.js';
import { type BreakerState, createCircuitBreaker } from './interceptors/circuit-breaker.js';
import { type AnswerStore, responseCache } from './interceptors/response-cache.js';
import { retry } from './interceptors/retry.js';
import { type FlightCoordinator, singleFlight } from './interceptors/single-flight.js';
import { createNullCheckClient, type NullCheckClient } from './null-check-client.js';
import { createPiDigitsClient, type PiDigitsClient } from './pi-digits-client.js';
import { parseNullHealth, parsePiHealth } from './response-schemas.js';
import { errorFromFailure, isGone } from './status-mapping.js';
import { createTransport, type Transport } from './transport.js';
import type { HealthProbe, NullHealthBody, PiHealthBody } from './types.js';

export interface UpstreamClientsOptions {
  /** The upstreams group of the settings, with both base URLs resolved. */
  upstreams: GroupValues<typeof upstreamSettings> & { nullBaseUrl: string; piBaseUrl: string };
  resilience: Omit<GroupValues<typeof resilienceSettings>, 'operationDeadlineMs'>;
  observer: UpstreamObserver;
  metrics: GatewayMetrics;
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

/** Why pi over v2 fails without PI_WAIVER_ACCEPTED (WAIVER_REQUIRED, no upstream call). */
export const PI_WAIVER_MESSAGE =
  "pi is served here by the pi-digits service's v2 inference endpoint, which requires a signed liability waiver; the gateway's operator accepts it for pi callers with PI_WAIVER_ACCEPTED=true.";

/** Reads an upstream's /openapi.json: v2 when it lists `POST /api/v2/null-or-not`. */
const OPENAPI_FORM: HttpForm<ApiVersion | undefined> = {
  endpoint: 'openapi',
  version: 'v1',
  method: 'GET',
  path: '/openapi.json',
  retry: 'none',
  decode: (json) => {
    const paths = (json as { paths?: Record<string, { post?: unknown }> } | null)?.paths;
    return paths?.['/api/v2/null-or-not']?.post !== undefined ? 'v2' : 'v1';
  },
  facts: () => ({ costUsd: null, sponsor: null, model: null }),
};

/** Connections of each upstream's probe pool: probes are rare (reused for 1 s) and small. */
const PROBE_CONNECTIONS = 2;

interface Stack {
  transport: Transport;
  probeTransport: Transport;
  dispatch: Dispatch;
  probeDispatch: Dispatch;
  versions: ApiVersions;
  breaker: () => BreakerState;
}

export function createUpstreamClients(options: UpstreamClientsOptions): UpstreamClients {
  const { upstreams, resilience, observer, metrics, logger } = options;

  const stack = (
    upstream: UpstreamName,
    baseUrl: string,
    probe: () => Promise<boolean>,
    versions: ApiVersions,
  ): Stack => {
    const transport = createTransport({
      upstream,
      baseUrl,
      authHeader: upstreams.authHeader,
      timeoutMs: upstreams.timeoutMs,
      connections: upstreams.connections,
      onExchange: observer.onExchange,
    });
    // Health probes (/ready, the health query, the breaker's half-open test) have a small pool of
    // their own: under load every business connection may be busy, and a readiness probe that
    // queues behind business calls would make a load balancer pull a healthy gateway.
    const probeTransport = createTransport({
      upstream,
      baseUrl,
      authHeader: upstreams.authHeader,
      timeoutMs: upstreams.timeoutMs,
      connections: PROBE_CONNECTIONS,
      onExchange: observer.onExchange,
    });
    const breaker = createCircuitBreaker({
      upstream,
      probe,
      threshold: resilience.breakerThreshold,
      halfOpenAfterMs: resilience.breakerHalfOpenAfterMs,
      onStateChange: (state) =>
        logger[state === 'closed' ? 'info' : 'warn'](
          { upstream, breaker: state },
          'upstream circuit breaker state changed',
        ),
    });
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
    );
    metrics.addBreakerSource(upstream, breaker.state);
    return {
      transport,
      dispatch: compose(transport.dispatch, ...layers),
      probeTransport,
      probeDispatch: compose(probeTransport.dispatch, observer.interceptor),
      versions,
      breaker: breaker.state,
    };
  };

  const stacks: Partial<Record<UpstreamName, Stack>> = {};
  const state = (upstream: UpstreamName): UpstreamState => {
    const stack = stacks[upstream] as Stack;
    return { ...stack.versions.state(), breaker: stack.breaker() };
  };
  const onDeprecated = (upstream: UpstreamName) => (endpoint: string) =>
    metrics.recordDeprecated(upstream, endpoint);

  // Probes are created after the stacks they observe; the breakers reach them through these.
  let probeNull: (operation?: Operation) => Promise<HealthProbe<NullHealthBody>> = async () => unreachable();
  let probePi: (operation?: Operation) => Promise<HealthProbe<PiHealthBody>> = async () => unreachable();

  const nullStack = stack(
    'null-check',
    upstreams.nullBaseUrl,
    () => probeNull().then((p) => p.reachable),
    createApiVersions({
      upstream: 'null-check',
      setting: upstreams.nullApiVersion,
      logger,
      onDeprecated: onDeprecated('null-check'),
      // The start version: v2 when the service's OpenAPI document lists it.
      initial: (dispatch) =>
        dispatch({
          upstream: 'null-check',
          forms: { v1: OPENAPI_FORM },
          form: OPENAPI_FORM,
          operation: undefined,
          anonymous: true,
          timeoutMs: upstreams.healthTimeoutMs,
          mayBeGone: true,
        }).then(
          (answer) => answer.value,
          // No document (404/410) is an answer: v1. As a rejection it was retried every 30 s forever,
          // each time with a warn line, for any upstream that publishes no /openapi.json.
          (error: unknown) => {
            if (isGone(error)) return undefined;
            throw error;
          },
        ),
    }),
  );
  const piStack = stack(
    'pi-digits',
    upstreams.piBaseUrl,
    () => probePi().then((p) => p.reachable),
    createApiVersions({
      upstream: 'pi-digits',
      setting: upstreams.piApiVersion,
      logger,
      onDeprecated: onDeprecated('pi-digits'),
      // v2 serves pi through the inference endpoint, whose waiver only the operator can sign for callers.
      refuse: (version) =>
        version === 'v2' && !upstreams.piWaiverAccepted
          ? errorFromFailure('refused-by-gateway', 'pi-digits', { detail: PI_WAIVER_MESSAGE })
          : undefined,
    }),
  );
  stacks['null-check'] = nullStack;
  stacks['pi-digits'] = piStack;
  probeNull = createHealthProbe({
    upstream: 'null-check',
    dispatch: nullStack.probeDispatch,
    decode: parseNullHealth,
    timeoutMs: upstreams.healthTimeoutMs,
    state: () => state('null-check'),
  });
  probePi = createHealthProbe({
    upstream: 'pi-digits',
    dispatch: piStack.probeDispatch,
    decode: parsePiHealth,
    timeoutMs: upstreams.healthTimeoutMs,
    state: () => state('pi-digits'),
  });
  let closing: Promise<void> | undefined;
  return {
    nullCheck: createNullCheckClient(nullStack.dispatch),
    piDigits: createPiDigitsClient(piStack.dispatch),
    health: { nullCheck: (operation) => probeNull(operation), piDigits: (operation) => probePi(operation) },
    state,
    ready: () => Promise.all([nullStack.versions.ready, piStack.versions.ready]).then(() => undefined),
    close() {
      nullStack.versions.close();
      piStack.versions.close();
      closing ??= Promise.all(
        [nullStack, piStack].flatMap((s) => [s.transport.close(), s.probeTransport.close()]),
      ).then(() => undefined);
      return closing;
    },
  };
}

function unreachable<Body>(): HealthProbe<Body> {
  return {
    reachable: false,
    latencyMs: 0,
    statusCode: null,
    body: null,
    error: 'health check failed',
    breaker: 'disabled',
    apiVersion: 'v1',
    deprecated: false,
    sunset: null,
  };
}
