/**
 * Requests Yoga would answer badly get a clear, coded answer instead:
 * - a request no parser accepts: Yoga's bare 415 with an empty body becomes 405 METHOD_NOT_ALLOWED
 *   (with `Allow: GET, POST, QUERY`) for other methods (a QUERY is a POST by now: use-query-method.ts),
 *   or 415 UNSUPPORTED_MEDIA_TYPE for a POST whose
 *   Content-Type is not a GraphQL one;
 * - an `operationName` that is neither a string nor null: Yoga checks `query`, `variables` and
 *   `extensions` but not this one, and an object here would reach the log line and the metrics
 *   labels as an object. 400 BAD_REQUEST, before any other plugin sees it.
 */
import type { Plugin } from 'graphql-yoga';
import { GRAPHQL_METHODS } from '../delivery/endpoint.js';
import { gatewayError } from '../errors.js';

const ALLOW = GRAPHQL_METHODS.join(', ');

export function useRequestShapeErrors(): Plugin {
  return {
    onRequestParse({ request, requestParser }) {
      if (requestParser === undefined) {
        if (request.method !== 'GET' && request.method !== 'POST') {
          throw gatewayError(
            'METHOD_NOT_ALLOWED',
            `Method ${request.method} is not allowed: use GET, POST or QUERY.`,
            { http: { status: 405, headers: { allow: ALLOW } } },
          );
        }
        throw gatewayError(
          'UNSUPPORTED_MEDIA_TYPE',
          'Unsupported Content-Type: send application/json (or application/graphql-response+json).',
          { http: { status: 415 } },
        );
      }
      return {
        onRequestParseDone({ requestParserResult }) {
          const all = Array.isArray(requestParserResult) ? requestParserResult : [requestParserResult];
          for (const params of all) {
            const name: unknown = (params as { operationName?: unknown } | null)?.operationName;
            if (name != null && typeof name !== 'string') {
              throw gatewayError('BAD_REQUEST', 'Expected "operationName" param to be a string or null.', {
                http: { status: 400 },
              });
            }
          }
        },
      };
    },
  };
}
