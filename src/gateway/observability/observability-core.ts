/**
 * The state the Yoga plugin and the upstream client wrapper share: metrics, the sponsor log, the tracer,
 * and the operations in flight keyed by request id.
 *
 * Why key by request id: the upstream clients see `CallOptions.requestId` (the id the gateway forwards
 * as `x-request-id`) and nothing of GraphQL. A Map lookup by that id attributes each upstream answer to
 * its operation without AsyncLocalStorage, which costs on every promise in Node 20. Two concurrent
 * operations with the same caller-chosen id share one entry: the later one's calls then appear in the
 * earlier one's log line (metrics and sponsor logging are unaffected).
 */
import { context, trace } from '@opentelemetry/api';
import type { Logger } from '../../shared/logger.js';
import type { CallOptions, UpstreamName } from '../upstream/types.js';
import type { GatewayMetrics } from './gateway-metrics.js';
import type { OperationRecord } from './operation-record.js';
import type { SponsorLog } from './sponsor-log.js';
import { type Span, SpanKind, SpanStatusCode, type Tracer } from './tracing.js';

export interface ObservabilityCoreOptions {
  logger: Logger;
  metrics: GatewayMetrics;
  sponsorLog: SponsorLog;
  /** Undefined when tracing is off: then no tracer call is made anywhere. */
  tracer: Tracer | undefined;
}

export class ObservabilityCore {
  readonly logger: Logger;
  readonly metrics: GatewayMetrics;
  readonly sponsorLog: SponsorLog;
  readonly tracer: Tracer | undefined;
  private readonly inFlight = new Map<string, OperationRecord>();

  constructor(options: ObservabilityCoreOptions) {
    this.logger = options.logger;
    this.metrics = options.metrics;
    this.sponsorLog = options.sponsorLog;
    this.tracer = options.tracer;
  }

  /** Makes the operation findable by the upstream calls made with its request id. */
  register(record: OperationRecord): void {
    const id = record.requestId;
    if (id !== undefined && !this.inFlight.has(id)) this.inFlight.set(id, record);
  }

  unregister(record: OperationRecord): void {
    const id = record.requestId;
    if (id !== undefined && this.inFlight.get(id) === record) this.inFlight.delete(id);
  }

  /** Operations currently executing (for tests: nothing must leak). */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  operationFor(options: CallOptions | undefined): OperationRecord | undefined {
    const id = options?.requestId;
    return id === undefined ? undefined : this.inFlight.get(id);
  }

  /** A CLIENT span for one upstream call, child of the operation's span. Only call when tracing is on. */
  startUpstreamSpan(
    tracer: Tracer,
    record: OperationRecord | undefined,
    upstream: string,
    endpoint: string,
  ): Span {
    const parent =
      record?.span === undefined ? context.active() : trace.setSpan(context.active(), record.span);
    return tracer.startSpan(
      `${upstream} ${endpoint}`,
      {
        kind: SpanKind.CLIENT,
        attributes: { 'gateway.upstream': upstream, 'gateway.upstream.endpoint': endpoint },
      },
      parent,
    );
  }

  /** Everything the gateway does with one finished upstream call (answered or failed). */
  upstreamSettled(
    record: OperationRecord | undefined,
    span: Span | undefined,
    upstream: UpstreamName,
    endpoint: string,
    started: number,
    status: number | null,
    code: string | undefined,
    costUsd: number | null | undefined,
    sponsoredBy: string | null | undefined,
  ): void {
    if (costUsd != null && costUsd > 0) {
      this.metrics.recordGpuCost(upstream, costUsd);
      if (record !== undefined) record.gpuCostUsd += costUsd;
    }
    if (sponsoredBy != null && sponsoredBy !== '') {
      this.metrics.recordSponsorMessage(upstream);
      this.sponsorLog.record(upstream, sponsoredBy);
      record?.addSponsor(sponsoredBy);
    }
    if (record !== undefined) {
      const durationMs = Math.round((performance.now() - started) * 100) / 100;
      if (code === undefined) record.addCall({ upstream, endpoint, status, durationMs });
      else record.addCall({ upstream, endpoint, status, durationMs, code });
    }
    if (span !== undefined) {
      if (status !== null) span.setAttribute('http.response.status_code', status);
      if (code !== undefined) {
        span.setAttribute('error.type', code);
        span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      }
      span.end();
    }
  }
}
