/**
 * Hourly cost budgets (COST_BUDGET_USD_PER_HOUR, docs/contract.md, Cost): spend and reservations per
 * budget key in per-minute buckets, read back as a sliding hour.
 *
 * A reservation is spend booked in advance: `reserve` adds the operation's estimate to the current
 * bucket when it fits, `adjust` later moves the bucket by what the operation actually cost minus the
 * estimate (a refund when negative). So reservations in flight and spend are one figure, an operation
 * that crashed keeps its estimate booked for the hour (errs towards the budget), and nothing needs
 * to be expired separately.
 *
 * Every replica keeps its own buckets in memory (its own spend and reservations); with Redis the same
 * amounts also go to one hash per budget key (`<prefix>budget:<digest>`, field = bucket start in ms,
 * HINCRBYFLOAT), whose TTL is renewed on each write to a bit over an hour, and whose buckets older
 * than the hour are dropped on each write, so a busy key's hash stays at about 60 fields. `reserve`
 * checks and books in one Lua script: two replicas never both take the last dollar.
 *
 * While Redis is unavailable (or a write fails) this replica decides on its own buckets, and what it
 * booked meanwhile is owed to Redis: pushed at the first write once Redis answers again, so spend made
 * during an outage still counts for every replica after it.
 */
import { LRUCache } from 'lru-cache';
import { redisKey } from './redis-keys.js';
import { FAILED, type RedisLink } from './redis-link.js';
import type { BudgetBucket, BudgetReserveResult, BudgetStore, MaybePromise } from './types.js';

export const BUCKET_MS = 60_000;
export const WINDOW_MS = 3_600_000;
/** Redis TTL of a budget hash: the hour plus two buckets of margin for clock differences. */
export const BUDGET_TTL_MS = WINDOW_MS + 2 * BUCKET_MS;
/**
 * Slack of the fit test, in dollars: sums of binary fractions (0.0042 × 12) must not refuse an
 * operation that fits exactly.
 */
export const FIT_EPSILON_USD = 1e-9;
/** Owed amounts pushed to Redis per store call once it is back (a burst would trip the timeout). */
const FLUSH_PER_CALL = 64;

/** Adds ARGV[2] (signed) to the bucket ARGV[1], renews the TTL, drops buckets at or before ARGV[3]. */
const ADD = `
redis.call('HINCRBYFLOAT', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local cutoff = tonumber(ARGV[3])
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local start = tonumber(field)
  if start == nil or start <= cutoff then redis.call('HDEL', KEYS[1], field) end
end
return 1`;

/**
 * Books ARGV[3] dollars in the bucket ARGV[2] when the buckets later than ARGV[1] plus ARGV[3] stay
 * within ARGV[4] (+ ARGV[6] of slack); answers 1, or the hash's fields and values when it does not fit.
 */
const RESERVE = `
local cutoff = tonumber(ARGV[1])
local fields = redis.call('HGETALL', KEYS[1])
local spent = 0
for i = 1, #fields, 2 do
  local start = tonumber(fields[i])
  if start == nil or start <= cutoff then
    redis.call('HDEL', KEYS[1], fields[i])
  else
    spent = spent + (tonumber(fields[i + 1]) or 0)
  end
end
if spent + tonumber(ARGV[3]) > tonumber(ARGV[4]) + tonumber(ARGV[6]) then return fields end
redis.call('HINCRBYFLOAT', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`;

type Buckets = Map<number, number>;

/** Writes `usd` (signed) to the bucket `start` of a budget key, as the Redis operation named. */
type Write = (
  budgetKey: string,
  start: number,
  usd: number,
  now: number,
  operation: 'budget_add' | 'budget_adjust',
) => void;

const sorted = (buckets: Buckets): BudgetBucket[] => [...buckets].sort((a, b) => a[0] - b[0]);
const bucketOf = (now: number) => Math.floor(now / BUCKET_MS) * BUCKET_MS;

/** Drops the buckets that left the hour ending at now. */
function prune(buckets: Buckets, now: number) {
  for (const start of buckets.keys()) if (!(start > now - WINDOW_MS)) buckets.delete(start);
}

function addTo(buckets: Buckets, start: number, usd: number) {
  buckets.set(start, (buckets.get(start) ?? 0) + usd);
}

export function createBudgetStore(link: RedisLink | undefined, maxKeys: number): BudgetStore {
  // Bounded: budget keys are API keys (and the free tier); the least recently used go first.
  const local = new LRUCache<string, Buckets>({ max: maxKeys });
  /** What this replica booked that Redis has not counted yet (outage, failed write), per key. */
  const owed = new LRUCache<string, Buckets>({ max: maxKeys });
  const addScript = link?.script('sharedStateBudgetAdd', 1, ADD);
  const reserveScript = link?.script('sharedStateBudgetReserve', 1, RESERVE);

  const bucketsOf = (cache: LRUCache<string, Buckets>, budgetKey: string): Buckets => {
    let buckets = cache.get(budgetKey);
    if (buckets === undefined) {
      buckets = new Map();
      cache.set(budgetKey, buckets);
    }
    return buckets;
  };

  /** Books locally (this replica's own spend: the fallback's figure). */
  const book = (budgetKey: string, start: number, usd: number, now: number) => {
    const buckets = bucketsOf(local, budgetKey);
    addTo(buckets, start, usd);
    prune(buckets, now);
  };

  const owe = (budgetKey: string, start: number, usd: number) => {
    if (link !== undefined) addTo(bucketsOf(owed, budgetKey), start, usd);
  };

  /** Sends one signed amount to Redis; owed again when the write fails. */
  const send: Write = (budgetKey, start, usd, now, operation) => {
    if (link === undefined || addScript === undefined) return;
    const key = redisKey(link.keyPrefix, 'budget', budgetKey);
    void link
      .run(operation, () => addScript(key, start, usd, now - WINDOW_MS, BUDGET_TTL_MS))
      .then((done) => {
        if (done === FAILED) owe(budgetKey, start, usd);
      });
  };

  /** Pushes some of what is owed (Redis is usable). */
  const flush = (now: number) => {
    let sent = 0;
    for (const [budgetKey, buckets] of [...owed.entries()]) {
      for (const [start, usd] of buckets) {
        buckets.delete(start);
        if (start > now - WINDOW_MS && usd !== 0) send(budgetKey, start, usd, now, 'budget_add');
        if (++sent >= FLUSH_PER_CALL) return;
      }
      owed.delete(budgetKey);
    }
  };

  /** Sends now when Redis is usable (after what was owed), owes it otherwise. */
  const share: Write = (budgetKey, start, usd, now, operation) => {
    if (link === undefined) return;
    if (!link.usable()) {
      owe(budgetKey, start, usd);
      return;
    }
    if (owed.size > 0) flush(now);
    send(budgetKey, start, usd, now, operation);
  };

  /** This replica's decision, on its own buckets. */
  const reserveLocally = (
    budgetKey: string,
    usd: number,
    limitUsd: number,
    now: number,
  ): BudgetReserveResult => {
    const buckets = local.get(budgetKey);
    let spent = 0;
    if (buckets !== undefined) {
      prune(buckets, now);
      for (const amount of buckets.values()) spent += amount;
    }
    if (spent + usd > limitUsd + FIT_EPSILON_USD)
      return { ok: false, buckets: buckets === undefined ? [] : sorted(buckets) };
    const start = bucketOf(now);
    book(budgetKey, start, usd, now);
    owe(budgetKey, start, usd);
    return { ok: true, bucketStart: start, shared: false };
  };

  /** A copy of this replica's buckets of the hour ending at now. */
  const localWindow = (budgetKey: string, now: number): Buckets => {
    const buckets = local.get(budgetKey);
    if (buckets === undefined) return new Map();
    prune(buckets, now);
    return new Map(buckets);
  };

  return {
    add(budgetKey, usd, now) {
      if (!(usd > 0) || !Number.isFinite(usd) || !Number.isFinite(now)) return;
      const start = bucketOf(now);
      book(budgetKey, start, usd, now);
      share(budgetKey, start, usd, now, 'budget_add');
    },

    reserve(budgetKey, usd, limitUsd, now): MaybePromise<BudgetReserveResult> {
      if (link === undefined || reserveScript === undefined || !link.usable())
        return reserveLocally(budgetKey, usd, limitUsd, now);
      if (owed.size > 0) flush(now);
      const key = redisKey(link.keyPrefix, 'budget', budgetKey);
      const start = bucketOf(now);
      return link
        .run('budget_reserve', () =>
          reserveScript(key, now - WINDOW_MS, start, usd, limitUsd, BUDGET_TTL_MS, FIT_EPSILON_USD),
        )
        .then((answer): BudgetReserveResult => {
          // Failed or timed out: decided here. Had the script run after all, Redis counts the
          // estimate twice until the hour passes: an error towards the budget, never past it.
          if (answer === FAILED) return reserveLocally(budgetKey, usd, limitUsd, now);
          if (Array.isArray(answer)) {
            const buckets: Buckets = new Map();
            for (let i = 0; i + 1 < answer.length; i += 2) {
              const bucket = Number(answer[i]);
              const amount = Number(answer[i + 1]);
              if (bucket > now - WINDOW_MS && Number.isFinite(amount)) buckets.set(bucket, amount);
            }
            return { ok: false, buckets: sorted(buckets) };
          }
          book(budgetKey, start, usd, now);
          return { ok: true, bucketStart: start, shared: true };
        });
    },

    adjust(budgetKey, bucketStart, usd, now) {
      if (usd === 0 || !Number.isFinite(usd) || !(bucketStart > now - WINDOW_MS)) return;
      book(budgetKey, bucketStart, usd, now);
      share(budgetKey, bucketStart, usd, now, 'budget_adjust');
    },

    window(budgetKey, now): MaybePromise<BudgetBucket[]> {
      if (link === undefined || !link.usable()) return sorted(localWindow(budgetKey, now));
      const key = redisKey(link.keyPrefix, 'budget', budgetKey);
      return link
        .run('budget_window', (client) => client.hgetall(key))
        .then((shared) => {
          const merged = localWindow(budgetKey, now);
          if (shared === FAILED) return sorted(merged);
          for (const [field, value] of Object.entries(shared)) {
            const start = Number(field);
            const usd = Number(value);
            if (!(start > now - WINDOW_MS) || !Number.isFinite(usd)) continue;
            merged.set(start, Math.max(merged.get(start) ?? 0, usd));
          }
          return sorted(merged);
        });
    },
  };
}
