/**
 * The innermost Dispatch: one HTTP exchange with one upstream over a keep-alive undici `Pool`.
 * Sends the request's chosen form, reads the whole body as text, maps a non-2xx status to an
 * `UpstreamCallError`, parses the JSON once and decodes it into the seam shape.
 *
 * Why undici's `dispatch` (exchange-handler.ts) and not `fetch` or `Pool.request`: no WHATWG
 * Request/Response/Headers per call, no Readable stream per body (the body is collected as Buffers
 * by a handler: ~10 µs of CPU less per call than `request` + `body.text()`, measured in
 * docs/benchmarks/2026-11-25.md), a response size cap enforced by the parser (`maxResponseSize`), and
 * `JSON.parse` of the text once. Every body is read to the end or the exchange aborted, which undici
 * needs to reuse or free the connection.
 *
 * Cancellation and time: each attempt ends at the earlier of its own timeout (UPSTREAM_TIMEOUT_MS)
 * and the operation's absolute deadline, watched by one shared sweep (deadline-sweep.ts), and is
 * aborted when the operation is cancelled (the client went away). The abort handle is an
 * `AbortController` per attempt: the operation's cancellation and the sweep's entry abort it.
 *
 * The attempt itself is the sink of undici's dispatch handler (exchange-handler.ts) and calls the
 * layers' handler back from there: no promise between the socket and the layers above.
 *
 * Attempts are observed by the layer above it (interceptors/attempts.ts), not by a callback here.
 */
import { Pool } from 'undici';
import { UpstreamCallError, type UpstreamName } from '../errors.js';
import { redactApiKey } from '../redaction.js';
import { unwatchDeadline, type Watched, watchDeadline } from './deadline-sweep.js';
import type { AnswerHandler, Dispatch, UpstreamRequest } from './dispatch.js';
import { type ExchangeSink, exchangeOnce, type ResponseHeaders } from './exchange-handler.js';
import { ResponseShapeError } from './response-schemas.js';
import { errorFromFailure, errorFromStatus } from './status-mapping.js';

export interface TransportOptions {
  upstream: UpstreamName;
  /** Base URL without /api/v1; may carry a path prefix (`http://host/prefix`). */
  baseUrl: string;
  /**
   * 'authorization' sends `Bearer <key>`; another header name sends the bare key.
   * @default 'authorization'
   */
  authHeader?: string;
  /** @default 64 */
  connections?: number;
  /** Per-attempt time for headers and body. @default 5000 */
  timeoutMs?: number;
  /** Larger answers are UPSTREAM_BAD_RESPONSE (a million pi digits is ~1 MB). @default 16777216 */
  maxResponseBytes?: number;
  /** Idle keep-alive sockets are closed after this (or the server's shorter hint). @default 4000 */
  keepAliveTimeoutMs?: number;
}

export interface Transport {
  readonly dispatch: Dispatch;
  /** Closes the pool: in-flight exchanges finish, then every socket is freed. */
  close(): Promise<void>;
}

/** Our own per-attempt timeout, recognized by identity. */
const ATTEMPT_TIMEOUT = Object.freeze(new Error('upstream attempt timed out'));
const DEADLINE_PASSED = Object.freeze(new Error('operation deadline passed'));
const MAX_CONNECT_TIMEOUT_MS = 10_000;

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

function header(headers: ResponseHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function createTransport(options: TransportOptions): Transport {
  const { upstream } = options;
  const timeoutMs = options.timeoutMs ?? 5000;
  const url = new URL(options.baseUrl);
  // Read once: URL's `origin` getter builds a new string at every read.
  const origin = url.origin;
  const basePath = url.pathname.replace(/\/+$/, '');
  const authHeader = (options.authHeader ?? 'authorization').toLowerCase();
  const bearer = authHeader === 'authorization';
  const pool = new Pool(origin, {
    connections: options.connections ?? 64,
    pipelining: 1,
    connectTimeout: Math.min(timeoutMs, MAX_CONNECT_TIMEOUT_MS),
    // Backstops only: the sweep enforces the real, total deadline (undici's are inactivity timers).
    headersTimeout: Math.min(timeoutMs + 1000, 300_000),
    bodyTimeout: Math.min(timeoutMs + 1000, 300_000),
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4000,
    maxResponseSize: options.maxResponseBytes ?? 16 * 1024 * 1024,
  });

  const classify = (error: unknown, signal: AbortSignal, statusCode: number | undefined) => {
    if (error instanceof UpstreamCallError) return error;
    if (signal.aborted) {
      if (signal.reason === ATTEMPT_TIMEOUT) return errorFromFailure('timeout', upstream, { statusCode });
      if (signal.reason === DEADLINE_PASSED)
        return errorFromFailure('timeout', upstream, { statusCode, detail: 'deadline' });
      return errorFromFailure('cancelled', upstream, { statusCode, cause: signal.reason });
    }
    const code = errorCode(error);
    if (code !== undefined && TIMEOUT_CODES.has(code))
      return errorFromFailure('timeout', upstream, { statusCode, cause: error });
    if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE')
      return errorFromFailure('bad-response', upstream, {
        statusCode,
        cause: error,
        detail: 'body too large',
      });
    if (code === 'UND_ERR_INVALID_ARG')
      // Only the header values we add can be invalid (a key or request id with control characters).
      return errorFromFailure('invalid-request', upstream, { cause: error, detail: 'invalid header value' });
    if (statusCode !== undefined)
      // The headers arrived, then the body broke off: a truncated answer.
      return errorFromFailure('bad-response', upstream, { statusCode, cause: error, detail: 'body cut off' });
    if (code === 'ECONNREFUSED') return errorFromFailure('refused', upstream, { cause: error });
    return errorFromFailure('connection', upstream, { cause: error });
  };

  /** One attempt; fails only with `UpstreamCallError`. Observed by interceptors/attempts.ts, whatever the outcome. */
  function attemptOnce<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
    const { form, operation } = request;
    if (operation?.cancelled) {
      handler.onError(errorFromFailure('cancelled', upstream, { cause: operation.reason }));
      return;
    }
    const now = Date.now();
    const deadline = operation === undefined ? Number.POSITIVE_INFINITY : operation.deadline;
    if (deadline <= now) {
      handler.onError(errorFromFailure('timeout', upstream, { detail: 'deadline' }));
      return;
    }

    // The attempt's abort handle: the operation's cancellation aborts it, and so does the deadline
    // sweep at the attempt's end (its own timeout or the operation's deadline, the earlier).
    const attemptEnd = now + (request.timeoutMs ?? timeoutMs);
    const controller = new AbortController();
    const end =
      attemptEnd <= deadline
        ? new AttemptEnd(attemptEnd, controller, ATTEMPT_TIMEOUT)
        : new AttemptEnd(deadline, controller, DEADLINE_PASSED);
    watchDeadline(end);
    operation?.attach(controller);

    // Name, value, name, value: undici's flat form, which it reads without listing an object's keys.
    const headers: string[] = [];
    if (form.body !== undefined) headers.push('content-type', 'application/json');
    if (operation !== undefined) {
      headers.push('x-request-id', operation.requestId);
      // The caller's own key, or the one the gateway holds for a user's tier (identity.ts); never a token.
      const key = operation.caller.upstreamKey;
      if (key !== undefined && request.anonymous !== true)
        headers.push(authHeader, bearer ? `Bearer ${key}` : key);
    }
    const traceHeaders = request.traceHeaders;
    if (traceHeaders !== undefined)
      for (const name of Object.keys(traceHeaders)) headers.push(name, traceHeaders[name] as string);

    exchangeOnce(
      pool,
      {
        origin,
        method: form.method,
        path: basePath + form.path,
        headers,
        body: form.body ?? null,
      },
      controller.signal,
      new Attempt(request, handler, controller, end),
    );
  }

  /** One attempt in flight: hears the exchange's outcome and tells the layers' handler. */
  class Attempt<T> implements ExchangeSink {
    constructor(
      private readonly request: UpstreamRequest<T>,
      private readonly handler: AnswerHandler<T>,
      private readonly controller: AbortController,
      private readonly end: AttemptEnd,
    ) {}

    private get signal(): AbortSignal {
      return this.controller.signal;
    }

    private done(): void {
      unwatchDeadline(this.end);
      this.request.operation?.detach(this.controller);
    }

    failed(error: unknown, statusCode: number | undefined): void {
      this.done();
      // A non-2xx answer whose body broke off still has a meaningful status, unless we gave up
      // waiting (timeout, cancellation), which classify reports as such.
      if (statusCode === undefined || (statusCode >= 200 && statusCode < 300) || this.signal.aborted) {
        this.handler.onError(classify(error, this.signal, statusCode));
        return;
      }
      this.answered(statusCode, {}, undefined);
    }

    exchanged(statusCode: number, headers: ResponseHeaders, text: string): void {
      this.done();
      this.answered(statusCode, headers, text);
    }

    private answered(statusCode: number, responseHeaders: ResponseHeaders, text: string | undefined): void {
      const { request, handler } = this;
      const form = request.form;
      const apiKey = request.operation?.caller.upstreamKey;
      if (statusCode < 200 || statusCode >= 300) {
        handler.onError(
          errorFromStatus({
            upstream,
            endpoint: form.endpoint,
            statusCode,
            text: redactApiKey(text, apiKey),
            retryAfter: responseHeaders['retry-after'],
            ...form.hints,
          }),
        );
        return;
      }
      let value: T;
      try {
        value = form.decode(JSON.parse(text as string));
      } catch (error) {
        const detail =
          error instanceof ResponseShapeError
            ? error.detail
            : error instanceof SyntaxError
              ? 'not JSON'
              : 'invalid body';
        handler.onError(
          errorFromFailure('bad-response', upstream, {
            statusCode,
            body: redactApiKey(text, apiKey),
            cause: error,
            detail,
          }),
        );
        return;
      }
      const deprecation = header(responseHeaders, 'deprecation');
      handler.onAnswer({
        value,
        source: 'upstream',
        endpoint: form.endpoint,
        statusCode,
        facts: form.facts(value),
        deprecation:
          deprecation === undefined ? undefined : { sunset: header(responseHeaders, 'sunset') ?? null },
        bodyChars: (text as string).length,
      });
    }
  }

  return {
    dispatch: attemptOnce as Dispatch,
    close: () => pool.close(),
  };
}

/** An attempt's entry in the deadline sweep: aborts its controller with the reason of that end. */
class AttemptEnd implements Watched {
  constructor(
    readonly at: number,
    private readonly controller: AbortController,
    private readonly reason: unknown,
  ) {}

  fire(): void {
    this.controller.abort(this.reason);
  }
}
