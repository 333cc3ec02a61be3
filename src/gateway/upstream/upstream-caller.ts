/**
 * What both HTTP clients share: one attempt (send, map the status, parse once, validate), the
 * retry/breaker wrapping, the health probe, logging and the per-call event.
 *
 * Logging: each failed attempt is logged with the upstream's raw body (truncated, with the API key
 * scrubbed should the upstream echo it), at `warn` for upstream trouble and `debug` for answers the
 * caller caused (4xx, own aborts). The key itself is never put in a log record.
 */
import type { Logger } from 'pino';
import { type EndpointName, errorFromFailure, errorFromStatus, type StatusContext } from './error-mapping.js';
import { ResponseShapeError } from './response-schemas.js';
import type { CallOptions, HealthProbe, UpstreamName } from './types.js';
import type { UpstreamFailure } from './upstream-failure.js';
import { type BreakerState, type RetryMode, UpstreamResilience } from './upstream-resilience.js';
import { type TransportResponse, UpstreamTransport } from './upstream-transport.js';

/** One finished upstream HTTP call, for metrics and logs. */
export interface UpstreamCallEvent {
  upstream: UpstreamName;
  /** 'check' | 'pi' | 'inference' | 'health'. */
  endpoint: string;
  /** HTTP status, or null when there was none (network failure, timeout before headers). */
  statusCode: number | null;
  durationMs: number;
  /** 'ok', 'aborted' (the caller's signal), or the contract error code of the attempt. */
  outcome: string;
  /** 1 for the first attempt of a call. */
  attempt: number;
}

/** How an upstream is called: shared by every client and by `createUpstreamClients`. */
export interface UpstreamTuningOptions {
  /** @default 'authorization' — 'authorization' sends `Bearer <key>`, other header names the bare key */
  authHeader?: string;
  /** @default 5000 — headers+body timeout per attempt (UPSTREAM_TIMEOUT) */
  timeoutMs?: number;
  /** @default 64 — per-upstream undici Pool */
  connections?: number;
  /** @default 1000 */
  healthTimeoutMs?: number;
  /** @default 5; 0 disables */
  breakerThreshold?: number;
  /** @default 5000 */
  breakerHalfOpenAfterMs?: number;
  /** @default 3 — attempts in total per idempotent call */
  retryMaxAttempts?: number;
  /** @default 50 — first backoff step (full jitter) */
  backoffBaseMs?: number;
  /** @default 1000 — longest backoff step */
  backoffCapMs?: number;
  /** @default 16777216 — larger upstream bodies are UPSTREAM_BAD_RESPONSE */
  maxResponseBytes?: number;
  /** Upstream failures are logged with the raw body, never the key. */
  logger?: Logger | undefined;
  /** Called once per finished upstream HTTP call (every attempt, health probes included). */
  onCall?: ((event: UpstreamCallEvent) => void) | undefined;
}

export interface UpstreamCallerOptions<HealthBody> extends UpstreamTuningOptions {
  upstream: UpstreamName;
  /** Validates the health body (also used by the half-open probe). */
  parseHealth: (json: unknown) => HealthBody;
  /** Base URL without /api/v1. */
  baseUrl: string;
}

/** A fixed description of one endpoint, built once per client. */
export interface EndpointSpec<Req, Res> {
  endpoint: Exclude<EndpointName, 'health'>;
  method: 'GET' | 'POST';
  retry: RetryMode;
  parse: (json: unknown) => Res;
  /** Facts about the request that decide how a 400 maps (read only on the error path). */
  hints?: (request: Req) => Pick<StatusContext, 'hadValue' | 'waiverSigned'>;
}

const LOG_BODY_CHARS = 2048;

const CLIENT_CAUSED = new Set([
  'UNDEFINED_VALUE',
  'TIER_FORBIDDEN',
  'RATE_LIMITED',
  'UNAUTHENTICATED',
  'WAIVER_REQUIRED',
  'BAD_USER_INPUT',
]);

function scrub(text: string | undefined, apiKey: string | undefined): string | undefined {
  if (text === undefined || apiKey === undefined || apiKey.length === 0 || !text.includes(apiKey))
    return text;
  return text.replaceAll(apiKey, '[redacted]');
}

function isSuccess(statusCode: number): boolean {
  return statusCode >= 200 && statusCode < 300;
}

export class UpstreamCaller<HealthBody> {
  readonly upstream: UpstreamName;
  readonly #transport: UpstreamTransport;
  readonly #resilience: UpstreamResilience;
  readonly #timeoutMs: number;
  readonly #healthTimeoutMs: number;
  readonly #logger: Logger | undefined;
  readonly #onCall: ((event: UpstreamCallEvent) => void) | undefined;
  readonly #parseHealth: (json: unknown) => HealthBody;
  #closing: Promise<void> | undefined;

  constructor(options: UpstreamCallerOptions<HealthBody>) {
    this.upstream = options.upstream;
    this.#parseHealth = options.parseHealth;
    this.#timeoutMs = options.timeoutMs ?? 5000;
    this.#healthTimeoutMs = options.healthTimeoutMs ?? 1000;
    this.#logger = options.logger;
    this.#onCall = options.onCall;
    this.#transport = new UpstreamTransport({
      upstream: options.upstream,
      baseUrl: options.baseUrl,
      authHeader: options.authHeader,
      connections: options.connections,
      timeoutMs: this.#timeoutMs,
      maxResponseBytes: options.maxResponseBytes,
    });
    this.#resilience = new UpstreamResilience({
      upstream: options.upstream,
      breakerThreshold: options.breakerThreshold,
      breakerHalfOpenAfterMs: options.breakerHalfOpenAfterMs,
      retryMaxAttempts: options.retryMaxAttempts,
      backoffBaseMs: options.backoffBaseMs,
      backoffCapMs: options.backoffCapMs,
      probe: () => this.#halfOpenProbe(),
      onBreakerStateChange: (state) => {
        const level = state === 'closed' ? 'info' : 'warn';
        this.#logger?.[level](
          { upstream: this.upstream, breaker: state },
          'upstream circuit breaker state changed',
        );
      },
    });
  }

  breakerState(): BreakerState {
    return this.#resilience.breakerState();
  }

  /** A throwing metrics callback must not turn a good answer into a failure. */
  #emit(event: UpstreamCallEvent): void {
    if (this.#onCall === undefined) return;
    try {
      this.#onCall(event);
    } catch (error) {
      this.#logger?.error({ err: error, upstream: this.upstream }, 'upstream onCall callback threw');
    }
  }

  /** One logical call: retries and breaker around single attempts. */
  call<Req, Res>(
    spec: EndpointSpec<Req, Res>,
    request: Req,
    path: string,
    body: string | undefined,
    options: CallOptions | undefined,
  ): Promise<Res> {
    const attempt = (n: number, timeoutMs: number) =>
      this.#attempt(spec, request, path, body, options, n, timeoutMs);
    return this.#resilience.run(spec.retry, attempt, {
      signal: options?.signal,
      deadline: options?.deadline,
      timeoutMs: this.#timeoutMs,
    });
  }

  async #attempt<Req, Res>(
    spec: EndpointSpec<Req, Res>,
    request: Req,
    path: string,
    body: string | undefined,
    options: CallOptions | undefined,
    attempt: number,
    timeoutMs: number,
  ): Promise<Res> {
    const start = performance.now();
    let response: TransportResponse;
    try {
      response = await this.#transport.request({
        method: spec.method,
        path,
        body,
        apiKey: options?.apiKey,
        requestId: options?.requestId,
        signal: options?.signal,
        timeoutMs,
      });
    } catch (error) {
      throw this.#failed(spec.endpoint, error as UpstreamFailure, attempt, start, options);
    }
    const { statusCode } = response;
    if (!isSuccess(statusCode)) {
      const failure = errorFromStatus({
        upstream: this.upstream,
        endpoint: spec.endpoint,
        statusCode,
        text: scrub(response.text, options?.apiKey),
        retryAfter: response.headers['retry-after'],
        ...spec.hints?.(request),
      });
      throw this.#failed(spec.endpoint, failure, attempt, start, options);
    }
    let result: Res;
    try {
      result = spec.parse(JSON.parse(response.text as string));
    } catch (error) {
      const detail =
        error instanceof ResponseShapeError
          ? error.detail
          : error instanceof SyntaxError
            ? 'not JSON'
            : 'invalid body';
      const failure = errorFromFailure('bad-response', this.upstream, {
        statusCode,
        body: scrub(response.text, options?.apiKey),
        cause: error,
        detail,
      });
      throw this.#failed(spec.endpoint, failure, attempt, start, options);
    }
    if (this.#onCall !== undefined) {
      this.#emit({
        upstream: this.upstream,
        endpoint: spec.endpoint,
        statusCode,
        durationMs: performance.now() - start,
        outcome: 'ok',
        attempt,
      });
    }
    return result;
  }

  #failed(
    endpoint: EndpointName,
    failure: UpstreamFailure,
    attempt: number,
    start: number,
    options: CallOptions | undefined,
  ): UpstreamFailure {
    const durationMs = performance.now() - start;
    const outcome = failure.kind === 'aborted' ? 'aborted' : failure.code;
    this.#emit({
      upstream: this.upstream,
      endpoint,
      statusCode: failure.statusCode ?? null,
      durationMs,
      outcome,
      attempt,
    });
    const logger = this.#logger;
    if (logger !== undefined) {
      const quiet = failure.kind === 'aborted' || CLIENT_CAUSED.has(failure.code);
      const body = typeof failure.body === 'string' ? failure.body.slice(0, LOG_BODY_CHARS) : undefined;
      const cause = failure.cause instanceof Error ? failure.cause.message : undefined;
      logger[quiet ? 'debug' : 'warn'](
        {
          upstream: this.upstream,
          endpoint,
          attempt,
          code: failure.code,
          kind: failure.kind,
          upstreamStatus: failure.statusCode,
          durationMs: Math.round(durationMs),
          requestId: options?.requestId,
          upstreamBody: scrub(body, options?.apiKey),
          cause: scrub(cause, options?.apiKey),
        },
        'upstream call failed',
      );
    }
    return failure;
  }

  /**
   * GET /api/v1/health with its own short timeout, no retries and no breaker (it must report the
   * truth while the circuit is open). Never throws.
   *
   * The caller's API key is not forwarded: health is not tier-dependent, and a caller's bad key
   * must not make an upstream look down. `reachable` means "answered 2xx"; a 2xx with a body that
   * does not fit is reachable with `body: null` and `error` set; a non-2xx is not reachable (its
   * body is still returned when it fits).
   */
  async probe(options?: CallOptions): Promise<HealthProbe<HealthBody>> {
    const start = performance.now();
    let response: TransportResponse;
    try {
      response = await this.#transport.request({
        method: 'GET',
        path: '/health',
        requestId: options?.requestId,
        signal: options?.signal,
        timeoutMs: this.#healthTimeoutMs,
      });
    } catch (error) {
      const failure = this.#failed('health', error as UpstreamFailure, 1, start, options);
      return {
        reachable: false,
        latencyMs: performance.now() - start,
        statusCode: failure.statusCode ?? null,
        body: null,
        error: failure.message,
        breaker: this.breakerState(),
      };
    }
    const latencyMs = performance.now() - start;
    const { statusCode } = response;
    let body: HealthBody | null = null;
    let error: string | null = null;
    try {
      body = this.#parseHealth(JSON.parse(response.text ?? ''));
    } catch (cause) {
      const detail = cause instanceof ResponseShapeError ? cause.detail : 'not JSON';
      error = errorFromFailure('bad-response', this.upstream, { detail }).message;
    }
    if (!isSuccess(statusCode)) {
      const failure = errorFromStatus({
        upstream: this.upstream,
        endpoint: 'health',
        statusCode,
        text: response.text,
        retryAfter: response.headers['retry-after'],
      });
      this.#failed('health', failure, 1, start, options);
      return {
        reachable: false,
        latencyMs,
        statusCode,
        body,
        error: failure.message,
        breaker: this.breakerState(),
      };
    }
    this.#emit({
      upstream: this.upstream,
      endpoint: 'health',
      statusCode,
      durationMs: latencyMs,
      outcome: error === null ? 'ok' : 'UPSTREAM_BAD_RESPONSE',
      attempt: 1,
    });
    return { reachable: true, latencyMs, statusCode, body, error, breaker: this.breakerState() };
  }

  async #halfOpenProbe(): Promise<boolean> {
    const probe = await this.probe();
    this.#logger?.info(
      { upstream: this.upstream, reachable: probe.reachable, upstreamStatus: probe.statusCode },
      'upstream half-open health probe',
    );
    return probe.reachable;
  }

  /** Closes the connection pool (in-flight calls finish or time out first). Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#transport.close();
    return this.#closing;
  }
}
