/**
 * The operation's life on Yoga's path: its state (`Operation`) is created with its parameters, put
 * on the GraphQL context, and reported when its result is ready (extensions, log line, metrics,
 * span), through the same reporter the fast path uses.
 *
 * Batches (BATCH_LIMIT): Yoga runs each operation of an array through every per-operation hook, as
 * if it came alone; the operations of one request also share one `OperationBatch` (the batch's
 * X-Max-Cost-Usd and MAX_UPSTREAM_CALLS count all of them), found by the request.
 */
import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { OperationReporter } from '../observability/operation-report.js';
import { Operation, type OperationBatch } from '../operation.js';
import { apiKeyOf, MAX_COST_HEADER, maxCostOf, requestIdOf } from '../request-facts.js';

export interface OperationPluginOptions {
  /** Request ids, as decided by useRequestId. */
  ids: WeakMap<Request, string>;
  /** OPERATION_DEADLINE_MS. */
  deadlineMs: number;
  reporter: OperationReporter;
  /** BATCH_LIMIT > 0: requests may carry an array of operations. @default false */
  batching?: boolean;
}

/** The part of the GraphQL context this plugin owns. */
interface WithOperation {
  operation?: Operation;
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

export function useOperation(options: OperationPluginOptions): Plugin {
  const { ids, deadlineMs, reporter } = options;
  /** The operations of a request (several in a batch), to settle when its response is made. */
  const operationsOf = new WeakMap<Request, Operation[]>();
  /** What the operations of a batched request share. */
  const batches = new WeakMap<Request, OperationBatch>();
  const plugin: Plugin = {
    onParams({ params, request, context, setResult }) {
      const headers = request.headers;
      const maxCost = maxCostOf(headers.get(MAX_COST_HEADER));
      const operation = new Operation({
        apiKey: apiKeyOf(headers.get('authorization'), headers.get('x-api-key')),
        requestId: ids.get(request) ?? requestIdOf(headers.get('x-request-id')),
        deadlineMs,
        name: typeof params.operationName === 'string' ? params.operationName : null,
        maxCostUsd: typeof maxCost === 'number' ? maxCost : undefined,
      });
      operation.batch = batches.get(request);
      reporter.start(operation);
      (context as WithOperation).operation = operation;
      const ofRequest = operationsOf.get(request);
      if (ofRequest === undefined) operationsOf.set(request, [operation]);
      else ofRequest.push(operation);
      // The client went away: its upstream calls are cancelled.
      const signal = request.signal;
      if (signal.aborted) operation.cancel(signal.reason);
      else signal.addEventListener('abort', () => operation.cancel(signal.reason), { once: true });
      if (maxCost !== undefined && typeof maxCost !== 'number') setResult({ errors: [maxCost] });
    },

    onExecute({ args }) {
      const operation = (args.contextValue as WithOperation).operation;
      if (operation !== undefined) reporter.executing(operation, args.document, args.operationName);
    },

    onExecutionResult({ result, setResult, context }) {
      const operation = (context as WithOperation).operation;
      if (operation === undefined || result === undefined || isAsyncIterable(result)) return;
      if (Array.isArray(result)) return;
      setResult(reporter.finish(operation, result as ExecutionResult));
    },

    // The backstop of budget settlement: an operation whose execution threw has no result, so no
    // report; its reservation is settled when the request's response is made (idempotent).
    onResponse({ request }) {
      const operations = operationsOf.get(request);
      if (operations !== undefined) for (const operation of operations) operation.settle();
    },
  };
  if (options.batching === true) {
    plugin.onRequestParse = ({ request }) => ({
      onRequestParseDone({ requestParserResult }) {
        if (Array.isArray(requestParserResult)) batches.set(request, { estimatedUsd: 0, upstreamCalls: 0 });
      },
    });
  }
  return plugin;
}
