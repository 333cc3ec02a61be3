/**
 * Part of the pipeline's encode step: the HTTP status of a GraphQL answer.
 *
 * `application/json` (legacy clients) keeps the statuses it always had: Yoga's rules
 * (`processRegularResult`), 200 for every well-formed GraphQL response.
 *
 * `application/graphql-response+json` follows the GraphQL-over-HTTP draft (stage 2, text as of
 * August 2026), as docs/contract.md (Errors) tabulates it:
 * - data, no errors: 200; data (even null) with errors: 294 (Partial Success);
 * - the body is not JSON, the document does not parse: 400;
 * - not a well-formed GraphQL-over-HTTP request (no query, `variables` not an object, an unexpected
 *   parameter), a document that fails validation, an operation that cannot be determined, variables
 *   that cannot be coerced: 422;
 * - refusals of the caller's limits keep their documented status (BUDGET_EXCEEDED 400 or 429,
 *   PERSISTED_QUERY_NOT_FOUND 404, PERSISTED_QUERY_NOT_IN_LIST 403, MAX_UPSTREAM_CALLS 400), as do
 *   405, 406, 413, 415 and an unexpected error's 500.
 * An error states its own draft status in `extensions.http.draftStatus` where its code alone does
 * not tell (the executor's variables errors); `http` never reaches the client.
 */
import type { ExecutionResult, GraphQLError } from 'graphql';
import type { JsonMediaType } from '../operation/request-facts.js';

/** The draft's status for a result that has data and errors. */
export const PARTIAL_SUCCESS = 294;

interface HttpExtension {
  status?: number;
  draftStatus?: number;
}

/** Yoga's error for a body that is not JSON carries the parser's SyntaxError. */
function isJsonSyntaxError(error: GraphQLError): boolean {
  const original = (error.extensions?.originalError as { name?: unknown } | undefined) ?? error.originalError;
  return original?.name === 'SyntaxError';
}

/** The draft's status for one request error, or undefined to keep its own. */
function draftStatusOf(error: GraphQLError): number | undefined {
  const http = error.extensions?.http as HttpExtension | undefined;
  if (http?.draftStatus !== undefined) return http.draftStatus;
  switch (error.extensions?.code) {
    case 'GRAPHQL_PARSE_FAILED':
      return 400;
    case 'GRAPHQL_VALIDATION_FAILED':
    case 'OPERATION_RESOLUTION_FAILURE':
      return 422;
    case 'BAD_REQUEST':
      // Yoga's request errors: the body not being JSON is the one that stays 400.
      if (isJsonSyntaxError(error)) return 400;
      return (http?.status ?? 400) === 400 ? 422 : undefined;
    default:
      return undefined;
  }
}

/** The status of `result` answered as `mediaType`, given the status Yoga's rules give it. */
export function httpStatusOf(
  result: ExecutionResult | readonly ExecutionResult[],
  mediaType: JsonMediaType,
  legacyStatus: number,
): number {
  if (mediaType === 'application/json' || Array.isArray(result)) return legacyStatus;
  const single = result as ExecutionResult;
  const errors = single.errors;
  if ('data' in single && single.data !== undefined)
    return errors !== undefined && errors.length > 0 ? PARTIAL_SUCCESS : 200;
  if (errors === undefined || errors.length === 0) return legacyStatus;
  let status: number | undefined;
  for (const error of errors) {
    const draft = draftStatusOf(error);
    if (draft !== undefined && (status === undefined || draft > status)) status = draft;
  }
  // A request error the draft has no word for keeps its own status (a limit's refusal, a 413).
  return status === undefined || legacyStatus >= 500 || legacyStatus > status ? legacyStatus : status;
}
