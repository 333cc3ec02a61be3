/**
 * Hourly cost budgets (COST_BUDGET_USD_PER_HOUR, docs/contract.md, Cost): spend per budget key in per-minute
 * buckets, read back as a sliding hour.
 *
 * Every replica keeps its own buckets in memory; with Redis they also go to one hash per budget key
 * (`<prefix>budget:<digest>`, field = bucket start in ms, HINCRBYFLOAT), whose TTL is renewed on
 * each add to a bit over an hour, and whose buckets older than the hour are dropped on each add, so a
 * busy key's hash stays at about 60 fields. A window read from Redis is merged with the local buckets
 * by taking the larger of each: spend this replica recorded during an outage (not in Redis) still
 * counts here after Redis is back, and nothing is counted twice.
 */
import { LRUCache } from 'lru-cache';
import { redisKey } from './redis-keys.js';
import { FAILED, type RedisLink } from './redis-link.js';
import type { BudgetBucket, BudgetStore, MaybePromise } from './types.js';

export const BUCKET_MS = 60_000;
export const WINDOW_MS = 3_600_000;
/** Redis TTL of a budget hash: the hour plus two buckets of margin for clock differences. */
export const BUDGET_TTL_MS = WINDOW_MS + 2 * BUCKET_MS;

const ADD = `
redis.call('HINCRBYFLOAT', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local cutoff = tonumber(ARGV[3])
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local start = tonumber(field)
  if start == nil or start <= cutoff then redis.call('HDEL', KEYS[1], field) end
end
return 1`;

type Buckets = Map<number, number>;

const sorted = (buckets: Buckets): BudgetBucket[] => [...buckets].sort((a, b) => a[0] - b[0]);

/** Drops the buckets that left the hour ending at now. */
function prune(buckets: Buckets, now: number) {
  for (const start of buckets.keys()) if (!(start > now - WINDOW_MS)) buckets.delete(start);
}

export function createBudgetStore(link: RedisLink | undefined, maxKeys: number): BudgetStore {
  // Bounded: budget keys are API keys (and the free tier); the least recently used go first.
  const local = new LRUCache<string, Buckets>({ max: maxKeys });
  const addScript = link?.script('sharedStateBudgetAdd', 1, ADD);

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
      const start = Math.floor(now / BUCKET_MS) * BUCKET_MS;
      let buckets = local.get(budgetKey);
      if (buckets === undefined) {
        buckets = new Map();
        local.set(budgetKey, buckets);
      }
      buckets.set(start, (buckets.get(start) ?? 0) + usd);
      prune(buckets, now);
      if (link === undefined || addScript === undefined || !link.usable()) return;
      const key = redisKey(link.keyPrefix, 'budget', budgetKey);
      void link.run('budget_add', () => addScript(key, start, usd, now - WINDOW_MS, BUDGET_TTL_MS));
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
