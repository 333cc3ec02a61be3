/**
 * Small Yoga plugins that turn hostile or malformed HTTP requests into clear, typed 4xx errors:
 * CSRF prevention that keeps plain GET and JSON POST working, a coded 415/405 instead of Yoga's bare
 * one, a type check of `operationName`, a `code` on request errors graphql-js leaves without one
 * (variable coercion), and graphql-armor rejections as ordinary validation errors.
 */
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import type { GraphQLError, ValidationContext } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

// --- CSRF ----------------------------------------------------------------------------------------

export interface CsrfPreventionOptions {
  /**
   * Headers, any one of which marks a request as preflighted (a browser cannot add them cross-site
   * without a CORS preflight).
   * @default ['x-graphql-yoga-csrf', 'apollo-require-preflight']
   */
  requestHeaders?: string[];
}

/** Default of `requestHeaders`. */
export const CSRF_HEADERS = ['x-graphql-yoga-csrf', 'apollo-require-preflight'];

/**
 * CSRF prevention that keeps GraphQL over HTTP GET and `application/json` POST working for plain
 * clients (contract §1, graphql-http's audits).
 *
 * The rule: a request a browser would send cross-site WITHOUT a CORS preflight must carry a header
 * only a preflighted (or non-browser) request can carry. Browsers skip the preflight for "simple"
 * requests: GET/HEAD, and POST with no Content-Type or one of `text/plain`,
 * `application/x-www-form-urlencoded`, `multipart/form-data` (what an HTML form sends). So:
 *
 * - GET and HEAD pass without the header. They only run queries (Yoga answers a mutation over GET
 *   with 405, and the schema has none), the page that triggers one cannot read the answer without
 *   CORS, and no ambient credential rides along: API keys travel in headers, never cookies, so a
 *   cross-site request is just a free-tier request the attacker could make directly.
 * - A POST with a simple (or no) Content-Type needs one of `requestHeaders` (any value), else 403
 *   `CSRF_PREVENTED`. `application/json`, `application/graphql-response+json` and
 *   `application/graphql` are always preflighted cross-site, and pass untouched.
 *
 * Why a wrapper around `@graphql-yoga/plugin-csrf-prevention` instead of the plugin alone: the plugin
 * treats a request without Content-Type as not preflighted, which includes every plain GET, and it has
 * no option to exempt safe methods, so it would break GET for every client that does not send the
 * header. For POST its rule is exactly the one above and is reused; the wrapper applies it to POST
 * only and adds an `extensions.code`.
 */
export function useGatewayCsrfPrevention(options: CsrfPreventionOptions = {}): Plugin {
  const requestHeaders = options.requestHeaders ?? CSRF_HEADERS;
  const check = (useCSRFPrevention({ requestHeaders }) as Plugin).onRequestParse;
  if (check === undefined) throw new Error('@graphql-yoga/plugin-csrf-prevention has no onRequestParse hook');
  return {
    onRequestParse(payload) {
      // Only POST carries a body Yoga parses; other methods are answered 405 by useRequestShapeErrors
      // (or, for a CORS preflight, by Yoga's CORS handling before this hook).
      if (payload.request.method !== 'POST') return;
      try {
        return check(payload);
      } catch {
        // The plugin's own error has no code; this one also says how to pass.
        throw createGraphQLError(
          `This request could be sent cross-site without a CORS preflight (no Content-Type, or a form or text one): send "content-type: application/json", or one of the headers ${requestHeaders.join(', ')}.`,
          { extensions: { code: 'CSRF_PREVENTED', http: { status: 403 } } },
        );
      }
    },
  };
}

// --- content type, method, parameters ------------------------------------------------------------

/**
 * Requests Yoga would answer badly get a clear, coded answer instead:
 *
 * - A request no parser accepts: Yoga's bare 415 with an empty body becomes 405 `METHOD_NOT_ALLOWED`
 *   (with `Allow`) for methods other than GET and POST, or 415 `UNSUPPORTED_MEDIA_TYPE` for a POST
 *   whose Content-Type is not a GraphQL one.
 * - An `operationName` that is neither a string nor null: Yoga checks the type of `query`,
 *   `variables` and `extensions` but not this one, and an object here reached the operation log line
 *   and metrics labels as an object (a 500). 400 `BAD_REQUEST`, before any other plugin sees it.
 */
export function useRequestShapeErrors(): Plugin {
  return {
    onRequestParse({ request, requestParser }) {
      if (requestParser === undefined) {
        if (request.method !== 'GET' && request.method !== 'POST') {
          throw createGraphQLError(`Method ${request.method} is not allowed: use GET or POST.`, {
            extensions: {
              code: 'METHOD_NOT_ALLOWED',
              http: { status: 405, headers: { allow: 'GET, POST' } },
            },
          });
        }
        throw createGraphQLError(
          'Unsupported Content-Type: send application/json (or application/graphql-response+json).',
          { extensions: { code: 'UNSUPPORTED_MEDIA_TYPE', http: { status: 415 } } },
        );
      }
      return {
        onRequestParseDone({ requestParserResult }) {
          const all = Array.isArray(requestParserResult) ? requestParserResult : [requestParserResult];
          for (const params of all) {
            const name: unknown = (params as { operationName?: unknown } | null)?.operationName;
            if (name != null && typeof name !== 'string') {
              throw createGraphQLError('Expected "operationName" param to be a string or null.', {
                extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
              });
            }
          }
        },
      };
    },
  };
}

// --- request error codes -------------------------------------------------------------------------

/**
 * graphql-js reports bad variable values (`Int cannot represent non 32-bit signed integer value`, a
 * string for an Int, a missing non-null variable) as request errors without `extensions.code`. Every
 * error a client sees has a code (contract §2), so these get `BAD_USER_INPUT`.
 *
 * Only errors of a result without `data` are touched: those are request errors, raised before any
 * resolver ran; field errors always carry a code already (the schema's, or the masked one).
 */
export function useRequestErrorCodes(): Plugin {
  const withCode = (error: GraphQLError): GraphQLError => {
    if (error.extensions?.code !== undefined) return error;
    return createGraphQLError(error.message, {
      nodes: error.nodes,
      source: error.source,
      positions: error.positions,
      path: error.path,
      originalError: error.originalError ?? undefined,
      extensions: { ...error.extensions, code: 'BAD_USER_INPUT' },
    });
  };
  return {
    onExecute() {
      return {
        onExecuteDone({ result, setResult }) {
          if (!('errors' in result) || 'data' in result || !result.errors) return;
          if (result.errors.every((e) => e.extensions?.code !== undefined)) return;
          setResult({ ...result, errors: result.errors.map(withCode) });
        },
      };
    },
  };
}

// --- graphql-armor rejections --------------------------------------------------------------------

/**
 * Spread into each graphql-armor limit (depth, aliases, directives). By default armor THROWS a plain
 * GraphQLError from inside validation: no `extensions.code`, a misleading "Syntax Error:" prefix, and
 * HTTP 200 with no `data` even for `application/graphql-response+json` (which the GraphQL-over-HTTP
 * spec forbids). Reported through the validation context instead, the rejection is a validation error
 * like any other: code `GRAPHQL_VALIDATION_FAILED`, HTTP 400 for graphql-response+json, and every
 * limit that is exceeded is listed, not only the first.
 */
export const armorRejection = {
  propagateOnRejection: false,
  onReject: [
    (context: ValidationContext | null, error: GraphQLError): void => {
      context?.reportError(
        createGraphQLError(error.message.replace(/^Syntax Error: /, ''), {
          extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
        }),
      );
    },
  ],
};
