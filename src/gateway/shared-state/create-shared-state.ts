/**
 * The gateway's shared state (docs/contract.md, More than one machine): response cache storage, APQ
 * documents, cross-replica single flight and hourly cost budgets, in this process' memory by default
 * and in Redis when REDIS_URL is set. Redis going away never fails or slows a call: every store
 * answers from memory meanwhile, and rejoins Redis by itself.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createAnswerStore } from './answer-store.js';
import { createBudgetStore } from './budget-store.js';
import { createFlightCoordinator } from './flight-coordinator.js';
import { createRedisLink } from './redis-link.js';
import type { SharedState } from './types.js';

export interface SharedStateOptions {
  /**
   * Redis shared by every replica (REDIS_URL, redis:// or rediss://). Unset: everything in memory.
   * @default undefined (memory only)
   */
  redisUrl?: string;
  /**
   * Prefix of every Redis key (REDIS_KEY_PREFIX), so deployments can share one Redis.
   * @default 'null-pi:'
   */
  keyPrefix?: string;
  /**
   * Longest wait for one Redis command, in ms (REDIS_TIMEOUT_MS); past it the call is answered from memory.
   * @default 25
   */
  timeoutMs?: number;
  /** Outage and recovery lines (one warn per outage, one info per recovery). Required: no @default. */
  logger: Logger;
  /**
   * Registers `gateway_redis_up` and `gateway_redis_errors_total{operation}` here, only when
   * `redisUrl` is set (in memory mode there is no Redis to report on, and a constant 0 would page
   * whoever alerts on it). One SharedState per registry.
   * @default undefined (no metrics)
   */
  registry?: Registry;
  /**
   * Clock of the local cache expiry, in ms. Budgets take their time as an argument.
   * @default Date.now
   */
  now?: () => number;
  /**
   * Most entries kept locally: cached answers, and separately budget keys.
   * @default 10000
   */
  localMaxEntries?: number;
  /**
   * Most bytes of cached answers kept locally (sizes from `set`'s `bytes`, else estimated).
   * @default 67108864 (64 MiB)
   */
  localMaxBytes?: number;
  /**
   * Most APQ documents kept locally (registered by clients: a store of their own, so that
   * registrations never evict cached answers nor count as cache entries).
   * @default 10000
   */
  documentsMaxEntries?: number;
  /**
   * Most bytes of APQ documents kept locally (two per character of their text).
   * @default 16777216 (16 MiB)
   */
  documentsMaxBytes?: number;
}

export function createSharedState(options: SharedStateOptions): SharedState {
  const now = options.now ?? Date.now;
  const maxEntries = options.localMaxEntries ?? 10_000;
  const link = options.redisUrl
    ? createRedisLink({
        url: options.redisUrl,
        keyPrefix: options.keyPrefix ?? 'null-pi:',
        timeoutMs: options.timeoutMs ?? 25,
        logger: options.logger,
        registry: options.registry,
      })
    : undefined;
  return {
    cache: createAnswerStore({ link, now, maxEntries, maxBytes: options.localMaxBytes ?? 64 * 1024 * 1024 }),
    documents: createAnswerStore({
      link,
      now,
      maxEntries: options.documentsMaxEntries ?? 10_000,
      maxBytes: options.documentsMaxBytes ?? 16 * 1024 * 1024,
      space: 'documents',
    }),
    flights: createFlightCoordinator(link),
    budgets: createBudgetStore(link, maxEntries),
    status: () => (link === undefined ? 'memory' : link.status()),
    close: async () => link?.close(),
  };
}
