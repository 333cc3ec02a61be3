/**
 * Per-key, per-tier rate limits on top of @fastify/rate-limit: one bucket per caller (`Caller.rateKey`),
 * a window of one minute, the tier's limit as the bucket's maximum, 0 meaning unlimited. Past the limit:
 * 429 RATE_LIMITED with `Retry-After` in whole seconds (at least 1; the plugin rounds the bucket's
 * remaining time up). Routes with `config.rateLimit: false` (health, /openapi.json) are not limited.
 */
import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import { ServiceError } from './service-error.js';
import type { TierRateLimits } from './tiers.js';

export interface RateLimitOptions {
  limits: TierRateLimits;
  /** Length of the window. @default 60000 */
  windowMs?: number;
  /** Buckets kept in memory (least recently used out first). @default 10000 */
  buckets?: number;
}

/** Registers the limiter; must run before the routes are declared (it hooks route creation). */
export function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): void {
  const { limits } = options;
  const windowMs = options.windowMs ?? 60_000;
  app.register(fastifyRateLimit, {
    global: true,
    timeWindow: windowMs,
    cache: options.buckets ?? 10_000,
    // The caller is resolved by the auth hook, which runs first (root onRequest hooks precede route ones).
    keyGenerator: (request) => request.caller?.rateKey ?? `free@${request.ip}`,
    allowList: (request) => limits[request.caller?.tier ?? 'free'] === 0,
    max: (request) => limits[request.caller?.tier ?? 'free'],
    errorResponseBuilder: (_request, context) =>
      new ServiceError(
        429,
        'RATE_LIMITED',
        `rate limit of ${context.max} requests per ${Math.round(windowMs / 1000)} s exceeded; retry in ${context.after}`,
      ),
  });
}
