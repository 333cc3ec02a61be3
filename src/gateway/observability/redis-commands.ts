/**
 * `gateway_redis_commands_total{purpose}`: the Redis commands the shared state sends, by what they are
 * for. Each is one round trip to Redis (a Lua script is one command, whatever it runs inside), so
 * `rate()` of it ÷ the operations' rate is the round trips an operation costs, per purpose: what
 * sharing state costs the fleet's Redis (docs/contract.md, More than one machine).
 *
 * Counted where the commands are sent (shared-state/redis-link.ts: every `run`, the health probe,
 * the eviction check), so a store cannot send one uncounted. A module of its own beside metrics.ts:
 * one counter, registered only with a Redis URL (as the other `gateway_redis_*` metrics).
 */
import { Counter, type Registry } from 'prom-client';

/** What a Redis command is for (label `purpose`). */
export type RedisPurpose = 'budget' | 'flight' | 'cache' | 'documents' | 'scores' | 'health';

export const REDIS_PURPOSES: readonly RedisPurpose[] = [
  'budget',
  'flight',
  'cache',
  'documents',
  'scores',
  'health',
];

/** Adds `count` commands sent for `purpose`. */
export type RedisCommandCounter = (purpose: RedisPurpose, count?: number) => void;

/**
 * Registers the counter on `registry` (every purpose present from the start, at 0) and returns its
 * increment. Plain numbers behind it, read at each scrape: the counting runs on every Redis command,
 * and prom-client hashes the labels on every `inc()`.
 */
export function createRedisCommandCounter(registry: Registry): RedisCommandCounter {
  const sent: Record<RedisPurpose, number> = {
    budget: 0,
    flight: 0,
    cache: 0,
    documents: 0,
    scores: 0,
    health: 0,
  };
  new Counter({
    name: 'gateway_redis_commands_total',
    help: 'Redis commands sent by the shared state, by purpose (budget, flight, cache, documents, scores, health); each is one round trip (a Lua script is one command).',
    labelNames: ['purpose'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const purpose of REDIS_PURPOSES) this.labels(purpose).inc(sent[purpose]);
    },
  });
  return (purpose, count = 1) => {
    sent[purpose] += count;
  };
}
