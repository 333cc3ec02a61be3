/**
 * Observability of the real gateway over a real socket, in front of the reference services: the log
 * line and request id (gateway, response and upstream agree), sponsor logging and extensions, /metrics.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { SpanKind } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDigitEngine, type DigitEngine } from '../../src/digits/digit-engine.js';
import {
  createObservability,
  type GatewayObservability,
} from '../../src/gateway/observability/create-observability.js';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { createGateway } from '../../src/gateway/yoga.js';
import { type RunningServices, startServices } from '../../src/services/start-services.js';
import { REDACT_PATHS } from '../../src/shared/logger.js';

type LogLine = Record<string, unknown>;

function captureLogger(level = 'info') {
  const lines: LogLine[] = [];
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
  return {
    logger: pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, stream),
    lines,
    raw,
  };
}

const SECRET = 'demo-pro';

let services: RunningServices;
let clients: HttpUpstreamClients;
let digits: DigitEngine;
let server: Server;
let url: string;
let observability: GatewayObservability;
const gatewayLog = captureLogger();
const servicesLog = captureLogger();

beforeAll(async () => {
  services = await startServices({
    host: '127.0.0.1',
    logger: servicesLog.logger,
    logRequests: true,
    freeRateLimit: 0,
  });
  const config = loadConfig({ NODE_ENV: 'test', RESPONSE_CACHE: 'false', SPONSOR_LOG_INTERVAL_MS: '60000' });
  observability = createObservability({ config, logger: gatewayLog.logger });
  clients = createUpstreamClients({
    nullBaseUrl: services.nullCheckUrl,
    piBaseUrl: services.piDigitsUrl,
    onCall: observability.onCall,
  });
  digits = createDigitEngine({ useWorker: false });
  const gateway = createGateway({ clients, digits, config, logger: gatewayLog.logger, observability });
  server = createServer(gateway);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await clients?.close();
  await services?.close();
  await digits?.close();
});

async function post(
  query: string,
  headers: Record<string, string> = {},
  variables?: Record<string, unknown>,
) {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return {
    res,
    body: (await res.json()) as {
      data?: Record<string, unknown>;
      errors?: unknown[];
      extensions?: { sponsoredBy?: string[] };
    },
  };
}

const operationLine = (requestId: string) =>
  gatewayLog.lines.find((l) => l.msg === 'graphql operation' && l.requestId === requestId);

describe('request id and the operation log line', () => {
  it('uses the caller’s x-request-id on the response, in the log line and at the upstream', async () => {
    const { res, body } = await post('query ObsPi { pi(digits: 3) { ... on ConstantDigits { digits } } }', {
      'x-request-id': 'obs-it-0001',
    });
    expect(body.data?.pi).toEqual({ digits: '3.141' });
    expect(res.headers.get('x-request-id')).toBe('obs-it-0001');
    expect(operationLine('obs-it-0001')).toMatchObject({
      operation: 'ObsPi',
      operationType: 'query',
      outcome: 'ok',
      upstreamCalls: [expect.objectContaining({ upstream: 'pi-digits', endpoint: 'pi', status: 200 })],
    });
    expect(servicesLog.lines.some((l) => l.reqId === 'obs-it-0001')).toBe(true);
  });

  it('generates an id when the caller sends none, and uses that one everywhere', async () => {
    const { res } = await post('query ObsNull { isNull(value: null) { __typename } }');
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(operationLine(id as string)).toMatchObject({
      operation: 'ObsNull',
      upstreamCalls: [expect.objectContaining({ upstream: 'null-check', endpoint: 'check', status: 200 })],
    });
    expect(servicesLog.lines.some((l) => l.reqId === id)).toBe(true);
  });

  it('logs an operation rejected by validation with the generated id the response carries', async () => {
    const { res, body } = await post('query ObsInvalid { noSuchField }');
    expect(body.errors?.length).toBeGreaterThan(0);
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(operationLine(id as string)).toMatchObject({
      outcome: 'invalid',
      upstreamCalls: [],
    });
  });

  it('logs failed upstream calls with their status and code, partial results as partial', async () => {
    await post('query ObsPartial { a: isNull(value: 1) { __typename } b: pi(digits: 50) { __typename } }', {
      'x-request-id': 'obs-it-partial',
    });
    const line = operationLine('obs-it-partial');
    expect(line).toMatchObject({ outcome: 'partial', errorCodes: ['TIER_FORBIDDEN'] });
    expect(line?.upstreamCalls).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ upstream: 'pi-digits', status: 418, code: 'TIER_FORBIDDEN' }),
      ]),
    );
  });

  it('never writes the API key into a log line', async () => {
    await post('query ObsKey { pi(digits: 5) { __typename } }', { authorization: `Bearer ${SECRET}` });
    await post('query ObsKey2 { pi(digits: 5) { __typename } }', { 'x-api-key': SECRET });
    await post('query ObsBadKey { pi(digits: 5) { __typename } }', { 'x-api-key': 'sk-wrong-key-42' });
    expect(gatewayLog.raw.length).toBeGreaterThan(3);
    for (const line of gatewayLog.raw) {
      expect(line).not.toContain(SECRET);
      expect(line).not.toContain('sk-wrong-key-42');
    }
  });
});

describe('sponsor messages', () => {
  it('exposes them in extensions.sponsoredBy and logs each distinct one once per interval', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { body } = await post(
        'query ObsSponsor { pi(digits: 2) { ... on ConstantDigits { sponsoredBy } } }',
      );
      const sponsors = body.extensions?.sponsoredBy ?? [];
      expect(sponsors.length).toBeGreaterThan(0);
      const field = (body.data?.pi as { sponsoredBy: string | null } | undefined)?.sponsoredBy;
      expect(sponsors).toContain(field);
      seen.push(...sponsors);
    }
    const logged = gatewayLog.lines.filter((l) => l.msg === 'sponsor message' && l.upstream === 'pi-digits');
    for (const message of new Set(seen)) {
      expect(logged.filter((l) => l.sponsoredBy === message)).toHaveLength(1);
    }
    // Six answers, fewer lines: repeats inside the interval are counted, not logged.
    expect(logged.length).toBeLessThanOrEqual(new Set(seen).size);
  });
});

describe('GET /metrics', () => {
  it('serves this gateway’s metrics in Prometheus text format', async () => {
    const res = await fetch(`${url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toContain('gateway_operations_total{operation="ObsPi",type="query",outcome="ok"} 1');
    expect(text).toContain(
      'gateway_operations_total{operation="ObsPartial",type="query",outcome="partial"} 1',
    );
    expect(text).toMatch(
      /gateway_operation_duration_seconds_bucket\{le="\+Inf",operation="ObsPi",type="query",outcome="ok"\} 1/,
    );
    expect(text).toMatch(
      /gateway_upstream_requests_total\{upstream="pi-digits",endpoint="pi",status="418",outcome="TIER_FORBIDDEN"\} \d+/,
    );
    expect(text).toMatch(
      /gateway_upstream_request_duration_seconds_count\{upstream="null-check",endpoint="check"\} \d+/,
    );
    const cost = /gateway_upstream_gpu_cost_usd_total\{upstream="pi-digits"\} ([\d.e-]+)/.exec(text);
    expect(Number(cost?.[1])).toBeGreaterThan(0);
    expect(text).toContain('gateway_upstream_breaker_state{upstream="pi-digits",state="closed"} 1');
    expect(text).toContain('# TYPE gateway_dedup_hits_total counter');
    expect(text).toContain('process_cpu_user_seconds_total');
  });

  it('counts the upstream calls the per-request loaders saved (dedup hits)', async () => {
    const dedupHits = async () => {
      const text = await (await fetch(`${url}/metrics`)).text();
      const match = /gateway_dedup_hits_total\{upstream="pi-digits",source="dataloader"\} (\d+)/.exec(text);
      return Number(match?.[1]);
    };
    const before = await dedupHits();
    // Three identical pi fields and one different: two of the four are served by the loader's cache.
    const res = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query:
          '{ a: pi(digits: 2) { __typename } b: pi(digits: 2) { __typename } c: pi(digits: 2) { __typename } d: pi(digits: 1) { __typename } }',
      }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()) as unknown).toMatchObject({ data: { a: {}, b: {}, c: {}, d: {} } });
    expect((await dedupHits()) - before).toBe(2);
  });

  it('keeps the registry per gateway: a second gateway starts from zero', async () => {
    const other = createObservability({
      config: { observability: { sponsorLogIntervalMs: 60_000, tracing: false } },
      logger: pino({ level: 'silent' }),
    });
    expect(other.registry).not.toBe(observability.registry);
    expect(await other.metrics.render()).not.toContain('operation="ObsPi"');
  });
});

describe('tracing (OTEL_TRACING=true)', () => {
  it('creates an operation span with a child CLIENT span per upstream call', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const config = loadConfig({ NODE_ENV: 'test', OTEL_TRACING: 'true' });
    const traced = createObservability({
      config,
      logger: pino({ level: 'silent' }),
      defaultMetrics: false,
      tracerProvider: provider,
    });
    const gateway = createGateway({
      clients,
      digits,
      config,
      logger: pino({ level: 'silent' }),
      observability: traced,
    });
    const res = await gateway.fetch('http://127.0.0.1/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'obs-trace-1' },
      body: JSON.stringify({
        query: 'query Traced { a: isNull(value: null) { __typename } b: pi(digits: 2) { __typename } }',
      }),
    });
    expect(res.status).toBe(200);
    const spans = exporter.getFinishedSpans();
    const operation = spans.find((s) => s.name === 'query Traced');
    expect(operation?.attributes['gateway.request_id']).toBe('obs-trace-1');
    const children = spans.filter((s) => s.parentSpanContext?.spanId === operation?.spanContext().spanId);
    expect(children.map((s) => s.name).sort()).toEqual(['null-check check', 'pi-digits pi']);
    for (const child of children) expect(child.kind).toBe(SpanKind.CLIENT);
    await provider.shutdown();
  });
});
