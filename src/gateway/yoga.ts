/**
 * The gateway's Yoga instance, with every plugin in one ordered list. It never listens: the server
 * (server.ts) hands it every request the fast path does not take.
 *
 * Order matters where plugins use the same hook: the request id first (every answer carries it), the
 * early answers next (/metrics, /ready, GraphiQL), the request checks (CSRF, shape), the operation
 * (created with its parameters, named before the limits and cost checks so that a refusal is reported
 * by name), the limits and cost checks, and the request error codes last.
 */
import type { DocumentNode, GraphQLSchema } from 'graphql';
import { createYoga, maskError, type YogaServerInstance, type YogaServerOptions } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { GroupValues } from '../shared/settings.js';
import type { Compression } from './compression.js';
import type { GatewayContext } from './context.js';
import { corsOptions } from './cors-options.js';
import type { CostControl } from './cost/cost-control.js';
import type { GatewayMetrics } from './observability/metrics.js';
import type { OperationReporter } from './observability/operation-report.js';
import { yogaLogger } from './observability/yoga-logger.js';
import type { Operation } from './operation.js';
import type { OperationPlan } from './operation-plan.js';
import { useCompression } from './plugins/use-compression.js';
import { useCostControl } from './plugins/use-cost-control.js';
import { useCsrfPrevention } from './plugins/use-csrf-prevention.js';
import { useSelfHostedGraphiQL } from './plugins/use-graphiql.js';
import { useGraphiQLOff } from './plugins/use-graphiql-off.js';
import { useMetricsEndpoint } from './plugins/use-metrics-endpoint.js';
import { useOperation } from './plugins/use-operation.js';
import { useOperationLimits } from './plugins/use-operation-limits.js';
import { type ReadinessPluginOptions, useReadiness } from './plugins/use-readiness.js';
import { useRequestErrorCodes } from './plugins/use-request-error-codes.js';
import { useRequestId } from './plugins/use-request-id.js';
import { useRequestShapeErrors } from './plugins/use-request-shape-errors.js';
import { useTrustedDocuments } from './plugins/use-trusted-documents.js';
import type { limitSettings, serverSettings } from './settings.js';
import type { TrustedDocuments } from './trusted-documents.js';

/** The GraphQL endpoint (docs/contract.md, Schema). */
export const GRAPHQL_ENDPOINT = '/graphql';

/** The message of every masked (unexpected) error. */
export const MASKED_MESSAGE = 'Unexpected error.';

export interface GatewayYogaOptions {
  schema: GraphQLSchema;
  server: Pick<GroupValues<typeof serverSettings>, 'graphiql' | 'introspection' | 'corsOrigins'>;
  limits: GroupValues<typeof limitSettings>;
  /** NODE_ENV=production: field suggestions hidden. */
  production: boolean;
  /** OPERATION_DEADLINE_MS. */
  deadlineMs: number;
  logger: Logger;
  metrics: GatewayMetrics;
  reporter: OperationReporter;
  costControl: CostControl;
  plan: (document: DocumentNode, operationName: string | null | undefined) => OperationPlan;
  readiness: ReadinessPluginOptions;
  /** The GraphQL context of an operation. */
  context: (operation: Operation) => GatewayContext;
  /** COMPRESSION_MIN_BYTES and the negotiation both paths share. */
  compression: Compression;
  /** Trusted documents (made after this Yoga: the manifest is validated with its rules). */
  trusted: () => TrustedDocuments;
}

export type GatewayYoga = YogaServerInstance<Record<string, unknown>, GatewayContext>;

/**
 * How the fast path (fast-path/fast-path.ts), which runs no Yoga hook but `onValidate`, gives a JSON
 * POST to /graphql what a plugin gives it on Yoga's path (docs/performance.md, Adding a plugin):
 * - `not-its-requests`: the plugin acts only on requests the fast path hands to Yoga;
 * - `shared-code`: the plugin and the fast path call the same functions (named in `shared`); for
 *   `onValidate` rules, prepared-operations.ts applies every plugin's through `getEnveloped`.
 * Every plugin must say which, so adding one is a decision; test/unit/yoga-plugins.test.ts fails
 * on any plugin or hook not in its reviewed table.
 */
export type FastPathCoverage =
  | { kind: 'not-its-requests'; why: string }
  | { kind: 'shared-code'; shared: string };

export interface GatewayPlugin {
  name: string;
  plugin: NonNullable<YogaServerOptions<Record<string, unknown>, GatewayContext>['plugins']>[number];
  fastPath: FastPathCoverage;
}

/** The gateway's plugins in Yoga's order, each with how the fast path covers it. */
export function gatewayPlugins(options: GatewayYogaOptions, ids: WeakMap<Request, string>): GatewayPlugin[] {
  const { server, logger } = options;
  return [
    {
      name: 'request-id',
      plugin: useRequestId({ ids }),
      fastPath: { kind: 'shared-code', shared: 'request-facts.ts requestIdOf' },
    },
    {
      name: 'metrics-endpoint',
      plugin: useMetricsEndpoint({ metrics: options.metrics }),
      fastPath: { kind: 'not-its-requests', why: 'GET /metrics' },
    },
    {
      name: 'readiness',
      plugin: useReadiness(options.readiness),
      fastPath: { kind: 'not-its-requests', why: 'GET /ready, GET /health' },
    },
    server.graphiql
      ? {
          name: 'graphiql',
          plugin: useSelfHostedGraphiQL({
            endpoint: GRAPHQL_ENDPOINT,
            title: 'null-pi gateway',
            logger,
            // Enforcing a manifest, only its documents run (their exact text): they are the tabs.
            tabs: () => {
              const trusted = options.trusted();
              return trusted.mode === 'enforce' ? trusted.documents.map((query) => ({ query })) : undefined;
            },
          }),
          fastPath: { kind: 'not-its-requests', why: 'GET /graphql for a browser, GET of its assets' },
        }
      : {
          name: 'graphiql-off',
          plugin: useGraphiQLOff({ endpoint: GRAPHQL_ENDPOINT }),
          fastPath: { kind: 'not-its-requests', why: 'GET /graphql for a browser' },
        },
    {
      name: 'csrf-prevention',
      plugin: useCsrfPrevention(),
      fastPath: { kind: 'not-its-requests', why: 'refuses only form, text/plain or untyped POSTs' },
    },
    {
      name: 'request-shape-errors',
      plugin: useRequestShapeErrors(),
      fastPath: {
        kind: 'not-its-requests',
        why: 'other methods and content types, a non-string operationName: all handed to Yoga',
      },
    },
    // Before everything that reads the document: an id or APQ hash becomes its text here.
    {
      name: 'trusted-documents',
      plugin: useTrustedDocuments({ trusted: options.trusted }),
      fastPath: { kind: 'shared-code', shared: 'trusted-documents.ts (involves, resolve) in paramsOf' },
    },
    // Before the limits and the cost checks: a refused operation is still reported by its name.
    {
      name: 'operation',
      plugin: useOperation({
        ids,
        deadlineMs: options.deadlineMs,
        reporter: options.reporter,
        batching: options.limits.batchLimit > 0,
      }),
      fastPath: {
        kind: 'shared-code',
        shared: 'request-facts.ts (API key, cost cap), Operation, OperationReporter start and finish',
      },
    },
    {
      name: 'operation-limits',
      plugin: useOperationLimits({
        limits: options.limits,
        introspection: server.introspection,
        hideSuggestions: options.production,
        plan: options.plan,
      }),
      fastPath: {
        kind: 'shared-code',
        shared: 'its onValidate rules, and the planner and MAX_TOKENS in prepared-operations.ts',
      },
    },
    {
      name: 'cost-control',
      plugin: useCostControl({ control: options.costControl, plan: options.plan }),
      fastPath: { kind: 'shared-code', shared: 'CostControl.admit' },
    },
    {
      name: 'request-error-codes',
      plugin: useRequestErrorCodes(),
      fastPath: { kind: 'shared-code', shared: 'withRequestErrorCodes' },
    },
    // Last: it compresses the final response, headers included.
    {
      name: 'compression',
      plugin: useCompression({ compression: options.compression }),
      fastPath: { kind: 'shared-code', shared: 'compression.ts (encodingFor, compressible, compress)' },
    },
  ];
}

export function createGatewayYoga(options: GatewayYogaOptions): GatewayYoga {
  const { server, logger } = options;
  const ids = new WeakMap<Request, string>();
  return createYoga<Record<string, unknown>, GatewayContext>({
    schema: options.schema,
    graphqlEndpoint: GRAPHQL_ENDPOINT,
    // The self-hosted page below replaces Yoga's (inline, CSP-hostile) GraphiQL.
    graphiql: false,
    landingPage: false,
    // Only GraphQLErrors made on purpose (the codes of errors.ts) reach clients; the fast path masks
    // with the same function and message.
    maskedErrors: { maskError, errorMessage: MASKED_MESSAGE, isDev: false },
    maxRequestBodySize: options.limits.maxRequestBodyBytes,
    // GraphQL-over-HTTP's persisted documents: `documentId` beside query, variables, operationName.
    extraParamNames: ['documentId'],
    // BATCH_LIMIT (docs/contract.md, Delivery): off by default, as Yoga's own default. Off, an array
    // is refused by Yoga with 400 BAD_REQUEST ("Batching is not supported."); over the limit with
    // 413 BAD_REQUEST. The fast path hands every array to Yoga.
    batching: options.limits.batchLimit > 0 ? { limit: options.limits.batchLimit } : false,
    cors: corsOptions(server.corsOrigins),
    logging: yogaLogger(logger),
    plugins: gatewayPlugins(options, ids).map((entry) => entry.plugin),
    // useOperation put the operation on the initial context (onParams runs before the context is built).
    context: (initial) => options.context((initial as unknown as { operation: Operation }).operation),
  });
}
