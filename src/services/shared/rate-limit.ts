/**
 * Per-key, per-tier rate limits on top of @fastify/rate-limit: one bucket per caller (`Caller.rateKey`)
 * and service, across all its limited routes (v1 and v2 alike: no route has a rate-limit config of its
 * own, which would give it a bucket of its own), the tier's limit as the bucket's maximum, 0 meaning
 * unlimited. Past the limit: 429 RATE_LIMITED with `Retry-After` in whole seconds (at least 1; the
 * plugin rounds the bucket's remaining time up). Routes with `config.rateLimit: false` (health,
 * /openapi.json, retired endpoints) are not limited.
 *
 * Buckets live in memory, or with a Redis connection in Redis (the plugin's own Redis store: atomic
 * INCR and PEXPIRE, so every key has a TTL), shared by every replica. A Redis command that fails or
 * times out is counted in this process's memory instead, so a Redis outage neither fails a request nor
 * lifts the limits (each replica then grants the limit on its own until Redis is back).
 */
import { createRequire } from 'node:module';
import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { RedisClient } from '../../shared/redis-url.js';
import type { RateLimitRedis } from './rate-limit-redis.js';
import { ServiceError } from './service-error.js';
import type { TierRateLimits } from './tiers.js';

export interface RateLimitOptions {
  limits: TierRateLimits;
  /** Length of the window. @default 60000 */
  windowMs?: number;
  /** Buckets kept in memory (least recently used out first). @default 10000 */
  buckets?: number;
  /** Shared buckets in Redis; memory only for the requests Redis cannot count. @default none (memory) */
  redis?: RateLimitRedis | undefined;
  /** Redis key prefix of this service's buckets, e.g. `null-pi:rate-limit:null-check:`. */
  redisNameSpace?: string;
}

/** What one count returns (the plugin's store contract). */
interface Count {
  current: number;
  ttl: number;
}
type CountCallback = (error: Error | null, result?: Count) => void;

/** The plugin's store contract (its `store` option), as its stores implement it. */
interface Store {
  incr(key: string, callback: CountCallback, timeWindow: number, max: number): void;
  child(routeOptions: object): Store;
}
/** What the plugin passes to a store's constructor (its merged options). */
interface StoreParams {
  continueExceeding?: boolean;
  exponentialBackoff?: boolean;
}
type RedisStoreClass = new (
  continueExceeding: boolean,
  exponentialBackoff: boolean,
  redis: RedisClient,
  nameSpace?: string,
) => Store;
type LocalStoreClass = new (continueExceeding: boolean, exponentialBackoff: boolean, cache?: number) => Store;

// The plugin's own stores: its Redis store (the one its `redis` option builds) and its memory store,
// composed below. Not part of its typed API, hence the local types; the version is pinned.
const require = createRequire(import.meta.url);
const PluginRedisStore = require('@fastify/rate-limit/store/RedisStore.js') as RedisStoreClass;
const PluginLocalStore = require('@fastify/rate-limit/store/LocalStore.js') as LocalStoreClass;

/** Counts in Redis; a count Redis cannot make in time is made in memory. */
class RedisWithMemoryFallback implements Store {
  constructor(
    private readonly shared: Store,
    private readonly local: Store,
    private readonly redis: RateLimitRedis,
  ) {}

  incr(key: string, callback: CountCallback, timeWindow: number, max: number): void {
    this.shared.incr(
      key,
      (error, result) => {
        if (error !== null || result === undefined || result === null) {
          this.redis.commandFailed(error);
          this.local.incr(key, callback, timeWindow, max);
          return;
        }
        this.redis.commandSucceeded();
        callback(null, result);
      },
      timeWindow,
      max,
    );
  }

  child(routeOptions: object): Store {
    return new RedisWithMemoryFallback(
      this.shared.child(routeOptions),
      this.local.child(routeOptions),
      this.redis,
    );
  }
}

/** The store class handed to the plugin (it calls `new Store(options)` itself). */
function redisStoreClass(redis: RateLimitRedis, nameSpace: string, buckets: number) {
  return class extends RedisWithMemoryFallback {
    constructor(params: StoreParams) {
      const continueExceeding = params.continueExceeding ?? false;
      const backoff = params.exponentialBackoff ?? false;
      super(
        new PluginRedisStore(continueExceeding, backoff, redis.client, nameSpace),
        new PluginLocalStore(continueExceeding, backoff, buckets),
        redis,
      );
    }
  };
}

/** Registers the limiter; must run before the routes are declared (it hooks route creation). */
export function registerRateLimit(app: FastifyInstance, options: RateLimitOptions): void {
  const { limits, redis } = options;
  const windowMs = options.windowMs ?? 60_000;
  const buckets = options.buckets ?? 10_000;
  app.register(fastifyRateLimit, {
    global: true,
    timeWindow: windowMs,
    cache: buckets,
    ...(redis
      ? {
          store: redisStoreClass(redis, options.redisNameSpace ?? 'rate-limit:', buckets),
          // The store never fails (it falls back to memory); should it ever, answer rather than 500.
          skipOnError: true,
        }
      : {}),
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
