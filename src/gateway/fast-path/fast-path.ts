/**
 * The fast path: the common request (a JSON POST of a known, valid query to /graphql) served on
 * node:http directly, with graphql-js's `execute`, and answered byte for byte as Yoga's handler would
 * answer it; every other request goes to Yoga's handler, unchanged. Public APIs only: graphql-js,
 * Yoga's `getEnveloped` (validation rules of every plugin), `processRegularResult` (status and body)
 * and `maskError`, `handleRequest` for what it hands over.
 *
 * What it implements (and so what a new plugin must also be added to, in shared code, or make this
 * path step aside for: docs/performance.md): the request id, the API key, the cost cap and budget,
 * the operation limits (through prepared-operations.ts), masking, request error codes, the operation
 * report (extensions, log line, metrics, span) and cancellation when the client goes away.
 *
 * It steps aside for: any method, path, content type or Accept value it has not seen Yoga answer as
 * a plain JSON result, bodies without Content-Length or over the limit, HTTP/2, a body that is not a
 * plain `{ query, variables?, operationName?, extensions? }` object, batches, documents that fail
 * parsing, validation or the limits, a malformed X-Max-Cost-Usd, and everything when CORS is on.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExecutionResult, GraphQLError } from 'graphql';
import { createGraphQLError, maskError, processRegularResult, type YogaLogger } from 'graphql-yoga';
import type { Compression } from '../compression.js';
import type { GatewayContext } from '../context.js';
import type { CostControl } from '../cost/cost-control.js';
import type { OperationReporter } from '../observability/operation-report.js';
import { Operation } from '../operation.js';
import { withRequestErrorCodes } from '../plugins/use-request-error-codes.js';
import { apiKeyOf, MAX_COST_HEADER, maxCostOf, requestIdOf } from '../request-facts.js';
import type { TrustedDocuments } from '../trusted-documents.js';
import { type GatewayYoga, GRAPHQL_ENDPOINT, MASKED_MESSAGE } from '../yoga.js';
import type { PreparedOperation, PreparedOperations } from './prepared-operations.js';

export interface FastPathOptions {
  yoga: GatewayYoga;
  prepared: PreparedOperations;
  reporter: OperationReporter;
  costControl: CostControl;
  context: (operation: Operation) => GatewayContext;
  /** COMPRESSION_MIN_BYTES and the encoding negotiation, shared with Yoga's path (use-compression.ts). */
  compression: Compression;
  /** Trusted documents and persisted queries, shared with Yoga's path (use-trusted-documents.ts). */
  trusted: TrustedDocuments;
  /** Where masked errors are logged (the same logger Yoga uses). */
  logger: YogaLogger;
  /** MAX_REQUEST_BODY_BYTES. */
  maxBodyBytes: number;
  /** OPERATION_DEADLINE_MS. */
  deadlineMs: number;
  /** HTTP_FAST_PATH, and no CORS. @default true */
  enabled?: boolean;
}

export interface FastPath {
  /** Serves `req` when it is the common case and returns true; false leaves it to Yoga's handler. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Requests taken, and those handed to Yoga after reading their body (tests, operators). */
  readonly served: { fast: number; handedOver: number };
}

/** The media types a regular result is answered with; learnt per Accept value from Yoga's answers. */
type MediaType = 'application/json' | 'application/graphql-response+json';
const MAX_ACCEPT_VALUES = 64;

interface Params {
  query: string;
  variables: Record<string, unknown> | undefined;
  operationName: string | undefined;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The body as the fast path's parameters, or undefined when anything is unusual. A trusted document
 * (`documentId`, an APQ hash) is resolved to its text by the same rules as Yoga's path
 * (trusted-documents.ts); a refusal, or a lookup that would wait for Redis, goes to Yoga, which
 * answers it with those rules' error.
 */
function paramsOf(body: Buffer, trusted: TrustedDocuments): Params | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isPlainObject(json)) return undefined;
  for (const key in json) {
    if (
      key !== 'query' &&
      key !== 'variables' &&
      key !== 'operationName' &&
      key !== 'extensions' &&
      key !== 'documentId'
    )
      return undefined;
  }
  const { variables, operationName, extensions } = json;
  if (variables != null && !isPlainObject(variables)) return undefined;
  if (operationName != null && typeof operationName !== 'string') return undefined;
  if (extensions != null && !isPlainObject(extensions)) return undefined;
  let query = json.query;
  if (trusted.involves(json)) {
    // Not counted yet (log mode): the request may still go to Yoga, which resolves it again.
    const resolved = trusted.resolve(json, false);
    if (isPromise(resolved) || resolved instanceof Error) return undefined;
    query = resolved.query;
  }
  if (typeof query !== 'string' || query === '') return undefined;
  return {
    query,
    variables: variables == null ? undefined : variables,
    operationName: operationName == null ? undefined : operationName,
  };
}

/** The answer `processRegularResult` builds, as plain data (it only ever calls `new Response(body, init)`). */
class PlainResponse {
  constructor(
    readonly body: string,
    readonly init: { status: number; headers: Record<string, string> },
  ) {}
}
const PLAIN_FETCH = { Response: PlainResponse } as unknown as Parameters<typeof processRegularResult>[1];

/**
 * Errors of a result without data were raised before any field ran (variables that do not coerce):
 * the executor Yoga uses (@graphql-tools/executor) answers those with HTTP 400 whatever the media
 * type; graphql-js's does not say. The same status on both paths.
 */
function asRequestErrors(result: ExecutionResult): ExecutionResult {
  if ('data' in result || result.errors === undefined) return result;
  return {
    errors: result.errors.map((error) =>
      createGraphQLError(error.message, {
        nodes: error.nodes,
        source: error.source,
        positions: error.positions,
        path: error.path,
        originalError: error.originalError ?? undefined,
        extensions: {
          ...error.extensions,
          http: { ...(error.extensions?.http as object | undefined), status: 400 },
        },
      }),
    ),
  };
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> =>
  typeof (value as { then?: unknown } | null)?.then === 'function';

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

/** Writes a Fetch Response (Yoga's answer to a handed-over request) to node's response. */
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

export function createFastPath(options: FastPathOptions): FastPath {
  const { yoga, prepared, reporter, costControl, compression, trusted, logger, maxBodyBytes, deadlineMs } =
    options;
  const served = { fast: 0, handedOver: 0 };
  const mediaTypes = new Map<string, MediaType>();

  const eligible = (req: IncomingMessage): boolean => {
    if (req.method !== 'POST' || req.url !== GRAPHQL_ENDPOINT || req.httpVersionMajor !== 1) return false;
    const headers = req.headers;
    const contentType = headers['content-type'];
    if (contentType !== 'application/json' && !contentType?.startsWith('application/json;')) return false;
    const contentLength = headers['content-length'];
    if (
      contentLength === undefined ||
      headers['transfer-encoding'] !== undefined ||
      headers.host === undefined
    )
      return false;
    if (!/^\d{1,15}$/.test(contentLength) || Number(contentLength) > maxBodyBytes) return false;
    return mediaTypes.size < MAX_ACCEPT_VALUES || mediaTypes.has(headers.accept ?? '');
  };

  /** Yoga answers a request whose body was read already; its media type choice is learnt. */
  const handOver = async (req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> => {
    served.handedOver++;
    const headers: Array<[string, string]> = [];
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.push([name, v]);
    }
    // A Request built here has no signal of its own, so a client that went away would not cancel
    // the operation's upstream calls (useOperation listens to request.signal): abort it ourselves,
    // as the fast path and Yoga's own node adapter do. Only on this slow path: the cost is one
    // AbortController per handed-over request.
    const gone = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) gone.abort(new Error('client went away'));
    });
    const request = new yoga.fetchAPI.Request(`http://${req.headers.host}${req.url}`, {
      method: 'POST',
      headers,
      body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) as Uint8Array<ArrayBuffer>,
      signal: gone.signal,
    });
    const response = await yoga.handleRequest(request, { req, res });
    const type = response.headers.get('content-type')?.split(';', 1)[0];
    const accept = req.headers.accept ?? '';
    if (
      (type === 'application/json' || type === 'application/graphql-response+json') &&
      mediaTypes.size < MAX_ACCEPT_VALUES
    )
      mediaTypes.set(accept, type);
    await sendFetchResponse(response, res);
  };

  const masked = (result: ExecutionResult): ExecutionResult => {
    const errors = result.errors;
    if (errors === undefined) return result;
    let changed = false;
    const out = errors.map((error) => {
      const replaced = maskError(error, MASKED_MESSAGE, false) as GraphQLError;
      if (replaced !== error) {
        changed = true;
        logger.error(error);
      }
      return replaced;
    });
    return changed ? { ...result, errors: out } : result;
  };

  const answer = (
    req: IncomingMessage,
    res: ServerResponse,
    operation: Operation,
    result: ExecutionResult,
    media: MediaType,
  ): void | Promise<void> => {
    const response = processRegularResult(
      reporter.finish(operation, withRequestErrorCodes(masked(result))),
      PLAIN_FETCH,
      media,
    ) as unknown as PlainResponse;
    if (res.destroyed || res.writableEnded) return;
    const headers: Record<string, string | number> = {};
    for (const [name, value] of Object.entries(response.init.headers)) headers[name.toLowerCase()] = value;
    const length = Buffer.byteLength(response.body);
    headers['x-request-id'] = operation.requestId;
    // Small answers (the common case) are written at once: no zlib, no copy (compression.ts).
    const large = length >= compression.minBytes;
    if (large) headers.vary = 'Accept-Encoding';
    const encoding = large ? compression.encodingFor(req.headers['accept-encoding']) : undefined;
    if (encoding === undefined) {
      headers['content-length'] = length;
      res.writeHead(response.init.status, headers);
      res.end(response.body);
      return;
    }
    return compression.compress(Buffer.from(response.body), encoding).then((compressed) => {
      if (res.destroyed || res.writableEnded) return;
      headers['content-encoding'] = encoding;
      headers['content-length'] = compressed.length;
      res.writeHead(response.init.status, headers);
      res.end(compressed);
    });
  };

  const run = (
    req: IncomingMessage,
    res: ServerResponse,
    operation: Operation,
    ready: PreparedOperation,
    params: Params,
    media: MediaType,
  ): void | Promise<void> => {
    const result = ready.execute(options.context(operation), params.variables);
    if (!isPromise(result)) return answer(req, res, operation, asRequestErrors(result), media);
    return result.then((resolved) => answer(req, res, operation, asRequestErrors(resolved), media));
  };

  const serve = (req: IncomingMessage, res: ServerResponse, body: Buffer): void | Promise<void> => {
    const params = paramsOf(body, trusted);
    const media = mediaTypes.get(req.headers.accept ?? '');
    const ready = params === undefined ? 'yoga' : prepared.get(params.query, params.operationName);
    const maxCost = maxCostOf(req.headers[MAX_COST_HEADER] as string | undefined);
    if (
      params === undefined ||
      ready === 'yoga' ||
      media === undefined ||
      (maxCost !== undefined && typeof maxCost !== 'number')
    )
      return handOver(req, res, body);

    served.fast++;
    trusted.observe(params.query);
    const headers = req.headers;
    const operation = new Operation({
      apiKey: apiKeyOf(headers.authorization, headers['x-api-key'] as string | undefined),
      requestId: requestIdOf(headers['x-request-id'] as string | undefined),
      deadlineMs,
      name: params.operationName,
      maxCostUsd: maxCost,
    });
    reporter.start(operation);
    // The client went away before its answer: its upstream calls are cancelled. Either way the
    // budget reservation is settled by now (a no-op when the report settled it; the backstop when
    // an error was thrown and no result was made).
    res.once('close', () => {
      if (!res.writableFinished) operation.cancel(new Error('client went away'));
      operation.settle();
    });
    reporter.executing(operation, ready.document, params.operationName);
    const refuse = (refusal: GraphQLError) => {
      operation.rejected = true;
      return answer(req, res, operation, { errors: [refusal] }, media);
    };
    const refusal = costControl.admit(operation, ready.plan, params.variables);
    if (refusal === undefined) return run(req, res, operation, ready, params, media);
    if (!isPromise(refusal)) return refuse(refusal);
    return refusal.then((refused) =>
      refused === undefined ? run(req, res, operation, ready, params, media) : refuse(refused),
    );
  };

  const fail = (error: unknown, res: ServerResponse) => {
    logger.error(error);
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    const body = JSON.stringify({ errors: [{ message: MASKED_MESSAGE }] });
    res.writeHead(500, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  };

  if (options.enabled === false) return { handle: () => false, served };
  return {
    served,
    handle(req, res) {
      if (!eligible(req)) return false;
      readBody(req, Number(req.headers['content-length'])).then(
        (body) => {
          try {
            const serving = serve(req, res, body);
            if (isPromise(serving)) serving.catch((error: unknown) => fail(error, res));
          } catch (error) {
            fail(error, res);
          }
        },
        // The client went away mid-body: nobody to answer.
        () => res.destroy(),
      );
      return true;
    },
  };
}
