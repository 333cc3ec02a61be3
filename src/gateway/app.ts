/**
 * The composition root: `createApp(config)` builds the whole gateway from its settings (embedded
 * reference services when no upstream URLs are given, shared state, observability, the upstream
 * clients and their layers, the schema's context, Yoga, the fast path and the HTTP server) and returns
 * it ready to listen. `src/main.ts`, each cluster worker and the tests' fixture all use it; nothing
 * else wires components together.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { Counter } from 'prom-client';
import type { AppConfig } from '../config.js';
import { DEFAULT_MAX_DIGITS, type DigitEngine, sharedDigitEngine } from '../digits/digit-engine.js';
import { apiKeyMap } from '../services/shared/api-keys.js';
import { type BudgetPolicy, budgetPolicy } from './cost/budget-policy.js';
import { createCostBudget } from './cost/cost-budget.js';
import { type CostControl, createCostControl } from './cost/cost-control.js';
import { createCostModel } from './cost/cost-model.js';
import { createCompression } from './delivery/compression.js';
import { startEmbeddedServices, type UpstreamUrls } from './embedded-services.js';
import { createFastPath, type FastPath } from './http/fast-path/fast-path.js';
import { createPreparedOperations } from './http/fast-path/prepared-operations.js';
import { createGatewayServer, type GatewayServer } from './http/server.js';
import { createGatewayYoga, type GatewayYoga } from './http/yoga.js';
import { createModelScoring, type ModelScoring } from './models/model-scoring.js';
import { createGatewayMetrics, type GatewayMetrics } from './observability/metrics.js';
import { createOperationReporter } from './observability/operation-report.js';
import { createSponsorLog } from './observability/sponsor-log.js';
import { createTracer, type Tracer, type TracingOptions } from './observability/tracing.js';
import { createUpstreamObserver } from './observability/upstream-observer.js';
import { yogaLogger } from './observability/yoga-logger.js';
import { createPlanner } from './operation/operation-plan.js';
import { createDocumentValidator } from './plugins/use-operation-limits.js';
import { createExecutor } from './request/executor.js';
import { createRequestPipeline } from './request/pipeline.js';
import { createTrustedDocuments, loadManifest, trustedMode } from './request/trusted-documents.js';
import { createContextFactory } from './schema/context.js';
import { schema } from './schema/index.js';
import { createSharedState, evictionMessage, type SharedState } from './shared-state/index.js';
import { createUpstreamClients, type UpstreamClients } from './upstream/clients.js';

export interface AppOptions {
  /** Where logs go (main.ts makes it from the `logs` settings). */
  logger: Logger;
  /** @default sharedDigitEngine() */
  digits?: DigitEngine;
  /** @default a new Registry */
  registry?: Registry;
  /** Collect prom-client's default process metrics. @default true */
  defaultMetrics?: boolean;
  /** Where the tracer comes from when OTEL_TRACING is on. @default the host SDK's global provider */
  tracerProvider?: TracingOptions['tracerProvider'];
  /** Clock of the cost budgets in memory (tests move it; with Redis, Redis' clock). @default Date.now */
  now?: () => number;
  /** Backoff of upstream retries, in ms (tests shorten it). @default { baseMs: 50, capMs: 1000 } */
  backoff?: { baseMs: number; capMs: number };
}

export interface App {
  readonly server: GatewayServer['server'];
  readonly yoga: GatewayYoga;
  readonly fastPath: FastPath;
  readonly clients: UpstreamClients;
  readonly metrics: GatewayMetrics;
  readonly sharedState: SharedState;
  /** The upstream base URLs in use (the embedded services' when they were started). */
  readonly upstreams: UpstreamUrls;
  /** Listens on `port` and `host` (default: PORT and HOST); resolves with the GraphQL URL (server.ts). */
  listen(port?: number, host?: string): Promise<string>;
  /**
   * Graceful stop: no new connections, accepted requests answered (for at most SHUTDOWN_TIMEOUT_MS),
   * then the upstream pools, shared state and embedded services closed. Idempotent.
   */
  close(): Promise<{ timedOut: boolean; inFlight: number }>;
}

export async function createApp(config: AppConfig, options: AppOptions): Promise<App> {
  const { logger } = options;
  const digits = options.digits ?? sharedDigitEngine();
  const services = await startEmbeddedServices(config, { logger, digits });
  const metrics = createGatewayMetrics({
    registry: options.registry,
    defaultMetrics: options.defaultMetrics,
  });
  const budgets = budgetPolicyOf(config);
  const sharedState = await sharedStateOf(config, budgets, logger, metrics.registry);
  const tracer = createTracer({
    enabled: config.observability.tracing,
    tracerProvider: options.tracerProvider,
  });
  const maxCompareDigits = Math.min(config.limits.maxDigits, DEFAULT_MAX_DIGITS);
  // Models scored against the truth, and routing by minAccuracy (docs/graphql.md, Models).
  const models = createModelScoring({
    store: sharedState.scores,
    digits,
    maxCompareDigits,
    costModel: createCostModel(),
    metrics,
    minSamples: config.cost.modelMinSamples,
    exploration: config.cost.modelExploration,
    onError: (error) => logger.warn({ err: error }, 'a model answer could not be scored'),
  });
  const costControl = costControlOf(budgets, sharedState, metrics, logger, options.now, models);
  const clients = upstreamClientsOf(config, services.upstreams, {
    logger,
    metrics,
    sharedState,
    tracer,
    costControl,
    backoff: options.backoff,
    onAnswer: models.scoreboard.record,
  });
  // The first calls already go to each upstream's API version (a discovery is bounded by its timeout).
  await clients.ready();

  const production = config.process.nodeEnv === 'production';
  const validate = createDocumentValidator(schema, {
    limits: config.limits,
    introspection: config.server.introspection,
    hideSuggestions: production,
  });
  const trusted = createTrustedDocuments({
    mode: trustedMode(config.server.trustedDocuments, config.server.trustedDocumentsMode),
    manifest:
      config.server.trustedDocuments === undefined
        ? undefined
        : loadManifest(config.server.trustedDocuments, validate),
    store: sharedState.documents,
    introspection: config.server.introspection,
    apq: config.server.apq,
    onUntrusted: () => metrics.recordUntrustedOperation(),
    logger,
  });
  const context = createContextFactory({
    clients,
    digits,
    limits: {
      maxDigits: config.limits.maxDigits,
      maxCompareDigits,
      maxJsonDepth: config.limits.maxJsonDepth,
      maxJsonBytes: config.limits.maxJsonBytes,
    },
    onDedup: (upstream) => metrics.recordDedupHit(upstream, 'dataloader'),
    budgetStatus: costControl.budgetStatus,
    models: models.view,
  });
  const executor = createExecutor({ schema });
  metrics.setExecutionsSource(() => executor.counts);
  const plan = createPlanner(schema);
  const pipeline = createRequestPipeline({
    deadlineMs: config.resilience.operationDeadlineMs,
    maxUpstreamCalls: config.limits.maxUpstreamCalls,
    fallbackByDefault: config.cost.costBudgetFallback === 'cheaper-model',
    trusted,
    costControl,
    reporter: createOperationReporter({ metrics, logger, tracer, responseCache: config.cache.responseCache }),
    executor,
    context,
    plan,
    logger: yogaLogger(logger),
  });
  const compression = createCompression({ minBytes: config.server.compressionMinBytes });
  const yoga = createGatewayYoga({
    schema,
    compression,
    trusted,
    pipeline,
    server: config.server,
    limits: config.limits,
    production,
    logger,
    metrics,
    context,
    readiness: {
      breaker: (upstream) => clients.state(upstream).breaker,
      reachable: async (upstream) =>
        (await (upstream === 'null-check' ? clients.health.nullCheck() : clients.health.piDigits()))
          .reachable,
      sharedState: () => sharedState.status(),
    },
  });
  const fastPath = createFastPath({
    yoga,
    pipeline,
    prepared: createPreparedOperations({ schema, validate, plan, maxTokens: config.limits.maxTokens }),
    compression,
    logger: yogaLogger(logger),
    maxBodyBytes: config.limits.maxRequestBodyBytes,
    // CORS answers depend on each request's Origin; the fast path does not replicate them.
    enabled: config.server.httpFastPath && config.server.corsOrigins === undefined,
  });
  const http = createGatewayServer(yoga, fastPath);

  let closing: Promise<{ timedOut: boolean; inFlight: number }> | undefined;
  return {
    server: http.server,
    yoga,
    fastPath,
    clients,
    metrics,
    sharedState,
    upstreams: services.upstreams,
    listen: (port = config.server.port, host = config.process.host) => http.listen(port, host),
    close() {
      closing ??= (async () => {
        const drained = http.server.listening
          ? await http.drain(config.process.shutdownTimeoutMs)
          : { timedOut: false, inFlight: 0 };
        await Promise.allSettled([clients.close(), sharedState.close(), services.close()]);
        return drained;
      })();
      return closing;
    },
  };
}

/**
 * The budgets in force (COST_BUDGETS, COST_BUDGET_USD_PER_HOUR; tiers from API_KEYS), undefined for
 * none. Throws one line when the two settings conflict.
 */
function budgetPolicyOf(config: AppConfig): BudgetPolicy | undefined {
  return budgetPolicy({
    budgets: config.cost.costBudgets,
    usdPerHour: config.cost.costBudgetUsdPerHour,
    warningRatio: config.cost.costBudgetWarningRatio,
    tiers: apiKeyMap(config.services.apiKeys),
  });
}

/** How long the start waits for the budgets' Redis to answer its eviction check. */
const BUDGET_REDIS_CHECK_MS = 2_500;

/**
 * The shared state: budgets on REDIS_URL, the cache, APQ documents and single flight on
 * REDIS_CACHE_URL (default REDIS_URL). With budgets on a Redis that may evict them, the start fails
 * with one line; when that Redis does not answer in time or does not say, the start goes on (the
 * check runs again once it connects, an error line if it evicts).
 */
async function sharedStateOf(
  config: AppConfig,
  budgets: BudgetPolicy | undefined,
  logger: Logger,
  registry: Registry,
): Promise<SharedState> {
  const { redisUrl } = config.redis;
  const sharedState = createSharedState({
    redisUrl,
    cacheRedisUrl: config.cache.redisCacheUrl,
    keyPrefix: config.redis.redisKeyPrefix,
    timeoutMs: config.redis.redisTimeoutMs,
    logger,
    registry,
    localMaxEntries: config.cache.responseCacheMaxEntries,
    documentMaxBytes: config.server.apqMaxDocumentBytes,
    documentsPerOwner: config.server.apqMaxDocumentsPerClient,
    budgets: budgets !== undefined,
  });
  if (budgets === undefined || redisUrl === undefined) return sharedState;
  const check = await sharedState.checkBudgetRedis(BUDGET_REDIS_CHECK_MS);
  if (check.verdict === 'evicting') {
    await sharedState.close();
    throw new Error(evictionMessage(redisUrl, check.memory));
  }
  if (check.verdict === 'unknown')
    logger.warn(
      'could not read the eviction policy of REDIS_URL (INFO memory refused?): the cost budgets live there; make sure its maxmemory-policy is noeviction',
    );
  return sharedState;
}

/** X-Max-Cost-Usd and the cost budgets, counted in the metrics; warnings logged once per key and window. */
function costControlOf(
  budgets: BudgetPolicy | undefined,
  sharedState: SharedState,
  metrics: GatewayMetrics,
  logger: Logger,
  now: (() => number) | undefined,
  models: ModelScoring,
): CostControl {
  const warnings = new Counter({
    name: 'gateway_budget_warnings_total',
    help: 'A key’s spend and reservations in a budget window reached COST_BUDGET_WARNING_RATIO of its limit (once per key and window per window length), by scope (default, anonymous, tier:<tier>, key) and window.',
    labelNames: ['scope', 'window'] as const,
    registers: [metrics.registry],
  });
  return createCostControl({
    model: models.costModel,
    router: models.router,
    onRouted: (upstream, usd) => metrics.recordRoutingSaving(upstream, usd),
    budget:
      budgets === undefined
        ? undefined
        : createCostBudget({
            store: sharedState.budgets,
            policy: budgets,
            now,
            onWarning: ({ caller, window, totalUsd }) => {
              warnings.labels(caller.scope.kind, window.label).inc();
              logger.warn(
                {
                  budgetKey: caller.id,
                  scope: caller.scope.kind,
                  window: window.label,
                  limitUsd: window.limitUsd,
                  spentUsd: Math.round(totalUsd * 1e8) / 1e8,
                },
                'cost budget warning: a key passed its warning ratio in a window',
              );
            },
          }),
    onRefusal: (reason) => metrics.recordBudgetRefusal(reason),
    onEstimate: (upstream, model, usd) => metrics.recordEstimatedCost(upstream, model, usd),
    onAbandoned: (upstream, model, usd) => metrics.recordAbandonedCall(upstream, model, usd),
  });
}

/** The two upstream clients, their layers observed (log, metrics, spans, sponsors, spend). */
function upstreamClientsOf(
  config: AppConfig,
  upstreams: UpstreamUrls,
  parts: {
    logger: Logger;
    metrics: GatewayMetrics;
    sharedState: SharedState;
    tracer: Tracer | undefined;
    costControl: CostControl;
    backoff: AppOptions['backoff'];
    onAnswer: ModelScoring['scoreboard']['record'];
  },
): UpstreamClients {
  const { logger, metrics, sharedState, tracer, costControl } = parts;
  const observer = createUpstreamObserver({
    logger,
    metrics,
    sponsorLog: createSponsorLog({ logger, intervalMs: config.observability.sponsorLogIntervalMs }),
    tracer,
    onSpent: costControl.spent,
    onAnswer: parts.onAnswer,
  });
  const responseCache = config.cache.responseCache;
  if (responseCache) metrics.setCacheSizeSource(() => sharedState.cache.size);
  return createUpstreamClients({
    upstreams: { ...config.upstreams, ...upstreams },
    resilience: config.resilience,
    observer,
    metrics,
    logger,
    cache: responseCache ? { store: sharedState.cache, ttlMs: config.cache.responseCacheTtlMs } : undefined,
    flights:
      (config.cache.redisCacheUrl ?? config.redis.redisUrl) === undefined ? undefined : sharedState.flights,
    backoff: parts.backoff,
  });
}
