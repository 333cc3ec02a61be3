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
import type { Registry } from 'prom-client';
import { createBudgetShareMetrics } from '../observability/budget-share-metrics.js';
import { createSharedStateMetrics, type RedisConnectionReport } from '../observability/metrics.js';
import { createRedisCommandCounter } from '../observability/redis-commands.js';
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
import type { BudgetRedisCheck, SharedState, SharedStateTopology } from './types.js';

export interface SharedStateOptions {
  /**
   * Redis shared by every replica (REDIS_URL; one server, Sentinel or Cluster, see
   * src/shared/redis-url.ts): budgets, and unless
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
   * Registers the shared state's metrics here (observability/metrics.ts `createSharedStateMetrics`):
   * `gateway_redis_up`, `gateway_redis_errors_total{operation}`, `gateway_redis_topology{role,topology}`,
   * `gateway_redis_topology_changes_total{role}` and `gateway_redis_commands_total{purpose}`
   * (observability/redis-commands.ts) only when a Redis URL is set (in memory mode there
   * is no Redis to report on, and a constant 0 would page whoever alerts on it), and
   * `gateway_apq_documents_dropped_total{reason}`. One SharedState per registry.
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
  /**
   * How often this replica beats into the replica registry (shared-state/replica-registry.ts), in
   * ms; 0: never (tests). It beats from the start with `budgets`, else from the first reserve.
   * @default 2000
   */
  replicaHeartbeatMs?: number;
  /**
   * How many replicas may spend a budget (EXPECTED_REPLICAS, the Deployment's replica count): what an
   * outage's part of a remainder is divided by at least until the replica registry is read.
   * @default 1
   */
  expectedReplicas?: number;
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
  const on = memory.server === undefined ? '' : ` on ${memory.server}`;
  return `REDIS_URL (${safeRedisUrl(url)}) may evict keys (maxmemory-policy ${memory.policy}, maxmemory ${mb} MB${on}) and the cost budgets live there: traffic could make it forget what a key spent. Give budgets a Redis with maxmemory-policy noeviction (or no maxmemory), and the cache and APQ documents their own (REDIS_CACHE_URL, e.g. allkeys-lru)`;
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
  const links: Array<{ link: RedisLink; roles: Array<RedisConnectionReport['role']> }> = [];

  const anyRedis = options.redisUrl !== undefined || cacheUrl !== undefined;
  const metrics =
    registry === undefined ? undefined : createSharedStateMetrics(registry, { redis: anyRedis });
  // gateway_redis_commands_total{purpose}: with a Redis URL only, as the other gateway_redis_* metrics.
  const commands = registry === undefined || !anyRedis ? undefined : createRedisCommandCounter(registry);
  metrics?.setRedisSource(() =>
    links.flatMap(({ link, roles }) =>
      roles.map((role) => ({ role, topology: link.topology, up: link.usable() })),
    ),
  );

  const linkTo = (url: string, logRole: string | undefined, roles: Array<RedisConnectionReport['role']>) => {
    const link = createRedisLink({
      url,
      keyPrefix,
      timeoutMs,
      slowTimeoutMs: budgetTimeoutMs,
      logger,
      role: logRole,
      metrics:
        metrics === undefined
          ? undefined
          : {
              error: (operation) => metrics.redisError(operation),
              commands,
              topologyChanged: () => {
                for (const role of roles) metrics.redisTopologyChanged(role);
              },
            },
    });
    links.push({ link, roles });
    return link;
  };
  const stateLink =
    options.redisUrl === undefined
      ? undefined
      : linkTo(
          options.redisUrl,
          twoLinks ? 'state' : undefined,
          twoLinks ? ['budgets'] : ['budgets', 'cache'],
        );
  const cacheLink =
    cacheUrl === undefined
      ? undefined
      : twoLinks || stateLink === undefined
        ? linkTo(cacheUrl, twoLinks ? 'cache' : undefined, ['cache'])
        : stateLink;

  const checkOnce = async (): Promise<BudgetRedisCheck> => {
    if (stateLink === undefined) return { verdict: 'memory' };
    const servers = await stateLink.memoryPolicy();
    if (servers === FAILED) return { verdict: 'unknown' };
    // On a Cluster every master holds some of the budgets: one that may evict is enough to refuse.
    const evicting = servers.find(mayEvict);
    if (evicting !== undefined) return { verdict: 'evicting', memory: evicting };
    const [memory] = servers;
    return memory === undefined ? { verdict: 'unknown' } : { verdict: 'safe', memory };
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
  // Shares exist only with Redis: their metrics too.
  const shareMetrics =
    registry === undefined || stateLink === undefined ? undefined : createBudgetShareMetrics(registry);
  const budgets = createBudgetStore(stateLink, maxEntries, {
    timeoutMs: budgetTimeoutMs,
    onLapse: options.onBudgetLapse,
    onShareRefill: shareMetrics?.refilled,
    replicaHeartbeatMs: options.replicaHeartbeatMs,
    beatAtStart: options.budgets,
    expectedReplicas: options.expectedReplicas,
  });
  const { sharesHeldUsd } = budgets;
  if (sharesHeldUsd !== undefined) shareMetrics?.setHeldSource(sharesHeldUsd);
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
      onDropped: metrics === undefined ? undefined : (reason) => metrics.apqDocumentDropped(reason),
    }),
    flights: createFlightCoordinator(cacheLink),
    budgets,
    scores,
    status: () => {
      if (links.length === 0) return 'memory';
      return links.every(({ link }) => link.status() === 'redis') ? 'redis' : 'fallback';
    },
    topology: () => {
      const topology: SharedStateTopology = {};
      for (const { link, roles } of links) for (const role of roles) topology[role] = link.topology;
      return topology;
    },
    async checkBudgetRedis(waitMs) {
      if (stateLink === undefined) return { verdict: 'memory' };
      if (!(await stateLink.connected(waitMs))) return { verdict: 'unreachable' };
      return checkOnce();
    },
    close: async () => {
      if (recheck !== undefined) clearInterval(recheck);
      scores.close();
      // What the budget shares spent is written back and what they hold goes back, before the links close.
      await budgets.close?.();
      await Promise.all(links.map(({ link }) => link.close()));
    },
  };
}
