/**
 * Part of the pipeline's finish step. graphql-js reports bad variable values (a string for an Int, a missing non-null variable) as
 * request errors without `extensions.code`. Every error a client sees has a code, so these get
 * BAD_USER_INPUT. Only results without `data` are touched: those are request errors raised before
 * any resolver ran; field errors always carry a code already (the schema's, or the masked one).
 */
import type { ExecutionResult, GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';

function withCode(error: GraphQLError): GraphQLError {
  if (error.extensions?.code !== undefined) return error;
  return createGraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError ?? undefined,
    extensions: { ...error.extensions, code: 'BAD_USER_INPUT' },
  });
}

/** The result with a code on every request error. */
export function withRequestErrorCodes<T extends ExecutionResult>(result: T): T {
  const errors = result.errors;
  if (errors === undefined || 'data' in result || errors.every((e) => e.extensions?.code !== undefined))
    return result;
  return { ...result, errors: errors.map(withCode) };
}
