/**
 * The gateway's own trace export (docs/contract.md §6; src/gateway/observability/trace-export.ts),
 * against a real OTLP/HTTP receiver on loopback (test/support/otlp-receiver.ts) and a scripted
 * upstream that records the `traceparent` each upstream request carried. The gateway runs as a process
 * of its own (`src/main.ts`), since the OTEL_* variables are the process's environment and SIGTERM is
 * the process's: the operation span and the upstream spans arrive linked (one trace, parent ids) with
 * the caller's trace id, in both encodings; a caller's unsampled trace records nothing; the spans of
 * the last request before SIGTERM arrive; a collector that refuses or never answers neither fails a
 * request nor holds the exit; cluster workers export each their own; and unset, no SDK package is
 * loaded at all. What the variables mean is unit-tested in test/unit/trace-export-plan.test.ts; the
 * spans' attributes through a host's SDK in integration/observability-plugin.test.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import {
  type GatewayProcess,
  killLeftovers,
  spawnCli,
  startGatewayProcess,
} from '../support/gateway-process.js';
import { gql } from '../support/graphql-client.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver.js';
import { routeSpecAnswers } from '../support/upstream-bodies.js';
import { LATE, until, within } from '../support/waits.js';

let up: ScriptedUpstream;
const receivers: OtlpReceiver[] = [];
const gateways: GatewayProcess[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  up = await startScriptedUpstream();
  routeSpecAnswers(up, up, '/pi');
});
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.stop(5000)));
  killLeftovers(children);
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await up.close();
});

/** The upstreams (one scripted server), no rate limit on the free tier. */
const upstreamEnv = () => ({ NULL_BASE_URL: up.url, PI_BASE_URL: `${up.url}/pi`, FREE_RATE_LIMIT: '0' });

async function receiver(): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  receivers.push(r);
  return r;
}

async function gateway(env: Record<string, string>): Promise<GatewayProcess> {
  const g = await startGatewayProcess({ ...upstreamEnv(), ...env });
  gateways.push(g);
  return g;
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
/** A caller's trace: its ids and the `traceparent` it sends (flags 01 sampled, 00 not). */
function callerTrace(sampled: boolean) {
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` };
}

const TRACED = 'query Traced { isNull(value: 1) { __typename } pi(digits: 3) { __typename } }';
const SPAN_KIND = { server: 2, client: 3 };

async function send(g: GatewayProcess, headers: Record<string, string>) {
  const result = await gql(g.url, TRACED, { headers });
  expect(result.status).toBe(200);
  expect(result.errors).toBeUndefined();
  expect(result.data).toEqual({ isNull: { __typename: 'NullVerdict' }, pi: { __typename: 'PiDigits' } });
}

/** The same operation as a GET: Yoga's lane (the fast path takes POSTs only). */
async function sendThroughYoga(g: GatewayProcess, headers: Record<string, string>) {
  const response = await fetch(`${g.url}?query=${encodeURIComponent(TRACED)}`, {
    headers: { accept: 'application/graphql-response+json', ...headers },
  });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { data?: unknown; errors?: unknown };
  expect(body.errors).toBeUndefined();
}

const spansOf = (r: OtlpReceiver, traceId: string) => r.spans().filter((s) => s.traceId === traceId);

/**
 * One operation's spans: the operation (SERVER, child of `parentSpanId`) and one CLIENT span per
 * upstream call, each its child, all in one trace. Returns them.
 */
function expectOperationTrace(spans: ReceivedSpan[], parentSpanId: string) {
  const operation = spans.find((s) => s.kind === SPAN_KIND.server);
  expect(operation).toMatchObject({
    name: 'query Traced',
    parentSpanId,
    scope: 'null-pi-gateway',
    attributes: { 'graphql.operation.name': 'Traced', 'gateway.outcome': 'ok' },
  });
  const calls = spans.filter((s) => s.parentSpanId === operation?.spanId);
  expect(calls.map((s) => s.name).sort()).toEqual(['null-check check', 'pi-digits pi']);
  for (const call of calls) {
    expect(call.kind).toBe(SPAN_KIND.client);
    expect(call.attributes['http.response.status_code']).toBe(200);
  }
  expect(spans).toHaveLength(3);
  return { operation: operation as ReceivedSpan, calls };
}

/** The `traceparent` headers the upstream received in the trace `traceId`. */
const upstreamTraceparents = (traceId: string) =>
  up.requests
    .map((r) => r.headers.traceparent)
    .filter((t): t is string => typeof t === 'string' && t.includes(traceId));

/** Each upstream call carried its own span's traceparent, sampled. */
function expectCarriedToUpstreams(traceId: string, calls: ReceivedSpan[]) {
  expect(upstreamTraceparents(traceId).sort()).toEqual(
    calls.map((c) => `00-${traceId}-${c.spanId}-01`).sort(),
  );
}

describe('exporting over OTLP/HTTP', () => {
  it('http/protobuf by default: the caller’s trace continued, carried to the upstreams, and flushed on SIGTERM; an unsampled caller records nothing', async () => {
    const r = await receiver();
    up.resetRecords();
    const g = await gateway({
      OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=k-123',
      // No scheduled export while the test runs: what arrives, SIGTERM's flush sent.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });
    expect(g.lines.find((l) => l.msg === 'exporting traces over OTLP/HTTP')).toMatchObject({
      endpoint: `${r.url}/v1/traces`,
      protocol: 'http/protobuf',
      serviceName: 'null-pi-gateway',
    });

    const unsampled = callerTrace(false);
    await send(g, { traceparent: unsampled.traceparent });
    const yoga = callerTrace(true);
    await sendThroughYoga(g, { traceparent: yoga.traceparent });
    const last = callerTrace(true);
    await send(g, { traceparent: last.traceparent });
    expect(r.exports).toHaveLength(0);
    await g.stop();
    expect(g.child.exitCode).toBe(0);

    expect(r.failures).toEqual([]);
    expect(r.exports.length).toBeGreaterThan(0);
    for (const sent of r.exports) {
      expect(sent.path).toBe('/v1/traces');
      expect(sent.contentType).toBe('application/x-protobuf');
      expect(sent.headers['x-collector-key']).toBe('k-123');
    }
    // The last request before SIGTERM, on the fast path.
    const { operation, calls } = expectOperationTrace(spansOf(r, last.traceId), last.spanId);
    expect(operation.resource).toMatchObject({ 'service.name': 'null-pi-gateway' });
    expectCarriedToUpstreams(last.traceId, calls);
    // Yoga's lane continues the caller's trace the same way.
    expectCarriedToUpstreams(yoga.traceId, expectOperationTrace(spansOf(r, yoga.traceId), yoga.spanId).calls);
    // Unsampled: nothing recorded, and the upstreams are told so (flags 00) in the caller's trace.
    expect(spansOf(r, unsampled.traceId)).toEqual([]);
    const carried = upstreamTraceparents(unsampled.traceId);
    expect(carried).toHaveLength(2);
    for (const t of carried) expect(t).toMatch(new RegExp(`^00-${unsampled.traceId}-[0-9a-f]{16}-00$`));
  });

  it('http/json to ..._TRACES_ENDPOINT as given, with the service name, resource attributes and sampler of the environment', async () => {
    const r = await receiver();
    up.resetRecords();
    const g = await gateway({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${r.url}/custom/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'gateway-under-test',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=ci,team=platform',
      // Records even what the caller did not sample: the sampler is the environment's.
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    const sampled = callerTrace(true);
    await send(g, { traceparent: sampled.traceparent });
    const unsampled = callerTrace(false);
    await send(g, { traceparent: unsampled.traceparent });
    await send(g, { 'x-request-id': 'otlp-root-operation' });
    const root = () => r.spans().find((s) => s.attributes['gateway.request_id'] === 'otlp-root-operation');
    expect(
      await until(
        () =>
          spansOf(r, sampled.traceId).length === 3 &&
          spansOf(r, unsampled.traceId).length === 3 &&
          root() !== undefined &&
          spansOf(r, root()?.traceId ?? '').length === 3,
        200,
      ),
    ).toBe(true);

    expect(r.failures).toEqual([]);
    for (const sent of r.exports) {
      expect(sent.path).toBe('/custom/traces');
      expect(sent.contentType).toBe('application/json');
    }
    const { operation, calls } = expectOperationTrace(spansOf(r, sampled.traceId), sampled.spanId);
    expect(operation.resource).toMatchObject({
      'service.name': 'gateway-under-test',
      'deployment.environment.name': 'ci',
      team: 'platform',
    });
    expectCarriedToUpstreams(sampled.traceId, calls);
    expectOperationTrace(spansOf(r, unsampled.traceId), unsampled.spanId);
    // No traceparent: the operation starts a trace of its own.
    expectOperationTrace(spansOf(r, root()?.traceId ?? ''), '');
  });

  it('a collector that refuses connections fails no request, is logged, and does not hold the exit', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const g = await gateway({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      // An export attempt for every span, while the requests run.
      OTEL_BSP_SCHEDULE_DELAY: '10',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '1',
      // Each export gives up (retries included) after 1 s: the failures are logged while the test runs.
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
      SHUTDOWN_TIMEOUT_MS: '2000',
    });
    for (let round = 0; round < 3; round++)
      await Promise.all(
        Array.from({ length: 10 }, () => send(g, { traceparent: callerTrace(true).traceparent })),
      );
    const failed = () => g.lines.filter((l) => /^trace export failed/.test(l.msg));
    expect(await until(() => failed().length > 0, 400)).toBe(true);
    // One line at error level saying why.
    expect(failed()[0]).toMatchObject({ level: 50, code: 'ECONNREFUSED' });
    await g.stop(20_000);
    expect(g.child.exitCode).toBe(0);
  });

  it('a collector that never answers does not hold the exit past the shutdown bound', async () => {
    const held: Socket[] = [];
    let received = 0;
    const blackHole = createServer((req) => {
      received++;
      held.push(req.socket);
    });
    blackHole.listen(0, '127.0.0.1');
    await once(blackHole, 'listening');
    try {
      const { port } = blackHole.address() as AddressInfo;
      const g = await gateway({
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_BSP_SCHEDULE_DELAY: '600000',
        SHUTDOWN_TIMEOUT_MS: '1000',
      });
      await send(g, { traceparent: callerTrace(true).traceparent });
      g.child.kill('SIGTERM');
      // A bound for a hang (the flush may take SHUTDOWN_TIMEOUT_MS, at least 1 s, at most 5 s).
      const exit = await within(once(g.child, 'exit'), 20_000);
      expect(exit).not.toBe(LATE);
      expect(g.child.exitCode).toBe(0);
      expect(received).toBeGreaterThan(0);
      expect(g.lines.map((l) => l.msg)).toContain(
        'trace export: the last spans were not sent in time (collector slow or unreachable); going on without them',
      );
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => blackHole.close(() => resolve()));
    }
  });

  it('each cluster worker exports its own spans (WORKERS=2)', async () => {
    const r = await receiver();
    const g = await gateway({
      OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      WORKERS: '2',
    });
    const pids = () => new Set(r.spans().map((s) => s.resource['process.pid']));
    // A new connection per request: the primary hands connections to the workers in turn.
    const agent = new Agent({ keepAlive: false });
    const body = JSON.stringify({ query: TRACED });
    const url = new URL(g.url);
    for (let i = 0; i < 20 && pids().size < 2; i++) {
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const req = httpRequest(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
      expect(status).toBe(200);
      await until(() => r.spans().length >= 3 * (i + 1), 100);
    }
    agent.destroy();
    expect(pids().size).toBe(2);
    expect(new Set(r.spans().map((s) => s.resource['service.instance.id'])).size).toBe(2);
  });
});

describe('unset', () => {
  /** Runs the probe (test/fixtures/otel-modules-probe.ts) with `env`; its status and loaded packages. */
  async function probe(env: Record<string, string>): Promise<{ status: number; packages: string[] }> {
    const cli = spawnCli('test/fixtures/otel-modules-probe.ts', {
      NODE_ENV: 'test',
      ...upstreamEnv(),
      ...env,
    });
    children.push(cli.child);
    const exit = await within(cli.exited, 60_000);
    expect(exit, cli.output()).toEqual({ code: 0, signal: null });
    const line = cli
      .output()
      .split('\n')
      .find((l) => l.startsWith('{"status"'));
    expect(line, cli.output()).toBeDefined();
    return JSON.parse(line as string) as { status: number; packages: string[] };
  }

  it('loads no OpenTelemetry SDK or exporter package; with an endpoint, the one exporter its protocol needs', async () => {
    // Set empty (the specification: empty is unset), whatever the environment running the tests holds.
    const off = await probe({ OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' });
    expect(off.status).toBe(200);
    expect(off.packages.filter((p) => p !== '@opentelemetry/api')).toEqual([]);

    const r = await receiver();
    const on = await probe({ OTEL_EXPORTER_OTLP_ENDPOINT: r.url, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' });
    expect(on.status).toBe(200);
    expect(on.packages).toEqual(
      expect.arrayContaining(['@opentelemetry/sdk-trace-base', '@opentelemetry/exporter-trace-otlp-proto']),
    );
    expect(on.packages).not.toContain('@opentelemetry/exporter-trace-otlp-http');
    // And it exported the probe's operation on close.
    expect(r.spans().some((s) => s.traceId === '4bf92f3577b34da6a3ce929d0e0e4736')).toBe(true);
  });
});
