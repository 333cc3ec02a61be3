/**
 * Response cache storage (and, in a store of its own, APQ documents): a local LRU, and behind it
 * (REDIS_URL set) Redis shared by every replica.
 *
 * The local LRU answers first and synchronously: a hit costs a map lookup and a clock read, no
 * promise and no JSON, in memory and Redis mode alike. Only a local miss goes to Redis, and what it
 * finds there is kept locally for the rest of its Redis TTL, so a replica pays each shared answer's
 * round trip and decoding once. Expiry uses the injected clock (tests move it) rather than lru-cache's
 * own timer.
 *
 * The documents store bounds what clients make the gateway write (`maxValueBytes`: a larger document
 * is not registered; `maxPerOwner`: at most so many new documents per owner per `ownerWindowMs`,
 * counted in this process and, with Redis, across replicas). A document that is not registered still
 * runs; an APQ client simply keeps sending its text.
 */
import { LRUCache } from 'lru-cache';
import { luaScript } from './lua-scripts.js';
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
  /** Largest value stored (UTF-8 bytes of a string, else of its JSON); larger ones are dropped. */
  maxValueBytes?: number | undefined;
  /** Most new entries one owner (`set`'s `owner`) may add per `ownerWindowMs`. */
  maxPerOwner?: number | undefined;
  /** @default 24 h */
  ownerWindowMs?: number | undefined;
  /** Told of each value dropped by the bounds (metrics). */
  onDropped?: ((reason: 'size' | 'owner') => void) | undefined;
}

interface Entry {
  value: unknown;
  expiresAt: number;
}

/** Size counted for a value whose size the caller did not give and that was not JSON-encoded. */
const DEFAULT_ENTRY_BYTES = 1024;

// GET and PTTL in one round trip (and one timeout): the local copy must not outlive the shared one.
const GET_WITH_TTL = luaScript('cache-get-with-ttl.lua');
// One more new entry of an owner, alone in its script (its counter is in another Cluster slot).
const COUNT_OWNER = luaScript('owner-count.lua');

export function createAnswerStore(options: AnswerStoreOptions): AnswerStore {
  const { link, now } = options;
  const space = options.space ?? 'cache';
  const getOperation = `${space}_get` as const;
  const setOperation = `${space}_set` as const;
  const local = new LRUCache<string, Entry>({ max: options.maxEntries, maxSize: options.maxBytes });
  const getWithTtl = link?.script('sharedStateGetWithTtl', 1, GET_WITH_TTL);
  const countOwner = link?.script('sharedStateCountOwner', 1, COUNT_OWNER);
  const { maxValueBytes, maxPerOwner, onDropped } = options;
  const ownerWindowMs = options.ownerWindowMs ?? 24 * 60 * 60 * 1000;
  /** New entries per owner in this process, within the owner window. */
  const owners = new LRUCache<string, { count: number; until: number }>({ max: 10_000 });

  /** Whether `owner` may add one more entry here (and counts it). */
  const ownerMayAdd = (owner: string): boolean => {
    if (maxPerOwner === undefined) return true;
    const at = now();
    let tally = owners.get(owner);
    if (tally === undefined || tally.until <= at) {
      tally = { count: 0, until: at + ownerWindowMs };
      owners.set(owner, tally);
    }
    if (tally.count >= maxPerOwner) return false;
    tally.count++;
    return true;
  };

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
    set(key, value, ttlMs, bytes, owner) {
      if (value === undefined || !(ttlMs > 0)) return;
      let json: string | undefined;
      if (link?.usable() || maxValueBytes !== undefined) {
        try {
          json = JSON.stringify(value);
        } catch {
          // BigInt, cycles: kept locally only.
        }
      }
      if (maxValueBytes !== undefined) {
        const size = typeof value === 'string' ? Buffer.byteLength(value) : Buffer.byteLength(json ?? '');
        if (size > maxValueBytes) {
          onDropped?.('size');
          return;
        }
      }
      const fresh = readLocal(key) === undefined;
      if (owner !== undefined && fresh && !ownerMayAdd(owner)) {
        onDropped?.('owner');
        return;
      }
      keep(key, value, ttlMs, bytes ?? (json === undefined ? DEFAULT_ENTRY_BYTES : json.length * 2));
      if (link === undefined || json === undefined || !link.usable()) return;
      const redisTtl = Math.max(1, Math.ceil(ttlMs));
      const entryKey = redisKey(link.keyPrefix, space, key);
      if (owner === undefined || maxPerOwner === undefined || countOwner === undefined) {
        void link.run(setOperation, (client) => client.set(entryKey, json, 'PX', redisTtl));
        return;
      }
      const ownerKey = redisKey(link.keyPrefix, 'owner', `${space}\n${owner}`);
      // An entry already there (any replica's) is only renewed; a new one counts against its owner and
      // is stored while the owner is within its bound. Three steps, not one script (see COUNT_OWNER):
      // two replicas registering the same new entry at once may both count it, an error towards the
      // bound. Registrations are rare (once per document per day), renewals one round trip.
      void link
        .run(setOperation, async (client) => {
          if ((await client.set(entryKey, json, 'PX', redisTtl, 'XX')) === 'OK') return true;
          link.countCommands(setOperation, 1);
          if (Number(await countOwner(ownerKey, ownerWindowMs)) > maxPerOwner) return false;
          link.countCommands(setOperation, 1);
          await client.set(entryKey, json, 'PX', redisTtl);
          return true;
        })
        .then((stored) => {
          if (stored === false) onDropped?.('owner');
        });
    },
    get size() {
      return local.size;
    },
    clear() {
      local.clear();
    },
  };
}
