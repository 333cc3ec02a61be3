/**
 * OpenTelemetry tracing, in one of two modes (docs/operations.md, Tracing):
 *
 * - the gateway's own export: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) set and no SDK
 *   registered by the host. The SDK is loaded then, and only then (trace-export.ts); the gateway
 *   continues the caller's `traceparent` itself and writes one on each upstream request;
 * - the host's SDK: `OTEL_TRACING=true` (or an endpoint with an SDK the host registered, e.g. through
 *   `--import`): spans through `@opentelemetry/api` only, in the context the host's instrumentation
 *   made; its HTTP instrumentation carries the trace to the upstreams, as before.
 *
 * Why `undefined` instead of the API's no-op tracer when tracing is off: the API's no-op still costs a
 * call, a span object and a context lookup per operation and per upstream call. With `undefined`, the
 * hot path does one falsy check and no tracer call at all (the default).
 */
import {
  context,
  ProxyTracerProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { Logger } from 'pino';
import { startTraceExport, traceExportPlan } from './trace-export.js';
import type { Tracing } from './tracing-types.js';

export type { Tracing } from './tracing-types.js';
export { type Span, SpanKind, SpanStatusCode, type Tracer };

/** Instrumentation scope name of the gateway's spans (and the default `service.name`). */
export const TRACER_NAME = 'null-pi-gateway';

export interface TracingOptions {
  /**
   * Create spans through the host's SDK (OTEL_TRACING).
   * @default false
   */
  enabled?: boolean;
  /**
   * Where the tracer comes from in host mode. Given, it wins over the gateway's own export.
   * @default trace.getTracerProvider() (the provider the host's SDK registered)
   */
  tracerProvider?: { getTracer(name: string, version?: string): Tracer };
  /** Told which mode started and why the own export did not. */
  logger: Logger;
  /**
   * The standard OTEL_* variables (trace-export.ts, OTEL_VARIABLES). The SDK reads the rest of them
   * (headers, sampler, resource, batch sizes) from `process.env` itself.
   * @default process.env
   */
  env?: NodeJS.ProcessEnv;
}

/**
 * Whether an SDK registered a global tracer provider before the gateway started (`--import`): the
 * API hands out a proxy that only delegates once one was registered.
 */
function hostSdkRegistered(): boolean {
  const global = trace.getTracerProvider();
  // The API's own proxy is the only way to ask it without registering anything; deprecated for the
  // next major version of the API, which this project does not use yet.
  if (!(global instanceof ProxyTracerProvider)) return true;
  return global.getDelegateTracer(TRACER_NAME) !== undefined;
}

/**
 * The gateway's tracing, or undefined when it is off (callers check and skip every tracer call).
 * Throws one line when an OTEL_* variable the gateway reads is wrong (trace-export.ts).
 */
export async function createTracing(options: TracingOptions): Promise<Tracing | undefined> {
  const { logger } = options;
  const plan = traceExportPlan(options.env ?? process.env);
  if (plan !== undefined) {
    if (options.tracerProvider === undefined && !hostSdkRegistered())
      return startTraceExport(plan, logger, TRACER_NAME);
    logger.info(
      { endpoint: plan.endpointForLog },
      'an OpenTelemetry SDK is registered by the host: the gateway’s spans go to it, which exports them (the gateway loads no exporter)',
    );
  } else if (!options.enabled) {
    return undefined;
  }
  const provider = options.tracerProvider ?? trace.getTracerProvider();
  return {
    tracer: provider.getTracer(TRACER_NAME, process.env.npm_package_version),
    mode: 'host',
    operationParent() {
      const parent = context.active();
      // The entry span of the process unless a host HTTP instrumentation already opened one.
      return { parent, kind: trace.getSpan(parent) === undefined ? SpanKind.SERVER : SpanKind.INTERNAL };
    },
    upstreamHeaders: undefined,
    close: async () => {},
  };
}
