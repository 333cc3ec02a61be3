/**
 * Part of the pipeline's finish step, the one place that decides the code and status of a request
 * error (a result without `data`) that is not a refusal (refusals carry theirs from where they were
 * made: cost control, the call limit, trusted documents). Every error a client sees has a code.
 *
 * - An execution's errors (`ran`): raised before any field ran, variables that do not coerce, in
 *   graphql-js's words whichever executor ran (Yoga's for @defer included). Each gets BAD_USER_INPUT
 *   when it has no code (graphql-js gives none) and its status: 400 for application/json as before,
 *   the 2026 draft's 422 (http-status.ts).
 * - Errors from before execution (Yoga's parse and validation errors) keep their code and status;
 *   one without a code gets BAD_USER_INPUT.
 *
 * One rebuild per error, at most. Field errors (results with data) always carry a code already: the
 * schema's (errors.ts), or the masked one.
 */
import type { ExecutionResult, GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';

const EXECUTION_HTTP = { status: 400, draftStatus: 422 };

function asRequestError(error: GraphQLError, ran: boolean): GraphQLError {
  const extensions = error.extensions;
  if (!ran && extensions?.code !== undefined) return error;
  return createGraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError ?? undefined,
    extensions: {
      ...extensions,
      code: extensions?.code ?? 'BAD_USER_INPUT',
      ...(ran ? { http: { ...(extensions?.http as object | undefined), ...EXECUTION_HTTP } } : {}),
    },
  });
}

/**
 * The result with its request errors coded (see above); `ran`: the result is an execution's (the
 * operation was admitted and ran). A result with data is returned as it is.
 */
export function withRequestErrorCodes<T extends ExecutionResult>(result: T, ran: boolean): T {
  const errors = result.errors;
  if (errors === undefined || 'data' in result) return result;
  if (!ran && errors.every((error) => error.extensions?.code !== undefined)) return result;
  return { ...result, errors: errors.map((error) => asRequestError(error, ran)) };
}
