/** CORS_ORIGINS as Yoga's CORS options; unset: same-origin only, no CORS headers at all. */
import type { CORSOptions } from 'graphql-yoga';
import { GRAPHQL_METHODS } from './endpoint.js';

export function corsOptions(origins: string | undefined): CORSOptions | false {
  if (origins === undefined) return false;
  const list = origins
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  return {
    origin: list.includes('*') ? '*' : list,
    // API keys travel in headers, never cookies: credentials are never needed.
    credentials: false,
    // QUERY is never CORS-safelisted: a browser preflights it, and the answer must name it.
    methods: [...GRAPHQL_METHODS, 'OPTIONS'],
    allowedHeaders: [
      'content-type',
      'accept',
      'authorization',
      'x-api-key',
      'x-request-id',
      'x-max-cost-usd',
    ],
    exposedHeaders: ['x-request-id'],
    maxAge: 600,
  };
}
