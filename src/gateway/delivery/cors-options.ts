/** CORS_ORIGINS as Yoga's CORS options; unset: same-origin only, no CORS headers at all. */
import type { CORSOptions } from 'graphql-yoga';

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
    methods: ['GET', 'POST', 'OPTIONS'],
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
