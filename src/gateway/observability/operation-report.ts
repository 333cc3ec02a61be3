/**
 * How one operation is reported, the same on both lanes (the request pipeline's finish step calls
 * it): its result extensions (`sponsoredBy`, `cache`, `cost`), one log line, one counter increment
 * and one histogram observation, and the end of its span.
 *
 * The figures come from the operation's call ledger (operation.ts), which only its own upstream
 * calls wrote: a log line, a metric and the extensions always carry the same numbers. Reporting
 * settles nothing: the budget is settled by the pipeline's last step.
 */
import type { DocumentNode, ExecutionResult } from 'graphql';
import { getOperationAST } from 'graphql';
import type { Logger } from 'pino';
import { roundUsd } from '../../shared/usd.js';
import type { CostAdmission, Operation } from '../operation/operation.js';
import type { RequestFacts } from '../operation/request-facts.js';
import type { GatewayMetrics, OperationOutcome } from './metrics.js';
import { SpanStatusCode, type Tracing } from './tracing.js';

export interface OperationReporterOptions {
  metrics: GatewayMetrics;
  logger: Logger;
  /** Undefined when tracing is off: then no tracer call is made at all. */
  tracing: Tracing | undefined;
  /** Whether the response cache is on (RESPONSE_CACHE): `extensions.cache` is shown then. */
  responseCache: boolean;
}

/** Result extensions the gateway adds (contract: fields may be added, none renamed). */
export interface OperationExtensions {
  /** Distinct sponsor messages of the answers this operation used, in arrival order. */
  sponsoredBy?: string[];
  /** Response cache use, when RESPONSE_CACHE is on and a cacheable call was made. */
  cache?: { hits: number; misses: number };
  /** What this operation cost, when it touched an upstream (docs/contract.md, Cost). */
  cost?: {
    gpuCostUsd: number;
    upstreamCalls: number;
    cacheHits: number;
    /** What was estimated before any call (and reserved, under a budget). */
    estimatedCostUsd?: number;
    /** Fields answered by a cheaper model than they asked for, to fit the cap or the budget. */
    fallbacks?: ReadonlyArray<{ path: string; requestedModel: string; usedModel: string }>;
    /** Fields whose model routing by quality chose (minAccuracy). */
    routing?: NonNullable<CostAdmission['routing']>;
  };
}

export interface OperationReporter {
  /** The operation's span, when tracing is on (its parent from the request: `facts.header`). */
  start(operation: Operation, facts: RequestFacts): void;
  /** The document passed validation: the operation's type and name are known. */
  executing(operation: Operation, document: DocumentNode, operationName: string | null | undefined): void;
  /** Adds the extensions, writes the log line and the metrics. Returns the result to send. */
  finish(operation: Operation, result: ExecutionResult): ExecutionResult;
}

function outcomeOf(operation: Operation, result: ExecutionResult): OperationOutcome {
  if (operation.cancelled) return 'cancelled';
  const errors = result.errors;
  if (errors === undefined || errors.length === 0) return 'ok';
  if (!operation.executed || operation.rejected) return 'invalid';
  const data = result.data;
  if (data == null) return 'error';
  // The model-backed root fields are nullable: some answered while others failed is a partial success.
  for (const key in data) if (data[key] !== null) return 'partial';
  return 'error';
}

function errorCodesOf(result: ExecutionResult): string[] | undefined {
  const errors = result.errors;
  if (errors === undefined || errors.length === 0) return undefined;
  const codes: string[] = [];
  for (const error of errors) {
    const code = error.extensions?.code;
    const text = typeof code === 'string' ? code : 'INTERNAL_SERVER_ERROR';
    if (!codes.includes(text)) codes.push(text);
  }
  return codes;
}

export function createOperationReporter(options: OperationReporterOptions): OperationReporter {
  // The line goes through the logger given, with its redaction: a field added to the line later is
  // redacted as every other line's would be (test/unit/observability-operation-report.test.ts).
  const { metrics, logger, tracing, responseCache } = options;

  return {
    start(operation, facts) {
      if (tracing === undefined) return;
      // The caller's traceparent (own export) or the host instrumentation's context.
      const { parent, kind } = tracing.operationParent(facts.header);
      operation.span = tracing.tracer.startSpan('graphql.operation', { kind }, parent);
      operation.span.setAttribute('gateway.request_id', operation.requestId);
    },

    executing(operation, document, operationName) {
      operation.executed = true;
      const ast = getOperationAST(document, operationName);
      if (ast != null) {
        operation.type = ast.operation;
        operation.name = ast.name?.value ?? operation.name;
      }
      const span = operation.span;
      if (span !== undefined) {
        span.updateName(operation.name === null ? operation.type : `${operation.type} ${operation.name}`);
        span.setAttribute('graphql.operation.type', operation.type);
        if (operation.name !== null) span.setAttribute('graphql.operation.name', operation.name);
      }
    },

    finish(operation, result) {
      const ledger = operation.ledger;
      const estimate = ledger.touchedUpstream ? operation.admission?.estimate() : undefined;
      const durationMs = performance.now() - operation.startedAt;
      const outcome = outcomeOf(operation, result);
      metrics.recordOperation(operation.name, operation.type, outcome, durationMs);
      const costUsd = roundUsd(ledger.costUsd);

      // The extensions, made only when there is something to show (most operations: `cost`).
      let extensions: OperationExtensions | undefined;
      if (ledger.sponsors !== undefined) extensions = { sponsoredBy: [...ledger.sponsors] };
      if (responseCache && ledger.cacheHits + ledger.cacheMisses > 0) {
        extensions ??= {};
        extensions.cache = { hits: ledger.cacheHits, misses: ledger.cacheMisses };
      }
      if (ledger.touchedUpstream) {
        const cost: NonNullable<OperationExtensions['cost']> = {
          gpuCostUsd: costUsd,
          upstreamCalls: ledger.upstreamCalls,
          cacheHits: ledger.cacheHits,
        };
        if (estimate !== undefined) cost.estimatedCostUsd = estimate.usd;
        const fallbacks = operation.admission?.fallbacks;
        if (fallbacks !== undefined && fallbacks.length > 0) cost.fallbacks = fallbacks;
        const routing = operation.admission?.routing;
        if (routing !== undefined && routing.length > 0) cost.routing = routing;
        extensions ??= {};
        extensions.cost = cost;
      }

      const level = outcome === 'error' ? 'warn' : 'info';
      if (logger.isLevelEnabled(level)) {
        const line: Record<string, unknown> = {
          requestId: operation.requestId,
          // Who (identity.ts): `anonymous`, `key:<sha256 hex>` or `user:<sha256 hex>`, never a key or token.
          callerId: operation.caller.id,
          operation: operation.name,
          operationType: operation.type,
          outcome,
          durationMs: Math.round(durationMs * 100) / 100,
          upstreamCalls: ledger.upstreamCalls,
        };
        if (ledger.touchedUpstream) {
          line.costUsd = costUsd;
          line.cacheHits = ledger.cacheHits;
          if (estimate !== undefined) line.estimatedCostUsd = estimate.usd;
        }
        // A cancelled operation's result reaches nobody, and its field errors are the cancellation's
        // own (UPSTREAM_UNAVAILABLE on the field): listing them would report an upstream outage.
        const codes = outcome === 'cancelled' ? undefined : errorCodesOf(result);
        if (codes !== undefined) line.errorCodes = codes;
        // Each call in full (status, duration, source, code) is for debugging.
        if (ledger.calls !== undefined && logger.isLevelEnabled('debug')) line.calls = ledger.calls;
        logger[level](line, 'graphql operation');
      }

      const span = operation.span;
      if (span !== undefined) {
        span.setAttribute('gateway.outcome', outcome);
        if (outcome === 'error' || outcome === 'invalid')
          span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
        span.end();
      }
      if (extensions === undefined) return result;
      return {
        ...result,
        extensions:
          result.extensions === undefined
            ? (extensions as Record<string, unknown>)
            : { ...result.extensions, ...extensions },
      };
    },
  };
}
