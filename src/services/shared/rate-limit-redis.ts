/**
 * The Redis connection behind the shared rate limits (`REDIS_URL`, docs/contract.md, More than one machine): one ioredis client per
 * process, shared by both embedded services. Redis down, slow or refusing never fails or holds up a
 * request: commands are not queued while disconnected (`enableOfflineQueue: false`), each waits at most
 * `timeoutMs`, and the store (rate-limit.ts) counts in memory instead. Reconnects go on forever, with a
 * pause that grows to `maxReconnectDelayMs`, so limits are shared again as soon as Redis is back.
 *
 * One warn line per outage and one info line when it ends; the URL in them never shows a password.
 */
import type { FastifyBaseLogger } from 'fastify';
import { createRedisClient, parseRedisUrl, type RedisClient, safeRedisUrl } from '../../shared/redis-url.js';

export interface RateLimitRedisOptions {
  /**
   * Any form src/shared/redis-url.ts parses: `redis://[user:password@]host:port[/db]`, `rediss://…`,
   * `redis+sentinel://host:port[,host:port…]/<master name>`, `redis+cluster://host:port[,host:port…]`.
   */
  url: string;
  /** Longest wait for one Redis command before the request is counted in memory instead. @default 25 */
  timeoutMs?: number;
  /** Longest pause between two reconnection attempts. @default 2000 */
  maxReconnectDelayMs?: number;
  /** Where the outage and recovery lines go. @default none */
  logger?: FastifyBaseLogger | undefined;
}

/** A shared connection plus the outage bookkeeping the store reports to. */
export interface RateLimitRedis {
  /** One server or Sentinel's primary (`Redis`), or a `Cluster`: the plugin's store uses one key per call. */
  readonly client: RedisClient;
  /** Whether the last thing heard from Redis was good (false while it is out). */
  readonly available: boolean;
  /** A command failed or timed out: the outage starts (logged once). */
  commandFailed(error: Error | null): void;
  /** A command succeeded: an outage, if any, is over (logged once). */
  commandSucceeded(): void;
  /**
   * Resolves true once connected, false on the first connection error or after `waitMs`; never
   * rejects. Lets a starting process share its very first requests' counts.
   */
  whenReady(waitMs: number): Promise<boolean>;
  /** Drops the connection at once; no reconnect, no log line. Idempotent. */
  close(): Promise<void>;
}

/** The URL as it may be logged: credentials replaced by `***`, no query string. */
export function redactRedisUrl(url: string): string {
  // Sentinel and Cluster URLs name several hosts, which WHATWG URLs cannot parse: their logged form.
  if (/^rediss?\+/.test(url)) return safeRedisUrl(url);
  try {
    const parsed = new URL(url);
    // A user name alone may be a password to some clients: hidden too.
    let userinfo = '';
    if (parsed.password !== '') userinfo = `${parsed.username === '' ? '' : `${parsed.username}:`}***@`;
    else if (parsed.username !== '') userinfo = '***@';
    return `${parsed.protocol}//${userinfo}${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
  } catch {
    return '(unparsable Redis URL)';
  }
}

/** Connects (in the background) and returns at once; a Redis that is down only gets logged. */
export function createRateLimitRedis(options: RateLimitRedisOptions): RateLimitRedis {
  const timeoutMs = options.timeoutMs ?? 25;
  const maxDelay = options.maxReconnectDelayMs ?? 2000;
  const where = redactRedisUrl(options.url);
  const logger = options.logger;
  // No offline queue; a command caught by a dropped connection fails at once instead of waiting for
  // a reconnect (createRedisClient: no retry, no resend).
  const client = createRedisClient(parseRedisUrl(options.url), {
    offlineQueue: false,
    commandTimeoutMs: timeoutMs,
    connectTimeoutMs: Math.max(1000, timeoutMs),
    // On close, ioredis waits this long for a socket that may already be gone, holding the process
    // open; nothing is left to flush here (every count is sent or lost already).
    disconnectTimeoutMs: 100,
    reconnectDelayMs: (attempt) => Math.min(50 * 2 ** Math.min(attempt, 16), maxDelay),
  });

  // 'connecting' until the first ready or error: a request racing the first connect is no outage.
  let state: 'connecting' | 'up' | 'down' = 'connecting';
  let closing = false;
  const down = (reason: string) => {
    if (closing || state === 'down') return;
    state = 'down';
    logger?.warn(
      { redis: where, reason },
      'Redis unavailable: rate limits are counted per process until it is back',
    );
  };
  const up = () => {
    if (closing) return;
    if (state === 'down')
      logger?.info({ redis: where }, 'Redis available again: rate limits are shared again');
    state = 'up';
  };
  // Only the message: an ioredis error may carry the command and its arguments.
  client.on('error', (error: Error) => down(error.message));
  client.on('close', () => {
    if (state === 'up') down('connection closed');
  });
  client.on('ready', up);

  return {
    client,
    get available() {
      return state === 'up';
    },
    commandFailed: (error) => {
      if (state === 'up') down(error?.message ?? 'command failed');
    },
    commandSucceeded: () => {
      if (state === 'down' && client.status === 'ready') up();
    },
    whenReady: (waitMs) => {
      if (client.status === 'ready') return Promise.resolve(true);
      return new Promise<boolean>((resolve) => {
        const finish = (ready: boolean) => {
          clearTimeout(timer);
          client.off('ready', onReady);
          client.off('error', onError);
          resolve(ready);
        };
        const onReady = () => finish(true);
        const onError = () => finish(false);
        const timer = setTimeout(() => finish(false), waitMs);
        client.once('ready', onReady);
        client.once('error', onError);
      });
    },
    close: async () => {
      if (closing) return;
      closing = true;
      client.disconnect(false);
    },
  };
}
