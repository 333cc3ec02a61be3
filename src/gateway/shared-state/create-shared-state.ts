/**
 * The gateway's shared state (docs/contract.md, More than one machine): response cache storage, APQ
 * documents, cross-replica single flight and cost budgets, in this process' memory by default and in
 * Redis when REDIS_URL is set. Redis going away never fails or slows a call: every store answers from
 * memory meanwhile, and rejoins Redis by itself.
 *
 * Two roles: budgets live on REDIS_URL (the `state` link); the response cache, APQ documents and the
 * single flight on REDIS_CACHE_URL (the `cache` link), which is REDIS_URL unless set, one connection
 * then. What clients can make the gateway write (cached answers, documents) can thus live on a Redis
 * that evicts (a cache, `allkeys-lru`) while budgets live on one that does not: `checkBudgetRedis`
 * says whether the budgets' Redis may evict (the gateway refuses to start then), and with budgets on
 * the check runs again at each reconnection and every minute, logging an error while it may.
 */
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { createAnswerStore } from './answer-store.js';
import { createBudgetStore } from './budget-store.js';
import { createFlightCoordinator } from './flight-coordinator.js';
import {
  createRedisLink,
  FAILED,
  type RedisLink,
  type RedisMemoryPolicy,
  safeRedisUrl,
} from './redis-link.js';
import { createScoreStore } from './score-store.js';
import type { BudgetRedisCheck, SharedState } from './types.js';

export interface SharedStateOptions {
  /**
   * Redis shared by every replica (REDIS_URL, redis:// or rediss://): budgets, and unless
   * `cacheRedisUrl` says otherwise everything else. Unset: budgets in memory.
   * @default undefined (memory only)
   */
  redisUrl?: string;
  /**
   * Redis of the response cache, APQ documents and single flight (REDIS_CACHE_URL).
   * @default redisUrl
   */
  cacheRedisUrl?: string;
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
  /**
   * Longest wait for one budget script, in ms (REDIS_BUDGET_TIMEOUT_MS): a slow Redis is waited for.
   * Also how long Redis must have answered nothing before a run of failed commands is an outage.
   * @default timeoutMs
   */
  budgetTimeoutMs?: number;
  /** Hears of budget reservations that lapsed (count, USD), once each across replicas. */
  onBudgetLapse?: (count: number, usd: number) => void;
  /** Outage and recovery lines (one warn per outage, one info per recovery). Required: no @default. */
  logger: Logger;
  /**
   * Registers `gateway_redis_up` and `gateway_redis_errors_total{operation}` here, only when a Redis
   * URL is set (in memory mode there is no Redis to report on, and a constant 0 would page whoever
   * alerts on it), and `gateway_apq_documents_dropped_total{reason}`. One SharedState per registry.
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
  /**
   * Largest APQ document registered, in UTF-8 bytes (APQ_MAX_DOCUMENT_BYTES); larger ones still run
   * but are not stored.
   * @default 65536
   */
  documentMaxBytes?: number;
  /**
   * Most new APQ documents one client registers per 24 h (APQ_MAX_DOCUMENTS_PER_CLIENT), when the
   * caller of `documents.set` names the client.
   * @default 1000
   */
  documentsPerOwner?: number;
  /**
   * Whether budgets are in use: then the budgets' Redis is checked for eviction at each reconnection
   * and every minute (an error line while it may evict).
   * @default false
   */
  budgets?: boolean;
}

/** How often the budgets' Redis is checked again for eviction. */
const EVICTION_RECHECK_MS = 60_000;

/** Whether a Redis with these settings may evict keys (a policy other than noeviction, with a limit). */
export function mayEvict(memory: RedisMemoryPolicy): boolean {
  return memory.policy !== 'noeviction' && memory.maxmemory > 0;
}

/** The one line saying that budgets would live on a Redis that evicts, and what to do. */
export function evictionMessage(url: string, memory: RedisMemoryPolicy): string {
  const mb = Math.round(memory.maxmemory / 1048576);
  return `REDIS_URL (${safeRedisUrl(url)}) may evict keys (maxmemory-policy ${memory.policy}, maxmemory ${mb} MB) and the cost budgets live there: traffic could make it forget what a key spent. Give budgets a Redis with maxmemory-policy noeviction (or no maxmemory), and the cache and APQ documents their own (REDIS_CACHE_URL, e.g. allkeys-lru)`;
}

export function createSharedState(options: SharedStateOptions): SharedState {
  const now = options.now ?? Date.now;
  const maxEntries = options.localMaxEntries ?? 10_000;
  const keyPrefix = options.keyPrefix ?? 'null-pi:';
  const timeoutMs = options.timeoutMs ?? 25;
  const budgetTimeoutMs = Math.max(timeoutMs, options.budgetTimeoutMs ?? timeoutMs);
  const { logger, registry } = options;
  const cacheUrl = options.cacheRedisUrl ?? options.redisUrl;
  const twoLinks = options.redisUrl !== undefined && cacheUrl !== undefined && cacheUrl !== options.redisUrl;
  const links: RedisLink[] = [];

  // One errors counter and one up gauge for both links.
  const anyRedis = options.redisUrl !== undefined || cacheUrl !== undefined;
  const metrics =
    registry !== undefined && anyRedis
      ? {
          errors: new Counter({
            name: 'gateway_redis_errors_total',
            help: 'Failed Redis commands (timeouts included) and connection errors, by operation. Each one was answered from memory.',
            labelNames: ['operation'] as const,
            registers: [registry],
          }),
        }
      : undefined;
  if (registry !== undefined && anyRedis) {
    new Gauge({
      name: 'gateway_redis_up',
      help: '1 while the shared state is in Redis (every Redis the gateway uses), 0 while the gateway uses its in-memory fallback.',
      registers: [registry],
      collect() {
        this.set(links.every((link) => link.usable()) ? 1 : 0);
      },
    });
  }
  const dropped =
    registry === undefined
      ? undefined
      : new Counter({
          name: 'gateway_apq_documents_dropped_total',
          help: 'APQ documents not registered because of a bound: size (APQ_MAX_DOCUMENT_BYTES) or client (APQ_MAX_DOCUMENTS_PER_CLIENT). They still ran.',
          labelNames: ['reason'] as const,
          registers: [registry],
        });

  const linkTo = (url: string, role: string | undefined) => {
    const link = createRedisLink({
      url,
      keyPrefix,
      timeoutMs,
      slowTimeoutMs: budgetTimeoutMs,
      logger,
      metrics,
      role,
    });
    links.push(link);
    return link;
  };
  const stateLink =
    options.redisUrl === undefined ? undefined : linkTo(options.redisUrl, twoLinks ? 'state' : undefined);
  const cacheLink =
    cacheUrl === undefined
      ? undefined
      : twoLinks || stateLink === undefined
        ? linkTo(cacheUrl, twoLinks ? 'cache' : undefined)
        : stateLink;

  const checkOnce = async (): Promise<BudgetRedisCheck> => {
    if (stateLink === undefined) return { verdict: 'memory' };
    const memory = await stateLink.memoryPolicy();
    if (memory === FAILED) return { verdict: 'unknown' };
    return { verdict: mayEvict(memory) ? 'evicting' : 'safe', memory };
  };

  // With budgets, the check again at each reconnection and every minute: an error line each time it
  // turns to evicting, an info line when it is safe again.
  let recheck: NodeJS.Timeout | undefined;
  if (options.budgets && stateLink !== undefined && options.redisUrl !== undefined) {
    const url = options.redisUrl;
    let evicting = false;
    const watch = () => {
      void checkOnce().then((check) => {
        if (check.verdict === 'evicting' && !evicting) {
          evicting = true;
          logger.error({ redis: safeRedisUrl(url) }, evictionMessage(url, check.memory));
        } else if (check.verdict === 'safe' && evicting) {
          evicting = false;
          logger.info({ redis: safeRedisUrl(url) }, 'the budgets’ Redis no longer evicts keys');
        }
      });
    };
    stateLink.onConnect(watch);
    recheck = setInterval(watch, EVICTION_RECHECK_MS);
    recheck.unref();
  }

  const scores = createScoreStore({ link: stateLink });
  return {
    cache: createAnswerStore({
      link: cacheLink,
      now,
      maxEntries,
      maxBytes: options.localMaxBytes ?? 64 * 1024 * 1024,
    }),
    documents: createAnswerStore({
      link: cacheLink,
      now,
      maxEntries: options.documentsMaxEntries ?? 10_000,
      maxBytes: options.documentsMaxBytes ?? 16 * 1024 * 1024,
      space: 'documents',
      maxValueBytes: options.documentMaxBytes ?? 65_536,
      maxPerOwner: options.documentsPerOwner ?? 1000,
      onDropped: dropped === undefined ? undefined : (reason) => dropped.labels(reason).inc(),
    }),
    flights: createFlightCoordinator(cacheLink),
    budgets: createBudgetStore(stateLink, maxEntries, {
      timeoutMs: budgetTimeoutMs,
      onLapse: options.onBudgetLapse,
    }),
    scores,
    status: () => {
      if (links.length === 0) return 'memory';
      return links.every((link) => link.status() === 'redis') ? 'redis' : 'fallback';
    },
    async checkBudgetRedis(waitMs) {
      if (stateLink === undefined) return { verdict: 'memory' };
      if (!(await stateLink.connected(waitMs))) return { verdict: 'unreachable' };
      return checkOnce();
    },
    close: async () => {
      if (recheck !== undefined) clearInterval(recheck);
      scores.close();
      await Promise.all(links.map((link) => link.close()));
    },
  };
}
