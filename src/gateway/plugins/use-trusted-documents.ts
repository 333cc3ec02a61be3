/**
 * Trusted documents and persisted queries on Yoga's path (docs/contract.md, Trusted documents and
 * persisted queries): each operation's params (every entry of a batch too) are resolved by the rules of
 * trusted-documents.ts, shared with the fast path: a `documentId` or an APQ hash becomes its document's
 * text, a refusal is thrown as the request's error (PERSISTED_QUERY_NOT_FOUND 404,
 * PERSISTED_QUERY_NOT_IN_LIST 403, BAD_USER_INPUT 400), before parsing, so a refused operation calls
 * nothing.
 *
 * Why not Yoga's `@graphql-yoga/plugin-persisted-operations` and `plugin-apq`: two plugins with their
 * own stores, codes and messages for what is one set of rules here (three modes, APQ registration in
 * the shared store, introspection in enforce mode), which the fast path must apply identically.
 */
import type { Plugin } from 'graphql-yoga';
import type { TrustedDocuments } from '../trusted-documents.js';

export interface TrustedDocumentsPluginOptions {
  /** The rules; a function because the manifest is validated with this Yoga's own rules, after it is made. */
  trusted: () => TrustedDocuments;
}

export function useTrustedDocuments(options: TrustedDocumentsPluginOptions): Plugin {
  return {
    async onParams({ params, setParams, request }) {
      const trusted = options.trusted();
      const sent = params as { query?: unknown; documentId?: unknown; extensions?: unknown };
      // Yoga's GET parser keeps only query, variables, operationName and extensions.
      if (sent.documentId === undefined && request.method === 'GET') {
        const id = new URL(request.url).searchParams.get('documentId');
        if (id !== null) sent.documentId = id;
      }
      if (!trusted.involves(sent)) return;
      const resolved = await trusted.resolve(sent);
      if (resolved instanceof Error) throw resolved;
      if (resolved.query === '') return;
      const { documentId: _id, ...rest } = params as typeof params & { documentId?: unknown };
      setParams({ ...rest, query: resolved.query });
    },
  };
}
