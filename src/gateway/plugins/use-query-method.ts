/**
 * The HTTP QUERY method (RFC 10008; docs/contract.md, Delivery to frontends): `QUERY /graphql` with a
 * POST's body is answered exactly as that POST. Yoga knows GET and POST only, so a QUERY to the
 * endpoint becomes, in the first `onRequest` hook (whatwg-node's `setRequest`), the same request as a
 * POST: the same headers, the body streamed through unread (MAX_REQUEST_BODY_BYTES still applies),
 * the client's signal. Every later step (parsers, CSRF, the pipeline, compression, @defer) then sees
 * a POST and answers as it would. The fast path takes a QUERY as it takes a POST and hands one it
 * cannot serve to Yoga as a QUERY, so this is the one place the method is rewritten.
 *
 * What POST allows and a safe method must not: a mutation. A QUERY whose operation is a mutation is
 * 405 METHOD_NOT_ALLOWED with `Allow: POST`, as Yoga answers a mutation sent by GET.
 */
import { ReadableStream } from 'node:stream/web';
import { getOperationAST, type OperationTypeNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { gatewayError } from '../errors.js';

export interface QueryMethodPluginOptions {
  /** The GraphQL endpoint's path: QUERY elsewhere is left alone (405). */
  endpoint: string;
}

export function useQueryMethod(options: QueryMethodPluginOptions): Plugin {
  /** The POST requests made here from a QUERY. */
  const fromQuery = new WeakSet<Request>();
  return {
    onRequest({ request, setRequest, url }) {
      if (request.method !== 'QUERY' || url.pathname !== options.endpoint) return;
      // The standard's `new Request(request, { method })` keeps the body; whatwg-node's Request does
      // not, so the body is passed on as a stream, unread (Yoga's body size limit still applies). Its
      // body is async iterable, as Node's web streams are, though the DOM types do not say so.
      const body = request.body as unknown as AsyncIterable<Uint8Array> | null;
      const post = new Request(request.url, {
        method: 'POST',
        headers: request.headers,
        body: body === null ? null : ReadableStream.from(body),
        signal: request.signal,
        duplex: 'half',
      } as RequestInit);
      fromQuery.add(post);
      setRequest(post);
    },

    onParse() {
      return ({ result, context }) => {
        const { request, params } = context as {
          request?: Request;
          params?: { operationName?: string | null };
        };
        if (request === undefined || !fromQuery.has(request) || result instanceof Error) return;
        const type: OperationTypeNode | undefined = getOperationAST(
          result,
          params?.operationName ?? undefined,
        )?.operation;
        if (type !== 'mutation') return;
        throw gatewayError(
          'METHOD_NOT_ALLOWED',
          'Can only perform a mutation operation from a POST request: QUERY is a safe method.',
          { http: { status: 405, headers: { allow: 'POST' } } },
        );
      };
    },
  };
}
