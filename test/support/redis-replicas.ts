/**
 * Two SharedState instances on one real redis-server, as two gateway replicas would be, with a raw
 * client to look at what they wrote: shared by the tests of the shared state and the budget store.
 */
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { expect } from 'vitest';
import {
  createSharedState,
  type SharedState,
  type SharedStateOptions,
} from '../../src/gateway/shared-state/index.js';
import { type RedisServer, startRedisServer } from './redis-server.js';
import { until } from './waits.js';

export interface RedisReplicasOptions {
  /** Every key under this prefix (one per test file keeps files apart). */
  keyPrefix: string;
  /** More options of replica A (a registry, a lapse listener). */
  a?: Partial<SharedStateOptions>;
  /** More options of replica B. */
  b?: Partial<SharedStateOptions>;
}

export interface RedisReplicas {
  server: RedisServer;
  /** Connected; fails a command at once rather than retrying it. */
  raw: Redis;
  a: SharedState;
  b: SharedState;
  /** Closes both replicas and the raw client, then stops the server. */
  stop(): Promise<void>;
}

/** Starts a redis-server and two replicas on it; resolves once both are on Redis. */
export async function startRedisReplicas(options: RedisReplicasOptions): Promise<RedisReplicas> {
  const server = await startRedisServer();
  const raw = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  await raw.connect();
  // A timeout far above the default: a loaded CI machine must not turn these tests into fallbacks.
  const common = {
    redisUrl: server.url,
    keyPrefix: options.keyPrefix,
    timeoutMs: 1000,
    logger: pino({ level: 'silent' }),
  };
  const a = createSharedState({ ...common, ...options.a });
  const b = createSharedState({ ...common, ...options.b });
  expect(await until(() => a.status() === 'redis' && b.status() === 'redis')).toBe(true);
  return {
    server,
    raw,
    a,
    b,
    async stop() {
      await a.close();
      await b.close();
      raw.disconnect();
      await server.stop();
    },
  };
}
