/**
 * Redis key names. Every key starts with the deployment's prefix (REDIS_KEY_PREFIX, so deployments
 * can share one Redis) and carries the caller's key only as a SHA-256 digest: cache and budget keys
 * contain API keys and request bodies, which must not be readable by whoever can list Redis keys,
 * and a digest keeps every key short whatever the request's size.
 */
import { createHash } from 'node:crypto';

export type KeySpace = 'cache' | 'documents' | 'owner' | 'flight' | 'answer' | 'budget';

/** `<prefix><space>:<sha256 of key, base64url>` */
export function redisKey(prefix: string, space: KeySpace, key: string): string {
  return `${prefix}${space}:${createHash('sha256').update(key).digest('base64url')}`;
}
