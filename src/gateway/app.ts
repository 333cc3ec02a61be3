/**
 * The composition root: `createApp(config)` builds the whole gateway from its settings (shared
 * state, observability, the upstream clients and their layers, the schema's context, Yoga, the fast
 * path and the HTTP server) and returns it ready to listen. `src/main.ts`, each cluster worker and the
 * tests' fixture all use it (through src/embedded-services.ts, which starts the reference services
 * first when an upstream URL is not set); nothing else wires components together. The gateway
 * reaches its upstreams only over HTTP, at the URLs its settings give.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { DEFAULT_MAX_DIGITS, type DigitEngine, sharedDigitEngine } from '../digits/digit-engine.js';
import { type BudgetPolicy, budgetPolicy } from './cost/budget-policy.js';
import { createCostBudget } from './cost/cost-budget.js';
import { type CostControl, createCostControl } from './cost/cost-control.js';
import { type CostModel, createCostModel } from './cost/cost-model.js';
import { createCompression } from './delivery/compression.js';
import { createFastPath, type FastPath } from './http/fast-path/fast-path.js';
import { createPreparedOperations } from './http/fast-path/prepared-operations.js';
import { createGatewayServer, type GatewayServer } from './http/server.js';
import { createGatewayYoga, type GatewayYoga } from './http/yoga.js';
import { createIdentity, type Identity } from './identity.js';
import { createMcpLane } from './mcp/mcp-lane.js';
import { createMcpMetrics } from './mcp/mcp-metrics.js';
import { createToolset } from './mcp/toolset.js';
import { createModelScoring, type ModelScoring } from './models/model-scoring.js';
import { createGatewayMetrics, type GatewayMetrics } from './observability/metrics.js';
import { createOperationReporter } from './observability/operation-report.js';
import { createSponsorLog } from './observability/sponsor-log.js';
import { traceFlushMs } from './observability/trace-export.js';
import { createTracing, type Tracing, type TracingOptions } from './observability/tracing.js';
import { createUpstreamObserver } from './observability/upstream-observer.js';
import { yogaLogger } from './observability/yoga-logger.js';
import { createPlanner } from './operation/operation-plan.js';
import { createDocumentValidator } from './plugins/use-operation-limits.js';
import { createExecutor } from './request/executor.js';
import { createRequestPipeline } from './request/pipeline.js';
import { createTrustedDocuments, loadManifest, trustedMode } from './request/trusted-documents.js';
import { createContextFactory } from './schema/context.js';
import { schema as publicSchema, subgraphSchema } from './schema/index.js';
import type { GatewayConfig } from './settings.js';
import { createSharedState, evictionMessage, type SharedState } from './shared-state/index.js';
import { createTokenVerifier } from './token-verifier.js';
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
  /**
   * Where the tracer comes from when OTEL_TRACING is on; given, the gateway exports nothing itself.
   * @default the host SDK's global provider
   */
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
  /** Listens on `port` and `host` (default: PORT and HOST); resolves with the GraphQL URL (server.ts). */
  listen(port?: number, host?: string): Promise<string>;
  /**
   * Graceful stop: no new connections, accepted requests answered (for at most SHUTDOWN_TIMEOUT_MS),
   * then the upstream pools and shared state closed. Idempotent.
   */
  close(): Promise<{ timedOut: boolean; inFlight: number }>;
}

/**
 * The gateway, in front of `config.upstreams`' URLs (NULL_BASE_URL and PI_BASE_URL; both must be set:
 * src/embedded-services.ts fills them with the embedded services' when they are not).
 */
export async function createApp(config: GatewayConfig, options: AppOptions): Promise<App> {
  const { logger } = options;
  const digits = options.digits ?? sharedDigitEngine();
  const { nullBaseUrl, piBaseUrl } = config.upstreams;
  if (nullBaseUrl === undefined || piBaseUrl === undefined)
    throw new Error(
      'createApp needs NULL_BASE_URL and PI_BASE_URL (src/embedded-services.ts starts the reference services for them)',
    );
  // Who the caller is: checked before anything starts (a contradiction is one line at start).
  const identity = identityOf(config, logger);
  const metrics = createGatewayMetrics({
    registry: options.registry,
    defaultMetrics: options.defaultMetrics,
  });
  const budgets = budgetPolicyOf(config);
  const sharedState = await sharedStateOf(config, budgets, logger, metrics);
  // OTEL_EXPORTER_OTLP_ENDPOINT: the SDK and exporter are loaded here, and only then.
  const tracing = await createTracing({
    enabled: config.observability.tracing,
    tracerProvider: options.tracerProvider,
    logger,
  });
  const maxCompareDigits = Math.min(config.limits.maxDigits, DEFAULT_MAX_DIGITS);
  // Models scored against the truth, and routing by minAccuracy (docs/graphql.md, Models).
  // The estimate's prices: routing picks the cheapest by the same figures.
  const costModel = createCostModel();
  const models = createModelScoring({
    store: sharedState.scores,
    digits,
    maxCompareDigits,
    price: (call) => costModel.expected(call),
    metrics,
    minSamples: config.cost.modelMinSamples,
    exploration: config.cost.modelExploration,
    onError: (error) => logger.warn({ err: error }, 'a model answer could not be scored'),
  });
  const costControl = costControlOf(
    budgets,
    sharedState,
    metrics,
    logger,
    options.now,
    config.cost.budgetLeaseMarginMs,
    models,
    costModel,
  );
  const upstreams = { nullBaseUrl, piBaseUrl };
  const clients = upstreamClientsOf(config, upstreams, {
    logger,
    metrics,
    sharedState,
    tracing,
    costControl,
    backoff: options.backoff,
    onAnswer: models.scoreboard.record,
  });
  // The first calls already go to each upstream's API version (a discovery is bounded by its timeout).
  await clients.ready();

  const production = config.process.nodeEnv === 'production';
  // FEDERATION=true: the Federation 2 subgraph (the public schema and _service, _entities, Model).
  const schema = config.federation.enabled ? subgraphSchema() : publicSchema;
  const validate = createDocumentValidator(schema, {
    limits: config.limits,
    introspection: config.server.introspection,
    hideSuggestions: production,
  });
  const manifest =
    config.server.trustedDocuments === undefined
      ? undefined
      : loadManifest(config.server.trustedDocuments, validate);
  const trusted = createTrustedDocuments({
    mode: trustedMode(config.server.trustedDocuments, config.server.trustedDocumentsMode),
    manifest,
    store: sharedState.documents,
    introspection: config.server.introspection,
    apq: config.server.apq,
    onUntrusted: () => metrics.recordUntrustedOperation(),
    logger,
  });
  if (config.federation.enabled && trusted.mode === 'enforce')
    logger.warn(
      "FEDERATION=true with TRUSTED_DOCUMENTS_MODE=enforce: a router's fetches are its query plan, not its callers' documents, and are refused; enforce trusted documents at the router (docs/federation.md)",
    );
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
    identity,
    costControl,
    reporter: createOperationReporter({
      metrics,
      logger,
      tracing,
      responseCache: config.cache.responseCache,
    }),
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
      redisTopology: () => sharedState.topology(),
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
  // MCP (docs/agents.md): a third lane of the same pipeline, each tool call one of its operations.
  const mcp = config.server.mcp
    ? createMcpLane({
        pipeline,
        toolset: createToolset({ schema, mode: trusted.mode, manifest, validate, plan }),
        metrics: createMcpMetrics(metrics.registry),
        maxBodyBytes: config.limits.maxRequestBodyBytes,
        allowedOrigins: config.server.mcpAllowedOrigins ?? [],
        identity,
        authorization:
          config.auth.issuer === undefined
            ? undefined
            : { issuer: config.auth.issuer, publicUrl: config.auth.publicUrl },
        logger: yogaLogger(logger),
      })
    : undefined;
  const http = createGatewayServer(yoga, fastPath, mcp === undefined ? [] : [mcp]);
  // Before the gateway listens (so before /ready): a replica's first /mcp request as quick as the rest.
  await mcp?.warm();

  let closing: Promise<{ timedOut: boolean; inFlight: number }> | undefined;
  return {
    server: http.server,
    yoga,
    fastPath,
    clients,
    metrics,
    sharedState,
    listen: (port = config.server.port, host = config.process.host) => http.listen(port, host),
    close() {
      closing ??= (async () => {
        const started = performance.now();
        const drained = http.server.listening
          ? await http.drain(config.process.shutdownTimeoutMs)
          : { timedOut: false, inFlight: 0 };
        // The spans of the requests just answered are sent now, in what is left of the bound.
        const flushMs = traceFlushMs(config.process.shutdownTimeoutMs - (performance.now() - started));
        await Promise.allSettled([clients.close(), sharedState.close(), tracing?.close(flushMs)]);
        return drained;
      })();
      return closing;
    },
  };
}

/**
 * Who callers are (identity.ts): API keys and API_KEYS' tiers; with AUTH_ISSUER, its tokens too,
 * verified by jose (token-verifier.ts), whose discovery document and JWKS are fetched now, in the
 * background: a provider that is down delays no start, and API-key callers never wait for it.
 */
function identityOf(config: GatewayConfig, logger: Logger): Identity {
  const { auth } = config;
  if (auth.issuer === undefined) {
    // Settings that would mean nothing without a provider: a mistake, not a configuration.
    if (auth.mode === 'tokens' || auth.audience !== undefined)
      throw new Error(
        `${auth.mode === 'tokens' ? 'AUTH_MODE=tokens' : 'AUTH_AUDIENCE'} needs AUTH_ISSUER, the identity provider whose tokens identify callers`,
      );
    return createIdentity({ tiers: config.server.apiKeys });
  }
  if (auth.audience === undefined)
    throw new Error(
      'AUTH_ISSUER needs AUTH_AUDIENCE: the audience its tokens must name (without it, a token the provider issued for any other application would be accepted)',
    );
  const verifier = createTokenVerifier({
    issuer: auth.issuer,
    audiences: auth.audience,
    clockToleranceS: auth.clockToleranceS,
    jwksMaxAgeS: auth.jwksMaxAgeS,
    jwksCooldownS: auth.jwksCooldownS,
    timeoutMs: auth.issuerTimeoutMs,
    rememberedTokens: auth.tokenCache,
  });
  void verifier.warm().then((ready) => {
    if (!ready)
      logger.warn(
        { issuer: auth.issuer },
        'the identity provider (AUTH_ISSUER) did not answer its discovery document or JWKS: token callers get 503 until it does; API keys are not affected',
      );
  });
  const missing = (['pro', 'enterprise'] as const).filter((tier) => !auth.upstreamKeys?.has(tier));
  if (missing.length > 0)
    logger.warn(
      { tiers: missing },
      'UPSTREAM_KEYS holds no key for these tiers: their token callers are sent to the upstreams without a key (the free tier)',
    );
  return createIdentity({
    tiers: config.server.apiKeys,
    verifier,
    mode: auth.mode,
    tierClaim: auth.tierClaim,
    upstreamKeys: auth.upstreamKeys,
  });
}

/**
 * The budgets in force (COST_BUDGETS, COST_BUDGET_USD_PER_HOUR; a caller's tier is identity.ts's),
 * undefined for none. Throws one line when the two settings conflict.
 */
function budgetPolicyOf(config: GatewayConfig): BudgetPolicy | undefined {
  return budgetPolicy({
    budgets: config.cost.costBudgets,
    usdPerHour: config.cost.costBudgetUsdPerHour,
    warningRatio: config.cost.costBudgetWarningRatio,
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
  config: GatewayConfig,
  budgets: BudgetPolicy | undefined,
  logger: Logger,
  metrics: GatewayMetrics,
): Promise<SharedState> {
  const { redisUrl } = config.redis;
  const sharedState = createSharedState({
    redisUrl,
    cacheRedisUrl: config.cache.redisCacheUrl,
    keyPrefix: config.redis.redisKeyPrefix,
    timeoutMs: config.redis.redisTimeoutMs,
    budgetTimeoutMs: config.cost.redisBudgetTimeoutMs,
    onBudgetLapse: (count, usd) => metrics.recordLapsedReservations(count, usd),
    logger,
    registry: metrics.registry,
    localMaxEntries: config.cache.responseCacheMaxEntries,
    documentMaxBytes: config.server.apqMaxDocumentBytes,
    documentsPerOwner: config.server.apqMaxDocumentsPerClient,
    budgets: budgets !== undefined,
    expectedReplicas: config.cost.expectedReplicas,
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
  leaseMarginMs: number,
  models: ModelScoring,
  costModel: CostModel,
): CostControl {
  return createCostControl({
    model: costModel,
    router: models.router,
    onRouted: (upstream, usd) => metrics.recordRoutingSaving(upstream, usd),
    budget:
      budgets === undefined
        ? undefined
        : createCostBudget({
            store: sharedState.budgets,
            policy: budgets,
            now,
            leaseMarginMs,
            onWarning: ({ caller, window, totalUsd }) => {
              metrics.recordBudgetWarning(caller.scope.kind, window.label);
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
  config: GatewayConfig,
  upstreams: { nullBaseUrl: string; piBaseUrl: string },
  parts: {
    logger: Logger;
    metrics: GatewayMetrics;
    sharedState: SharedState;
    tracing: Tracing | undefined;
    costControl: CostControl;
    backoff: AppOptions['backoff'];
    onAnswer: ModelScoring['scoreboard']['record'];
  },
): UpstreamClients {
  const { logger, metrics, sharedState, tracing, costControl } = parts;
  const observer = createUpstreamObserver({
    logger,
    metrics,
    sponsorLog: createSponsorLog({ logger, intervalMs: config.observability.sponsorLogIntervalMs }),
    tracer: tracing?.tracer,
    traceHeaders: tracing?.upstreamHeaders,
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
