/**
 * Every response carries `x-request-id`: the caller's (when sane) or a generated one, decided when
 * the request arrives (so the operation, the upstreams and the log line use the same id) and set on
 * whatever answers it, early answers included (/health, 404s, CORS preflights, errors).
 */
import type { Plugin } from 'graphql-yoga';
import { requestIdOf } from '../request-facts.js';

export interface RequestIdPluginOptions {
  /** Where the id of each request is kept (the operation plugin reads it). */
  ids: WeakMap<Request, string>;
}

export function useRequestId(options: RequestIdPluginOptions): Plugin {
  const { ids } = options;
  const idOf = (request: Request): string => {
    let id = ids.get(request);
    if (id === undefined) {
      id = requestIdOf(request.headers.get('x-request-id'));
      ids.set(request, id);
    }
    return id;
  };
  return {
    onRequest({ request }) {
      idOf(request);
    },
    onResponse({ request, response }) {
      // Plugins registered before this one (Yoga's /health) may have answered before onRequest ran here.
      response.headers.set('x-request-id', idOf(request));
    },
  };
}
