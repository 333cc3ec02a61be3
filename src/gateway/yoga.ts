/**
 * The gateway as a Yoga server instance (it never listens: src/main.ts and the tests do).
 *
 * Everything that can be decided once is decided here, at creation: the schema is built at import,
 * limits and feature switches are read from the config once, and per request only a small context
 * (lazily filled) and a request id are made.
 */
import { EnvelopArmor } from '@escape.tech/graphql-armor';
import {
  type ASTVisitor,
  type DocumentNode,
  Kind,
  type OperationDefinitionNode,
  print,
  type SelectionSetNode,
  type ValidationContext,
} from 'graphql';
import {
  type CORSOptions,
  createGraphQLError,
  createYoga,
  type Plugin,
  type YogaLogger,
  type YogaServerInstance,
} from 'graphql-yoga';
import type { AppConfig } from '../config.js';
import type { DigitEngine } from '../digits/digit-engine.js';
import type { Logger } from '../shared/logger.js';
import { useResponseCacheExtensions } from './cache/cache-plugin.js';
import { createResponseCache } from './cache/response-cache.js';
import { apiKeyFrom, createGatewayContext, type GatewayContext, requestIdFrom } from './context.js';
import { createObservability, type GatewayObservability } from './observability/create-observability.js';
import {
  armorRejection,
  useGatewayCsrfPrevention,
  useRequestErrorCodes,
  useRequestShapeErrors,
} from './plugins/http-guards.js';
import { useSelfHostedGraphiQL } from './plugins/use-graphiql.js';
import { useReadiness } from './plugins/use-readiness.js';
import { schema } from './schema/index.js';
import type { UpstreamClients } from './upstream/types.js';

export interface GatewayOptions {
  clients: UpstreamClients;
  digits: DigitEngine;
  /** src/config.ts loadConfig() result. */
  config: AppConfig;
  logger: Logger;
  /**
   * Extra Yoga/envelop plugins (metrics, caching, ...), registered after the gateway's own.
   * @default []
   */
  plugins?: GatewayPlugin[];
  /**
   * Operation log line, /metrics, tracing and sponsor logging (src/observability). Pass the instance
   * whose `onCall` the upstream clients were given, so per-attempt upstream metrics land here too.
   * @default createObservability({ config, logger })
   */
  observability?: GatewayObservability;
}

export type Gateway = YogaServerInstance<Record<string, unknown>, GatewayContext>;

/** A plugin the gateway accepts: a plain Yoga plugin, or one that reads the gateway context. */
export type GatewayPlugin = Plugin | Plugin<GatewayContext & Record<string, unknown>>;

/** The GraphQL endpoint (contract §1). */
export const GRAPHQL_ENDPOINT = '/graphql';

/**
 * The digit engine serves at most this many places by default (src/digits/digit-engine.ts), so
 * `correctDigits` compares at most this many even when MAX_DIGITS allows more.
 */
const ENGINE_MAX_DIGITS = 1_000_000;

// --- request id ----------------------------------------------------------------------------------

/**
 * Every response carries `x-request-id`: decided in onRequest (so even a 404 or a parse error gets
 * one), read by the context factory, set in onResponse.
 */
function useRequestId(requestIds: WeakMap<Request, string>): Plugin {
  return {
    onRequest({ request }) {
      requestIds.set(request, requestIdFrom(request.headers));
    },
    onResponse({ request, response }) {
      const id = requestIds.get(request);
      if (id !== undefined) response.headers.set('x-request-id', id);
    },
  };
}

// --- operation limits ----------------------------------------------------------------------------

/** Root fields that call an upstream, and how many calls each distinct use makes. */
const UPSTREAM_FIELDS: Record<string, number> = { isNull: 1, pi: 1, inference: 1, health: 2 };

/**
 * Distinct upstream calls an operation can make: root fields counted once per distinct
 * (name, printed arguments), as the per-request dataloaders dedupe them. Variables count by name, not
 * value: an upper bound that never needs to look at (possibly huge) variable values.
 */
export function countUpstreamCalls(document: DocumentNode, operationName?: string | null): number {
  const fragments = new Map<string, SelectionSetNode>();
  let operation: OperationDefinitionNode | undefined;
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION)
      fragments.set(definition.name.value, definition.selectionSet);
    else if (definition.kind === Kind.OPERATION_DEFINITION) {
      if (operationName ? definition.name?.value === operationName : operation === undefined)
        operation = definition;
    }
  }
  if (operation?.operation !== 'query') return 0;
  const keys = new Set<string>();
  let calls = 0;
  const pending: SelectionSetNode[] = [operation.selectionSet];
  const seenFragments = new Set<string>();
  while (pending.length > 0) {
    for (const selection of (pending.pop() as SelectionSetNode).selections) {
      if (selection.kind === Kind.FIELD) {
        const cost = UPSTREAM_FIELDS[selection.name.value];
        if (cost === undefined) continue;
        const args = (selection.arguments ?? [])
          .map((a) => `${a.name.value}:${print(a.value)}`)
          .sort()
          .join(',');
        const key = `${selection.name.value}(${args})`;
        if (!keys.has(key)) {
          keys.add(key);
          calls += cost;
        }
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        pending.push(selection.selectionSet);
      } else {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (fragment && !seenFragments.has(name)) {
          seenFragments.add(name);
          pending.push(fragment);
        }
      }
    }
  }
  return calls;
}

/** Refuses, before any upstream call, an operation that would make more than `max` upstream calls. */
function useUpstreamCallLimit(max: number): Plugin {
  // Documents come from Yoga's parse cache, so the same object repeats: count each once.
  const counted = new WeakMap<DocumentNode, Map<string, number>>();
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const name = args.operationName ?? '';
      let perName = counted.get(args.document);
      if (!perName) {
        perName = new Map();
        counted.set(args.document, perName);
      }
      let calls = perName.get(name);
      if (calls === undefined) {
        calls = countUpstreamCalls(args.document, args.operationName);
        perName.set(name, calls);
      }
      if (calls > max) {
        setResultAndStopExecution({
          errors: [
            createGraphQLError(
              `This operation would make ${calls} distinct upstream calls; at most ${max} are allowed (MAX_UPSTREAM_CALLS).`,
              {
                // `spec`: 400 for application/graphql-response+json (a result without data must not be
                // 200), 200 for legacy application/json, as Yoga does for validation errors.
                extensions: {
                  code: 'BAD_USER_INPUT',
                  upstreamCalls: calls,
                  limit: max,
                  http: { status: 400, spec: true },
                },
              },
            ),
          ],
        });
      }
    },
  };
}

/**
 * graphql-js's own token limit in the parser (no Proxy per token, unlike graphql-armor's), and a clear
 * error for documents nested so deeply that the recursive-descent parser runs out of stack before
 * reaching the token limit (a `[[[[...` literal of ~1500 levels fits in 2000 tokens).
 *
 * Why wrap the engine's `parseFn` instead of importing graphql's `parse`: the engine's is the copy of
 * graphql-js Yoga uses; a second copy (ESM vs CJS, as under vitest) makes its syntax errors foreign
 * to Yoga's `instanceof GraphQLError` and they would be masked.
 */
type ParseFn = Parameters<NonNullable<Plugin['onParse']>>[0]['parseFn'];

function useParseLimits(maxTokens: number): Plugin {
  let wrapped: ParseFn | undefined;
  let wrapping: ParseFn | undefined;
  return {
    onParse({ parseFn, setParseFn }) {
      if (wrapping !== parseFn || !wrapped) {
        wrapping = parseFn;
        wrapped = (source, options) => {
          try {
            return parseFn(source, { ...options, maxTokens });
          } catch (error) {
            if (!(error instanceof RangeError)) throw error;
            // A stack overflow: the stack has unwound by now, and the half-built document is discarded.
            throw createGraphQLError('The document is nested too deeply to parse.', {
              extensions: { code: 'BAD_USER_INPUT' },
            });
          }
        };
      }
      setParseFn(wrapped);
    },
  };
}

/**
 * Refuses `__schema` and `__type` (introspection off). Own rule rather than graphql-js's
 * NoSchemaIntrospectionCustomRule, which checks types by `instanceof` and so breaks across two copies
 * of graphql-js; the field names are all that matters here.
 */
function useDisabledIntrospection(): Plugin {
  const rule = (context: ValidationContext): ASTVisitor => ({
    Field(node) {
      const name = node.name.value;
      if (name === '__schema' || name === '__type') {
        context.reportError(
          createGraphQLError(`GraphQL introspection is disabled, but the query contained ${name}.`, {
            nodes: [node],
            extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
          }),
        );
      }
    },
  });
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(rule);
    },
  };
}

/** A 413 in Yoga's own shape (code and HTTP status), so clients see the same error either way. */
function bodyTooLarge(limit: number) {
  return createGraphQLError(`Request body too large (at most ${limit} bytes).`, {
    // `connection: close`: the rest of the body is never read, so the socket cannot serve another
    // request; Node closes it once the 413 is sent.
    extensions: { http: { status: 413, headers: { connection: 'close' } }, code: 'REQUEST_ENTITY_TOO_LARGE' },
  });
}

async function readLimited(body: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      // Released, not cancelled: cancelling destroys the request and with it the socket, and the
      // client would get a reset instead of the 413. The rest is left unread; the 413's
      // `connection: close` ends the socket once the answer is out.
      reader.releaseLock();
      throw bodyTooLarge(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * MAX_REQUEST_BODY_BYTES. Why not Yoga's `maxRequestBodySize`: it pipes every body through a
 * TransformStream and a new Request (a few percent of a request's CPU), even when a valid
 * Content-Length already bounds it. Node's HTTP parser never delivers more body than Content-Length
 * announces, so that header alone is enough; only bodies without it (chunked) are read with a cap.
 */
function useRequestBodyLimit(limit: number): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser, fetchAPI }) {
      const contentLength = request.headers.get('content-length');
      if (contentLength !== null) {
        if (!/^\d+$/.test(contentLength)) {
          throw createGraphQLError('Content-Length header is invalid.', {
            extensions: { http: { status: 400 }, code: 'BAD_REQUEST' },
          });
        }
        if (Number(contentLength) > limit) throw bodyTooLarge(limit);
        return;
      }
      if (!requestParser || !request.body) return;
      const parse = requestParser;
      setRequestParser(async (req) => {
        const body = req.body ? await readLimited(req.body, limit) : null;
        return parse(
          new fetchAPI.Request(req.url, {
            method: req.method,
            headers: req.headers,
            body: body as Uint8Array<ArrayBuffer> | null,
          }),
        );
      });
    },
  };
}

/** Releases the operation deadline timer as soon as execution is over. */
function useContextDisposal(): Plugin<GatewayContext & Record<string, unknown>> {
  return {
    onExecute() {
      return {
        onExecuteDone({ args }) {
          args.contextValue.operation?.dispose();
        },
      };
    },
  };
}

// --- logging -------------------------------------------------------------------------------------

/** Yoga's logger interface onto pino. Yoga logs masked (unexpected) errors through `error`. */
function yogaLogger(logger: Logger): YogaLogger {
  const forward =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (...args: unknown[]) => {
      const [first, ...rest] = args;
      if (first instanceof Error) logger[level]({ err: first }, rest.map(String).join(' ') || first.message);
      else logger[level](args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' '));
    };
  return { debug: forward('debug'), info: forward('info'), warn: forward('warn'), error: forward('error') };
}

function corsOptions(origins: string | undefined): CORSOptions | false {
  if (origins === undefined) return false; // same-origin only: no CORS headers at all
  const list = origins
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  return {
    origin: list.includes('*') ? '*' : list,
    // API keys travel in headers, never cookies: credentials are never needed.
    credentials: false,
    methods: ['GET', 'POST', 'OPTIONS'],
    allowedHeaders: ['content-type', 'accept', 'authorization', 'x-api-key', 'x-request-id'],
    exposedHeaders: ['x-request-id'],
    maxAge: 600,
  };
}

/** Builds the gateway. Never listens: pass it to `http.createServer` (or call `fetch` in tests). */
export function createGateway(options: GatewayOptions): Gateway {
  const { digits, config, logger } = options;
  const observability = options.observability ?? createObservability({ config, logger });
  // Innermost wrapper around the clients: it sees every real upstream answer (cost, sponsor, status).
  const instrumented = observability.instrumentClients(options.clients);
  // RESPONSE_CACHE: the deterministic-answer cache wraps the instrumented clients (src/cache), so the
  // observability wrapper still sees only real upstream answers.
  const responseCache = config.cache.responseCache
    ? createResponseCache({
        ttlMs: config.cache.responseCacheTtlMs,
        maxEntries: config.cache.responseCacheMaxEntries,
        registry: observability.registry,
        onSaved: (upstream, source) => observability.recordDedupHit(upstream, source),
      })
    : undefined;
  const clients = responseCache ? responseCache.decorate(instrumented) : instrumented;
  const production = config.process.nodeEnv === 'production';
  const graphiql = config.server.graphiql ?? !production;
  const introspection = config.server.introspection ?? !production;
  const requestIds = new WeakMap<Request, string>();
  const contextDeps = {
    clients,
    digits,
    logger,
    operationDeadlineMs: config.resilience.operationDeadlineMs,
    dedupHits: {
      nullCheck: observability.dedupHitCounter('null-check', 'dataloader'),
      pi: observability.dedupHitCounter('pi-digits', 'dataloader'),
      inference: observability.dedupHitCounter('pi-digits', 'dataloader'),
    },
    limits: {
      maxDigits: config.limits.maxDigits,
      maxCompareDigits: Math.min(config.limits.maxDigits, ENGINE_MAX_DIGITS),
      maxJsonDepth: config.limits.maxJsonDepth,
      maxJsonBytes: config.limits.maxJsonBytes,
    },
  };

  const armor = new EnvelopArmor({
    maxDepth: { n: config.limits.maxDepth, ignoreIntrospection: true, ...armorRejection },
    maxAliases: { n: config.limits.maxAliases, ...armorRejection },
    maxDirectives: { n: config.limits.maxDirectives, ...armorRejection },
    // Tokens are limited by graphql-js's own parser option (useParseLimits): no Proxy per token.
    maxTokens: { enabled: false },
    // MAX_UPSTREAM_CALLS is this gateway's real cost measure.
    costLimit: { enabled: false },
    blockFieldSuggestion: { enabled: production },
  }).protect();

  const plugins: GatewayPlugin[] = [
    useRequestId(requestIds),
    // The id also reaches the log line of operations rejected before the context (and its id) exists.
    observability.createPlugin({ getRequestId: (request) => requestIds.get(request) }),
    ...(graphiql
      ? [useSelfHostedGraphiQL({ endpoint: GRAPHQL_ENDPOINT, title: 'null-pi gateway', logger })]
      : []),
    useReadiness({ clients }),
    useGatewayCsrfPrevention(),
    useRequestShapeErrors(),
    useRequestBodyLimit(config.limits.maxRequestBodyBytes),
    useParseLimits(config.limits.maxTokens),
    ...(armor.plugins as Plugin[]),
    ...(introspection ? [] : [useDisabledIntrospection()]),
    useUpstreamCallLimit(config.limits.maxUpstreamCalls),
    useContextDisposal(),
    useRequestErrorCodes(),
    // After the observability plugin: it adds cached answers' sponsors to extensions.sponsoredBy.
    ...(responseCache ? [useResponseCacheExtensions(responseCache)] : []),
    ...(options.plugins ?? []),
  ];

  return createYoga<Record<string, unknown>, GatewayContext>({
    schema,
    graphqlEndpoint: GRAPHQL_ENDPOINT,
    // The self-hosted page above replaces Yoga's (inline, CDN-free but CSP-hostile) GraphiQL.
    graphiql: false,
    landingPage: false,
    // Never `false`: only GraphQLErrors made on purpose (codes of contract §2) reach clients.
    maskedErrors: { isDev: false },
    // Enforced by useRequestBodyLimit (cheaper for bodies with a Content-Length).
    maxRequestBodySize: false,
    cors: corsOptions(config.server.corsOrigins),
    logging: yogaLogger(logger),
    plugins,
    context: ({ request }) =>
      createGatewayContext(contextDeps, {
        apiKey: apiKeyFrom(request.headers),
        requestId: requestIds.get(request) ?? requestIdFrom(request.headers),
        signal: request.signal,
      }),
  });
}
