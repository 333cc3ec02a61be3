/**
 * The process' one Redis connection and its health: when Redis may be used, and what to log and
 * count when it may not. One server, Sentinel or Cluster alike (src/shared/redis-url.ts builds the
 * ioredis client from the URL): the options and the health rules below hold for all three; Sentinel's
 * failovers and a Cluster's changes of masters are logged (info) and counted as topology changes.
 *
 * Why these ioredis options: a request must never wait for Redis beyond the command timeout, so
 * there is no offline queue (a command while disconnected fails at once), no retry of a command
 * (`maxRetriesPerRequest: 0`: a command in flight when the socket drops fails at once, and is not
 * replayed later), and every command times out: after `timeoutMs` (the cache, flights), or the longer
 * wait its caller gives `run` (the budget scripts, `slowTimeoutMs`). The connection is lazy and opened
 * without awaiting it, so the gateway starts whether Redis is up or not; ioredis then reconnects in
 * the background forever, at most every 2 s.
 *
 * Health: 'up' from the connection's ready event; 'down' when the connection closes or a run of
 * commands fails (timeouts included) while the socket stays open and Redis has answered nothing for
 * `slowTimeoutMs` (slow is not away: a cache command timed out at 25 ms on a loaded machine while the
 * budget scripts still get answers is no outage). While down, `usable()` is false and
 * the stores do not send anything: a dead Redis costs a property read per call. A socket outage ends
 * with ioredis' reconnection; a command-failure outage with a probe (a SET with TTL, every second).
 * Each outage logs one warning and each recovery one info line; the URL is logged without credentials.
 *
 * A Redis that is full (`OOM command not allowed`, maxmemory reached under `noeviction`) is not an
 * outage: it still answers reads, and the budget scripts still write (budget-store.ts says how), so
 * only the write that was refused is lost (a cached answer, a document), counted in the errors metric.
 * With a separate cache Redis (REDIS_CACHE_URL) there are two links, each with its own health; their
 * lines carry `role`.
 */
import type { Logger } from 'pino';
import {
  createRedisClient,
  isCluster,
  parseRedisUrl,
  type RedisClient,
  type RedisTopology,
  secretsOf,
} from '../../shared/redis-url.js';
import type { RedisPurpose } from '../observability/redis-commands.js';
import { purposeOf, type RedisOperation } from './redis-operations.js';

/** What a failed (or timed out) command resolves to: the callers never see a rejection. */
export const FAILED: unique symbol = Symbol('redis command failed');
export type Failed = typeof FAILED;

export { purposeOf, type RedisOperation } from './redis-operations.js';

/** A Lua script defined on the connection, called with its keys then its arguments. */
export type ScriptCall = (...keysAndArgs: Array<string | number>) => Promise<unknown>;

export interface RedisLinkOptions {
  /** Any form src/shared/redis-url.ts parses: one server, Sentinel or Cluster. */
  url: string;
  keyPrefix: string;
  timeoutMs: number;
  /**
   * The longest timeout a caller gives `run` (the budget scripts', REDIS_BUDGET_TIMEOUT_MS), and how
   * long Redis must have answered nothing before a run of failed commands makes an outage: a command
   * that timed out at `timeoutMs` shows a slow Redis, not one that is away.
   * @default timeoutMs
   */
  slowTimeoutMs?: number;
  logger: Logger;
  /** Where failed commands and topology changes are counted (the shared state's metrics). */
  metrics?: RedisLinkMetrics | undefined;
  /** What this connection holds, on its log lines, when the process has two: `state` or `cache`. */
  role?: string | undefined;
}

/** What a link reports to the metrics (shared by the links of a process). */
export interface RedisLinkMetrics {
  error(operation: RedisOperation): void;
  /** The primary changed (Sentinel) or the masters did (Cluster). */
  topologyChanged(): void;
  /** `count` commands sent (round trips), for `purpose` (observability/redis-commands.ts). */
  commands?(purpose: RedisPurpose, count: number): void;
}

/** What Redis says of its memory limit (INFO memory). */
export interface RedisMemoryPolicy {
  /** `maxmemory-policy`: noeviction, allkeys-lru, volatile-ttl, … */
  policy: string;
  /** `maxmemory` in bytes; 0: no limit (Redis never evicts). */
  maxmemory: number;
  /** Which server said it (`host:port`), on a Cluster (one per master). */
  server?: string | undefined;
}

export interface RedisLink {
  readonly keyPrefix: string;
  /** The kind of deployment the URL names: single, sentinel or cluster. */
  readonly topology: RedisTopology;
  /** Connected and healthy: commands may be sent. A property read or two: call it on every request. */
  usable(): boolean;
  /**
   * Usable, and on a Cluster every master's own connection open and ready. Just after a Cluster's
   * `ready` a node connection still opening refuses a command (no offline queue), and a command to one
   * not opened yet opens it, so that other commands to it meanwhile fail: a caller that may choose its
   * moment (the replica registry's first beat) waits for this.
   */
  nodesReady(): boolean;
  /**
   * Runs one command; its value, or FAILED (counted, and part of a run that makes an outage).
   * `timeoutMs`: this call's own timeout, at most `slowTimeoutMs` (default: the link's `timeoutMs`).
   */
  run<T>(
    operation: RedisOperation,
    command: (client: RedisClient) => Promise<T>,
    timeoutMs?: number,
  ): Promise<T | Failed>;
  /**
   * Counts commands a `run` callback sent beyond its first (`run` counts one per call), or commands
   * sent on this connection outside `run` (a pipeline of n commands: n), under `operation`'s purpose.
   */
  countCommands(operation: RedisOperation, count: number): void;
  /**
   * Defines a Lua script (EVALSHA, EVAL when Redis lost it) and returns its caller. `numberOfKeys`
   * undefined: each call gives the number of its keys first. On a Cluster every key of one call must
   * be in one hash slot (redis-keys.ts' tagged keys).
   */
  script(name: string, numberOfKeys: number | undefined, lua: string): ScriptCall;
  status(): 'redis' | 'fallback';
  /** Calls `listener` each time the connection is (re)established and usable. */
  onConnect(listener: () => void): void;
  /**
   * Resolves once the first connection attempt ended: true when connected, false when it failed or
   * `timeoutMs` passed first.
   */
  connected(timeoutMs: number): Promise<boolean>;
  /**
   * The eviction settings (INFO memory) of every server that holds this link's keys: the one server,
   * Sentinel's current primary, or every master of a Cluster. FAILED when one does not say (error,
   * ACL, timeout, no master known yet).
   */
  memoryPolicy(): Promise<RedisMemoryPolicy[] | Failed>;
  close(): Promise<void>;
}

/** Consecutive failed commands that make an outage while the socket is up (slow or refusing Redis). */
const FAILURES_FOR_OUTAGE = 3;
/** How often a command-failure outage re-checks Redis. */
const PROBE_INTERVAL_MS = 1_000;
/** Longest pause between reconnection attempts. */
const MAX_RECONNECT_DELAY_MS = 2_000;
/** A connection attempt that hangs (blackholed address) fails after this, then the next one starts. */
const CONNECT_TIMEOUT_MS = 2_000;

export { safeRedisUrl } from '../../shared/redis-url.js';

function messageOf(error: unknown, secrets: readonly string[]): string {
  let text = error instanceof Error ? error.message : String(error);
  // ioredis' messages carry host and port, not credentials; scrub anyway, a log line is forever.
  for (const secret of secrets) text = text.split(secret).join('***');
  return text;
}

/** Whether a command failed because Redis is full (maxmemory reached, nothing evictable). */
export function isOutOfMemory(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('OOM ');
}

/** Reads one `field:value` line of an INFO answer. */
function infoField(info: string, field: string): string | undefined {
  const match = new RegExp(`^${field}:(.*)$`, 'm').exec(info);
  return match?.[1]?.trim();
}

/** `host:port` of a Cluster node as ioredis knows it. */
function nodeAddress(node: { options: { host?: string | undefined; port?: number | undefined } }): string {
  return `${node.options.host ?? '?'}:${node.options.port ?? '?'}`;
}

/** `pending`, or a rejection once `ms` passed first (ioredis' own message, so the logs read alike). */
function within<T>(pending: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('Command timed out')), ms);
    pending.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

export function createRedisLink(options: RedisLinkOptions): RedisLink {
  const { keyPrefix, timeoutMs, metrics } = options;
  const countCommands = (operation: RedisOperation, count: number) => {
    const purpose = purposeOf(operation);
    if (purpose !== undefined && count > 0) metrics?.commands?.(purpose, count);
  };
  // ioredis times every command out at the longest wait any caller may ask for; the shorter waits
  // (the cache's, the flights') are timed here, per call.
  const slowTimeoutMs = Math.max(timeoutMs, options.slowTimeoutMs ?? timeoutMs);
  const logger = options.role === undefined ? options.logger : options.logger.child({ role: options.role });
  // The settings validated the URL; a caller passing a bad one directly learns it here, at once.
  const target = parseRedisUrl(options.url);
  const { topology } = target;
  const where = target.safe;
  const secrets = secretsOf(target);

  const client = createRedisClient(target, {
    lazyConnect: true,
    offlineQueue: false,
    commandTimeoutMs: slowTimeoutMs,
    connectTimeoutMs: CONNECT_TIMEOUT_MS,
    reconnectDelayMs: (attempt) => Math.min(50 * 2 ** attempt, MAX_RECONNECT_DELAY_MS),
    connectionName: 'null-pi-gateway',
  });

  let state: 'connecting' | 'up' | 'down' = 'connecting';
  let closing = false;
  let failures = 0;
  /** When Redis last answered anything (performance.now()). */
  let answeredAt = performance.now();
  let lastError = 'connection closed';
  let probe: NodeJS.Timeout | undefined;
  const connectListeners: Array<() => void> = [];
  let firstAttempt: ((connected: boolean) => void) | undefined;
  const firstAttemptEnded = new Promise<boolean>((resolve) => {
    firstAttempt = resolve;
  });
  /** Sentinel: the primary last connected to; Cluster: its masters, sorted (`host:port,…`). */
  let lastPrimary: string | undefined;

  function usable(): boolean {
    return state === 'up' && client.status === 'ready';
  }

  function nodesReady(): boolean {
    if (!usable()) return false;
    if (!isCluster(client)) return true;
    return client.nodes('master').every((node) => node.status === 'ready');
  }

  function stopProbe() {
    if (probe !== undefined) clearInterval(probe);
    probe = undefined;
  }

  /** Where the keys live now: the primary's address (Sentinel), the masters (Cluster). */
  function primaryNow(): string | undefined {
    if (isCluster(client)) {
      const masters = client.nodes('master').map(nodeAddress).sort();
      return masters.length === 0 ? undefined : masters.join(',');
    }
    if (topology !== 'sentinel') return undefined;
    // The socket ioredis connected to once the sentinels named the primary.
    const stream = client.stream;
    return stream?.remoteAddress === undefined ? undefined : `${stream.remoteAddress}:${stream.remotePort}`;
  }

  /** Logs (info) and counts a change of primary or masters; no credentials in either address. */
  function watchTopology() {
    const now = primaryNow();
    if (now === undefined || now === lastPrimary) return;
    const before = lastPrimary;
    lastPrimary = now;
    if (before === undefined) return;
    metrics?.topologyChanged();
    if (topology === 'cluster')
      logger.info({ redis: where, topology, masters: now, before }, 'redis cluster masters changed');
    else logger.info({ redis: where, topology, primary: now, before }, 'redis primary switched');
  }

  function markUp() {
    firstAttempt?.(true);
    if (closing) return;
    watchTopology();
    if (state === 'up') return;
    const previous = state;
    state = 'up';
    failures = 0;
    answeredAt = performance.now();
    stopProbe();
    if (previous === 'down') logger.info({ redis: where, topology }, 'redis back; sharing state again');
    else logger.info({ redis: where, topology }, 'redis connected; sharing state');
    for (const listener of connectListeners) listener();
  }

  function markDown(reason: string) {
    firstAttempt?.(false);
    if (closing || state === 'down') return;
    state = 'down';
    logger.warn({ redis: where, topology, reason }, 'redis unavailable; using in-memory state');
  }

  // A write (with TTL), not a PING: a Redis that answers but refuses writes (read-only replica, out of
  // memory) is not usable either.
  const probeKey = `${keyPrefix}probe`;
  function startProbe() {
    if (probe !== undefined) return;
    probe = setInterval(() => {
      if (client.status !== 'ready') return; // the socket is down: ioredis' ready event ends the outage
      countCommands('probe', 1);
      client.set(probeKey, '1', 'PX', 10_000).then(markUp, (error: unknown) => {
        metrics?.error('probe');
        lastError = messageOf(error, secrets);
      });
    }, PROBE_INTERVAL_MS);
    probe.unref();
  }

  function fail(operation: RedisOperation, error: unknown) {
    metrics?.error(operation);
    lastError = messageOf(error, secrets);
    // Full is not down: reads and the budget scripts still go through (see the header).
    if (isOutOfMemory(error)) return;
    failures++;
    // Slow is not away: a run of failures is an outage only once Redis has answered nothing for as
    // long as the longest wait (a budget script's), so commands timed out at the cache's short wait on
    // a loaded machine never send the budgets to memory while Redis still answers them.
    if (
      failures >= FAILURES_FOR_OUTAGE &&
      state === 'up' &&
      performance.now() - answeredAt >= slowTimeoutMs
    ) {
      markDown(`${failures} commands failed in a row: ${lastError}`);
      startProbe();
    }
  }

  // Without an error listener ioredis prints every connection error to the console.
  client.on('error', (error: unknown) => {
    metrics?.error('connection');
    lastError = messageOf(error, secrets);
    firstAttempt?.(false);
  });
  client.on('ready', markUp);
  client.on('close', () => markDown(lastError));
  // A Cluster refreshes its slots every few seconds (and after a MOVED): its masters may have changed.
  if (isCluster(client)) client.on('refresh', watchTopology);
  // Not awaited: the gateway starts now; the events above follow the connection.
  client.connect().catch(() => {});

  /** INFO memory of one server, FAILED when it does not say. */
  const memoryOf = async (
    server: { info(section: string): Promise<string> },
    address: string | undefined,
  ): Promise<RedisMemoryPolicy | Failed> => {
    let info: string;
    try {
      countCommands('info', 1);
      info = await server.info('memory');
    } catch (error) {
      metrics?.error('info');
      lastError = messageOf(error, secrets);
      return FAILED;
    }
    const policy = infoField(info, 'maxmemory_policy');
    const maxmemory = Number(infoField(info, 'maxmemory'));
    if (policy === undefined || !Number.isFinite(maxmemory)) return FAILED;
    return { policy, maxmemory, server: address };
  };

  return {
    keyPrefix,
    topology,
    usable,
    nodesReady,
    run<T>(
      operation: RedisOperation,
      command: (redis: RedisClient) => Promise<T>,
      callTimeoutMs = timeoutMs,
    ): Promise<T | Failed> {
      let pending: Promise<T>;
      try {
        pending = command(client);
        countCommands(operation, 1);
        if (callTimeoutMs < slowTimeoutMs) pending = within(pending, callTimeoutMs);
      } catch (error) {
        fail(operation, error);
        return Promise.resolve(FAILED);
      }
      return pending.then(
        (value) => {
          failures = 0;
          answeredAt = performance.now();
          return value;
        },
        (error: unknown) => {
          if (isOutOfMemory(error)) answeredAt = performance.now();
          fail(operation, error);
          return FAILED;
        },
      );
    },
    countCommands,
    script(name, numberOfKeys, lua) {
      client.defineCommand(name, { numberOfKeys, lua });
      // defineCommand adds a method ioredis' types cannot know of.
      const commands = client as unknown as Record<string, ScriptCall>;
      return (...keysAndArgs) => commands[name]!(...keysAndArgs);
    },
    status: () => (usable() ? 'redis' : 'fallback'),
    onConnect(listener) {
      connectListeners.push(listener);
    },
    connected(waitMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), waitMs);
        timer.unref();
      });
      return Promise.race([firstAttemptEnded, late]).finally(() => clearTimeout(timer));
    },
    async memoryPolicy() {
      if (client.status !== 'ready') return FAILED;
      // Every master of a Cluster holds a share of the budgets; each must keep them.
      const servers = isCluster(client)
        ? client.nodes('master').map((node) => memoryOf(node, nodeAddress(node)))
        : [memoryOf(client, undefined)];
      if (servers.length === 0) return FAILED;
      const policies = await Promise.all(servers);
      const known: RedisMemoryPolicy[] = [];
      for (const policy of policies) {
        if (policy === FAILED) return FAILED;
        known.push(policy);
      }
      return known;
    },
    async close() {
      if (closing) return;
      closing = true;
      stopProbe();
      // QUIT is bounded by the command timeout; disconnect() then stops any reconnection.
      if (client.status === 'ready') await client.quit().catch(() => {});
      client.disconnect();
    },
  };
}
