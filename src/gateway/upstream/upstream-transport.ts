/**
 * One HTTP exchange with one upstream over a shared keep-alive undici `Pool`.
 *
 * Why `Pool.request` and not `fetch`: no WHATWG Request/Response/Headers objects per call, explicit
 * connect/headers/body timeouts, and a response size cap enforced by the parser (`maxResponseSize`)
 * instead of after buffering. Every body is read to the end or destroyed (undici needs one or the
 * other to reuse or free the connection).
 *
 * Failures come out as `UpstreamFailure` with a kind (refused, connection, timeout, aborted,
 * bad-response, invalid-request); statuses come out as data: mapping them is the caller's job.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { Pool } from 'undici';
import { AttemptSignal } from './attempt-signal.js';
import { errorFromFailure } from './error-mapping.js';
import type { UpstreamName } from './types.js';
import { UpstreamFailure } from './upstream-failure.js';

export interface UpstreamTransportOptions {
  upstream: UpstreamName;
  /** Base URL without /api/v1; may carry a path prefix (`http://host/prefix`). */
  baseUrl: string;
  /** @default 'authorization' — 'authorization' sends `Bearer <key>`, other header names the bare key */
  authHeader?: string;
  /** @default 64 */
  connections?: number;
  /** @default 5000 — the default per-attempt deadline (headers and body) */
  timeoutMs?: number;
  /** @default min(timeoutMs, 10000) */
  connectTimeoutMs?: number;
  /** @default 16 MiB — larger answers are UPSTREAM_BAD_RESPONSE (a million pi digits is ~1 MB) */
  maxResponseBytes?: number;
  /** @default 4000 — idle keep-alive sockets are closed after this (or the server's shorter hint) */
  keepAliveTimeoutMs?: number;
}

export interface TransportRequest {
  method: 'GET' | 'POST';
  /** Path relative to /api/v1 with its query string, e.g. `/pi?digits=3`. */
  path: string;
  /** JSON text, serialized once by the caller. */
  body?: string | undefined;
  apiKey?: string | undefined;
  requestId?: string | undefined;
  signal?: AbortSignal | undefined;
  /** This attempt's deadline in ms (the remaining operation time may make it shorter than the default). */
  timeoutMs: number;
}

export interface TransportResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  /** The body as text; undefined when a non-2xx body could not be read (the status still counts). */
  text: string | undefined;
}

const MAX_CONNECT_TIMEOUT_MS = 10_000;

/** The abort reason of our own per-attempt timer, recognized by identity. */
const ATTEMPT_TIMEOUT = Object.freeze(
  Object.assign(new Error('upstream attempt timed out'), { name: 'TimeoutError', code: 'UPSTREAM_TIMEOUT' }),
);

function onAttemptTimeout(signal: AttemptSignal): void {
  signal.abort(ATTEMPT_TIMEOUT);
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

function errorCode(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  // Happy-eyeballs connects (autoSelectFamily) fail with an AggregateError of per-address errors.
  if (error instanceof AggregateError) {
    for (const inner of error.errors) {
      const innerCode = errorCode(inner);
      if (innerCode !== undefined) return innerCode;
    }
  }
  return undefined;
}

export class UpstreamTransport {
  readonly upstream: UpstreamName;
  readonly timeoutMs: number;
  readonly #pool: Pool;
  readonly #basePath: string;
  readonly #authHeader: string;
  readonly #bearer: boolean;

  constructor(options: UpstreamTransportOptions) {
    this.upstream = options.upstream;
    this.timeoutMs = options.timeoutMs ?? 5000;
    const url = new URL(options.baseUrl);
    this.#basePath = `${url.pathname.replace(/\/+$/, '')}/api/v1`;
    this.#authHeader = (options.authHeader ?? 'authorization').toLowerCase();
    this.#bearer = this.#authHeader === 'authorization';
    const connectTimeout = options.connectTimeoutMs ?? Math.min(this.timeoutMs, MAX_CONNECT_TIMEOUT_MS);
    this.#pool = new Pool(url.origin, {
      connections: options.connections ?? 64,
      pipelining: 1,
      connectTimeout,
      // Backstops only: the per-attempt timer below is the real (total) deadline. undici's own
      // timers are inactivity timers (bodyTimeout restarts on every chunk).
      headersTimeout: Math.min(this.timeoutMs, 300_000),
      bodyTimeout: Math.min(this.timeoutMs, 300_000),
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 4000,
      maxResponseSize: options.maxResponseBytes ?? 16 * 1024 * 1024,
    });
  }

  /** Sends one request and reads its whole body. Rejects only with `UpstreamFailure`. */
  async request(req: TransportRequest): Promise<TransportResponse> {
    const callerSignal = req.signal;
    if (callerSignal?.aborted) {
      throw errorFromFailure('aborted', this.upstream, { cause: callerSignal.reason });
    }
    if (req.timeoutMs <= 0) throw errorFromFailure('timeout', this.upstream);

    const attemptSignal = new AttemptSignal();
    const timer = setTimeout(onAttemptTimeout, req.timeoutMs, attemptSignal);
    let onCallerAbort: (() => void) | undefined;
    if (callerSignal !== undefined) {
      onCallerAbort = () => attemptSignal.abort(callerSignal.reason);
      callerSignal.addEventListener('abort', onCallerAbort, { once: true });
    }

    const headers: Record<string, string> = {};
    if (req.body !== undefined) headers['content-type'] = 'application/json';
    if (req.requestId !== undefined) headers['x-request-id'] = req.requestId;
    if (req.apiKey !== undefined)
      headers[this.#authHeader] = this.#bearer ? `Bearer ${req.apiKey}` : req.apiKey;

    let statusCode: number | undefined;
    try {
      const response = await this.#pool.request({
        method: req.method,
        path: this.#basePath + req.path,
        headers,
        body: req.body,
        // undici documents EventEmitter-shaped signals; see attempt-signal.ts for why not AbortSignal.
        signal: attemptSignal as unknown as NonNullable<Parameters<Pool['request']>[0]['signal']>,
        headersTimeout: req.timeoutMs,
        bodyTimeout: req.timeoutMs,
      });
      statusCode = response.statusCode;
      let text: string | undefined;
      try {
        text = await response.body.text();
      } catch (error) {
        // A non-2xx answer whose body broke off still has a meaningful status, unless we gave up
        // waiting (timeout/abort), which the outer handler reports as such.
        if (statusCode >= 200 && statusCode < 300) throw error;
        if (attemptSignal.aborted) throw error;
        text = undefined;
      }
      return { statusCode, headers: response.headers, text };
    } catch (error) {
      throw this.#classify(error, attemptSignal, statusCode);
    } finally {
      clearTimeout(timer);
      if (onCallerAbort !== undefined) callerSignal?.removeEventListener('abort', onCallerAbort);
    }
  }

  #classify(error: unknown, signal: AttemptSignal, statusCode: number | undefined): UpstreamFailure {
    if (error instanceof UpstreamFailure) return error;
    const upstream = this.upstream;
    if (signal.aborted) {
      if (signal.reason === ATTEMPT_TIMEOUT) return errorFromFailure('timeout', upstream, { statusCode });
      return errorFromFailure('aborted', upstream, { statusCode, cause: signal.reason });
    }
    const code = errorCode(error);
    if (code !== undefined && TIMEOUT_CODES.has(code)) {
      return errorFromFailure('timeout', upstream, { statusCode, cause: error });
    }
    if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') {
      return errorFromFailure('bad-response', upstream, {
        statusCode,
        cause: error,
        detail: 'body too large',
      });
    }
    if (code === 'UND_ERR_INVALID_ARG') {
      // Only the header values we add can be invalid (a key or request id with control characters).
      return errorFromFailure('invalid-request', upstream, { cause: error, detail: 'invalid header value' });
    }
    if (statusCode !== undefined) {
      // The headers arrived, then the body broke off: a truncated answer.
      return errorFromFailure('bad-response', upstream, { statusCode, cause: error, detail: 'body cut off' });
    }
    if (code === 'ECONNREFUSED') return errorFromFailure('refused', upstream, { cause: error });
    return errorFromFailure('connection', upstream, { cause: error });
  }

  /** Closes the pool: waits for in-flight requests, then frees every socket. */
  async close(): Promise<void> {
    await this.#pool.close();
  }

  /** Destroys the pool at once, failing in-flight requests. */
  async destroy(): Promise<void> {
    await this.#pool.destroy();
  }
}
