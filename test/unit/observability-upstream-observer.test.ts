/**
 * The upstream observer on its own: what each HTTP attempt leaves (`onExchange`: metrics, the
 * operation's count of answered attempts, failure logs by level) and what each logical call leaves
 * (the interceptor: cost only for answers that came from the upstream, implausible costs counted as
 * 0 and logged, sponsor messages, the operation's call list, spans).
 */
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { keyCaller } from '../../src/gateway/identity.js';
import { createGatewayMetrics } from '../../src/gateway/observability/metrics.js';
import { createSponsorLog } from '../../src/gateway/observability/sponsor-log.js';
import type { Tracer } from '../../src/gateway/observability/tracing.js';
import {
  createUpstreamObserver,
  MAX_PLAUSIBLE_COST_USD,
} from '../../src/gateway/observability/upstream-observer.js';
import { Operation } from '../../src/gateway/operation/operation.js';
import {
  type AnswerFacts,
  type AnswerSource,
  type Dispatch,
  type EndpointName,
  fromPromised,
  type HttpForm,
  type PromiseDispatch,
  promised,
  type UpstreamAnswer,
  type UpstreamRequest,
} from '../../src/gateway/upstream/dispatch.js';
import type { ExchangeEvent } from '../../src/gateway/upstream/interceptors/attempts.js';
import { errorFromFailure, errorFromStatus } from '../../src/gateway/upstream/status-mapping.js';
import { capturedLogger, count, LEVEL } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';

const KEY = 'sk-observer-secret-77';

const form: HttpForm<string> = {
  endpoint: 'check',
  version: 'v1',
  method: 'POST',
  path: '/api/v1/check',
  retry: 'idempotent',
  decode: (json) => String(json),
  facts: () => ({ costUsd: null, sponsor: null, model: null }),
};

const operationOf = (apiKey?: string) =>
  new Operation({ caller: keyCaller(apiKey), requestId: 'req-obs', deadlineMs: 15_000 });

const PRICING = { upstream: 'null-check', kind: 'check', model: 'null-x-4o' } as const;

const requestOf = (operation: Operation | undefined): UpstreamRequest<string> => ({
  upstream: 'null-check',
  forms: { v1: form },
  form,
  operation,
  pricing: PRICING,
});

function setup(options: { level?: string; tracer?: Tracer } = {}) {
  const { logger, lines, text } = capturedLogger(options.level ?? 'debug');
  const metrics = createGatewayMetrics({ defaultMetrics: false });
  const spent = vi.fn();
  const real = createUpstreamObserver({
    logger: logger as Logger,
    metrics,
    sponsorLog: createSponsorLog({ logger: logger as Logger, intervalMs: 60_000 }),
    tracer: options.tracer,
    onSpent: spent,
  });
  // The outermost layer, called through the promise edge adapter.
  const observer = { ...real, interceptor: (next: Dispatch) => promised(real.interceptor(next)) };
  const value = (name: string, labels: Record<string, string>) => metricValue(metrics.registry, name, labels);
  /** The attempts counted for the check of null-check with this status and outcome. */
  const attempts = (status: string, outcome: string) =>
    value('gateway_upstream_requests_total', { upstream: 'null-check', endpoint: 'check', status, outcome });
  return { observer, metrics, lines, text, spent, value, attempts };
}

const exchange = (request: UpstreamRequest, extra: Partial<ExchangeEvent> = {}): ExchangeEvent => ({
  upstream: 'null-check',
  endpoint: 'check',
  statusCode: 200,
  durationMs: 12,
  attempt: 1,
  request,
  ...extra,
});

const status = (statusCode: number, text?: string) =>
  errorFromStatus({ upstream: 'null-check', endpoint: 'check', statusCode, text, retryAfter: undefined });

/** A next layer answering with these facts and source (or failing with `error`). */
function answering(
  facts: Partial<AnswerFacts>,
  source: AnswerSource = 'upstream',
  endpoint: EndpointName = 'check',
): Dispatch {
  return fromPromised(
    (async (_request: UpstreamRequest<string>): Promise<UpstreamAnswer<string>> => ({
      value: 'answer',
      source,
      endpoint,
      statusCode: 200,
      facts: { costUsd: null, sponsor: null, model: 'null-x-4o', ...facts },
    })) as PromiseDispatch,
  );
}

const failing = (error: unknown): Dispatch =>
  fromPromised((async () => {
    throw error;
  }) as PromiseDispatch);

describe('each HTTP attempt (onExchange)', () => {
  it('records an answered attempt in the request metrics and on the operation, and logs nothing', async () => {
    const { observer, value, attempts, lines } = setup();
    const operation = operationOf();
    observer.onExchange(exchange(requestOf(operation)));
    expect(await attempts('200', 'ok')).toBe(1);
    expect(
      await value('gateway_upstream_request_duration_seconds_count', {
        upstream: 'null-check',
        endpoint: 'check',
      }),
    ).toBe(1);
    expect(operation.ledger.upstreamCalls).toBe(1);
    expect(lines).toEqual([]);
  });

  it('counts failed attempts the upstream answered, not those it never answered', async () => {
    const { observer, value } = setup();
    const operation = operationOf();
    const request = requestOf(operation);
    observer.onExchange(exchange(request, { statusCode: 503, error: status(503) }));
    observer.onExchange(
      exchange(request, { statusCode: null, attempt: 2, error: errorFromFailure('timeout', 'null-check') }),
    );
    observer.onExchange(
      exchange(request, { statusCode: null, attempt: 3, error: errorFromFailure('refused', 'null-check') }),
    );
    expect(operation.ledger.upstreamCalls).toBe(1);
    const series = (statusLabel: string, outcome: string) =>
      value('gateway_upstream_requests_total', {
        upstream: 'null-check',
        endpoint: 'check',
        status: statusLabel,
        outcome,
      });
    expect(await series('503', 'UPSTREAM_UNAVAILABLE')).toBe(1);
    expect(await series('none', 'UPSTREAM_TIMEOUT')).toBe(1);
    expect(await series('none', 'UPSTREAM_UNAVAILABLE')).toBe(1);
  });

  it('logs upstream trouble at warn with the raw body (bounded, key scrubbed), never the key', () => {
    const { observer, lines, text } = setup();
    const body = `{"error":"paradox for ${KEY}"}${'x'.repeat(5000)}`;
    const error = status(500, body);
    observer.onExchange(exchange(requestOf(operationOf(KEY)), { statusCode: 500, attempt: 2, error }));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: LEVEL.warn,
      msg: 'upstream call failed',
      upstream: 'null-check',
      endpoint: 'check',
      attempt: 2,
      code: 'NULL_PARADOX',
      kind: 'status',
      upstreamStatus: 500,
      durationMs: 12,
      requestId: 'req-obs',
    });
    expect(String(lines[0]?.upstreamBody)).toContain('paradox for [redacted]');
    expect(String(lines[0]?.upstreamBody).length).toBeLessThanOrEqual(2048);
    expect(text()).not.toContain(KEY);
  });

  it('scrubs the key from the cause of a failure too', () => {
    const { observer, lines, text } = setup();
    const error = errorFromFailure('connection', 'null-check', {
      cause: new Error(`socket for ${KEY} hung up`),
    });
    observer.onExchange(exchange(requestOf(operationOf(KEY)), { statusCode: null, error }));
    expect(lines[0]?.cause).toBe('socket for [redacted] hung up');
    expect(text()).not.toContain(KEY);
  });

  it.each([
    ['418 (tier)', () => status(418), 'TIER_FORBIDDEN'],
    ['429 (rate limit)', () => status(429), 'RATE_LIMITED'],
    ['401 (key)', () => status(401), 'UNAUTHENTICATED'],
    ['400 (no value)', () => status(400, '{"error":{"code":"UNDEFINED_VALUE"}}'), 'UNDEFINED_VALUE'],
    ['400 (arguments)', () => status(400), 'BAD_USER_INPUT'],
  ])('logs what the caller caused, %s, at debug', (_name, error, code) => {
    const { observer, lines } = setup();
    observer.onExchange(exchange(requestOf(operationOf()), { statusCode: 400, error: error() }));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: LEVEL.debug, code });
  });

  it('logs a cancelled attempt at debug as cancelled, not as UPSTREAM_UNAVAILABLE, and labels it cancelled', async () => {
    const { observer, lines, attempts } = setup();
    const error = errorFromFailure('cancelled', 'null-check', { cause: new Error('client went away') });
    expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
    observer.onExchange(exchange(requestOf(operationOf()), { statusCode: null, error }));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: LEVEL.debug, msg: 'upstream call cancelled', code: 'CANCELLED' });
    expect(lines.filter((l) => l.code === 'UPSTREAM_UNAVAILABLE')).toEqual([]);
    expect(await attempts('none', 'cancelled')).toBe(1);
    expect(await attempts('none', 'UPSTREAM_UNAVAILABLE')).toBeUndefined();
  });

  it('logs a 404/410 the API-versions layer may switch on at debug; other failures of such attempts at warn', () => {
    const { observer, lines } = setup();
    const request = { ...requestOf(operationOf()), mayBeGone: true };
    observer.onExchange(exchange(request, { statusCode: 410, error: status(410) }));
    observer.onExchange(exchange(request, { statusCode: 404, error: status(404) }));
    expect(lines.map((l) => [l.level, l.upstreamStatus])).toEqual([
      [LEVEL.debug, 410],
      [LEVEL.debug, 404],
    ]);
    observer.onExchange(exchange(request, { statusCode: 500, error: status(500) }));
    observer.onExchange(
      exchange(request, { statusCode: null, error: errorFromFailure('refused', 'null-check') }),
    );
    // Without the mark, a 404 is an upstream failure like any other.
    observer.onExchange(exchange(requestOf(operationOf()), { statusCode: 404, error: status(404) }));
    expect(lines.slice(2).map((l) => [l.level, l.upstreamStatus])).toEqual([
      [LEVEL.warn, 500],
      [LEVEL.warn, undefined],
      [LEVEL.warn, 404],
    ]);
  });

  it('writes no debug line when the logger is at info, and still the warn lines', () => {
    const { observer, lines } = setup({ level: 'info' });
    const request = requestOf(operationOf());
    observer.onExchange(exchange(request, { statusCode: 418, error: status(418) }));
    observer.onExchange(
      exchange(request, { statusCode: null, error: errorFromFailure('cancelled', 'null-check') }),
    );
    expect(lines).toEqual([]);
    observer.onExchange(exchange(request, { statusCode: 502, error: status(502) }));
    expect(lines.map((l) => l.level)).toEqual([LEVEL.warn]);
  });

  it('counts an attempt outside any operation in the metrics', async () => {
    const { observer, attempts } = setup();
    observer.onExchange(exchange(requestOf(undefined)));
    expect(await attempts('200', 'ok')).toBe(1);
  });
});

describe('each logical call (the interceptor)', () => {
  it('counts the cost of an upstream answer on the operation, in the metric and for the budgets', async () => {
    const { observer, value, spent } = setup();
    const operation = operationOf();
    await observer.interceptor(answering({ costUsd: 0.25, model: 'null-x-4o' }))(requestOf(operation));
    await observer.interceptor(answering({ costUsd: 0.5, model: 'null-x-4o' }))(requestOf(operation));
    expect(operation.ledger.costUsd).toBe(0.75);
    expect(await value('gateway_gpu_cost_usd_total', { upstream: 'null-check', model: 'null-x-4o' })).toBe(
      0.75,
    );
    // What the call asked for (its pricing), not what the answer says, keys the running means.
    expect(spent.mock.calls).toEqual([
      [operation, PRICING, 0.25],
      [operation, PRICING, 0.5],
    ]);
  });

  it.each(['cache', 'shared'] as const)('counts no cost for a %s answer', async (source) => {
    const { observer, value, spent } = setup();
    const operation = operationOf();
    await observer.interceptor(answering({ costUsd: 0.25 }, source))(requestOf(operation));
    expect(operation.ledger.costUsd).toBe(0);
    expect(
      await value('gateway_gpu_cost_usd_total', { upstream: 'null-check', model: 'null-x-4o' }),
    ).toBeUndefined();
    expect(spent).not.toHaveBeenCalled();
    expect(operation.ledger.calls).toEqual([expect.objectContaining({ source, status: 200 })]);
  });

  it('counts the cost of answers outside any operation', async () => {
    const { observer, value, spent } = setup();
    await observer.interceptor(answering({ costUsd: 0.5, model: 'pi-x-4o' }))({
      ...requestOf(undefined),
      upstream: 'pi-digits',
    });
    expect(await value('gateway_gpu_cost_usd_total', { upstream: 'pi-digits', model: 'pi-x-4o' })).toBe(0.5);
    expect(spent).toHaveBeenCalledWith(undefined, PRICING, 0.5);
  });

  it.each([
    ['negative', -1],
    ['not a number', Number.NaN],
    ['infinite', Number.POSITIVE_INFINITY],
    ['absurd', MAX_PLAUSIBLE_COST_USD + 0.01],
  ])('counts a %s cost as 0 and logs it', async (_name, usd) => {
    const { observer, value, spent, lines } = setup();
    const operation = operationOf();
    const answer = await observer.interceptor(answering({ costUsd: usd }))(requestOf(operation));
    // The answer itself goes through.
    expect(answer.value).toBe('answer');
    expect(operation.ledger.costUsd).toBe(0);
    expect(spent).not.toHaveBeenCalled();
    expect(
      await value('gateway_gpu_cost_usd_total', { upstream: 'null-check', model: 'null-x-4o' }),
    ).toBeUndefined();
    expect(count(lines, LEVEL.warn, 'upstream reported an implausible cost; counted as 0')).toBe(1);
    expect(lines[0]).toMatchObject({
      upstream: 'null-check',
      endpoint: 'check',
      reportedCostUsd: String(usd),
    });
  });

  it('counts a cost of exactly the plausible maximum; no cost or 0 counts nothing and logs nothing', async () => {
    const { observer, lines } = setup();
    const operation = operationOf();
    await observer.interceptor(answering({ costUsd: MAX_PLAUSIBLE_COST_USD }))(requestOf(operation));
    await observer.interceptor(answering({ costUsd: null }))(requestOf(operation));
    await observer.interceptor(answering({ costUsd: 0 }))(requestOf(operation));
    expect(operation.ledger.costUsd).toBe(MAX_PLAUSIBLE_COST_USD);
    expect(lines).toEqual([]);
  });

  it('gives every answer’s sponsor to the operation; only upstream answers count and log it', async () => {
    const { observer, value, lines } = setup();
    const operation = operationOf();
    await observer.interceptor(answering({ sponsor: 'NullCorp' }, 'cache'))(requestOf(operation));
    await observer.interceptor(answering({ sponsor: 'NullCorp' }, 'shared'))(requestOf(operation));
    expect(operation.ledger.sponsors).toEqual(['NullCorp']);
    expect(await value('gateway_sponsor_messages_total', { upstream: 'null-check' })).toBe(0);
    expect(lines).toEqual([]);

    await observer.interceptor(answering({ sponsor: 'NullCorp' }))(requestOf(operation));
    await observer.interceptor(answering({ sponsor: 'Void Inc.' }))(requestOf(operation));
    await observer.interceptor(answering({ sponsor: '' }))(requestOf(operation));
    expect(operation.ledger.sponsors).toEqual(['NullCorp', 'Void Inc.']);
    expect(await value('gateway_sponsor_messages_total', { upstream: 'null-check' })).toBe(2);
    expect(lines.filter((l) => l.msg === 'sponsor message').map((l) => l.sponsoredBy)).toEqual([
      'NullCorp',
      'Void Inc.',
    ]);
  });

  it('records each logical call on the operation with the endpoint that answered', async () => {
    const { observer } = setup();
    const operation = operationOf();
    // Sent as v1 `check`, answered by v2 `null-or-not` (a version switch below).
    await observer.interceptor(answering({}, 'upstream', 'null-or-not'))(requestOf(operation));
    expect(operation.ledger.calls).toEqual([
      {
        upstream: 'null-check',
        endpoint: 'null-or-not',
        status: 200,
        durationMs: expect.any(Number),
        source: 'upstream',
      },
    ]);
    expect(operation.ledger.touchedUpstream).toBe(true);
  });

  it('records a call once, even if a layer below calls back twice (a bug), and a throw as a failure', async () => {
    const { observer } = setup();
    const operation = operationOf();
    const twice: Dispatch = (request, handler) => {
      const answer = {
        value: 'answer' as never,
        source: 'upstream' as const,
        endpoint: request.form.endpoint,
        statusCode: 200,
        facts: { costUsd: null, sponsor: null, model: null },
      };
      handler.onAnswer(answer);
      handler.onError(status(503));
    };
    expect((await observer.interceptor(twice)(requestOf(operation))).value).toBe('answer');
    const bug = new TypeError('bug');
    const throwing: Dispatch = () => {
      throw bug;
    };
    expect(
      await observer
        .interceptor(throwing)(requestOf(operation))
        .catch((e: unknown) => e),
    ).toBe(bug);
    expect(operation.ledger.calls).toEqual([
      expect.objectContaining({ endpoint: 'check', status: 200, source: 'upstream' }),
      expect.objectContaining({ endpoint: 'check', status: null, code: 'INTERNAL_SERVER_ERROR' }),
    ]);
  });

  it('records a failed call with its code and status, and rethrows the same error', async () => {
    const { observer } = setup();
    const operation = operationOf();
    const error = status(503);
    expect(
      await observer
        .interceptor(failing(error))(requestOf(operation))
        .catch((e: unknown) => e),
    ).toBe(error);
    const bug = new TypeError('bug');
    expect(
      await observer
        .interceptor(failing(bug))(requestOf(operation))
        .catch((e: unknown) => e),
    ).toBe(bug);
    expect(operation.ledger.calls).toEqual([
      expect.objectContaining({
        endpoint: 'check',
        status: 503,
        source: 'upstream',
        code: 'UPSTREAM_UNAVAILABLE',
      }),
      expect.objectContaining({ endpoint: 'check', status: null, code: 'INTERNAL_SERVER_ERROR' }),
    ]);
    expect(operation.ledger.costUsd).toBe(0);
  });

  it('with a tracer, makes one client span per logical call with its outcome', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const { observer } = setup({ tracer: provider.getTracer('test') });
    await observer.interceptor(answering({}, 'cache'))(requestOf(operationOf()));
    await observer
      .interceptor(failing(status(418)))(requestOf(operationOf()))
      .catch(() => undefined);
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['null-check check', 'null-check check']);
    expect(spans[0]?.attributes).toMatchObject({
      'gateway.upstream': 'null-check',
      'gateway.upstream.endpoint': 'check',
      'http.response.status_code': 200,
      'gateway.answer.source': 'cache',
    });
    expect(spans[1]?.attributes).toMatchObject({
      'http.response.status_code': 418,
      'error.type': 'TIER_FORBIDDEN',
    });
    expect(spans[1]?.status).toMatchObject({ code: 2, message: 'TIER_FORBIDDEN' });
    await provider.shutdown();
  });
});
