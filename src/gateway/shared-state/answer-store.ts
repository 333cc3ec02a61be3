/**
 * Response cache storage (and, in a store of its own, APQ documents): a local LRU, and behind it
 * (REDIS_URL set) Redis shared by every replica.
 *
 * The local LRU answers first and synchronously: a hit costs a map lookup and a clock read, no
 * promise and no JSON, in memory and Redis mode alike. Only a local miss goes to Redis, and what it
 * finds there is kept locally for the rest of its Redis TTL, so a replica pays each shared answer's
 * round trip and decoding once. Expiry uses the injected clock (tests move it) rather than lru-cache's
 * own timer.
 */
import { LRUCache } from 'lru-cache';
import { type KeySpace, redisKey } from './redis-keys.js';
import { FAILED, type RedisLink } from './redis-link.js';
import type { AnswerStore, MaybePromise } from './types.js';

export interface AnswerStoreOptions {
  /** Redis behind the local LRU; none: memory only. */
  link: RedisLink | undefined;
  now: () => number;
  maxEntries: number;
  maxBytes: number;
  /**
   * What the store holds, which names its Redis keys (`<prefix><space>:…`) and the `operation`
   * label of its Redis errors (`<space>_get`, `<space>_set`).
   * @default 'cache'
   */
  space?: Extract<KeySpace, 'cache' | 'documents'>;
}

interface Entry {
  value: unknown;
  expiresAt: number;
}

/** Size counted for a value whose size the caller did not give and that was not JSON-encoded. */
const DEFAULT_ENTRY_BYTES = 1024;

// GET and PTTL in one round trip (and one timeout): the local copy must not outlive the shared one.
const GET_WITH_TTL = `return { redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]) }`;

export function createAnswerStore(options: AnswerStoreOptions): AnswerStore {
  const { link, now } = options;
  const space = options.space ?? 'cache';
  const getOperation = `${space}_get` as const;
  const setOperation = `${space}_set` as const;
  const local = new LRUCache<string, Entry>({ max: options.maxEntries, maxSize: options.maxBytes });
  const getWithTtl = link?.script('sharedStateGetWithTtl', 1, GET_WITH_TTL);

  const keep = (key: string, value: unknown, ttlMs: number, bytes: number) => {
    local.set(key, { value, expiresAt: now() + ttlMs }, { size: Math.max(1, Math.ceil(bytes)) });
  };

  const readLocal = (key: string): unknown => {
    const entry = local.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt > now()) return entry.value;
    local.delete(key);
    return undefined;
  };

  const readRemote = (shared: RedisLink, call: NonNullable<typeof getWithTtl>, key: string) =>
    shared
      .run(getOperation, () => call(redisKey(shared.keyPrefix, space, key)))
      .then((reply) => {
        if (reply === FAILED || !Array.isArray(reply)) return undefined;
        const [json, pttl] = reply as [unknown, unknown];
        if (typeof json !== 'string') return undefined;
        let value: unknown;
        try {
          value = JSON.parse(json);
        } catch {
          // Not ours (or truncated): a miss, not a Redis failure.
          return undefined;
        }
        if (typeof pttl === 'number' && pttl > 0) keep(key, value, pttl, json.length * 2);
        return value;
      });

  return {
    get(key: string): MaybePromise<unknown> {
      const value = readLocal(key);
      if (value !== undefined || link === undefined || getWithTtl === undefined || !link.usable())
        return value;
      return readRemote(link, getWithTtl, key);
    },
    set(key, value, ttlMs, bytes) {
      if (value === undefined || !(ttlMs > 0)) return;
      let json: string | undefined;
      if (link?.usable()) {
        try {
          json = JSON.stringify(value);
        } catch {
          // BigInt, cycles: kept locally only.
        }
      }
      keep(key, value, ttlMs, bytes ?? (json === undefined ? DEFAULT_ENTRY_BYTES : json.length * 2));
      if (link === undefined || json === undefined) return;
      const redisTtl = Math.max(1, Math.ceil(ttlMs));
      void link.run(setOperation, (client) =>
        client.set(redisKey(link.keyPrefix, space, key), json, 'PX', redisTtl),
      );
    },
    get size() {
      return local.size;
    },
    clear() {
      local.clear();
    },
  };
}
