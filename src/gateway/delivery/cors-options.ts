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
    // Every request header the contract gives a caller a say with (§3 keys, §8 caps and fallback, §9
    // trace context): a page that cannot send one cannot use it.
    allowedHeaders: [
      'content-type',
      'accept',
      'authorization',
      'x-api-key',
      'x-request-id',
      'x-max-cost-usd',
      'x-budget-fallback',
      'traceparent',
      'tracestate',
    ],
    // And every answer field a page needs to act on: the budget's RateLimit fields (§8), when to come
    // back (429/BUDGET_EXCEEDED), a 401's challenge. None is CORS-safelisted.
    exposedHeaders: ['x-request-id', 'ratelimit', 'ratelimit-policy', 'retry-after', 'www-authenticate'],
    maxAge: 600,
  };
}
