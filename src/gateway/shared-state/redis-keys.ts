/**
 * Redis key names. Every key starts with the deployment's prefix (REDIS_KEY_PREFIX, so deployments
 * can share one Redis) and carries the caller's key only as a SHA-256 digest: cache and budget keys
 * contain API keys and request bodies, which must not be readable by whoever can list Redis keys,
 * and a digest keeps every key short whatever the request's size.
 */
import { createHash } from 'node:crypto';

export type KeySpace = 'cache' | 'documents' | 'owner' | 'flight' | 'answer' | 'budget' | 'lease';

const digestOf = (key: string) => createHash('sha256').update(key).digest('base64url');

/** `<prefix><space>:<sha256 of key, base64url>` */
export function redisKey(prefix: string, space: KeySpace, key: string): string {
  return `${prefix}${space}:${digestOf(key)}`;
}

/**
 * `<prefix><space>:{<sha256 of key, base64url>}<suffix>`: the digest is a Redis Cluster hash tag, so
 * every key made from one `key` (whatever its space and suffix) is in one hash slot, and one Lua
 * script may touch them all (no CROSSSLOT). base64url never contains a brace, nor does the prefix.
 */
export function taggedRedisKey(prefix: string, space: KeySpace, key: string, suffix = ''): string {
  return `${prefix}${space}:{${digestOf(key)}}${suffix}`;
}

/**
 * The keys of one budget key (a caller's budget scope): its lease set, `<prefix>lease:{<digest>}`,
 * and one hash per window, `<prefix>budget:{<digest>}:<window ms>`, all in one hash slot.
 */
export function budgetRedisKeys(
  prefix: string,
  budgetKey: string,
  windowsMs: readonly number[],
): { lease: string; windows: string[] } {
  return {
    lease: taggedRedisKey(prefix, 'lease', budgetKey),
    windows: windowsMs.map((ms) => taggedRedisKey(prefix, 'budget', budgetKey, `:${ms}`)),
  };
}

/**
 * `<prefix>replicas`: the replica registry (replica-registry.ts), one sorted set for the deployment,
 * touched alone (untagged: any slot of a Cluster).
 */
export function replicaRegistryKey(prefix: string): string {
  return `${prefix}replicas`;
}
