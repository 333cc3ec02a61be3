/**
 * One tools/call: the tool's operation run by the request pipeline (request/pipeline.ts), exactly as
 * a POST /graphql of the same document and variables would run (begin, resolve, open, admit,
 * execute, finish, encode, end), then the GraphQL answer as an MCP tool result. Nothing here decides
 * a policy: identity, trusted documents, limits, the estimate, cap, budgets and fallback, routing,
 * error codes, the log line, metrics and span are the pipeline's.
 *
 * The result (contract §13):
 * - `structuredContent`: the answer's `data` (kept when errors came with it; absent when the
 *   operation was refused before running), and the same JSON as the text of `content[0]`;
 * - `isError` when the answer has any error, each error's message with its code as a text item, and
 *   the errors in `_meta.errors` as the GraphQL answer has them (message, path, extensions);
 * - `_meta`: `requestId`, `cost` (extensions.cost), `sponsoredBy` (extensions.sponsoredBy: every sponsor
 *   message of the answer), `routing` (extensions.cost.routing) where minAccuracy chose the model.
 *
 * With errors, the answer is the pipeline's own encoding (application/json) read back: the errors an
 * agent sees are byte for byte those a GraphQL client sees (masking and internal extensions included).
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ExecutionResult, GraphQLFormattedError } from 'graphql';
import { gatewayError } from '../errors.js';
import type { Caller } from '../identity.js';
import type { RequestPipeline, RequestState } from '../request/pipeline.js';
import type { McpTool } from './toolset.js';

/** A GraphQL answer as a client reads it. */
interface GraphQLAnswer {
  data?: Record<string, unknown> | null;
  errors?: GraphQLFormattedError[];
  extensions?: {
    cost?: { routing?: unknown } & Record<string, unknown>;
    sponsoredBy?: string[];
  } & Record<string, unknown>;
}

/** The tool calls of one HTTP request: their states, so that a client leaving cancels them. */
export interface ToolCalls {
  readonly facts: RequestState['facts'];
  /** Who the caller is, decided once for the request (identity.ts): every call runs as that caller. */
  readonly identified: Caller;
  readonly states: Set<RequestState>;
  /** The state of a call that ran (the caller's budget on the answer: RateLimit header fields). */
  ran?: RequestState;
}

const errorText = (error: GraphQLFormattedError) => {
  const code = error.extensions?.code;
  const where = error.path === undefined ? '' : ` (at ${error.path.join('.')})`;
  return `${typeof code === 'string' ? code : 'ERROR'}: ${error.message}${where}`;
};

/** The GraphQL answer as an MCP tool result. */
export function toolResult(answer: GraphQLAnswer, requestId: string): CallToolResult {
  const data = answer.data ?? undefined;
  const errors = answer.errors;
  const extensions = answer.extensions;
  const meta: Record<string, unknown> = { requestId };
  const cost = extensions?.cost;
  if (cost !== undefined) meta.cost = cost;
  if (extensions?.sponsoredBy !== undefined) meta.sponsoredBy = extensions.sponsoredBy;
  if (cost?.routing !== undefined) meta.routing = cost.routing;
  const content: CallToolResult['content'] = [];
  if (data !== undefined) content.push({ type: 'text', text: JSON.stringify(data) });
  const result: CallToolResult = { content, _meta: meta };
  if (data !== undefined) result.structuredContent = data;
  if (errors !== undefined && errors.length > 0) {
    result.isError = true;
    meta.errors = errors;
    for (const error of errors) content.push({ type: 'text', text: errorText(error) });
  }
  return result;
}

export function createToolCaller(
  pipeline: RequestPipeline,
): (calls: ToolCalls, tool: McpTool, args: Record<string, unknown>) => Promise<CallToolResult> {
  /** The operation's finished result (or the refusal of its document). */
  const run = async (
    state: RequestState,
    tool: McpTool,
    args: Record<string, unknown>,
  ): Promise<ExecutionResult> => {
    const resolved = await pipeline.resolve(state, tool.request);
    // Refused by the trusted documents before any operation opened, as on the GraphQL lanes.
    if (resolved instanceof Error) return { errors: [resolved] };
    const { document, operationName } = tool;
    const operation = pipeline.open(state, operationName);
    if (tool.invalid.length > 0) return pipeline.finish(operation, { errors: tool.invalid });
    const wrong = tool.checkArguments(args);
    if (wrong !== undefined)
      return pipeline.finish(operation, { errors: [gatewayError('BAD_USER_INPUT', wrong)] });
    const refusal = await pipeline.admit(operation, document, operationName, args);
    const result = refusal ?? (await pipeline.execute(operation, document, operationName, args));
    return pipeline.finish(operation, result);
  };

  return async (calls, tool, args) => {
    // One state per call: each call is capped (X-Max-Cost-Usd) and settled on its own.
    const state = pipeline.begin(calls.facts, calls.identified);
    calls.states.add(state);
    calls.ran = state;
    try {
      const result = await run(state, tool, args);
      // Without errors the result is plain JSON already (data and the reporter's extensions); with
      // errors, the pipeline's encoding (masking, internal extensions dropped) is read back.
      const answer =
        result.errors === undefined
          ? (result as GraphQLAnswer)
          : (JSON.parse(pipeline.encode(result, 'application/json').body) as GraphQLAnswer);
      return toolResult(answer, state.facts.requestId);
    } finally {
      calls.states.delete(state);
      pipeline.end(state);
    }
  };
}
