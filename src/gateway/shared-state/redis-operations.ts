/**
 * The names of the link's commands (`gateway_redis_errors_total{operation}`) and what each is for
 * (`gateway_redis_commands_total{purpose}`).
 */
import type { RedisPurpose } from '../observability/redis-commands.js';

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
  | 'budget_window'
  | 'scores_write'
  | 'info'
  | 'replicas'; // the replica registry's beat (replica-registry.ts), counted as `health`

/**
 * What a command of `operation` is for (`gateway_redis_commands_total{purpose}`): its prefix, so a new
 * `budget_…` or `flight_…` operation counts under its store without a change here.
 */
export function purposeOf(operation: RedisOperation): RedisPurpose | undefined {
  if (operation === 'connection') return undefined; // not a command
  if (operation === 'probe' || operation === 'info' || operation === 'replicas') return 'health';
  const prefix = operation.slice(0, operation.indexOf('_'));
  return prefix === 'budget' ||
    prefix === 'flight' ||
    prefix === 'cache' ||
    prefix === 'documents' ||
    prefix === 'scores'
    ? prefix
    : undefined;
}
