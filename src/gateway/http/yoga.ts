/**
 * The gateway's Yoga instance, with every plugin in one ordered list. It never listens: the server
 * (server.ts) hands it every request the fast path does not take.
 *
 * Order matters where plugins use the same hook: a QUERY made a POST first (every later hook sees
 * the POST), the early answers next (/metrics, /ready, GraphiQL), the request checks (CSRF, shape),
 * the limits' parse and validation rules, the request pipeline (request/pipeline.ts: request id,
 * operation, trusted documents, admission, execution, report, encoding, settlement), and
 * compression last, on the final response.
 */
import type { GraphQLSchema } from 'graphql';
import { createYoga, maskError, type YogaServerInstance } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { GroupValues } from '../../shared/settings.js';
import type { Compression } from '../delivery/compression.js';
import { corsOptions } from '../delivery/cors-options.js';
import { GRAPHQL_ENDPOINT } from '../delivery/endpoint.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { yogaLogger } from '../observability/yoga-logger.js';
import type { Operation } from '../operation/operation.js';
import { useCompression } from '../plugins/use-compression.js';
import { useCsrfPrevention } from '../plugins/use-csrf-prevention.js';
import { useSelfHostedGraphiQL } from '../plugins/use-graphiql.js';
import { useGraphiQLOff } from '../plugins/use-graphiql-off.js';
import { useMetricsEndpoint } from '../plugins/use-metrics-endpoint.js';
import { validationPlugins } from '../plugins/use-operation-limits.js';
import { useQueryMethod } from '../plugins/use-query-method.js';
import { type ReadinessPluginOptions, useReadiness } from '../plugins/use-readiness.js';
import { useRequestPipeline } from '../plugins/use-request-pipeline.js';
import { useRequestShapeErrors } from '../plugins/use-request-shape-errors.js';
import { MASKED_MESSAGE, type RequestPipeline } from '../request/pipeline.js';
import type { TrustedDocuments } from '../request/trusted-documents.js';
import type { GatewayContext } from '../schema/context.js';
import type { limitSettings, serverSettings } from '../settings.js';

export { MASKED_MESSAGE } from '../request/pipeline.js';

export interface GatewayYogaOptions {
  schema: GraphQLSchema;
  server: Pick<GroupValues<typeof serverSettings>, 'graphiql' | 'introspection' | 'corsOrigins'>;
  limits: GroupValues<typeof limitSettings>;
  /** NODE_ENV=production: field suggestions hidden. */
  production: boolean;
  logger: Logger;
  metrics: GatewayMetrics;
  /** The request pipeline both lanes run. */
  pipeline: RequestPipeline;
  readiness: ReadinessPluginOptions;
  /** The GraphQL context of an operation. */
  context: (operation: Operation) => GatewayContext;
  /** COMPRESSION_MIN_BYTES and the negotiation both paths share. */
  compression: Compression;
  /** Trusted documents: in enforce mode, GraphiQL's tabs are the manifest's documents. */
  trusted: TrustedDocuments;
}

export type GatewayYoga = YogaServerInstance<Record<string, unknown>, GatewayContext>;

export function createGatewayYoga(options: GatewayYogaOptions): GatewayYoga {
  const { server, logger } = options;
  return createYoga<Record<string, unknown>, GatewayContext>({
    schema: options.schema,
    graphqlEndpoint: GRAPHQL_ENDPOINT,
    // The self-hosted page below replaces Yoga's (inline, CSP-hostile) GraphiQL.
    graphiql: false,
    landingPage: false,
    // Only GraphQLErrors made on purpose (the codes of errors.ts) reach clients. Results are masked by
    // the pipeline's finish step; this masks what Yoga itself catches outside execution.
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
    plugins: [
      useQueryMethod({ endpoint: GRAPHQL_ENDPOINT }),
      useMetricsEndpoint({ metrics: options.metrics }),
      useReadiness(options.readiness),
      server.graphiql
        ? useSelfHostedGraphiQL({
            endpoint: GRAPHQL_ENDPOINT,
            title: 'null-pi gateway',
            logger,
            // Enforcing a manifest, only its documents run (their exact text): they are the tabs.
            tabs: () =>
              options.trusted.mode === 'enforce'
                ? options.trusted.documents.map((query) => ({ query }))
                : undefined,
          })
        : useGraphiQLOff({ endpoint: GRAPHQL_ENDPOINT }),
      useCsrfPrevention(),
      useRequestShapeErrors(),
      ...validationPlugins({
        limits: options.limits,
        introspection: server.introspection,
        hideSuggestions: options.production,
      }),
      useRequestPipeline({
        pipeline: options.pipeline,
        batching: options.limits.batchLimit > 0,
      }),
      // Last: it compresses the final response, headers included.
      useCompression({ compression: options.compression }),
    ],
    // The pipeline put the operation on the initial context (onParams runs before the context is built).
    context: (initial) => options.context((initial as unknown as { operation: Operation }).operation),
  });
}
