/**
 * Everything an operator sees of one gateway instance, assembled from the configuration: the Yoga
 * plugin (log line, metrics, /metrics, operation spans, `extensions.sponsoredBy`), the upstream
 * clients' `onCall` hook and the client wrapper that sees every upstream answer.
 *
 * Wiring (two ends meet here, which is why this is one object):
 *   const observability = createObservability({ config, logger });
 *   const clients = observability.instrumentClients(createUpstreamClients({ ..., onCall: observability.onCall }));
 *   createYoga({ ..., plugins: [..., observability.plugin] });
 */
import type { Plugin } from 'graphql-yoga';
import type { Registry } from 'prom-client';
import type { AppConfig } from '../../config.js';
import type { Logger } from '../../shared/logger.js';
import type { UpstreamClients, UpstreamName } from '../upstream/types.js';
import {
  type BreakerState,
  createGatewayMetrics,
  type DedupSource,
  type GatewayMetrics,
} from './gateway-metrics.js';
import { instrumentUpstreamClients } from './instrument-upstream-clients.js';
import { ObservabilityCore } from './observability-core.js';
import { createObservabilityPlugin, type ObservabilityPluginOptions } from './observability-plugin.js';
import { createSponsorLog } from './sponsor-log.js';
import { createTracer, type Tracer, type TracingOptions } from './tracing.js';

/** What the upstream clients report for each HTTP attempt (their `onCall` option). */
export interface UpstreamCallEvent {
  upstream: string;
  endpoint: string;
  /** HTTP status, null when there was no answer (timeout, refused connection, open circuit). */
  statusCode: number | null;
  durationMs: number;
  outcome: string;
  attempt: number;
  /** The breaker state after this attempt, when the client reports it. */
  breaker?: BreakerState;
}

export interface ObservabilityOptions {
  /** The settings of group 'observability' (SPONSOR_LOG_INTERVAL_MS, OTEL_TRACING). */
  config: Pick<AppConfig, 'observability'>;
  logger: Logger;
  /**
   * The Prometheus registry of this gateway.
   * @default a new Registry per call (never prom-client's global one)
   */
  registry?: Registry;
  /**
   * Collect prom-client's default process metrics on the registry.
   * @default true
   */
  defaultMetrics?: boolean;
  /**
   * Where the tracer comes from when tracing is on.
   * @default the global provider registered by the host's OpenTelemetry SDK
   */
  tracerProvider?: TracingOptions['tracerProvider'];
  /** Options of the default Yoga plugin, {@link GatewayObservability.plugin}. */
  plugin?: ObservabilityPluginOptions;
}

export interface GatewayObservability {
  /** Add to the Yoga `plugins` array (made with the `plugin` options, on first use). */
  readonly plugin: Plugin;
  /** Another plugin over the same metrics and logs, e.g. with the host's own request id lookup. */
  createPlugin(options?: ObservabilityPluginOptions): Plugin;
  /** Pass as the upstream clients' `onCall`: per-attempt upstream metrics and breaker state. */
  readonly onCall: (event: UpstreamCallEvent) => void;
  /** The clients, reporting every answer (cost, sponsor, per-operation calls, spans). */
  instrumentClients<T extends UpstreamClients>(clients: T): T;
  /** For the schema's dataloaders and caches: an upstream call saved. */
  recordDedupHit(upstream: UpstreamName, source: DedupSource): void;
  /**
   * A stable counter function for one (upstream, source), made once per gateway: hand it to a
   * `CountingCacheMap` (DataLoader `cacheMap`) without creating a closure per request.
   */
  dedupHitCounter(upstream: UpstreamName, source: DedupSource): () => void;
  readonly metrics: GatewayMetrics;
  readonly registry: Registry;
  /** Undefined when OTEL_TRACING is off. */
  readonly tracer: Tracer | undefined;
  /** Operations currently executing (tests check nothing leaks). */
  readonly inFlightCount: number;
}

const KNOWN_UPSTREAMS = new Set<string>(['null-check', 'pi-digits']);

export function createObservability(options: ObservabilityOptions): GatewayObservability {
  const { logger } = options;
  const metrics = createGatewayMetrics({
    registry: options.registry,
    defaultMetrics: options.defaultMetrics,
  });
  const sponsorLog = createSponsorLog({
    logger,
    intervalMs: options.config.observability.sponsorLogIntervalMs,
  });
  const tracer = createTracer({
    enabled: options.config.observability.tracing,
    tracerProvider: options.tracerProvider,
  });
  const core = new ObservabilityCore({ logger, metrics, sponsorLog, tracer });
  let plugin: Plugin | undefined;

  const onCall = (event: UpstreamCallEvent): void => {
    metrics.recordUpstreamCall(
      event.upstream,
      event.endpoint,
      event.statusCode,
      event.outcome,
      event.durationMs,
    );
    if (event.breaker !== undefined && KNOWN_UPSTREAMS.has(event.upstream)) {
      metrics.setBreakerState(event.upstream as UpstreamName, event.breaker);
    }
  };

  const counters = new Map<string, () => void>();
  const dedupHitCounter = (upstream: UpstreamName, source: DedupSource): (() => void) => {
    const key = `${upstream}\n${source}`;
    let counter = counters.get(key);
    if (counter === undefined) {
      counter = () => metrics.recordDedupHit(upstream, source);
      counters.set(key, counter);
    }
    return counter;
  };

  return {
    get plugin() {
      plugin ??= createObservabilityPlugin(core, options.plugin);
      return plugin;
    },
    createPlugin: (pluginOptions) => createObservabilityPlugin(core, pluginOptions),
    onCall,
    dedupHitCounter,
    instrumentClients: (clients) => instrumentUpstreamClients(core, clients),
    recordDedupHit: (upstream, source) => metrics.recordDedupHit(upstream, source),
    metrics,
    registry: metrics.registry,
    tracer,
    get inFlightCount() {
      return core.inFlightCount;
    },
  };
}
