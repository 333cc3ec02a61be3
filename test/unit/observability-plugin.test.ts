/**
 * The observability plugin and client wrapper on a minimal Yoga instance of their own, with in-memory
 * upstream clients: the log line, the metrics, `extensions.sponsoredBy`, the sponsor log and the spans.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { type Tracer, type TracerProvider, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { createGraphQLError, createSchema, createYoga } from 'graphql-yoga';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createObservability,
  type GatewayObservability,
} from '../../src/gateway/observability/create-observability.js';
import { UpstreamError } from '../../src/gateway/upstream/errors.js';
import type {
  CallOptions,
  HealthProbe,
  NullCheckResponse,
  NullHealthBody,
  PiDigitsClient,
  PiHealthBody,
  PiResponse,
  UpstreamClients,
} from '../../src/gateway/upstream/types.js';
import { REDACT_PATHS } from '../../src/shared/logger.js';

const SECRET_KEY = 'sk-live-very-secret-123';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) {
        if (!line) continue;
        raw.push(line);
        lines.push(JSON.parse(line));
      }
      callback();
    },
  });
  const logger = pino({ level: 'info', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, stream);
  return { logger, lines, raw };
}

/** In-memory upstream clients; `calls` records the CallOptions each call got. */
function fakeClients() {
  const calls: CallOptions[] = [];
  const piAnswer = (digits: number, sponsor: string | null): PiResponse => ({
    digits: '3.14159265358979'.slice(0, digits === 0 ? 1 : digits + 2),
    precision: digits,
    confidence: 0.99,
    model: 'pi-x-4o',
    inferenceTimeMs: 3,
    gpuCostUsd: 0.125,
    sponsoredBy: sponsor,
    disclaimer: null,
    constantMarker: null,
    raw: {},
  });
  const probe = <B>(body: B): HealthProbe<B> => ({
    reachable: true,
    latencyMs: 1,
    statusCode: 200,
    body,
    error: null,
    breaker: 'closed',
  });
  const piDigits: PiDigitsClient = {
    async pi(request, options) {
      calls.push(options ?? {});
      const digits = request.digits ?? 5;
      if (digits > 3 && options?.apiKey === undefined) {
        throw new UpstreamError('TIER_FORBIDDEN', 'the free tier allows 3 digits', {
          upstream: 'pi-digits',
          statusCode: 418,
          body: { error: { message: 'upstream secret body' } },
        });
      }
      return piAnswer(digits, digits % 2 === 0 ? 'Sponsor Even' : 'Sponsor Odd');
    },
    async inference() {
      throw new UpstreamError('WAIVER_REQUIRED', 'sign the waiver', {
        upstream: 'pi-digits',
        statusCode: 400,
      });
    },
    async health(options) {
      calls.push(options ?? {});
      return probe<PiHealthBody>({
        status: 'ok',
        piAvailable: true,
        gpuCluster: 'up',
        monthlyBurnRate: '$1',
      });
    },
    async close() {},
  };
  const clients: UpstreamClients = {
    nullCheck: {
      async check(_request, options) {
        calls.push(options ?? {});
        const answer: NullCheckResponse = {
          answer: { kind: 'boolean', isNull: true },
          confidence: 0.5,
          model: 'null-x-4o',
          inferenceTimeMs: 1,
          gpuCostUsd: 0.5,
          expertsConsulted: 3,
          sponsoredBy: 'Sponsor Even',
          disclaimer: null,
          raw: {},
        };
        return answer;
      },
      async health(options) {
        calls.push(options ?? {});
        return {
          ...probe<NullHealthBody>({
            status: 'ok',
            nullDetectable: true,
            undefinedDetectable: false,
            clusterStatus: 'up',
            philosophyConsultant: null,
            monthlyBurn: '$1',
          }),
          breaker: 'half-open',
        };
      },
      async close() {},
    },
    piDigits,
  };
  return { clients, calls };
}

interface Ctx {
  requestId: string;
  apiKey: string | undefined;
}

/** A minimal gateway: the real plugin and wrapper, a tiny schema that calls the clients as the real one does. */
function buildGateway(options: { tracing?: boolean; tracerProvider?: TracerProvider } = {}) {
  const { logger, lines, raw } = capture();
  const { clients: rawClients, calls } = fakeClients();
  const observability = createObservability({
    config: { observability: { sponsorLogIntervalMs: 60_000, tracing: options.tracing ?? false } },
    logger,
    defaultMetrics: false,
    tracerProvider: options.tracerProvider,
  });
  const clients = observability.instrumentClients(rawClients);
  const toGraphQLError = (error: unknown): never => {
    throw error instanceof UpstreamError
      ? createGraphQLError(error.message, { extensions: error.toExtensions() })
      : error;
  };
  const yoga = createYoga<object, Ctx>({
    logging: false,
    schema: createSchema<Ctx>({
      typeDefs: /* GraphQL */ `
        type Query {
          pi(digits: Int): String
          isNull: Boolean
          inference: String
          health: String!
        }
      `,
      resolvers: {
        Query: {
          pi: (_: unknown, args: { digits?: number }, ctx: Ctx) =>
            clients.piDigits
              .pi({ digits: args.digits }, { requestId: ctx.requestId, apiKey: ctx.apiKey })
              .then((r) => r.digits, toGraphQLError),
          isNull: (_: unknown, _args: unknown, ctx: Ctx) =>
            clients.nullCheck
              .check({ hasValue: true, value: null }, { requestId: ctx.requestId, apiKey: ctx.apiKey })
              .then((r) => r.answer.kind === 'boolean' && r.answer.isNull),
          inference: (_: unknown, _args: unknown, ctx: Ctx) =>
            clients.piDigits
              .inference({ desiredDigits: 3, liabilityWaiverSigned: false }, { requestId: ctx.requestId })
              .then((r) => r.digits, toGraphQLError),
          health: async (_: unknown, _args: unknown, ctx: Ctx) => {
            const [n, p] = await Promise.all([
              clients.nullCheck.health({ requestId: ctx.requestId }),
              clients.piDigits.health({ requestId: ctx.requestId }),
            ]);
            return `${n.body?.status}/${p.body?.status}`;
          },
        },
      },
    }),
    // What the real gateway does: the caller's x-request-id or a new one, and the caller's key.
    context: ({ request }) => ({
      requestId: request.headers.get('x-request-id') ?? randomUUID(),
      apiKey: request.headers.get('x-api-key') ?? request.headers.get('authorization')?.slice(7) ?? undefined,
    }),
    plugins: [observability.plugin],
  });
  const post = (query: string, headers: Record<string, string> = {}, operationName?: string) =>
    yoga.fetch('http://127.0.0.1/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      body: JSON.stringify({ query, operationName }),
    });
  const operationLines = () => lines.filter((l) => l.msg === 'graphql operation');
  return { yoga, observability, post, lines, raw, calls, operationLines };
}

async function metricsText(observability: GatewayObservability) {
  return observability.metrics.render();
}

describe('observability plugin: the log line', () => {
  it('writes one line per operation with name, type, outcome, duration, request id and upstream calls', async () => {
    const g = buildGateway();
    const res = await g.post(
      'query Digits { a: pi(digits: 2) b: pi(digits: 3) }',
      { 'x-request-id': 'req-abc-1' },
      'Digits',
    );
    const body = await res.json();
    expect(body.data).toEqual({ a: '3.14', b: '3.141' });
    const ops = g.operationLines();
    expect(ops).toHaveLength(1);
    const line = ops[0]!;
    expect(line).toMatchObject({
      level: 30,
      requestId: 'req-abc-1',
      operation: 'Digits',
      operationType: 'query',
      outcome: 'ok',
      gpuCostUsd: 0.25,
    });
    expect(typeof line.durationMs).toBe('number');
    expect(line.upstreamCalls).toEqual([
      expect.objectContaining({ upstream: 'pi-digits', endpoint: 'pi', status: 200 }),
      expect.objectContaining({ upstream: 'pi-digits', endpoint: 'pi', status: 200 }),
    ]);
    // The id reached every upstream call.
    expect(g.calls.map((c) => c.requestId)).toEqual(['req-abc-1', 'req-abc-1']);
    expect(g.observability.inFlightCount).toBe(0);
  });

  it('takes the operation name from the document when the request does not name it', async () => {
    const g = buildGateway();
    await g.post('query OnlyOne { pi(digits: 1) }');
    await g.post('{ pi(digits: 1) }');
    expect(g.operationLines().map((l) => l.operation)).toEqual(['OnlyOne', null]);
    const text = await metricsText(g.observability);
    expect(text).toContain('gateway_operations_total{operation="OnlyOne",type="query",outcome="ok"} 1');
    expect(text).toContain('gateway_operations_total{operation="(anonymous)",type="query",outcome="ok"} 1');
  });

  it('records partial results, failed operations and their error codes and upstream statuses', async () => {
    const g = buildGateway();
    await g.post('query Mixed { ok: pi(digits: 2) no: pi(digits: 9) }', { 'x-request-id': 'r-mixed' });
    await g.post('query Fails { pi(digits: 9) }', { 'x-request-id': 'r-fail' });
    const [mixed, fails] = g.operationLines();
    expect(mixed).toMatchObject({ requestId: 'r-mixed', outcome: 'partial', errorCodes: ['TIER_FORBIDDEN'] });
    expect(mixed?.upstreamCalls).toEqual(
      expect.arrayContaining([expect.objectContaining({ status: 418, code: 'TIER_FORBIDDEN' })]),
    );
    expect(fails).toMatchObject({
      level: 40,
      requestId: 'r-fail',
      outcome: 'error',
      errorCodes: ['TIER_FORBIDDEN'],
    });
    const text = await metricsText(g.observability);
    expect(text).toContain('gateway_operations_total{operation="Mixed",type="query",outcome="partial"} 1');
    expect(text).toContain('gateway_operations_total{operation="Fails",type="query",outcome="error"} 1');
  });

  it('logs operations that fail validation as "invalid", without upstream calls', async () => {
    const g = buildGateway();
    const body = await (await g.post('query Bad { nope }', { 'x-request-id': 'r-bad' })).json();
    expect(body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(g.operationLines()).toEqual([
      expect.objectContaining({ requestId: 'r-bad', operation: null, outcome: 'invalid', upstreamCalls: [] }),
    ]);
    expect(g.calls).toHaveLength(0);
  });

  it('never writes an API key or an upstream error body into any log line', async () => {
    const g = buildGateway();
    await g.post('query K { pi(digits: 9) isNull }', { authorization: `Bearer ${SECRET_KEY}` });
    await g.post('query K2 { pi(digits: 9) }', { 'x-api-key': SECRET_KEY });
    await g.post('query K3 { pi(digits: 9) }');
    expect(g.raw.length).toBeGreaterThanOrEqual(3);
    for (const line of g.raw) {
      expect(line).not.toContain(SECRET_KEY);
      expect(line).not.toContain('upstream secret body');
    }
    // The key did reach the upstream client: the log is clean by design, not because nothing flowed.
    expect(g.calls.some((c) => c.apiKey === SECRET_KEY)).toBe(true);
  });

  it('accounts health probes as upstream calls and keeps their breaker state', async () => {
    const g = buildGateway();
    await g.post('query H { health }', { 'x-request-id': 'r-h' });
    expect(g.operationLines()[0]?.upstreamCalls).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ upstream: 'null-check', endpoint: 'health', status: 200 }),
        expect.objectContaining({ upstream: 'pi-digits', endpoint: 'health', status: 200 }),
      ]),
    );
    const text = await metricsText(g.observability);
    expect(text).toContain('gateway_upstream_breaker_state{upstream="null-check",state="half-open"} 1');
  });

  it('writes no operation line when the level is above info, and still counts', async () => {
    const { logger, lines } = capture();
    logger.level = 'warn';
    const obs = createObservability({
      config: { observability: { sponsorLogIntervalMs: 0, tracing: false } },
      logger,
      defaultMetrics: false,
    });
    const yoga = createYoga({
      logging: false,
      schema: createSchema({ typeDefs: 'type Query { x: Int }', resolvers: { Query: { x: () => 1 } } }),
      plugins: [obs.plugin],
    });
    await yoga.fetch('http://127.0.0.1/graphql?query=query+Q{x}', {
      headers: { accept: 'application/json' },
    });
    expect(lines).toHaveLength(0);
    expect(await obs.metrics.render()).toContain(
      'gateway_operations_total{operation="Q",type="query",outcome="ok"} 1',
    );
  });
});

describe('observability plugin: sponsor messages', () => {
  it('exposes the distinct sponsor messages of the operation in extensions.sponsoredBy', async () => {
    const g = buildGateway();
    const res = await g.post('query S { a: pi(digits: 2) b: pi(digits: 3) c: pi(digits: 1) isNull }');
    const body = await res.json();
    expect([...body.extensions.sponsoredBy].sort()).toEqual(['Sponsor Even', 'Sponsor Odd']);
  });

  it('adds no extensions when no answer carried a sponsor message', async () => {
    const g = buildGateway();
    const body = await (await g.post('query N { pi(digits: 9) }')).json();
    expect(body.extensions?.sponsoredBy).toBeUndefined();
  });

  it('logs each distinct message once per interval, not once per request', async () => {
    const g = buildGateway();
    for (let i = 0; i < 5; i++) await g.post('query S { pi(digits: 2) isNull }');
    const sponsorLines = g.lines.filter((l) => l.msg === 'sponsor message');
    expect(sponsorLines.map((l) => `${l.upstream}:${l.sponsoredBy}`).sort()).toEqual([
      'null-check:Sponsor Even',
      'pi-digits:Sponsor Even',
    ]);
    const text = await metricsText(g.observability);
    expect(text).toContain('gateway_sponsor_messages_total{upstream="pi-digits"} 5');
    expect(text).toContain('gateway_upstream_gpu_cost_usd_total{upstream="null-check"} 2.5');
  });
});

describe('observability plugin: /metrics and onCall', () => {
  it('serves the Prometheus text at GET /metrics with per-attempt upstream metrics from onCall', async () => {
    const g = buildGateway();
    g.observability.onCall({
      upstream: 'pi-digits',
      endpoint: 'pi',
      statusCode: 503,
      durationMs: 4,
      outcome: 'unavailable',
      attempt: 1,
    });
    g.observability.onCall({
      upstream: 'pi-digits',
      endpoint: 'pi',
      statusCode: null,
      durationMs: 1,
      outcome: 'circuit_open',
      attempt: 2,
      breaker: 'open',
    });
    await g.post('query M { pi(digits: 1) }');
    const res = await g.yoga.fetch('http://127.0.0.1/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toContain('gateway_operations_total{operation="M",type="query",outcome="ok"} 1');
    expect(text).toContain(
      'gateway_upstream_requests_total{upstream="pi-digits",endpoint="pi",status="503",outcome="unavailable"} 1',
    );
    expect(text).toContain(
      'gateway_upstream_requests_total{upstream="pi-digits",endpoint="pi",status="none",outcome="circuit_open"} 1',
    );
    expect(text).toContain('gateway_upstream_breaker_state{upstream="pi-digits",state="open"} 1');
    expect(text).toContain('# TYPE gateway_operation_duration_seconds histogram');
    // A scrape is not a GraphQL operation.
    expect(g.operationLines()).toHaveLength(1);
  });

  it('leaves POST /metrics to the rest of the server', async () => {
    const g = buildGateway();
    const res = await g.yoga.fetch('http://127.0.0.1/metrics', { method: 'POST', body: '{}' });
    expect(res.status).toBe(404);
  });

  it('counts dedup hits reported by the schema', async () => {
    const g = buildGateway();
    g.observability.recordDedupHit('null-check', 'dataloader');
    expect(await metricsText(g.observability)).toContain(
      'gateway_dedup_hits_total{upstream="null-check",source="dataloader"} 1',
    );
  });
});

describe('observability plugin: tracing', () => {
  let provider: BasicTracerProvider | undefined;
  afterEach(async () => {
    await provider?.shutdown();
    provider = undefined;
    trace.disable();
  });

  it('creates an operation span with a child span per upstream call when tracing is on', async () => {
    const exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const g = buildGateway({ tracing: true, tracerProvider: provider });
    await g.post('query Traced { ok: pi(digits: 2) no: pi(digits: 9) }', { 'x-request-id': 'r-trace' });
    const spans = exporter.getFinishedSpans();
    const op = spans.find((s) => s.name === 'query Traced');
    expect(op).toBeDefined();
    expect(op?.attributes).toMatchObject({
      'graphql.operation.name': 'Traced',
      'graphql.operation.type': 'query',
      'gateway.request_id': 'r-trace',
      'gateway.outcome': 'partial',
    });
    const upstream = spans.filter((s) => s.name === 'pi-digits pi');
    expect(upstream).toHaveLength(2);
    for (const span of upstream) {
      expect(span.parentSpanContext?.spanId).toBe(op?.spanContext().spanId);
      expect(span.spanContext().traceId).toBe(op?.spanContext().traceId);
    }
    const failed = upstream.find((s) => s.attributes['error.type'] === 'TIER_FORBIDDEN');
    expect(failed?.attributes['http.response.status_code']).toBe(418);
    expect(failed?.status.code).toBe(2);
  });

  it('uses the globally registered provider (the host SDK) by default', async () => {
    const exporter = new InMemorySpanExporter();
    provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    const g = buildGateway({ tracing: true });
    await g.post('query Global { pi(digits: 1) }');
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(
      expect.arrayContaining(['query Global', 'pi-digits pi']),
    );
  });

  it('makes no tracer call at all when tracing is off', async () => {
    let providerCalls = 0;
    let tracerCalls = 0;
    // A provider whose tracer counts every call; registered globally too, as a host SDK would.
    const counting: TracerProvider = {
      getTracer() {
        providerCalls++;
        const tracer = trace.getTracerProvider().getTracer('noop');
        return new Proxy(tracer, {
          get(target, prop, receiver) {
            tracerCalls++;
            return Reflect.get(target, prop, receiver);
          },
        }) as Tracer;
      },
    };
    trace.setGlobalTracerProvider(counting);
    const g = buildGateway({ tracing: false, tracerProvider: counting });
    expect(g.observability.tracer).toBeUndefined();
    const body = await (await g.post('query Off { pi(digits: 2) health }')).json();
    expect(body.data.pi).toBe('3.14');
    expect(providerCalls).toBe(0);
    expect(tracerCalls).toBe(0);
  });
});
