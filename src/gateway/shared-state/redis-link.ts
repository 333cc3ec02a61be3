/**
 * The process' one Redis connection and its health: when Redis may be used, and what to log and
 * count when it may not.
 *
 * Why these ioredis options: a request must never wait for Redis beyond the command timeout, so
 * there is no offline queue (a command while disconnected fails at once), no retry of a command
 * (`maxRetriesPerRequest: 0`: a command in flight when the socket drops fails at once, and is not
 * replayed later), and every command times out after `timeoutMs`. The connection is lazy and opened
 * without awaiting it, so the gateway starts whether Redis is up or not; ioredis then reconnects in
 * the background forever, at most every 2 s.
 *
 * Health: 'up' from the connection's ready event; 'down' when the connection closes or a run of
 * commands fails (timeouts included) while the socket stays open. While down, `usable()` is false and
 * the stores do not send anything: a dead Redis costs a property read per call. A socket outage ends
 * with ioredis' reconnection; a command-failure outage with a probe (a SET with TTL, every second).
 * Each outage logs one warning and each recovery one info line; the URL is logged without credentials.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';

/** What a failed (or timed out) command resolves to: the callers never see a rejection. */
export const FAILED: unique symbol = Symbol('redis command failed');
export type Failed = typeof FAILED;

/** The `operation` label of `gateway_redis_errors_total`. */
export type RedisOperation =
  | 'connection'
  | 'probe'
  | 'cache_get'
  | 'cache_set'
  | 'documents_get'
  | 'documents_set'
  | 'flight_claim'
  | 'flight_settle'
  | 'flight_await'
  | 'budget_add'
  | 'budget_reserve'
  | 'budget_adjust'
  | 'budget_window';

/** A Lua script defined on the connection, called with its keys then its arguments. */
export type ScriptCall = (...keysAndArgs: Array<string | number>) => Promise<unknown>;

export interface RedisLinkOptions {
  url: string;
  keyPrefix: string;
  timeoutMs: number;
  logger: Logger;
  registry?: Registry;
}

export interface RedisLink {
  readonly keyPrefix: string;
  /** Connected and healthy: commands may be sent. A property read or two: call it on every request. */
  usable(): boolean;
  /** Runs one command; its value, or FAILED (counted, and part of a run that makes an outage). */
  run<T>(operation: RedisOperation, command: (client: Redis) => Promise<T>): Promise<T | Failed>;
  /** Defines a Lua script (EVALSHA, EVAL when Redis lost it) and returns its caller. */
  script(name: string, numberOfKeys: number, lua: string): ScriptCall;
  status(): 'redis' | 'fallback';
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

/** The URL as it may be logged: scheme, host, port and database, never the user or password. */
export function safeRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

function messageOf(error: unknown, password: string): string {
  const text = error instanceof Error ? error.message : String(error);
  // ioredis' messages carry host and port, not credentials; scrub anyway, a log line is forever.
  return password === '' ? text : text.split(password).join('***');
}

export function createRedisLink(options: RedisLinkOptions): RedisLink {
  const { url, keyPrefix, timeoutMs, logger } = options;
  const where = safeRedisUrl(url);
  let password = '';
  try {
    password = decodeURIComponent(new URL(url).password);
  } catch {
    // Unparseable: ioredis will fail to connect and say so; nothing to scrub.
  }

  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: timeoutMs,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, MAX_RECONNECT_DELAY_MS),
    // Redis replies with errors the callers turn into misses; never reconnect because of one.
    reconnectOnError: null,
    connectionName: 'null-pi-gateway',
  });

  let state: 'connecting' | 'up' | 'down' = 'connecting';
  let closing = false;
  let failures = 0;
  let lastError = 'connection closed';
  let probe: NodeJS.Timeout | undefined;

  const errors = options.registry
    ? new Counter({
        name: 'gateway_redis_errors_total',
        help: 'Failed Redis commands (timeouts included) and connection errors, by operation. Each one was answered from memory.',
        labelNames: ['operation'] as const,
        registers: [options.registry],
      })
    : undefined;
  if (options.registry) {
    new Gauge({
      name: 'gateway_redis_up',
      help: '1 while the shared state is in Redis, 0 while the gateway uses its in-memory fallback.',
      registers: [options.registry],
      collect() {
        this.set(usable() ? 1 : 0);
      },
    });
  }

  function usable(): boolean {
    return state === 'up' && client.status === 'ready';
  }

  function stopProbe() {
    if (probe !== undefined) clearInterval(probe);
    probe = undefined;
  }

  function markUp() {
    if (closing || state === 'up') return;
    const previous = state;
    state = 'up';
    failures = 0;
    stopProbe();
    if (previous === 'down') logger.info({ redis: where }, 'redis back; sharing state again');
    else logger.info({ redis: where }, 'redis connected; sharing state');
  }

  function markDown(reason: string) {
    if (closing || state === 'down') return;
    state = 'down';
    logger.warn({ redis: where, reason }, 'redis unavailable; using in-memory state');
  }

  // A write (with TTL), not a PING: a Redis that answers but refuses writes (read-only replica, out of
  // memory) is not usable either.
  const probeKey = `${keyPrefix}probe`;
  function startProbe() {
    if (probe !== undefined) return;
    probe = setInterval(() => {
      if (client.status !== 'ready') return; // the socket is down: ioredis' ready event ends the outage
      client.set(probeKey, '1', 'PX', 10_000).then(markUp, (error: unknown) => {
        errors?.labels('probe').inc();
        lastError = messageOf(error, password);
      });
    }, PROBE_INTERVAL_MS);
    probe.unref();
  }

  function fail(operation: RedisOperation, error: unknown) {
    errors?.labels(operation).inc();
    lastError = messageOf(error, password);
    failures++;
    if (failures >= FAILURES_FOR_OUTAGE && state === 'up') {
      markDown(`${failures} commands failed in a row: ${lastError}`);
      startProbe();
    }
  }

  // Without an error listener ioredis prints every connection error to the console.
  client.on('error', (error: unknown) => {
    errors?.labels('connection').inc();
    lastError = messageOf(error, password);
  });
  client.on('ready', markUp);
  client.on('close', () => markDown(lastError));
  // Not awaited: the gateway starts now; the events above follow the connection.
  client.connect().catch(() => {});

  return {
    keyPrefix,
    usable,
    run<T>(operation: RedisOperation, command: (redis: Redis) => Promise<T>): Promise<T | Failed> {
      let pending: Promise<T>;
      try {
        pending = command(client);
      } catch (error) {
        fail(operation, error);
        return Promise.resolve(FAILED);
      }
      return pending.then(
        (value) => {
          failures = 0;
          return value;
        },
        (error: unknown) => {
          fail(operation, error);
          return FAILED;
        },
      );
    },
    script(name, numberOfKeys, lua) {
      client.defineCommand(name, { numberOfKeys, lua });
      // defineCommand adds a method ioredis' types cannot know of.
      const commands = client as unknown as Record<string, ScriptCall>;
      return (...keysAndArgs) => commands[name]!(...keysAndArgs);
    },
    status: () => (usable() ? 'redis' : 'fallback'),
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
