/**
 * Yoga's lane of the request pipeline (request/pipeline.ts): each of Yoga's hooks calls the step that
 * belongs there, so every policy is the pipeline's, and this file only says where Yoga keeps things.
 *
 * - onRequest: `begin` (the request's facts, its request id, who the caller is) unless the fast
 *   path began it already and handed the request over; a client that goes away (the request's
 *   signal) cancels its operations.
 * - onRequestParse: an array of operations (BATCH_LIMIT) shares one batch.
 * - onParams: `resolve` the document (a GET's `documentId` is read from the query string: Yoga's GET
 *   parser keeps only the four standard parameters), a refusal thrown as the request's error; then,
 *   once the caller is identified (a token verified), `open` the operation (each entry of a batch).
 * - onExecute: `admit`; the pipeline's executor replaces Yoga's (`setExecuteFn`), but for @defer and
 *   @stream, which Yoga's executor streams.
 * - onExecutionResult: `finish` (`finishStream` for a stream of parts, which ends the request when
 *   the stream is over).
 * - onResultProcess: `encode`, for the JSON media types (streams keep Yoga's processors).
 * - onResponse: the request id on every answer, the budget's RateLimit fields on GraphQL answers,
 *   then `end`.
 *
 * Per-request state is the server context's `gateway` field (Yoga gives each request its own server
 * context; each entry of a batch gets a context inheriting from it), per-operation state the
 * context's `operation`: no side table keyed by a request.
 */
import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { isPromise } from '../../shared/is-promise.js';
import { usesIncrementalDelivery } from '../request/executor.js';
import { requestFactsOf, requestIdOf } from '../request/facts.js';
import type {
  AnswerHeaders,
  IncrementalPart,
  PipelineContext,
  RequestPipeline,
} from '../request/pipeline.js';
import type { DocumentRequest } from '../request/trusted-documents.js';

export interface RequestPipelinePluginOptions {
  pipeline: RequestPipeline;
  /** BATCH_LIMIT > 0: requests may carry an array of operations. @default false */
  batching?: boolean;
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

export function useRequestPipeline(options: RequestPipelinePluginOptions): Plugin {
  const { pipeline } = options;

  const plugin: Plugin = {
    onRequest({ request, serverContext }) {
      const context = serverContext as PipelineContext;
      if (context.gateway !== undefined) return;
      const address = (serverContext as { req?: { socket?: { remoteAddress?: string } } }).req?.socket
        ?.remoteAddress;
      const state = pipeline.begin(requestFactsOf((name) => request.headers.get(name), address));
      context.gateway = state;
      const signal = request.signal;
      if (signal.aborted) pipeline.cancel(state, signal.reason);
      else signal.addEventListener('abort', () => pipeline.cancel(state, signal.reason), { once: true });
    },

    async onParams({ params, request, context, setParams }) {
      const scope = context as PipelineContext;
      const state = scope.gateway;
      if (state === undefined) return;
      const sent = params as DocumentRequest & { documentId?: unknown };
      if (sent.documentId === undefined && request.method === 'GET') {
        const id = new URL(request.url).searchParams.get('documentId');
        if (id !== null) sent.documentId = id;
      }
      const pending = pipeline.resolve(state, sent);
      const resolved = isPromise(pending) ? await pending : pending;
      // Refused (PERSISTED_QUERY_NOT_FOUND, _NOT_IN_LIST, a malformed id): the request's error, before
      // Yoga checks the parameters (an APQ hash alone has no query).
      if (resolved instanceof Error) throw resolved;
      const identified = pipeline.identified(state);
      if (isPromise(identified)) await identified;
      scope.operation = pipeline.open(state, params.operationName);
      if (resolved.register !== undefined)
        scope.registerDocument = { hash: resolved.register, text: resolved.query };
      if (resolved.query === '' || (resolved.query === params.query && sent.documentId === undefined)) return;
      const { documentId: _id, ...rest } = sent as typeof params & { documentId?: unknown };
      setParams({ ...rest, query: resolved.query });
    },

    onExecute({ args, setExecuteFn, setResultAndStopExecution }) {
      const scope = args.contextValue as PipelineContext;
      const operation = scope.operation;
      if (operation === undefined) return;
      // @defer and @stream: Yoga's own executor streams the parts (request/executor.ts).
      if (!usesIncrementalDelivery(args.document))
        setExecuteFn((run) =>
          pipeline.execute(
            operation,
            run.document,
            run.operationName,
            run.variableValues as Record<string, unknown> | null | undefined,
            run.contextValue,
          ),
        );
      const refusal = pipeline.admit(
        operation,
        args.document,
        args.operationName,
        args.variableValues as Record<string, unknown> | null | undefined,
        scope.registerDocument,
      );
      if (refusal === undefined) return;
      if (!isPromise(refusal)) {
        setResultAndStopExecution(refusal);
        return;
      }
      return refusal.then((refused) => {
        if (refused !== undefined) setResultAndStopExecution(refused);
      });
    },

    onExecutionResult({ result, setResult, context }) {
      const scope = context as PipelineContext;
      const operation = scope.operation;
      if (operation === undefined || result === undefined || Array.isArray(result)) return;
      if (isAsyncIterable(result)) {
        if (scope.gateway !== undefined)
          setResult(
            pipeline.finishStream(scope.gateway, operation, result as AsyncIterable<IncrementalPart>),
          );
        return;
      }
      setResult(pipeline.finish(operation, result as ExecutionResult));
    },

    onResultProcess({ result, serverContext, setResultProcessor }) {
      const mediaType = (serverContext as PipelineContext).gateway?.facts.mediaType;
      if (mediaType === undefined || isAsyncIterable(result)) return;
      setResultProcessor((processed, fetchAPI) => {
        const encoded = pipeline.encode(processed as ExecutionResult | ExecutionResult[], mediaType);
        return new fetchAPI.Response(encoded.body, { status: encoded.status, headers: encoded.headers });
      }, mediaType);
    },

    onResponse({ request, response, serverContext }) {
      const state = (serverContext as PipelineContext).gateway;
      // Early answers (Yoga's /health) may come before onRequest ran here.
      response.headers.set(
        'x-request-id',
        state?.facts.requestId ?? requestIdOf(request.headers.get('x-request-id')),
      );
      if (state === undefined) return;
      // A stream of parts ends when its last part is sent (finishStream), not here; unless no stream
      // is sent after all (Yoga answers 406 when the Accept takes no streaming type).
      const type = response.headers.get('content-type') ?? '';
      const streamed = type.startsWith('multipart/mixed') || type.startsWith('text/event-stream');
      const end = () => {
        if (!state.streaming || !streamed) pipeline.end(state);
      };
      // The caller's budget on every GraphQL answer (not on /metrics, /health, GraphiQL's page); a
      // promise only with the budgets in Redis, so the common answer waits for nothing.
      if (state.operations.length === 0) return end();
      const added = pipeline.answerHeaders(state);
      const apply = (fields: AnswerHeaders | undefined) => {
        if (fields !== undefined)
          for (const [name, value] of Object.entries(fields)) response.headers.set(name, value);
        end();
      };
      return isPromise(added) ? added.then(apply) : apply(added);
    },
  };
  if (options.batching === true) {
    plugin.onRequestParse = ({ serverContext }) => ({
      onRequestParseDone({ requestParserResult }) {
        const state = (serverContext as PipelineContext).gateway;
        if (Array.isArray(requestParserResult) && state !== undefined)
          state.batch = { estimatedUsd: 0, upstreamCalls: 0 };
      },
    });
  }
  return plugin;
}
