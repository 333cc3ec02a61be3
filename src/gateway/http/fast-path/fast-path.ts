/**
 * The fast path: the request pipeline (request/pipeline.ts) run directly on node:http for the common
 * request, a JSON POST (or QUERY, answered alike) to /graphql of a known, valid query whose answer
 * is JSON; Yoga's handler, which runs the same pipeline from its hooks, takes every other request.
 * What is here is only what makes it fast: eligibility from the request line and headers, reading
 * the body, writing the bytes. No policy lives here; the equivalence test
 * (test/integration/fast-path-equivalence.test.ts) compares both lanes byte for byte.
 *
 * It steps aside (to Yoga, before reading the body) for: any other method, path or content type,
 * HTTP/2, bodies without Content-Length or over the limit, an Accept with no JSON media type, and
 * everything when CORS is on; and (after reading it, handing over the body it read and the request
 * state it began) for a body that is not a plain `{ query, variables?, operationName?, extensions?,
 * documentId? }` object, a document that does not resolve at once (a Redis lookup) or fails parsing
 * or validation (prepared-operations.ts): Yoga answers those with its own errors.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExecutionResult } from 'graphql';
import type { YogaLogger, YogaServerInstance } from 'graphql-yoga';
import { isPromise } from '../../../shared/is-promise.js';
import type { Compression, Delivered } from '../../delivery/compression.js';
import { GRAPHQL_ENDPOINT } from '../../delivery/endpoint.js';
import type { Operation } from '../../operation/operation.js';
import type { JsonMediaType } from '../../operation/request-facts.js';
import { declaredLength } from '../../request/declared-length.js';
import { requestFactsOf } from '../../request/facts.js';
import {
  type AnswerHeaders,
  MASKED_MESSAGE,
  type PipelineContext,
  type RequestPipeline,
  type RequestState,
} from '../../request/pipeline.js';
import type { Resolved } from '../../request/trusted-documents.js';
import type { GatewayContext } from '../../schema/context.js';
import type { LiftedDocument } from './literal-lifting.js';
import type { PreparedOperation, PreparedOperations } from './prepared-operations.js';

/**
 * Yoga's lane as the fast path needs it, to hand a request over: its Fetch API and its handler
 * (http/yoga.ts makes the instance; the fast path sits below it and does not import it).
 */
export type YogaLane = Pick<
  YogaServerInstance<Record<string, unknown>, GatewayContext>,
  'fetchAPI' | 'handleRequest'
>;

export interface FastPathOptions {
  yoga: YogaLane;
  pipeline: RequestPipeline;
  prepared: PreparedOperations;
  /** COMPRESSION_MIN_BYTES and the encoding negotiation (compression.ts), as on Yoga's lane. */
  compression: Compression;
  /** Where errors of the lane itself are logged (the same logger Yoga uses). */
  logger: YogaLogger;
  /** MAX_REQUEST_BODY_BYTES. */
  maxBodyBytes: number;
  /** HTTP_FAST_PATH, and no CORS. @default true */
  enabled?: boolean;
}

export interface FastPath {
  /** Serves `req` when it is the common case and returns true; false leaves it to Yoga's handler. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /**
   * Requests taken, those of them run as their document's shape (prepared-operations.ts), and those
   * handed to Yoga after reading their body (tests, operators).
   */
  readonly served: { fast: number; lifted: number; handedOver: number };
}

/** The body's parameters: the parsed object itself, once checked (`null` and absent alike). */
interface Params {
  query?: unknown;
  documentId?: unknown;
  extensions?: unknown;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The body as the request's parameters, or undefined when anything is unusual (Yoga answers it). */
function paramsOf(body: Buffer): Params | undefined {
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
  return json as Params;
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

/** Writes an answer's head and body, unless the client went away meanwhile. */
function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | number>,
  delivered: Delivered,
): void {
  if (res.destroyed || res.writableEnded) return;
  if (delivered.vary) headers.vary = 'Accept-Encoding';
  if (delivered.encoding !== undefined) headers['content-encoding'] = delivered.encoding;
  headers['content-length'] = delivered.length;
  res.writeHead(status, headers);
  res.end(delivered.body);
}

/** Where a request's record is kept on node's request and response, for their listeners. */
const RECORD = Symbol('fast-path request');
type Carrier = { [RECORD]?: FastRequest };

/**
 * One request on the fast path, from its headers to its answer: the state every step shares, on one
 * object, read by node's listeners through `RECORD` (module functions: no closure per listener and
 * request, no `once` wrapper, no promise for the body).
 */
class FastRequest {
  /** The body read so far: one chunk (the common case), or several, joined at its end. */
  body: Buffer | Buffer[] | undefined = undefined;
  size = 0;
  /** Until the body's end or error: whichever comes first decides, as a promise's first settlement would. */
  reading = true;
  /** Set at the response's first `close`. */
  closed = false;
  /** The request's variables, once its body is read. */
  variables: Record<string, unknown> | undefined = undefined;
  /** Its operation, once opened. */
  operation: Operation | undefined = undefined;
  /** Set when the document runs as its shape's operation (prepared-operations.ts). */
  lifted: LiftedDocument | undefined = undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly state: RequestState,
    readonly mediaType: JsonMediaType,
    /** Content-Length. */
    readonly length: number,
    readonly pipeline: RequestPipeline,
    readonly received: (request: FastRequest, body: Buffer) => void,
  ) {}
}

function onBodyChunk(this: IncomingMessage, chunk: Buffer): void {
  const request = (this as Carrier)[RECORD] as FastRequest;
  const body = request.body;
  if (body === undefined) request.body = chunk;
  else if (Array.isArray(body)) body.push(chunk);
  else request.body = [body, chunk];
  request.size += chunk.length;
}

function onBodyEnd(this: IncomingMessage): void {
  const request = (this as Carrier)[RECORD] as FastRequest;
  if (!request.reading) return;
  request.reading = false;
  const { body, size } = request;
  request.body = undefined;
  // Shorter than its Content-Length: nobody to answer.
  if (size !== request.length) {
    request.res.destroy();
    return;
  }
  const whole = body === undefined ? Buffer.alloc(0) : Array.isArray(body) ? Buffer.concat(body, size) : body;
  request.received(request, whole);
}

/** The client went away mid-body: nobody to answer. */
function onBodyError(this: IncomingMessage): void {
  const request = (this as Carrier)[RECORD] as FastRequest;
  if (!request.reading) return;
  request.reading = false;
  request.res.destroy();
}

function onResponseClose(this: ServerResponse): void {
  const request = (this as Carrier)[RECORD] as FastRequest;
  if (request.closed) return;
  request.closed = true;
  if (!this.writableFinished) request.pipeline.cancel(request.state, new Error('client went away'));
  request.pipeline.end(request.state);
}

export function createFastPath(options: FastPathOptions): FastPath {
  const { yoga, pipeline, prepared, compression, logger, maxBodyBytes } = options;
  const served = { fast: 0, lifted: 0, handedOver: 0 };

  const eligible = (req: IncomingMessage): boolean => {
    // QUERY (RFC 10008) is answered exactly as a POST (docs/contract.md, Delivery to frontends).
    if ((req.method !== 'POST' && req.method !== 'QUERY') || req.url !== GRAPHQL_ENDPOINT) return false;
    if (req.httpVersionMajor !== 1) return false;
    const headers = req.headers;
    const contentType = headers['content-type'];
    if (contentType !== 'application/json' && !contentType?.startsWith('application/json;')) return false;
    if (headers.host === undefined) return false;
    return declaredLength(headers, maxBodyBytes) !== undefined;
  };

  /** Yoga's lane answers a request whose body was read already, with the state begun here. */
  const handOver = async (
    req: IncomingMessage,
    res: ServerResponse,
    body: Buffer,
    state: RequestState,
  ): Promise<void> => {
    served.handedOver++;
    const headers: Array<[string, string]> = [];
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) headers.push([name, v]);
    }
    // A Request built here has no signal of its own: the client going away cancels through the
    // state, as on the fast path (the close listener is already on `res`).
    // A QUERY stays one: Yoga's lane makes it a POST in one place (plugins/use-query-method.ts).
    const request = new yoga.fetchAPI.Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) as Uint8Array<ArrayBuffer>,
    });
    const context: PipelineContext = { gateway: state };
    const response = await yoga.handleRequest(request, { req, res, ...context });
    await sendFetchResponse(response, res);
  };

  /** Writes the answer; small ones (the common case) at once: no zlib, no copy (compression.ts `deliver`). */
  const write = (request: FastRequest, result: ExecutionResult): void | Promise<void> => {
    const extra = pipeline.answerHeaders(request.state);
    if (isPromise(extra)) return extra.then((added) => writeWith(request, result, added));
    return writeWith(request, result, extra);
  };

  const writeWith = (
    request: FastRequest,
    result: ExecutionResult,
    added: AnswerHeaders | undefined,
  ): void | Promise<void> => {
    const { res, state } = request;
    const encoded = pipeline.encode(result, request.mediaType);
    if (res.destroyed || res.writableEnded) return;
    const headers: Record<string, string | number> = {};
    const given = encoded.headers;
    for (const name in given) headers[name.toLowerCase()] = given[name] as string;
    if (added !== undefined) Object.assign(headers, added);
    headers['x-request-id'] = state.facts.requestId;
    const delivered = compression.deliver(encoded.body, state.facts.acceptEncoding);
    if (!isPromise(delivered)) return send(res, encoded.status, headers, delivered);
    return delivered.then((later) => send(res, encoded.status, headers, later));
  };

  /** The operation's result: finished (codes, masking, the report) and written. */
  const answer = (request: FastRequest, result: ExecutionResult): void | Promise<void> => {
    const lifted = request.lifted;
    const located = lifted === undefined ? result : lifted.relocate(result);
    return write(request, pipeline.finish(request.operation as Operation, located));
  };

  const execute = (request: FastRequest, ready: PreparedOperation): void | Promise<void> => {
    const operation = request.operation as Operation;
    const result = pipeline.execute(operation, ready.document, ready.operationName, request.variables);
    return isPromise(result) ? result.then((done) => answer(request, done)) : answer(request, result);
  };

  const run = (
    request: FastRequest,
    ready: PreparedOperation,
    register: { hash: string; text: string } | undefined,
  ): void | Promise<void> => {
    const refusal = pipeline.admit(
      request.operation as Operation,
      ready.document,
      ready.operationName,
      request.variables,
      register,
    );
    if (refusal === undefined) return execute(request, ready);
    if (!isPromise(refusal)) return answer(request, refusal);
    return refusal.then((refused) =>
      refused === undefined ? execute(request, ready) : answer(request, refused),
    );
  };

  const serve = (request: FastRequest, body: Buffer): void | Promise<void> => {
    const { req, res, state } = request;
    const params = paramsOf(body);
    if (params === undefined) return handOver(req, res, body, state);
    const resolved: Resolved | Promise<Resolved> = pipeline.resolve(state, params);
    // A lookup that waits for Redis, or a refusal: Yoga's lane answers with the same resolution.
    if (isPromise(resolved) || resolved instanceof Error || resolved.query === '')
      return handOver(req, res, body, state);
    const operationName = params.operationName ?? undefined;
    const variables = params.variables ?? undefined;
    const ready = prepared.get(resolved.query, operationName, variables);
    if (ready === 'yoga') return handOver(req, res, body, state);
    served.fast++;
    // A document run as its shape's operation: its literals are variables, its errors relocated.
    const lifted = ready.lifted;
    if (lifted !== undefined) served.lifted++;
    request.lifted = lifted;
    request.variables = lifted === undefined ? variables : lifted.variables;
    const register =
      resolved.register === undefined ? undefined : { hash: resolved.register, text: resolved.query };
    // A token still being verified (begun with the request, while its body was read) is waited for.
    const identified = pipeline.identified(state);
    if (isPromise(identified)) return identified.then(() => open(request, ready, operationName, register));
    return open(request, ready, operationName, register);
  };

  const open = (
    request: FastRequest,
    ready: PreparedOperation,
    operationName: string | undefined,
    register: { hash: string; text: string } | undefined,
  ): void | Promise<void> => {
    request.operation = pipeline.open(request.state, operationName);
    return run(request, ready, register);
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

  /** The body is in: the request is served, or handed to Yoga's lane. */
  const received = (request: FastRequest, body: Buffer): void => {
    const res = request.res;
    try {
      const serving = serve(request, body);
      if (isPromise(serving)) serving.catch((error: unknown) => fail(error, res));
    } catch (error) {
      fail(error, res);
    }
  };

  if (options.enabled === false) return { handle: () => false, served };
  return {
    served,
    handle(req, res) {
      if (!eligible(req)) return false;
      const headers = req.headers;
      const state = pipeline.begin(
        requestFactsOf((name) => headers[name] as string | undefined, req.socket.remoteAddress),
      );
      const mediaType = state.facts.mediaType;
      if (mediaType === undefined) return false;
      const request = new FastRequest(
        req,
        res,
        state,
        mediaType,
        Number(headers['content-length']),
        pipeline,
        received,
      );
      (req as Carrier)[RECORD] = request;
      (res as Carrier)[RECORD] = request;
      // The pipeline's last step, once, whichever lane answers: settled when the response is done
      // or the client went away (its operations then cancelled first).
      res.on('close', onResponseClose);
      req.on('data', onBodyChunk);
      req.on('end', onBodyEnd);
      req.on('error', onBodyError);
      return true;
    },
  };
}
