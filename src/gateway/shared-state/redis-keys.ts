/**
 * Redis key names. Every key starts with the deployment's prefix (REDIS_KEY_PREFIX, so deployments
 * can share one Redis) and carries the caller's key only as a SHA-256 digest: cache and budget keys
 * contain API keys and request bodies, which must not be readable by whoever can list Redis keys,
 * and a digest keeps every key short whatever the request's size.
 *
 * Hash tags: a Redis Cluster refuses a script or a multi-key command whose keys are in different hash
 * slots (`CROSSSLOT`). The keys one call touches together therefore share a tag, the digest in braces
 * (`redisTaggedKey`): Redis hashes only what is between the first `{` and `}`, so a flight's lock and
 * its answer, or the windows of one budget, land in one slot whatever their space. Keys always
 * touched alone (cached answers, documents, owners' counters, the probe) are untagged, and spread
 * over the slots by their digests.
 */
import { createHash } from 'node:crypto';

export type KeySpace = 'cache' | 'documents' | 'owner' | 'flight' | 'answer' | 'budget';

function digestOf(key: string): string {
  return createHash('sha256').update(key).digest('base64url');
}

/** `<prefix><space>:<sha256 of key, base64url>` */
export function redisKey(prefix: string, space: KeySpace, key: string): string {
  return `${prefix}${space}:${digestOf(key)}`;
}

/**
 * `<prefix><space>:{<sha256 of key, base64url>}[:<suffix>]`: every tagged key of one `key`, whatever
 * its space and suffix, is in one Cluster hash slot (base64url has no braces, so the tag is exactly
 * the digest).
 */
export function redisTaggedKey(prefix: string, space: KeySpace, key: string, suffix?: string): string {
  return `${prefix}${space}:{${digestOf(key)}}${suffix === undefined ? '' : `:${suffix}`}`;
}
