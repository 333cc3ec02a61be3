/**
 * OpenTelemetry tracing through @opentelemetry/api only: the host registers an SDK (or nothing), the
 * gateway just asks the API for a tracer.
 *
 * Why `undefined` instead of the API's no-op tracer when tracing is off: the API's no-op still costs a
 * call, a span object and a context lookup per operation and per upstream call. With `undefined`, the
 * hot path does one falsy check and no tracer call at all (OTEL_TRACING=false, the default).
 */
import { type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';

export { type Span, SpanKind, SpanStatusCode, type Tracer };

/** Instrumentation scope name of the gateway's spans. */
export const TRACER_NAME = 'null-pi-gateway';

export interface TracingOptions {
  /**
   * Create spans (OTEL_TRACING).
   * @default false
   */
  enabled?: boolean;
  /**
   * Where the tracer comes from; the global provider the host's SDK registered.
   * @default trace.getTracerProvider()
   */
  tracerProvider?: { getTracer(name: string, version?: string): Tracer };
}

/** The gateway's tracer, or undefined when tracing is off (callers check and skip every tracer call). */
export function createTracer(options: TracingOptions = {}): Tracer | undefined {
  if (!options.enabled) return undefined;
  const provider = options.tracerProvider ?? trace.getTracerProvider();
  return provider.getTracer(TRACER_NAME, process.env.npm_package_version);
}
