/**
 * What tracing gives, in either mode (tracing.ts picks the mode, trace-export.ts makes the gateway's
 * own): its own file, so that the export implements it without importing the module that loads it.
 */
import type { Context, Span, SpanKind, Tracer } from '@opentelemetry/api';
import type { HeaderReader } from '../operation/request-facts.js';

/** Where spans come from and how the trace crosses the gateway, once tracing is on. */
export interface Tracing {
  readonly tracer: Tracer;
  /** `own`: the gateway exports (OTLP); `host`: an SDK the host registered gets the spans. */
  readonly mode: 'own' | 'host';
  /** The context an operation's span starts in, and the span's kind. */
  operationParent(header: HeaderReader): { parent: Context; kind: SpanKind };
  /**
   * The headers that carry `span`'s trace to an upstream (`traceparent`, `tracestate`); undefined
   * when the host's HTTP instrumentation does that itself.
   */
  readonly upstreamHeaders: ((span: Span) => Record<string, string>) | undefined;
  /**
   * Flushes the spans still buffered and stops the exporter, in `timeoutMs` at most: resolves then
   * whatever the collector does (nothing to do in host mode: the host's SDK is the host's).
   */
  close(timeoutMs: number): Promise<void>;
}
