/**
 * The model scoreboard's counters (docs/graphql.md, Models measured against the truth): named sums
 * (answers, correct answers, cost, latency per service, model and band), in this process' memory and,
 * with REDIS_URL, in one Redis hash every replica adds to.
 *
 * Why on REDIS_URL (the budgets' Redis) and not REDIS_CACHE_URL: the cache's Redis may evict
 * (`allkeys-lru`), and a scoreboard that loses a model's row would route its callers by a sample
 * that restarted from nothing; the budgets' Redis must be `noeviction` already (the start checks it).
 * The hash is small and bounded (a few fields per service, model and band), so it costs that Redis
 * nothing worth a role of its own.
 *
 * Off the request path: `add` only adds to a local map; the sums go to Redis in one script call
 * (HINCRBYFLOAT per field, PEXPIRE, HGETALL) every `flushMs`, which also brings back every replica's
 * totals. A write that fails stays local and goes with the next one, so a Redis outage loses nothing
 * and never slows or fails a request; meanwhile the view is the last shared totals plus what this
 * replica added since. One key (`<prefix>models:{scores}`, a Redis Cluster hash tag of its own), so
 * the script touches one slot.
 */
import { luaScript } from './lua-scripts.js';
import { FAILED, type RedisLink } from './redis-link.js';
import type { ScoreStore } from './types.js';

export interface ScoreStoreOptions {
  /** The budgets' Redis (REDIS_URL); undefined: memory only. */
  link: RedisLink | undefined;
  /**
   * How often added sums go to Redis (and every replica's totals come back), in ms.
   * @default 500
   */
  flushMs?: number;
  /**
   * How long the hash lives after its last write, in ms (a scoreboard nobody writes to any more expires).
   * @default 30 days
   */
  ttlMs?: number;
}

// Adds this replica's sums, renews the TTL, answers every replica's totals.
const ADD_AND_READ = luaScript('scores-add-and-read.lua');

const addInto = (into: Map<string, number>, from: ReadonlyMap<string, number>) => {
  for (const [field, amount] of from) into.set(field, (into.get(field) ?? 0) + amount);
};

export function createScoreStore(options: ScoreStoreOptions): ScoreStore {
  const { link } = options;
  const ttlMs = options.ttlMs ?? 30 * 24 * 60 * 60 * 1000;
  const key = `${link?.keyPrefix ?? ''}models:{scores}`;
  const addAndRead = link?.script('modelScoresAddAndRead', 1, ADD_AND_READ);
  /** The totals Redis last answered (every replica's). */
  let shared = new Map<string, number>();
  /** Added here and not yet in `shared`: in flight to Redis, and waiting for the next write. */
  let sending = new Map<string, number>();
  let pending = new Map<string, number>();
  let flushing: Promise<void> | undefined;
  /** shared + sending + pending, made when first read after a change (routing reads it per field). */
  let view: Map<string, number> | undefined;

  const flush = (): Promise<void> => {
    if (flushing !== undefined) return flushing;
    if (link === undefined || addAndRead === undefined || !link.usable()) return Promise.resolve();
    sending = pending;
    pending = new Map();
    view = undefined;
    const args: Array<string | number> = [key, ttlMs];
    for (const [field, amount] of sending) args.push(field, amount);
    flushing = link
      .run('scores_write', () => addAndRead(...args))
      .then((reply) => {
        if (reply === FAILED || !Array.isArray(reply)) {
          // Not written (or not known to be): it goes with the next write. A timed-out write that did
          // land is then counted twice; a lost answer is rarer than a lost scoreboard.
          addInto(pending, sending);
        } else {
          const totals = new Map<string, number>();
          for (let i = 0; i + 1 < reply.length; i += 2) totals.set(String(reply[i]), Number(reply[i + 1]));
          shared = totals;
        }
        sending = new Map();
        flushing = undefined;
        view = undefined;
      });
    return flushing;
  };

  const timer = link === undefined ? undefined : setInterval(() => void flush(), options.flushMs ?? 500);
  timer?.unref();

  const totals = (): ReadonlyMap<string, number> => {
    if (link === undefined) return pending;
    if (view === undefined) {
      view = new Map(shared);
      addInto(view, sending);
      addInto(view, pending);
    }
    return view;
  };

  return {
    add(field, amount) {
      if (amount === 0 || !Number.isFinite(amount)) return;
      pending.set(field, (pending.get(field) ?? 0) + amount);
      if (view !== undefined) view.set(field, (view.get(field) ?? 0) + amount);
    },
    totals,
    async read() {
      // One write of what is waiting, which answers every replica's totals (a round trip at most).
      await flush();
      return totals();
    },
    close() {
      if (timer !== undefined) clearInterval(timer);
    },
  };
}
