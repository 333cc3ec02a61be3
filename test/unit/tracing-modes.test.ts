/**
 * Which tracing the gateway runs (src/gateway/observability/tracing.ts, `createTracing`): none, its
 * own export (an endpoint and no SDK of the host's), or the host's SDK (OTEL_TRACING=true, or an
 * endpoint with an SDK the host registered: the host's SDK keeps working as before and the gateway
 * loads no exporter of its own). The export over the wire: integration/otlp-export.test.ts.
 */
import { SpanKind, trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { createTracing, type Tracing } from '../../src/gateway/observability/tracing.js';
import { createLogger } from '../../src/shared/logger.js';

const logger = createLogger({ level: 'silent' });
/** Port 1 on loopback: nothing listens there; nothing is exported by these tests anyway. */
const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' };
const CALLER = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331' };
const callerHeaders = (name: string) =>
  name === 'traceparent' ? `00-${CALLER.traceId}-${CALLER.spanId}-01` : undefined;

let opened: Tracing | undefined;
afterEach(async () => {
  await opened?.close(1000);
  opened = undefined;
  trace.disable();
});

describe('createTracing', () => {
  it('is off without OTEL_TRACING and without an endpoint', async () => {
    expect(await createTracing({ logger, env: {} })).toBeUndefined();
    expect(await createTracing({ logger, env: { OTEL_EXPORTER_OTLP_ENDPOINT: '' } })).toBeUndefined();
  });

  it('with an endpoint and no SDK of the host: its own export, continuing the caller’s traceparent and writing the upstreams’', async () => {
    opened = await createTracing({ logger, env: ENDPOINT });
    expect(opened?.mode).toBe('own');
    const { parent, kind } = (opened as Tracing).operationParent(callerHeaders);
    expect(kind).toBe(SpanKind.SERVER);
    expect(trace.getSpanContext(parent)).toMatchObject({ ...CALLER, isRemote: true, traceFlags: 1 });
    const span = (opened as Tracing).tracer.startSpan('graphql.operation', { kind }, parent);
    expect(span.spanContext().traceId).toBe(CALLER.traceId);
    expect(opened?.upstreamHeaders?.(span)).toEqual({
      traceparent: `00-${CALLER.traceId}-${span.spanContext().spanId}-01`,
    });
    span.end();
    // Nothing global was registered: a host's SDK, or a test's, is left alone.
    expect(trace.getTracerProvider().getTracer('x').startSpan('y').spanContext().traceId).toBe(
      '00000000000000000000000000000000',
    );
  });

  it('without a traceparent, the operation starts a trace of its own', async () => {
    opened = await createTracing({ logger, env: ENDPOINT });
    const { parent } = (opened as Tracing).operationParent(() => undefined);
    expect(trace.getSpanContext(parent)).toBeUndefined();
  });

  it('with an endpoint and an SDK the host registered: the host’s, which gets the spans', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    const tracing = await createTracing({ logger, env: ENDPOINT });
    expect(tracing?.mode).toBe('host');
    // The host's HTTP instrumentation carries the trace to the upstreams, as before.
    expect(tracing?.upstreamHeaders).toBeUndefined();
    tracing?.tracer.startSpan('graphql.operation').end();
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['graphql.operation']);
    await provider.shutdown();
  });

  it('OTEL_TRACING=true without an endpoint: the host’s SDK, as before', async () => {
    const tracing = await createTracing({ logger, env: {}, enabled: true });
    expect(tracing?.mode).toBe('host');
    expect(tracing?.upstreamHeaders).toBeUndefined();
  });
});
