/**
 * The members of a graphql-yoga 5.24.1 server instance the fast path drives. They are reachable on
 * the instance (the server adapter forwards property reads to the YogaServer) but typed `private` or
 * `protected`; this module is the one place that reads them, and checks at start-up that they are
 * all there, so an upgrade of graphql-yoga that changes them turns the fast path off instead of
 * breaking it (`npm run bench` and test/integration/fast-path-*.test.ts would show it).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExecutionResult, GraphQLError } from 'graphql';

export type MaybePromise<T> = T | Promise<T>;

/** What Yoga calls the server context: the node request and response, and `waitUntil`. */
export interface FastServerContext {
  req: IncomingMessage;
  res: ServerResponse;
  waitUntil: (promise: Promise<unknown> | unknown) => void;
}

/** The HTTP-level hooks (those envelop does not run) of one plugin, loosely typed on purpose. */
export interface HttpHooks {
  onRequest?: (payload: Record<string, unknown>) => unknown;
  onResponse?: (payload: Record<string, unknown>) => unknown;
  instrumentation?: unknown;
}

export type ResultProcessor = (result: unknown, fetchAPI: unknown, acceptedMediaType: string) => unknown;

export interface ResultProcessHookPayload {
  request: unknown;
  acceptableMediaTypes: string[];
  result: unknown;
  setResult(result: unknown): void;
  resultProcessor: ResultProcessor | undefined;
  setResultProcessor(processor: ResultProcessor, acceptedMediaType: string): void;
  serverContext: FastServerContext;
}

export interface MaskedErrorsOptions {
  errorMessage: string;
  isDev?: boolean;
  maskError: (error: unknown, message: string, isDev?: boolean) => Error;
}

export interface YogaLoggerLike {
  debug(...args: unknown[]): void;
  error(...args: unknown[]): void;
}

/** The YogaServer members used, bound to the instance where they are methods. */
export interface YogaInternals {
  /** Yoga's request parsing: every onRequestParse hook, the chosen parser, onRequestParseDone. */
  parseRequest(
    request: unknown,
    serverContext: FastServerContext,
  ): MaybePromise<{ response?: unknown; requestParserResult?: unknown }>;
  /** onParams hooks, the envelop pipeline (parse, validate, context, execute), onExecutionResult hooks. */
  getResultForParams(
    payload: { params: unknown; request: unknown },
    context: object,
  ): MaybePromise<ExecutionResult | AsyncIterable<ExecutionResult>>;
  onResultProcessHooks: Array<(payload: ResultProcessHookPayload) => unknown>;
  maskedErrorsOpts: MaskedErrorsOptions | null;
  logger: YogaLoggerLike;
  /** Every plugin, Yoga's own included, in order (the list the server adapter reads onRequest/onResponse from). */
  plugins: Array<HttpHooks | undefined | null | false>;
  fetchAPI: { Request: typeof Request; Response: typeof Response; URL: typeof URL } & Record<string, unknown>;
  waitUntil: FastServerContext['waitUntil'];
  /** Yoga's own node request listener (the slow, complete path). */
  requestListener(req: IncomingMessage, res: ServerResponse): unknown;
  /** Yoga's Fetch handler: runs the whole pipeline, HTTP hooks included, on a real Request. */
  handleRequest(request: Request, serverContext: FastServerContext): MaybePromise<Response>;
  graphqlEndpoint: string;
}

/** The instance's internals, or the reason they cannot be used. */
export function yogaInternals(yoga: unknown): YogaInternals | string {
  // Reads through the adapter's Proxy; functions come back bound (wrapped) to the instance.
  const y = yoga as Record<string, unknown>;
  const functions = ['parseRequest', 'getResultForParams', 'requestListener', 'handleRequest', 'waitUntil'];
  for (const name of functions) {
    if (typeof y[name] !== 'function') return `graphql-yoga instance has no ${name}()`;
  }
  if (!Array.isArray(y.onResultProcessHooks)) return 'graphql-yoga instance has no onResultProcessHooks';
  if (!Array.isArray(y.plugins)) return 'graphql-yoga instance has no plugins list';
  if (typeof y.logger !== 'object' || y.logger === null) return 'graphql-yoga instance has no logger';
  if (typeof y.fetchAPI !== 'object' || y.fetchAPI === null) return 'graphql-yoga instance has no fetchAPI';
  if (typeof y.graphqlEndpoint !== 'string') return 'graphql-yoga instance has no graphqlEndpoint';
  return {
    parseRequest: y.parseRequest as YogaInternals['parseRequest'],
    getResultForParams: y.getResultForParams as YogaInternals['getResultForParams'],
    onResultProcessHooks: y.onResultProcessHooks as YogaInternals['onResultProcessHooks'],
    maskedErrorsOpts: (y.maskedErrorsOpts ?? null) as YogaInternals['maskedErrorsOpts'],
    logger: y.logger as YogaLoggerLike,
    plugins: y.plugins as YogaInternals['plugins'],
    fetchAPI: y.fetchAPI as YogaInternals['fetchAPI'],
    waitUntil: y.waitUntil as YogaInternals['waitUntil'],
    requestListener: y.requestListener as YogaInternals['requestListener'],
    handleRequest: y.handleRequest as YogaInternals['handleRequest'],
    graphqlEndpoint: y.graphqlEndpoint as string,
  };
}

export type { GraphQLError };
