/**
 * What the gateway records of its upstream calls, at two levels, as two interceptors of each
 * upstream's stack (upstream/clients.ts):
 *
 * - every HTTP attempt (`attempts`, the innermost layer, right above the transport; its events go to
 *   `onExchange`): the request metrics, the operation's
 *   count of answered attempts (docs/contract.md, Cost: `upstreamCalls`), and one log line per failed attempt
 *   with the upstream's raw body (key scrubbed): warn for upstream trouble, debug for what the caller
 *   caused (4xx) or a cancellation (the client went away: no upstream failure);
 * - every logical call (`interceptor`, the outermost layer, so it sees cache hits and shared calls
 *   too): the operation's call list, sponsor messages and cost, the sponsor log, the cost metric and
 *   the call's span.
 *
 * Cost is counted only for answers that came from the upstream for this operation: a cache hit or a
 * shared call costs nothing. A negative, non-finite or absurd cost is counted as 0 and logged: an
 * upstream is never trusted to lower a budget.
 */
import { context, trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { type ErrorCode, UpstreamCallError } from '../errors.js';
import type { CallInFlight, Operation } from '../operation/operation.js';
import type { ModelCall } from '../operation/operation-plan.js';
import { redactApiKey } from '../redaction.js';
import type {
  AnswerHandler,
  Dispatch,
  Interceptor,
  ObservedAnswer,
  UpstreamAnswer,
  UpstreamRequest,
} from '../upstream/dispatch.js';
import { type ExchangeEvent, observeAttempts } from '../upstream/interceptors/attempts.js';
import { isGone } from '../upstream/status-mapping.js';
import type { GatewayMetrics } from './metrics.js';
import type { SponsorLog } from './sponsor-log.js';
import { type Span, SpanKind, SpanStatusCode, type Tracer } from './tracing.js';

/** No single upstream call costs more than this; a larger figure is a broken upstream, not a bill. */
export const MAX_PLAUSIBLE_COST_USD = 1000;

const LOG_BODY_CHARS = 2048;

/** Codes of failures the caller caused: logged at debug, they say nothing about the upstream. */
const CALLER_CAUSED = new Set<ErrorCode>([
  'UNDEFINED_VALUE',
  'TIER_FORBIDDEN',
  'RATE_LIMITED',
  'UNAUTHENTICATED',
  'WAIVER_REQUIRED',
  'BAD_USER_INPUT',
]);

export interface UpstreamObserverOptions {
  logger: Logger;
  metrics: GatewayMetrics;
  sponsorLog: SponsorLog;
  /** Undefined when tracing is off: then no tracer call is made at all. */
  tracer: Tracer | undefined;
  /**
   * The headers that carry a call's span to the upstream (tracing.ts, `upstreamHeaders`), when the
   * gateway exports its own traces; undefined: none are added (a host's HTTP instrumentation does it).
   */
  traceHeaders?: ((span: Span) => Record<string, string>) | undefined;
  /** Told of every cost actually spent (the cost budgets and the running mean per model). */
  onSpent?: ((operation: Operation | undefined, call: ModelCall, usd: number) => void) | undefined;
  /**
   * Told of every answer the upstream itself gave to a call whose truth is known (never of a cache
   * hit or a shared call): the model scoreboard (models/scoreboard.ts) scores it.
   */
  onAnswer?: ((answer: ObservedAnswer) => void) | undefined;
}

export interface UpstreamObserver {
  /** What one HTTP attempt leaves (the `attempts` layer reports here). */
  onExchange(event: ExchangeEvent): void;
  /** The outermost layer: every logical call. */
  readonly interceptor: Interceptor;
  /** The innermost layer: every HTTP attempt. */
  readonly attempts: Interceptor;
}

export function createUpstreamObserver(options: UpstreamObserverOptions): UpstreamObserver {
  const { logger, metrics, sponsorLog, tracer, traceHeaders } = options;

  const onExchange = (event: ExchangeEvent): void => {
    const { error, request } = event;
    const operation = request.operation;
    if (event.statusCode !== null) operation?.ledger.answered();
    const outcome = error === undefined ? 'ok' : error.kind === 'cancelled' ? 'cancelled' : error.code;
    metrics.recordUpstreamCall(event.upstream, event.endpoint, event.statusCode, outcome, event.durationMs);
    if (error === undefined) return;
    // A 404/410 its caller handles (a version switch, a missing OpenAPI document) is no failure of
    // the upstream: the caller logs what it learnt, this attempt goes to debug.
    const retired = request.mayBeGone === true && isGone(error);
    const quiet = error.kind === 'cancelled' || CALLER_CAUSED.has(error.code) || retired;
    const level = quiet ? 'debug' : 'warn';
    if (!logger.isLevelEnabled(level)) return;
    const apiKey = operation?.caller.upstreamKey;
    const cause = error.cause instanceof Error ? error.cause.message : undefined;
    logger[level](
      {
        upstream: event.upstream,
        endpoint: event.endpoint,
        attempt: event.attempt,
        code: error.kind === 'cancelled' ? 'CANCELLED' : error.code,
        kind: error.kind,
        upstreamStatus: error.statusCode,
        durationMs: Math.round(event.durationMs),
        requestId: operation?.requestId,
        upstreamBody: redactApiKey(error.body?.slice(0, LOG_BODY_CHARS), apiKey),
        cause: redactApiKey(cause, apiKey),
      },
      error.kind === 'cancelled' ? 'upstream call cancelled' : 'upstream call failed',
    );
  };

  const spent = (request: UpstreamRequest, answer: UpstreamAnswer): number => {
    const usd = answer.facts.costUsd;
    if (usd === null) {
      if (answer.facts.costText !== undefined) {
        logger.warn(
          {
            upstream: request.upstream,
            endpoint: answer.endpoint,
            cost: answer.facts.costText.slice(0, 100),
          },
          'upstream cost did not parse as US dollars; counted as 0',
        );
      }
      return 0;
    }
    if (usd === 0) return 0;
    if (!Number.isFinite(usd) || usd < 0 || usd > MAX_PLAUSIBLE_COST_USD) {
      logger.warn(
        { upstream: request.upstream, endpoint: answer.endpoint, reportedCostUsd: String(usd) },
        'upstream reported an implausible cost; counted as 0',
      );
      return 0;
    }
    return usd;
  };

  const settled = (
    request: UpstreamRequest,
    started: number,
    span: Span | undefined,
    answer: UpstreamAnswer | undefined,
    error: unknown,
  ) => {
    const operation = request.operation;
    const endpoint = answer?.endpoint ?? request.form.endpoint;
    // One reading for the call's record and its scored answer: both say how long the call took.
    const elapsedMs = performance.now() - started;
    if (answer !== undefined) {
      const sponsor = answer.facts.sponsor;
      if (sponsor !== null && sponsor !== '') {
        operation?.ledger.sponsor(sponsor);
        if (answer.source === 'upstream') {
          metrics.recordSponsorMessage(request.upstream);
          sponsorLog.record(request.upstream, sponsor);
        }
      }
      if (answer.source === 'upstream') {
        const usd = spent(request, answer);
        if (usd > 0) {
          operation?.ledger.spent(usd);
          metrics.recordGpuCost(request.upstream, answer.facts.model, usd);
          if (request.pricing !== undefined) options.onSpent?.(operation, request.pricing, usd);
        }
        const { truth, pricing } = request;
        if (truth !== undefined && pricing !== undefined && options.onAnswer !== undefined)
          options.onAnswer({
            truth,
            call: pricing,
            value: answer.value,
            costUsd: usd,
            latencyMs: elapsedMs,
          });
      }
    }
    const failure = error instanceof UpstreamCallError ? error : undefined;
    // Refused by the circuit breaker: no HTTP request went out, but operators count these too.
    if (failure?.kind === 'circuit-open')
      metrics.recordUpstreamCall(request.upstream, endpoint, null, 'circuit-open', 0);
    const status = answer?.statusCode ?? failure?.statusCode ?? null;
    // A cancellation (the client went away) is no upstream failure: recorded as CANCELLED, as its
    // exchange line says, not as the UPSTREAM_UNAVAILABLE its (unread) field error carries.
    const code =
      answer !== undefined
        ? undefined
        : failure?.kind === 'cancelled'
          ? 'CANCELLED'
          : (failure?.code ?? 'INTERNAL_SERVER_ERROR');
    if (operation !== undefined) {
      const durationMs = Math.round(elapsedMs * 100) / 100;
      const source = answer?.source ?? 'upstream';
      operation.ledger.record(
        code === undefined
          ? { upstream: request.upstream, endpoint, status, durationMs, source }
          : { upstream: request.upstream, endpoint, status, durationMs, source, code },
      );
    }
    if (span !== undefined) {
      if (status !== null) span.setAttribute('http.response.status_code', status);
      if (answer !== undefined) span.setAttribute('gateway.answer.source', answer.source);
      if (code !== undefined) {
        span.setAttribute('error.type', code);
        span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      }
      span.end();
    }
  };

  /** One logical call on its way: the handler the layers below answer, once. */
  class ObservedCall<T> implements AnswerHandler<T> {
    readonly started = performance.now();
    readonly inFlight: CallInFlight | undefined;
    span: Span | undefined = undefined;
    /** Set once the call is recorded: a layer's bug that answers twice is not recorded twice. */
    private done = false;

    constructor(
      private readonly request: UpstreamRequest<T>,
      private readonly handler: AnswerHandler<T>,
    ) {
      this.inFlight = request.operation?.ledger.begin(request.pricing);
    }

    onAnswer(answer: UpstreamAnswer<T>): void {
      if (this.done) return;
      this.done = true;
      const request = this.request;
      if (this.inFlight !== undefined)
        request.operation?.ledger.end(this.inFlight, answer.source === 'upstream');
      try {
        settled(request as UpstreamRequest, this.started, this.span, answer as UpstreamAnswer, undefined);
      } catch (error) {
        // What a callback of the record threw fails the call, as a throw in an async layer did.
        this.handler.onError(error);
        return;
      }
      this.handler.onAnswer(answer);
    }

    onError(error: unknown): void {
      if (this.done) return;
      this.done = true;
      const request = this.request;
      if (this.inFlight !== undefined) request.operation?.ledger.end(this.inFlight, false);
      try {
        settled(request as UpstreamRequest, this.started, this.span, undefined, error);
      } catch (thrown) {
        this.handler.onError(thrown);
        return;
      }
      this.handler.onError(error);
    }
  }

  /** A layer below that throws instead of calling back fails the call, as in an async layer. */
  const send = <T>(next: Dispatch, request: UpstreamRequest<T>, call: ObservedCall<T>): void => {
    try {
      next(request, call);
    } catch (error) {
      call.onError(error);
    }
  };

  const interceptor: Interceptor = (next: Dispatch) =>
    function observed<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      const call = new ObservedCall(request, handler);
      if (tracer === undefined) {
        send(next, request, call);
        return;
      }
      const parent = request.operation?.span;
      const span = tracer.startSpan(
        `${request.upstream} ${request.form.endpoint}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'gateway.upstream': request.upstream,
            'gateway.upstream.endpoint': request.form.endpoint,
          },
        },
        parent === undefined ? context.active() : trace.setSpan(context.active(), parent),
      );
      call.span = span;
      // Own export: each attempt of this call carries the span's traceparent (transport.ts).
      const traced = traceHeaders === undefined ? request : { ...request, traceHeaders: traceHeaders(span) };
      // In the span's context, a host's HTTP instrumentation nests under it and propagates the trace
      // (the transport's undici dispatch runs inside it; so do retries, whose timers keep the context).
      context.with(trace.setSpan(context.active(), span), () => send(next, traced, call));
    };

  return { onExchange, interceptor, attempts: observeAttempts(onExchange) };
}
