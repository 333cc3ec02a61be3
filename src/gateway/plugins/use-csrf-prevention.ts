/**
 * CSRF prevention that keeps GraphQL over HTTP GET and JSON POST working for plain clients.
 *
 * The rule: a request a browser would send cross-site WITHOUT a CORS preflight must carry a header
 * only a preflighted (or non-browser) request can carry. Browsers skip the preflight for "simple"
 * requests: GET/HEAD, and POST with no Content-Type or one of `text/plain`,
 * `application/x-www-form-urlencoded`, `multipart/form-data` (what an HTML form sends). So:
 * - GET and HEAD pass. They only run queries (a mutation over GET is refused, and the schema has
 *   none), the page that triggers one cannot read the answer without CORS, and no ambient credential
 *   rides along: API keys travel in headers, never cookies.
 * - A POST with a simple (or no) Content-Type needs one of `requestHeaders`, else 403 CSRF_PREVENTED.
 *   JSON and GraphQL content types are always preflighted cross-site, and pass.
 * - A POST whose Content-Type no parser takes (`text/plain`, none at all) is not a GraphQL request at
 *   all: it gets 415 (use-request-shape-errors.ts) before any CSRF verdict, as the GraphQL-over-HTTP
 *   draft of 2026 asks (docs/contract.md, Errors). Nothing runs for it either way.
 *
 * Why not `@graphql-yoga/plugin-csrf-prevention` as published: it applies its rule to every method,
 * so every plain GET without the header would be refused, breaking GraphQL over HTTP GET for every
 * client (and graphql-http's audits). Its POST rule is this one.
 */
import type { Plugin } from 'graphql-yoga';
import { gatewayError } from '../errors.js';

export interface CsrfPreventionPluginOptions {
  /**
   * Headers, any one of which marks a request as preflighted.
   * @default ['x-graphql-yoga-csrf', 'apollo-require-preflight']
   */
  requestHeaders?: string[];
}

const SIMPLE_CONTENT_TYPES = ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'];

export function useCsrfPrevention(options: CsrfPreventionPluginOptions = {}): Plugin {
  const requestHeaders = options.requestHeaders ?? ['x-graphql-yoga-csrf', 'apollo-require-preflight'];
  return {
    onRequestParse({ request, requestParser }) {
      if (request.method !== 'POST' || requestParser === undefined) return;
      const contentType = request.headers.get('content-type')?.toLowerCase();
      const simple =
        contentType === undefined || SIMPLE_CONTENT_TYPES.some((type) => contentType.startsWith(type));
      if (!simple || requestHeaders.some((name) => request.headers.has(name))) return;
      throw gatewayError(
        'CSRF_PREVENTED',
        `This request could be sent cross-site without a CORS preflight (no Content-Type, or a form or text one): send "content-type: application/json", or one of the headers ${requestHeaders.join(', ')}.`,
        { http: { status: 403 } },
      );
    },
  };
}
