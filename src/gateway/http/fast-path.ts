/**
 * The gateway's node:http request listener: the common case, a GraphQL POST with a JSON body, runs
 * on a lean adapter; everything else goes to Yoga's own handler, unchanged.
 *
 * Why: measured on this project, a request through Yoga's node adapter costs ~4× what the same
 * envelop pipeline costs behind a lean adapter; the difference is the Fetch layer (a Request with a
 * stream body and an AbortController per call, Headers copies, a Response object, promise chains),
 * not GraphQL.
 *
 * What stays the same: the fast path drives the SAME Yoga instance, with the same plugins, through
 * the same code, only with light request/response objects (light-request.ts, light-response.ts):
 *   1. every plugin's `onRequest` hook (request id, /metrics, CORS, GraphiQL, anything added later);
 *   2. Yoga's `parseRequest`: every `onRequestParse` hook (body limit, method check, CSRF, the JSON
 *      parser, batching and params checks);
 *   3. Yoga's `getResultForParams`: `onParams` hooks, the envelop pipeline (parse and validation
 *      caches, limits, masking, context, execute), `onExecutionResult` hooks (observability);
 *   4. Yoga's `onResultProcess` hooks and result processor (status code, content type, serialization);
 *   5. every plugin's `onResponse` hook (x-request-id, CORS headers).
 * Steps 2-4 follow graphql-yoga 5.24.1's `YogaServer.handle`/`processResult` line by line (the
 * error handling included); test/integration/fast-path-*.test.ts compares both paths answer by answer.
 *
 * Which requests take it (`isFastPathRequest`): HTTP/1.x POST to exactly the GraphQL endpoint (no
 * query string), `Content-Type: application/json`, a `Content-Length` no larger than the body limit
 * and no `Transfer-Encoding`, an `Accept` that asks for no streaming answer (no text/event-stream,
 * no multipart/mixed), and a Host header. The fast path is off altogether when a plugin uses
 * `instrumentation` (Yoga's tracing API), which it does not replicate.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createGraphQLError } from 'graphql-yoga';
import { LightRequest } from './light-request.js';
import { LightResponse } from './light-response.js';
import {
  type FastServerContext,
  type GraphQLError,
  type HttpHooks,
  type ResultProcessor,
  type YogaInternals,
  yogaInternals,
} from './yoga-internals.js';

export interface GatewayRequestListenerOptions {
  /**
   * Largest body the fast path reads (MAX_REQUEST_BODY_BYTES); larger requests go to Yoga's handler,
   * which refuses them with 413 through the same body-limit plugin.
   */
  maxBodyBytes: number;
  /**
   * Serve eligible requests on the fast path (HTTP_FAST_PATH). Off: every request goes to Yoga's handler.
   * @default true
   */
  enabled?: boolean;
  /** Told once, at creation, why the fast path is off when it cannot be used. */
  onDisabled?: (reason: string) => void;
}

/** A Yoga server instance, as far as this module's signature needs it (a node request listener). */
export type YogaNodeHandler = (req: IncomingMessage, res: ServerResponse) => unknown;

/** A node:http listener, plus whether it serves anything on the fast path. */
export interface GatewayRequestListener {
  (req: IncomingMessage, res: ServerResponse): void;
  /** Whether eligible requests take the fast path at all. */
  readonly fastPath: boolean;
  /** Requests served so far by each path (tests and operators can see which path answered). */
  readonly served: { fast: number; yoga: number };
}

// Yoga's own error class (its copy of graphql-js), so `instanceof` agrees with Yoga's checks even when a
// second copy of graphql-js is loaded (ESM and CJS, as under vitest).
const YogaGraphQLError = createGraphQLError('probe').constructor as new (...args: never[]) => GraphQLError;

const isPromise = (value: unknown): value is PromiseLike<unknown> =>
  value !== null &&
  (typeof value === 'object' || typeof value === 'function') &&
  typeof (value as { then?: unknown }).then === 'function';

/** A request that a plugin wants as a real Request (setRequest/setRequestHandler): Yoga serves it. */
class NeedsYoga extends Error {}

/** Cheap header checks only; see the module comment. */
export function isFastPathRequest(req: IncomingMessage, endpoint: string, maxBodyBytes: number): boolean {
  if (req.method !== 'POST' || req.url !== endpoint || req.httpVersionMajor !== 1) return false;
  const headers = req.headers;
  const contentType = headers['content-type'];
  if (
    contentType === undefined ||
    !(contentType === 'application/json' || contentType.startsWith('application/json;'))
  )
    return false;
  const contentLength = headers['content-length'];
  if (contentLength === undefined || headers['transfer-encoding'] !== undefined) return false;
  if (!/^\d{1,15}$/.test(contentLength) || Number(contentLength) > maxBodyBytes) return false;
  const accept = headers.accept;
  if (accept !== undefined && (accept.includes('event-stream') || accept.includes('multipart'))) return false;
  return headers.host !== undefined;
}

function readBody(req: IncomingMessage, length: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
    });
    req.once('end', () => {
      if (size !== length) reject(new Error('body shorter than Content-Length'));
      else resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    });
    req.once('error', reject);
  });
}

/** Writes a real Fetch Response (an early answer of a plugin, a streaming body) to node's response. */
async function sendFetchResponse(response: Response, res: ServerResponse): Promise<void> {
  const headers: string[] = [];
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') headers.push(name, value);
  });
  for (const cookie of response.headers.getSetCookie?.() ?? []) headers.push('set-cookie', cookie);
  res.writeHead(response.status, response.statusText || undefined, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    if (res.destroyed) return;
    if (!res.write(chunk)) await new Promise((resolve) => res.once('drain', resolve));
  }
  res.end();
}

function sendResponse(response: unknown, res: ServerResponse): void | Promise<void> {
  if (res.closed || res.destroyed || res.writableEnded) return;
  if (response instanceof LightResponse) {
    if (response.isLight) {
      response.writeTo(res);
      return;
    }
    return sendFetchResponse(response.toResponse(), res);
  }
  if (response === undefined || response === null) {
    res.statusCode = 404;
    res.end();
    return;
  }
  return sendFetchResponse(response as Response, res);
}

/** The fast path over one Yoga instance. */
class FastPath {
  readonly #yoga: YogaInternals;
  readonly #onRequest: NonNullable<HttpHooks['onRequest']>[];
  readonly #onResponse: NonNullable<HttpHooks['onResponse']>[];
  /** Yoga's fetchAPI with the light Response, for the result processor only. */
  readonly #resultFetchAPI: Record<string, unknown>;

  constructor(yoga: YogaInternals) {
    this.#yoga = yoga;
    const plugins = yoga.plugins.filter((p): p is HttpHooks => typeof p === 'object' && p !== null);
    this.#onRequest = plugins.flatMap((p) => (p.onRequest ? [p.onRequest] : []));
    this.#onResponse = plugins.flatMap((p) => (p.onResponse ? [p.onResponse] : []));
    this.#resultFetchAPI = { ...yoga.fetchAPI, Response: LightResponse };
  }

  async serve(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    const yoga = this.#yoga;
    const serverContext: FastServerContext = { req, res, waitUntil: yoga.waitUntil };
    const url = `http://${req.headers.host}${req.url}`;
    const request = new LightRequest(req, res, url, body);
    let response: unknown;
    try {
      response = await this.#handle(request, serverContext);
    } catch (error) {
      if (!(error instanceof NeedsYoga)) throw error;
      // A plugin wants a real Request: Yoga serves it, hooks and all (they run a second time).
      response = await yoga.handleRequest(request.toRequest(yoga.fetchAPI.Request), serverContext);
    }
    await sendResponse(response, res);
  }

  /** The server adapter's handleRequest: onRequest hooks, Yoga's handle, onResponse hooks. */
  async #handle(request: LightRequest, serverContext: FastServerContext): Promise<unknown> {
    const fetchAPI = this.#yoga.fetchAPI;
    let response: unknown;
    let parsedUrl: URL | undefined;
    // Like the adapter: the URL is parsed only if a hook reads it (destructuring `url` does not).
    const url = new Proxy({} as URL, {
      get(_target, prop) {
        parsedUrl ??= new fetchAPI.URL(request.url, 'http://localhost');
        return Reflect.get(parsedUrl, prop, parsedUrl);
      },
    });
    const requestHandler = () => {
      throw new NeedsYoga();
    };
    for (const onRequest of this.#onRequest) {
      let stop = false;
      const result = onRequest({
        request,
        setRequest() {
          throw new NeedsYoga();
        },
        serverContext,
        fetchAPI,
        url,
        requestHandler,
        setRequestHandler() {
          throw new NeedsYoga();
        },
        endResponse(newResponse: unknown) {
          response = newResponse;
          if (newResponse) stop = true;
        },
      });
      if (isPromise(result)) await result;
      if (stop) break;
    }
    if (!response) response = await this.#yogaHandle(request, serverContext);
    for (const onResponse of this.#onResponse) {
      const result = onResponse({
        request,
        response,
        serverContext,
        setResponse(newResponse: unknown) {
          response = newResponse;
        },
        fetchAPI,
      });
      if (isPromise(result)) await result;
    }
    return response;
  }

  /** graphql-yoga 5.24.1 `YogaServer.handle` (without instrumentation, which disables the fast path). */
  async #yogaHandle(request: LightRequest, serverContext: FastServerContext): Promise<unknown> {
    const yoga = this.#yoga;
    try {
      let parsed = yoga.parseRequest(request, serverContext);
      if (isPromise(parsed)) parsed = await parsed;
      if (parsed.response) return parsed.response;
      const params = parsed.requestParserResult;
      let result: unknown;
      if (Array.isArray(params)) {
        result = await Promise.all(
          params.map((p: unknown) =>
            Promise.resolve()
              .then(() => yoga.getResultForParams({ params: p, request }, Object.create(serverContext)))
              .catch((error: unknown) => ({ errors: this.#handleError(error) })),
          ),
        );
      } else {
        result = await yoga.getResultForParams({ params, request }, serverContext);
      }
      return await this.#processResult(request, result, serverContext);
    } catch (error) {
      if (error instanceof NeedsYoga) throw error;
      return this.#processResult(request, { errors: this.#handleError(error) }, serverContext);
    }
  }

  /** graphql-yoga 5.24.1 `processResult`, with the light Response. */
  async #processResult(request: LightRequest, result: unknown, serverContext: FastServerContext) {
    let resultProcessor: ResultProcessor | undefined;
    const acceptableMediaTypes: string[] = [];
    let acceptedMediaType = '*/*';
    for (const hook of this.#yoga.onResultProcessHooks) {
      const done = hook({
        request,
        acceptableMediaTypes,
        result,
        setResult(newResult) {
          result = newResult;
        },
        resultProcessor,
        setResultProcessor(processor, mediaType) {
          resultProcessor = processor;
          acceptedMediaType = mediaType;
        },
        serverContext,
      });
      if (isPromise(done)) await done;
    }
    if (!resultProcessor) {
      return new LightResponse(null, {
        status: 406,
        statusText: 'Not Acceptable',
        headers: { accept: acceptableMediaTypes.join('; charset=utf-8, ') },
      });
    }
    return resultProcessor(result, this.#resultFetchAPI, acceptedMediaType);
  }

  /** graphql-yoga 5.24.1 `handleError`. */
  #handleError(error: unknown): GraphQLError[] {
    const errors = new Set<GraphQLError>();
    const yoga = this.#yoga;
    const masked = yoga.maskedErrorsOpts;
    if (error !== null && typeof error === 'object' && 'errors' in error) {
      for (const single of (error as { errors: unknown[] }).errors)
        for (const handled of this.#handleError(single)) errors.add(handled);
    } else if (
      typeof error === 'object' &&
      error?.constructor?.name === 'DOMException' &&
      ((error as Error).name === 'AbortError' || (error as Error).name === 'TimeoutError')
    ) {
      yoga.logger.debug('Request aborted');
    } else if (masked) {
      const maskedError = masked.maskError(error, masked.errorMessage, masked.isDev);
      if (maskedError !== error) yoga.logger.error(error);
      errors.add(
        maskedError instanceof YogaGraphQLError
          ? maskedError
          : createGraphQLError(maskedError.message, { originalError: maskedError }),
      );
    } else if (error instanceof YogaGraphQLError) {
      errors.add(error);
    } else if (error instanceof Error) {
      errors.add(createGraphQLError(error.message, { originalError: error }));
    } else if (typeof error === 'string') {
      errors.add(
        createGraphQLError(error, { extensions: { code: 'INTERNAL_SERVER_ERROR', unexpected: true } }),
      );
    } else if (error !== null && error !== undefined && typeof error.toString === 'function') {
      errors.add(
        createGraphQLError(String(error), {
          extensions: { code: 'INTERNAL_SERVER_ERROR', unexpected: true },
        }),
      );
    } else {
      yoga.logger.error(error);
      errors.add(createGraphQLError('Unexpected error.', { extensions: { unexpected: true } }));
    }
    return [...errors];
  }
}

/**
 * The listener `createServer` gets: eligible requests on the fast path, all others to Yoga's own
 * node listener. With `enabled: false`, or when the Yoga instance does not offer what the fast path
 * needs, every request goes to Yoga.
 */
export function createGatewayRequestListener(
  yoga: YogaNodeHandler,
  options: GatewayRequestListenerOptions,
): GatewayRequestListener {
  const internals = yogaInternals(yoga);
  let reason: string | undefined;
  if (options.enabled === false) reason = 'HTTP_FAST_PATH is off';
  else if (typeof internals === 'string') reason = internals;
  else if (internals.plugins.some((p) => typeof p === 'object' && p !== null && p.instrumentation))
    reason = 'a plugin uses instrumentation, which the fast path does not run';
  const served = { fast: 0, yoga: 0 };
  const slow = (req: IncomingMessage, res: ServerResponse) => {
    served.yoga++;
    yoga(req, res);
  };
  if (reason !== undefined || typeof internals === 'string') {
    if (options.enabled !== false) options.onDisabled?.(reason ?? 'unavailable');
    return Object.assign(slow, { fastPath: false, served });
  }

  const fast = new FastPath(internals);
  const endpoint = internals.graphqlEndpoint;
  const { maxBodyBytes } = options;
  const fail = (error: unknown, res: ServerResponse) => {
    internals.logger.error(error);
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    const body = JSON.stringify({ errors: [{ message: 'Unexpected error.' }] });
    res.writeHead(500, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    if (!isFastPathRequest(req, endpoint, maxBodyBytes)) {
      served.yoga++;
      yoga(req, res);
      return;
    }
    served.fast++;
    readBody(req, Number(req.headers['content-length'])).then(
      (body) => fast.serve(req, res, body).catch((error: unknown) => fail(error, res)),
      // The client went away mid-body: nobody to answer.
      () => res.destroy(),
    );
  };
  return Object.assign(listener, { fastPath: true, served });
}
