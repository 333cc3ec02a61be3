/**
 * The request pipeline: the ordered steps of one GraphQL request over HTTP, each policy written once,
 * run by both lanes. Yoga's lane calls them from one plugin's hooks (plugins/use-request-pipeline.ts);
 * the fast path (http/fast-path/fast-path.ts) runs the same list directly on node:http. A lane decides only
 * how bytes travel (which parser read the body, how the answer is written, how a client that left is
 * noticed).
 *
 *   begin    the request's facts, read once from its headers (facts.ts), and who the caller is
 *            (identity.ts: at once for an API key, a promise while a token is verified, which
 *            `identified` awaits before the first operation opens)
 *   open     an operation of the request (one, or each of a batch): its state (operation/operation.ts), its span
 *   resolve  the document: text, documentId, APQ hash, trusted documents (trusted-documents.ts)
 *   admit    the document passed validation: the cost cap header, MAX_UPSTREAM_CALLS, the cost
 *            estimate, cap and budget reservation (cost/cost-control.ts), APQ registration; one
 *            refusal shape for all of them
 *   execute  one executor: graphql-js, then graphql-jit once a document repeats (executor.ts)
 *   finish   an execution's request errors coded (request-error-codes.ts), masking of unexpected
 *            errors, the report (extensions, log line, metrics, span)
 *   encode   the JSON media type by the rules of media-type.ts, the status (http-status.ts: the
 *            2026 draft's for application/graphql-response+json), the body, and the caller's
 *            budget as RateLimit header fields (rate-limit-headers.ts)
 *   end      settles each operation's cost admission, once per request whichever lane calls it
 *
 * Per-request state lives in a `RequestState` the lane carries (node's response on the fast path,
 * Yoga's server context on its lane): nothing is kept in a side table keyed by a request.
 */
import type { DocumentNode, ExecutionResult, GraphQLError } from 'graphql';
import { maskError, processRegularResult, type YogaLogger } from 'graphql-yoga';
import { isPromise } from '../../shared/is-promise.js';
import type { CostControl } from '../cost/cost-control.js';
import { gatewayError } from '../errors.js';
import { ANONYMOUS_CALLER, type Caller, clientOf, type Identified, type Identity } from '../identity.js';
import type { OperationReporter } from '../observability/operation-report.js';
import { Operation, type OperationBatch } from '../operation/operation.js';
import type { OperationPlan } from '../operation/operation-plan.js';
import type { JsonMediaType, RequestFacts } from '../operation/request-facts.js';
import type { GatewayContext } from '../schema/context.js';
import type { Execution, Executor } from './executor.js';
import { httpStatusOf } from './http-status.js';
import { rateLimitHeaders } from './rate-limit-headers.js';
import { withRequestErrorCodes } from './request-error-codes.js';
import type { DocumentRequest, Resolved, TrustedDocuments } from './trusted-documents.js';

/** The message of every masked (unexpected) error. */
export const MASKED_MESSAGE = 'Unexpected error.';

export interface RequestPipelineOptions {
  /** OPERATION_DEADLINE_MS. */
  deadlineMs: number;
  /** MAX_UPSTREAM_CALLS: distinct upstream calls of one operation, or of a whole batch. */
  maxUpstreamCalls: number;
  /** COST_BUDGET_FALLBACK=cheaper-model: cheaper models unless a request says `X-Budget-Fallback: none`. @default false */
  fallbackByDefault?: boolean;
  trusted: TrustedDocuments;
  /** Who the caller is (identity.ts). */
  identity: Identity;
  costControl: CostControl;
  reporter: OperationReporter;
  executor: Executor;
  /** The GraphQL context of an operation (the fast path's; Yoga's lane builds its own from it). */
  context: (operation: Operation) => GatewayContext;
  plan: (document: DocumentNode, operationName: string | null | undefined) => OperationPlan;
  /** Where masked errors are logged. */
  logger: YogaLogger;
}

/** One HTTP request's state, from `begin` to `end`. */
export interface RequestState {
  readonly facts: RequestFacts;
  /**
   * Who the caller is, or the refusal of its credential (identity.ts); a promise while a token is
   * verified (`identified` waits for it, once, before the first operation opens).
   */
  identified: Identified | Promise<Identified>;
  /** Set when the request carries an array of operations (BATCH_LIMIT), before any is opened. */
  batch: OperationBatch | undefined;
  /** The request's operations, in the order they were opened (written by `open` alone). */
  operations: readonly Operation[];
  /**
   * The document of a single-operation request, once resolved: a request the fast path read and then
   * hands to Yoga's lane is not resolved (nor counted) twice.
   */
  resolved: Resolved | undefined;
  /**
   * Set when an operation's result is a stream of parts (@defer, @stream): the request ends when the
   * stream does (its last part, or the client leaving), not when the response starts.
   */
  streaming: boolean;
  /**
   * Set by `end`: a request the fast path hands to Yoga's lane is watched by both (node's response
   * closing, Yoga's onResponse or the end of its stream), and whichever comes first ends it.
   */
  ended: boolean;
}

/**
 * What the gateway keeps on Yoga's server context (per request) and GraphQL context (per operation):
 * Yoga's lane (plugins/use-request-pipeline.ts) reads it, the fast path sets `gateway` on a request it
 * hands over.
 */
export interface PipelineContext {
  /** The request's pipeline state (the fast path sets it on a request it hands over). */
  gateway?: RequestState;
  /** The operation of this context. */
  operation?: Operation;
  /** An APQ document to register once it passed validation. */
  registerDocument?: { hash: string; text: string };
}

/** One part of an incremental result (GraphQL over HTTP's incremental delivery). */
export interface IncrementalPart extends ExecutionResult {
  hasNext?: boolean;
  incremental?: ReadonlyArray<{ data?: unknown; items?: unknown; errors?: readonly GraphQLError[] }>;
}

/** Header fields added to an answer. */
export type AnswerHeaders = Record<string, string>;

/** A result as bytes: status, headers and body. */
export interface EncodedResult {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface RequestPipeline {
  /**
   * A request's state, and who its caller is; `identified` given (the MCP lane's tool calls, whose
   * request was identified once for all of them) is used instead of identifying again.
   */
  begin(facts: RequestFacts, identified?: Identified): RequestState;
  /** Who the caller is, once decided: at once unless a token is still being verified. */
  identified(state: RequestState): Identified | Promise<Identified>;
  /** Opens an operation; `identified` must have settled (the lanes wait for it first). */
  open(state: RequestState, operationName: string | null | undefined): Operation;
  resolve(state: RequestState, request: DocumentRequest): Resolved | Promise<Resolved>;
  /** Undefined: admitted; else the refusal to answer (nothing was called). */
  admit(
    operation: Operation,
    document: DocumentNode,
    operationName: string | null | undefined,
    variables: Record<string, unknown> | null | undefined,
    register?: { hash: string; text: string } | undefined,
  ): ExecutionResult | undefined | Promise<ExecutionResult | undefined>;
  execute(
    operation: Operation,
    document: DocumentNode,
    operationName: string | null | undefined,
    variables: Record<string, unknown> | null | undefined,
    contextValue?: unknown,
  ): Execution;
  finish(operation: Operation, result: ExecutionResult): ExecutionResult;
  /**
   * `finish` for a stream of parts (@defer, @stream): codes and masking on every part, the report
   * of the whole operation (its errors from every part) on the last one, which carries
   * `extensions.cost` for the whole operation; `end` once the stream is over, however it ended.
   */
  finishStream(
    state: RequestState,
    operation: Operation,
    stream: AsyncIterable<IncrementalPart>,
  ): AsyncIterable<IncrementalPart>;
  encode(result: ExecutionResult | readonly ExecutionResult[], mediaType: JsonMediaType): EncodedResult;
  /**
   * The header fields every answer to this caller carries beside the result: the IETF RateLimit
   * fields of its budget (rate-limit-headers.ts); undefined without a budget. A promise only when the
   * budget lives in Redis.
   */
  answerHeaders(state: RequestState): AnswerHeaders | undefined | Promise<AnswerHeaders | undefined>;
  /** The client went away: every operation of the request is cancelled. */
  cancel(state: RequestState, reason: unknown): void;
  end(state: RequestState): void;
}

/** A request's operations before the first is opened: shared, never written. */
const NO_OPERATIONS: readonly Operation[] = Object.freeze([]);

/** The answer `processRegularResult` builds, as plain data (it only ever calls `new Response(body, init)`). */
class PlainResponse {
  constructor(
    readonly body: string,
    readonly init: { status: number; headers: Record<string, string> },
  ) {}
}
const PLAIN_FETCH = { Response: PlainResponse } as unknown as Parameters<typeof processRegularResult>[1];

export function createRequestPipeline(options: RequestPipelineOptions): RequestPipeline {
  const { deadlineMs, maxUpstreamCalls, trusted, identity, costControl, reporter, executor, logger } =
    options;

  /** The one refusal shape: the whole operation refused before anything ran, no data. */
  const refuse = (operation: Operation, error: GraphQLError): ExecutionResult => {
    operation.rejected = true;
    return { errors: [error] };
  };

  /** MAX_UPSTREAM_CALLS; in a batch the calls of its operations admitted before this one count. */
  const overCallLimit = (operation: Operation, calls: number): GraphQLError | undefined => {
    const batch = operation.batch;
    const before = batch?.upstreamCalls ?? 0;
    if (before + calls <= maxUpstreamCalls) {
      if (batch !== undefined) batch.upstreamCalls = before + calls;
      return undefined;
    }
    const message =
      batch === undefined
        ? `This operation would make ${calls} distinct upstream calls; at most ${maxUpstreamCalls} are allowed (MAX_UPSTREAM_CALLS).`
        : `This operation would make ${calls} distinct upstream calls, after the ${before} of the batch's operations before it; at most ${maxUpstreamCalls} are allowed for the whole batch (MAX_UPSTREAM_CALLS).`;
    // `spec`: 400 for application/graphql-response+json (a result without data must not be 200),
    // 200 for legacy application/json, as Yoga does for validation errors.
    return gatewayError('BAD_USER_INPUT', message, {
      upstreamCalls: calls,
      limit: maxUpstreamCalls,
      http: { status: 400, spec: true },
    });
  };

  const masked = (result: ExecutionResult): ExecutionResult => {
    const errors = result.errors;
    if (errors === undefined) return result;
    let changed = false;
    const out = errors.map((error) => {
      const replaced = maskError(error, MASKED_MESSAGE, false) as GraphQLError;
      if (replaced !== error) {
        changed = true;
        logger.error(error);
      }
      return replaced;
    });
    return changed ? { ...result, errors: out } : result;
  };

  return {
    begin(facts, identified) {
      const header = facts.header;
      return {
        facts,
        identified: identified ?? identity.identify(header('authorization'), header('x-api-key')),
        batch: undefined,
        operations: NO_OPERATIONS,
        resolved: undefined,
        streaming: false,
        ended: false,
      };
    },

    identified(state) {
      const pending = state.identified;
      if (!isPromise(pending)) return pending;
      return pending.then((identified) => {
        state.identified = identified;
        return identified;
      });
    },

    open(state, operationName) {
      const { facts, identified } = state;
      if (isPromise(identified)) throw new Error('an operation opened before its caller was identified');
      const refused = identified instanceof Error ? identified : undefined;
      const operation = new Operation({
        // A refused credential runs nothing: its operation is refused at admission.
        caller: refused === undefined ? (identified as Caller) : ANONYMOUS_CALLER,
        requestId: facts.requestId,
        deadlineMs,
        name: typeof operationName === 'string' ? operationName : null,
        maxCostUsd: typeof facts.maxCost === 'number' ? facts.maxCost : undefined,
        headerRefusal: refused ?? (typeof facts.maxCost === 'object' ? facts.maxCost : undefined),
        address: facts.address,
        fallback: facts.fallback ?? options.fallbackByDefault ?? false,
        batch: state.batch,
      });
      // One operation (the common request) is an array of one, not an empty array grown by a push.
      const opened = state.operations;
      if (opened.length === 0) state.operations = [operation];
      else (opened as Operation[]).push(operation);
      reporter.start(operation, facts);
      return operation;
    },

    resolve(state, request) {
      if (state.batch !== undefined) return trusted.resolve(request);
      if (state.resolved !== undefined) return state.resolved;
      const resolved = trusted.resolve(request);
      if (isPromise(resolved))
        return resolved.then((value) => {
          state.resolved = value;
          return value;
        });
      state.resolved = resolved;
      return resolved;
    },

    admit(operation, document, operationName, variables, register) {
      reporter.executing(operation, document, operationName);
      // The document parsed and passed validation: an APQ document may now be registered.
      if (register !== undefined)
        trusted.register(register.hash, register.text, clientOf(operation.caller, operation.address));
      if (operation.headerRefusal !== undefined) return refuse(operation, operation.headerRefusal);
      const plan = options.plan(document, operationName);
      const overLimit = overCallLimit(operation, plan.calls);
      if (overLimit !== undefined) return refuse(operation, overLimit);
      const verdict = costControl.admit(operation, plan, variables ?? undefined);
      if (verdict === undefined) return undefined;
      if (!isPromise(verdict)) return refuse(operation, verdict);
      return verdict.then((refusal) => (refusal === undefined ? undefined : refuse(operation, refusal)));
    },

    execute(operation, document, operationName, variables, contextValue) {
      return executor.run(document, operationName, contextValue ?? options.context(operation), variables);
    },

    finish(operation, result) {
      // Codes first (request-error-codes.ts), then masking, which still masks an unexpected error.
      // A refusal is coded where it was made.
      if (operation.rejected) return reporter.finish(operation, masked(result));
      return reporter.finish(operation, masked(withRequestErrorCodes(result, operation.executed)));
    },

    finishStream(state, operation, stream) {
      state.streaming = true;
      const end = () => this.end(state);
      return finishedParts(operation, stream, masked, reporter, end);
    },

    encode(result, mediaType) {
      const response = processRegularResult(
        result as ExecutionResult,
        PLAIN_FETCH,
        mediaType,
      ) as unknown as PlainResponse;
      return {
        status: httpStatusOf(result, mediaType, response.init.status),
        headers: response.init.headers,
        body: response.body,
      };
    },

    answerHeaders(state) {
      const caller = state.identified;
      if (isPromise(caller) || caller instanceof Error) return undefined;
      const status = costControl.budgetStatus(caller);
      return isPromise(status) ? status.then(rateLimitHeaders) : rateLimitHeaders(status);
    },

    cancel(state, reason) {
      for (const operation of state.operations) operation.cancel(reason);
    },

    end(state) {
      if (state.ended) return;
      state.ended = true;
      for (const operation of state.operations) costControl.settle(operation);
    },
  };
}

/** The parts of a stream, finished: see `RequestPipeline.finishStream`. */
async function* finishedParts(
  operation: Operation,
  stream: AsyncIterable<IncrementalPart>,
  masked: (result: ExecutionResult) => ExecutionResult,
  reporter: RequestPipelineOptions['reporter'],
  end: () => void,
): AsyncGenerator<IncrementalPart> {
  const errors: GraphQLError[] = [];
  let data: ExecutionResult['data'];
  let reported = false;
  const report = () => {
    reported = true;
    return reporter.finish(operation, errors.length === 0 ? { data } : { data, errors });
  };
  try {
    for await (const raw of stream) {
      const part = masked(raw) as IncrementalPart;
      if (part.data !== undefined) data = part.data;
      if (part.errors !== undefined) errors.push(...part.errors);
      for (const item of part.incremental ?? []) if (item.errors !== undefined) errors.push(...item.errors);
      if (part.hasNext === false) {
        const summary = report();
        yield summary.extensions === undefined
          ? part
          : { ...part, extensions: { ...part.extensions, ...summary.extensions } };
      } else yield part;
    }
  } finally {
    // The client left mid-stream (the consumer returned early): the operation is still reported.
    if (!reported) report();
    end();
  }
}
