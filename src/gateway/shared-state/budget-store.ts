/**
 * Cost budgets (COST_BUDGETS, docs/contract.md, Cost): per budget key, several sliding windows at
 * once, each in buckets of its own length (a sixtieth of the window), spend and reservations apart.
 *
 * A reservation is booked in the current bucket of every window of the caller's scope when it fits
 * in all of them (`reserve`); when its operation settles, `settle` takes it out of the reservations
 * and adds what the operation actually cost to the spend, in the same bucket.
 *
 * A reservation is a lease (docs/contract.md, More than one machine): it carries an expiry, the
 * operation's deadline plus a margin (`leaseMs`, given by the caller). One its replica never settles
 * (killed, crashed, cut off) lapses then: it counts as spent at its estimate (the upstream may have
 * billed the calls in flight), by whichever script or replica notices first, exactly once. In Redis
 * the leases of a budget key are a sorted set (`<prefix>lease:{<digest>}`, member
 * `<lease id>:<bucket time>:<usd>`, score the expiry in Redis time) written by the reserve script
 * itself; every budget script of that key first sweeps its expired leases (reservation to spend in
 * each window, member removed, in the same atomic script) and answers how many and how much, which
 * this replica counts (`onLapse`). `settle` removes its lease in the same script that settles it: a
 * lease already gone lapsed (or this settlement already ran): nothing more is booked, so neither a
 * retried nor a late settlement counts twice; a late one leaves the spend at the estimate.
 *
 * Every replica keeps its own buckets in memory; with Redis the same amounts go to one hash per budget
 * key and window (`<prefix>budget:{<digest>}:<window ms>`, fields `s<bucket start>` for spend,
 * `r<bucket start>` for reservations, `w` for when the warning was last given), whose TTL is renewed
 * on each write to the window plus two buckets, and whose buckets out of the window are dropped by
 * each script, so a busy key's hash keeps about 120 fields per window. Every key of one budget key
 * shares the hash tag `{<digest>}`: one Redis Cluster slot, so one script may touch them all.
 *
 * One clock: each script reads Redis' `TIME`, which places the bucket, slides the windows and expires
 * the leases, so replicas whose clocks differ share one window. `reserve` checks and books every
 * window in one script: two replicas never both take the last dollar.
 *
 * A full Redis does not stop a budget write: each writing script first renews its keys' TTL
 * (`PEXPIRE`, a write Redis never refuses for memory), and once a script has written Redis runs it to
 * its end without checking memory again (scripts are atomic), so a reservation is booked even when
 * maxmemory is reached under `noeviction`. The budget hashes are small, so what they add past
 * maxmemory is small. (Redis may evict them under any other policy: the gateway refuses to start
 * with budgets on such a Redis, create-shared-state.ts.)
 *
 * While Redis is unavailable (or a reserve fails) this replica decides on its own buckets, with leases
 * of its own (the same rule, on its clock). What it reserves then is never pushed to Redis as a
 * reservation (a replica that died after pushing it would leave it there): what it owes Redis is only
 * spend, booked when such an operation settles (its actual cost) or its local lease lapses (its
 * estimate), and pushed at the first write once Redis answers again, so spend made during an outage
 * still counts for every replica after it. A Redis lease settled while Redis is away is settled there
 * once it is back (or has lapsed meanwhile: then nothing is booked twice).
 */
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { budgetRedisKeys } from './redis-keys.js';
import { FAILED, type RedisLink, type ScriptCall } from './redis-link.js';
import type {
  BudgetBucket,
  BudgetRead,
  BudgetReserveResult,
  BudgetStore,
  BudgetWarning,
  BudgetWindowSpec,
  MaybePromise,
} from './types.js';

/** What `createBudgetStore` may be told besides its link. */
export interface BudgetStoreOptions {
  /**
   * Longest wait for one budget script, in ms (REDIS_BUDGET_TIMEOUT_MS): longer than the cache's, a
   * budget decision is worth waiting for on a loaded machine.
   * @default the link's own timeout
   */
  timeoutMs?: number;
  /** Hears of leases that lapsed (count, their estimates in USD), once each, whoever noticed. */
  onLapse?: (count: number, usd: number) => void;
}

/**
 * Slack of the fit test, in dollars: sums of binary fractions (0.0042 × 12) must not refuse an
 * operation that fits exactly.
 */
export const FIT_EPSILON_USD = 1e-9;
/** An amount left in a bucket below this after a settlement is float noise: the field is dropped. */
const NOISE_USD = 1e-12;
/** Owed amounts pushed to Redis per store call once it is back (a burst would trip the timeout). */
const FLUSH_PER_CALL = 64;
/** Expired leases one script sweeps at most (the rest by the next one): each script stays short. */
const SWEEP_PER_CALL = 64;
/** The longest OPERATION_DEADLINE_MS: the lease of an operation without a deadline runs this long. */
export const LONGEST_DEADLINE_MS = 600_000;
/** The longest BUDGET_LEASE_MARGIN_MS, and its default. */
export const DEFAULT_LEASE_MARGIN_MS = 30_000;
/**
 * A reservation's lease when the caller gives none: the longest OPERATION_DEADLINE_MS plus the
 * longest margin.
 */
export const DEFAULT_LEASE_MS = LONGEST_DEADLINE_MS + DEFAULT_LEASE_MARGIN_MS;
/** Redis settlements waiting for Redis to be back, at most (past it, their leases lapse). */
const MAX_PENDING_SETTLES = 10_000;

/** Redis' clock in ms, into `now`. */
const NOW = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)`;

/**
 * The layout every budget script shares: KEYS[1] the lease set, KEYS[i + 1] the hash of window i;
 * ARGV[2i - 1] that window's span and ARGV[2i] its bucket, in ms; the script's own arguments after.
 *
 * `bucket_of(i, at)`: the field suffix of `at`'s bucket in window i, nil once that bucket has left
 * the window. `window_of(i)`: drops the fields of window i's buckets at or before `now - span` and
 * answers the sum of the others and their flat list. `warn_if(i, total, warn)`: answers true, and
 * notes the time in `w`, when `total` reached `warn` and no warning was given within the last span.
 * `bump(key, field, usd)`: adds, dropping a field left at float noise. `sweep()`: every expired lease
 * (at most ${SWEEP_PER_CALL}) moves from reservation to spend in its bucket of each window and leaves
 * the set; answers how many and their dollars.
 */
const HELPERS = `
local windows = #KEYS - 1
local function span_of(i) return tonumber(ARGV[2 * i - 1]) end
local function step_of(i) return tonumber(ARGV[2 * i]) end
local function ttl_of(i) return span_of(i) + 2 * step_of(i) end
local function bucket_of(i, at)
  local start = at - (at % step_of(i))
  if start > now - span_of(i) then return string.format('%.0f', start) end
  return nil
end
local function window_of(i)
  local key = KEYS[i + 1]
  local cutoff = now - span_of(i)
  local fields = redis.call('HGETALL', key)
  local total = 0
  local kept = {}
  for j = 1, #fields, 2 do
    local name = fields[j]
    local kind = string.sub(name, 1, 1)
    if kind == 's' or kind == 'r' then
      local start = tonumber(string.sub(name, 2))
      if start == nil or start <= cutoff then
        redis.call('HDEL', key, name)
      else
        total = total + (tonumber(fields[j + 1]) or 0)
        kept[#kept + 1] = name
        kept[#kept + 1] = fields[j + 1]
      end
    end
  end
  return total, kept
end
local function warn_if(i, total, warn)
  if warn < 0 or total + ${FIT_EPSILON_USD} < warn then return false end
  local key = KEYS[i + 1]
  local last = tonumber(redis.call('HGET', key, 'w'))
  if last ~= nil and last > now - span_of(i) then return false end
  redis.call('HSET', key, 'w', string.format('%.0f', now))
  return true
end
local function bump(key, field, usd)
  local left = tonumber(redis.call('HINCRBYFLOAT', key, field, usd))
  if math.abs(left) < ${NOISE_USD} then redis.call('HDEL', key, field) end
end
local function lease_of(member)
  local _, _, at, usd = string.find(member, '^[^:]*:(%d+):(.+)$')
  return tonumber(at), tonumber(usd)
end
local function sweep()
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ${SWEEP_PER_CALL})
  if #due == 0 then return 0, 0 end
  -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
  for i = 1, windows do redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i)) end
  redis.call('ZREM', KEYS[1], unpack(due))
  local usd = 0
  for _, member in ipairs(due) do
    local at, amount = lease_of(member)
    if at ~= nil and amount ~= nil then
      usd = usd + amount
      for i = 1, windows do
        local bucket = bucket_of(i, at)
        if bucket ~= nil then
          bump(KEYS[i + 1], 'r' .. bucket, -amount)
          bump(KEYS[i + 1], 's' .. bucket, amount)
        end
      end
    end
  end
  return #due, usd
end
local lapsed, lapsed_usd = sweep()
local base = 2 * windows`;

/**
 * Own ARGV: base+1 dollars, base+2 slack, base+3 lease id, base+4 lease ms, then per window i:
 * base+3+2i limit, base+4+2i warning figure. Books the dollars as reserved in the current bucket of
 * every window when every window's total plus them stays within its limit (+ slack), with a lease:
 * answers {1, now, lapsed, lapsed usd, lease member, {index, total, …} of windows due a warning};
 * else books nothing and answers {0, now, lapsed, lapsed usd, fields of window 1, …}.
 */
const RESERVE = `${NOW}${HELPERS}
local usd = tonumber(ARGV[base + 1])
local slack = tonumber(ARGV[base + 2])
local totals = {}
local views = {}
local fits = true
for i = 1, windows do
  local total, kept = window_of(i)
  totals[i] = total
  views[i] = kept
  if total + usd > tonumber(ARGV[base + 3 + 2 * i]) + slack then fits = false end
end
if not fits then
  local answer = {0, now, lapsed, tostring(lapsed_usd)}
  for i = 1, windows do answer[i + 4] = views[i] end
  return answer
end
local lease_ms = tonumber(ARGV[base + 4])
local member = ARGV[base + 3] .. ':' .. string.format('%.0f', now) .. ':' .. ARGV[base + 1]
local longest = 0
local warned = {}
for i = 1, windows do
  local step = step_of(i)
  if ttl_of(i) > longest then longest = ttl_of(i) end
  -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
  redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
  redis.call('HINCRBYFLOAT', KEYS[i + 1], 'r' .. string.format('%.0f', now - (now % step)), ARGV[base + 1])
  redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
  local after = totals[i] + usd
  if warn_if(i, after, tonumber(ARGV[base + 4 + 2 * i])) then
    warned[#warned + 1] = i
    warned[#warned + 1] = tostring(after)
  end
end
redis.call('ZADD', KEYS[1], now + lease_ms, member)
-- The set outlives every lease in it until its bucket has left every window.
local keep = longest + lease_ms
if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
return {1, now, lapsed, tostring(lapsed_usd), member, warned}`;

/**
 * Own ARGV: base+1 the lease member, base+2 the dollars actually spent, then per window i: base+2+i
 * warning figure. When the lease is still there: removes it, and in its bucket of each window that
 * still holds it takes its dollars out of the reservations and adds the spend. Gone (lapsed, or this
 * settlement already ran): books nothing. Answers {lapsed, lapsed usd, settled 1|0, {index, total,
 * …} of windows due a warning}.
 */
const SETTLE = `${NOW}${HELPERS}
local member = ARGV[base + 1]
local spent = tonumber(ARGV[base + 2])
local warned = {}
if redis.call('ZREM', KEYS[1], member) == 0 then return {lapsed, tostring(lapsed_usd), 0, warned} end
local at, amount = lease_of(member)
for i = 1, windows do
  local bucket = bucket_of(i, at)
  if bucket ~= nil then
    redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
    bump(KEYS[i + 1], 'r' .. bucket, -amount)
    if spent ~= 0 then bump(KEYS[i + 1], 's' .. bucket, spent) end
    local total = window_of(i)
    if spent > amount and warn_if(i, total, tonumber(ARGV[base + 2 + i])) then
      warned[#warned + 1] = i
      warned[#warned + 1] = tostring(total)
    end
  end
end
return {lapsed, tostring(lapsed_usd), 1, warned}`;

/**
 * Own ARGV: base+1 the bucket's time (ms; 0: now), base+2 dollars of spend, then per window i:
 * base+2+i warning figure. Adds the spend in the bucket of base+1 of each window that still holds
 * it; answers {lapsed, lapsed usd, {index, total, …} of the windows due a warning}.
 */
const ADD = `${NOW}${HELPERS}
local at = tonumber(ARGV[base + 1])
if at <= 0 then at = now end
local spent = tonumber(ARGV[base + 2])
local warned = {}
for i = 1, windows do
  local bucket = bucket_of(i, at)
  if bucket ~= nil then
    -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
    redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
    bump(KEYS[i + 1], 's' .. bucket, spent)
    redis.call('PEXPIRE', KEYS[i + 1], ttl_of(i))
    local total = window_of(i)
    if spent > 0 and warn_if(i, total, tonumber(ARGV[base + 2 + i])) then
      warned[#warned + 1] = i
      warned[#warned + 1] = tostring(total)
    end
  end
end
return {lapsed, tostring(lapsed_usd), warned}`;

/** Answers {now, lapsed, lapsed usd, fields of window 1, …}; writes only what the sweep lapsed. */
const READ = `${NOW}${HELPERS}
local answer = {now, lapsed, tostring(lapsed_usd)}
for i = 1, windows do answer[i + 3] = redis.call('HGETALL', KEYS[i + 1]) end
return answer`;

/** Spent and reserved dollars of one bucket. */
interface Amounts {
  s: number;
  r: number;
}

/** One window of one key, in this process. */
interface LocalWindow {
  buckets: Map<number, Amounts>;
  /** When this process last gave the window's warning (memory mode and outages). */
  warnedAt: number;
}

/** A reservation this replica made, until it settles or lapses. */
interface Lease {
  readonly budgetKey: string;
  readonly windows: readonly BudgetWindowSpec[];
  /** Its bucket time in this replica's buckets (Redis' time when Redis booked it). */
  readonly at: number;
  readonly usd: number;
  /** When it lapses here, in the callers' clock (`now`). */
  readonly expiresAt: number;
  /** Its member in Redis' lease set; undefined: booked in this replica only (memory, outage). */
  readonly member: string | undefined;
}

/** Spend this replica booked that Redis has not counted yet, per budget key, by bucket time. */
interface Owed {
  windows: readonly BudgetWindowSpec[];
  spend: Map<number, number>;
}

/**
 * One move of budget amounts: into the buckets of `at` of each window of a key, `reservedUsd` to the
 * reservations and `spentUsd` to the spend (either may be negative: a settlement).
 */
interface Move {
  budgetKey: string;
  windows: readonly BudgetWindowSpec[];
  at: number;
  reservedUsd: number;
  spentUsd: number;
}

/** A settlement of a Redis lease that waits for Redis. */
interface PendingSettle {
  budgetKey: string;
  windows: readonly BudgetWindowSpec[];
  member: string;
  spentUsd: number;
}

const bucketOf = (at: number, spec: BudgetWindowSpec) => at - (at % spec.bucketMs);
const windowKeyOf = (budgetKey: string, spec: BudgetWindowSpec) => `${budgetKey}\n${spec.ms}`;

function prune(window: LocalWindow, spec: BudgetWindowSpec, now: number) {
  for (const start of window.buckets.keys()) if (!(start > now - spec.ms)) window.buckets.delete(start);
}

function totalOf(buckets: Map<number, Amounts>): number {
  let total = 0;
  for (const { s, r } of buckets.values()) total += s + r;
  return total;
}

function move(buckets: Map<number, Amounts>, start: number, reservedUsd: number, spentUsd: number) {
  let amounts = buckets.get(start);
  if (amounts === undefined) {
    amounts = { s: 0, r: 0 };
    buckets.set(start, amounts);
  }
  amounts.r += reservedUsd;
  amounts.s += spentUsd;
  if (Math.abs(amounts.r) < NOISE_USD) amounts.r = 0;
  if (Math.abs(amounts.s) < NOISE_USD) amounts.s = 0;
  if (amounts.r === 0 && amounts.s === 0) buckets.delete(start);
}

function listOf(buckets: Map<number, Amounts>): BudgetBucket[] {
  return [...buckets].map(([start, { s, r }]): BudgetBucket => [start, s, r]).sort((a, b) => a[0] - b[0]);
}

/** A hash's flat field list (`s<start>`, `r<start>`, …) as buckets in the window ending at `at`. */
function bucketsOfFields(fields: unknown, spec: BudgetWindowSpec, at: number): Map<number, Amounts> {
  const buckets = new Map<number, Amounts>();
  if (!Array.isArray(fields)) return buckets;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = String(fields[i]);
    const kind = name[0];
    if (kind !== 's' && kind !== 'r') continue;
    const start = Number(name.slice(1));
    const usd = Number(fields[i + 1]);
    if (!(start > at - spec.ms) || !Number.isFinite(usd)) continue;
    let amounts = buckets.get(start);
    if (amounts === undefined) {
      amounts = { s: 0, r: 0 };
      buckets.set(start, amounts);
    }
    amounts[kind] += usd;
  }
  return buckets;
}

/** `{index, total, …}` (1-based index) as warnings. */
function warningsOf(reply: unknown): BudgetWarning[] {
  const warnings: BudgetWarning[] = [];
  if (!Array.isArray(reply)) return warnings;
  for (let i = 0; i + 1 < reply.length; i += 2)
    warnings.push({ index: Number(reply[i]) - 1, totalUsd: Number(reply[i + 1]) });
  return warnings;
}

/** Every window's span and bucket: the first arguments of every budget script. */
function windowArgs(windows: readonly BudgetWindowSpec[]): Array<string | number> {
  const args: Array<string | number> = [];
  for (const spec of windows) args.push(spec.ms, spec.bucketMs);
  return args;
}

export function createBudgetStore(
  link: RedisLink | undefined,
  maxKeys: number,
  options: BudgetStoreOptions = {},
): BudgetStore {
  const { timeoutMs, onLapse } = options;
  // Bounded: budget keys are API keys (and the free tier); the least recently used go first. A key
  // has a few windows.
  const local = new LRUCache<string, LocalWindow>({ max: maxKeys * 4 });
  const owed = new LRUCache<string, Owed>({ max: maxKeys });
  /** This replica's reservations in flight, per budget key, by lease id. */
  const leases = new Map<string, Map<string, Lease>>();
  const pending: PendingSettle[] = [];
  const reserveScript = link?.script('sharedStateBudgetReserve', undefined, RESERVE);
  const settleScript = link?.script('sharedStateBudgetSettle', undefined, SETTLE);
  const addScript = link?.script('sharedStateBudgetAdd', undefined, ADD);
  const readScript = link?.script('sharedStateBudgetRead', undefined, READ);
  // Lease ids: unique across replicas (a random token per process) and short.
  const token = randomBytes(6).toString('base64url');
  let leaseCount = 0;
  const newLeaseId = () => `${token}${(leaseCount++).toString(36)}`;

  const windowOf = (budgetKey: string, spec: BudgetWindowSpec): LocalWindow => {
    const key = windowKeyOf(budgetKey, spec);
    let window = local.get(key);
    if (window === undefined) {
      window = { buckets: new Map(), warnedAt: Number.NEGATIVE_INFINITY };
      local.set(key, window);
    }
    return window;
  };

  /** KEYS of a budget script: the lease set, then each window's hash. */
  const keysOf = (shared: RedisLink, budgetKey: string, windows: readonly BudgetWindowSpec[]) => {
    const keys = budgetRedisKeys(
      shared.keyPrefix,
      budgetKey,
      windows.map((spec) => spec.ms),
    );
    return [keys.lease, ...keys.windows];
  };

  /** Counts what a script's sweep lapsed (`count`, `usd` from its reply). */
  const lapsedIn = (count: unknown, usd: unknown) => {
    const n = Number(count);
    if (n > 0 && onLapse !== undefined) onLapse(n, Number(usd) || 0);
  };

  /** Whether this process' window is due its warning at `total` (memory mode and outages). */
  const dueLocally = (window: LocalWindow, spec: BudgetWindowSpec, total: number, now: number) => {
    if (spec.warnUsd < 0 || total + FIT_EPSILON_USD < spec.warnUsd || window.warnedAt > now - spec.ms)
      return false;
    window.warnedAt = now;
    return true;
  };

  /**
   * Moves amounts in this process' buckets of `at`; `decide`: it is the figure that decides (no
   * Redis), so the warnings are this process' to give.
   */
  const book = (
    { budgetKey, windows, at, reservedUsd, spentUsd }: Move,
    now: number,
    decide: boolean,
  ): BudgetWarning[] => {
    const warnings: BudgetWarning[] = [];
    windows.forEach((spec, index) => {
      const start = bucketOf(at, spec);
      if (!(start > now - spec.ms)) return;
      const window = windowOf(budgetKey, spec);
      prune(window, spec, now);
      move(window.buckets, start, reservedUsd, spentUsd);
      if (!decide || reservedUsd + spentUsd <= 0) return;
      const total = totalOf(window.buckets);
      if (dueLocally(window, spec, total, now)) warnings.push({ index, totalUsd: total });
    });
    return warnings;
  };

  /** Spend Redis has not counted yet, in the bucket of `at` (this replica's clock). */
  const owe = (budgetKey: string, windows: readonly BudgetWindowSpec[], at: number, usd: number) => {
    if (link === undefined || !(usd > 0)) return;
    let debt = owed.get(budgetKey);
    if (debt === undefined) {
      debt = { windows, spend: new Map() };
      owed.set(budgetKey, debt);
    }
    // One amount per bucket of the finest window: bounded, and in the right bucket of every window.
    const finest = Math.min(...windows.map((spec) => spec.bucketMs));
    const start = at - (at % finest);
    debt.spend.set(start, (debt.spend.get(start) ?? 0) + usd);
  };

  /**
   * This replica's leases of `budgetKey` that expired by `now` lapse here: reservation to spend at
   * the estimate. Those Redis holds lapse there too (its sweep counts them); those only here are
   * counted now and owed to Redis as spend.
   */
  const sweepLocally = (budgetKey: string, now: number) => {
    const mine = leases.get(budgetKey);
    if (mine === undefined) return;
    let count = 0;
    let usd = 0;
    for (const [id, lease] of mine) {
      if (lease.expiresAt > now) continue;
      mine.delete(id);
      book(
        { budgetKey, windows: lease.windows, at: lease.at, reservedUsd: -lease.usd, spentUsd: lease.usd },
        now,
        false,
      );
      if (lease.member !== undefined) continue;
      owe(budgetKey, lease.windows, lease.at, lease.usd);
      count++;
      usd += lease.usd;
    }
    if (mine.size === 0) leases.delete(budgetKey);
    if (count > 0) onLapse?.(count, usd);
  };

  const hold = (lease: Lease): string => {
    const id = newLeaseId();
    let mine = leases.get(lease.budgetKey);
    if (mine === undefined) {
      mine = new Map();
      leases.set(lease.budgetKey, mine);
    }
    mine.set(id, lease);
    return id;
  };

  /**
   * Runs a writing budget script on a key's windows: its own arguments `own` between the windows'
   * spans and their warning figures. Failed: `onFailed`; else counts what its sweep lapsed and gives
   * the warnings of its reply at `warnedAt`.
   */
  const write = (
    operation: 'budget_add' | 'budget_adjust',
    script: ScriptCall | undefined,
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    own: Array<string | number>,
    outcome: {
      warnedAt: number;
      onFailed: () => void;
      onWarning?: ((warning: BudgetWarning) => void) | undefined;
    },
  ) => {
    if (link === undefined || script === undefined) return;
    const keys = keysOf(link, budgetKey, windows);
    const args = [...windowArgs(windows), ...own, ...windows.map((spec) => spec.warnUsd)];
    const { warnedAt, onFailed, onWarning } = outcome;
    void link
      .run(operation, () => script(keys.length, ...keys, ...args), timeoutMs)
      .then((reply) => {
        if (reply === FAILED || !Array.isArray(reply)) {
          onFailed();
          return;
        }
        lapsedIn(reply[0], reply[1]);
        if (onWarning !== undefined) for (const warning of warningsOf(reply[warnedAt])) onWarning(warning);
      });
  };

  /** Sends spend to Redis (bucket of `at`; 0: Redis' current one); owed again when the write fails. */
  const sendSpend = (
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    at: number,
    usd: number,
    owedAt: number,
    onWarning?: (warning: BudgetWarning) => void,
  ) =>
    write('budget_add', addScript, budgetKey, windows, [at, usd], {
      warnedAt: 2,
      onFailed: () => owe(budgetKey, windows, owedAt, usd),
      onWarning,
    });

  /** A settlement of a Redis lease waits for Redis (at most MAX_PENDING_SETTLES: past it, it lapses). */
  const settleLater = (settle: PendingSettle) => {
    if (pending.length < MAX_PENDING_SETTLES) pending.push(settle);
  };

  /** Settles a Redis lease there; waits for Redis again when the script fails (it is idempotent). */
  const sendSettle = (settle: PendingSettle, onWarning?: (warning: BudgetWarning) => void) =>
    write('budget_adjust', settleScript, settle.budgetKey, settle.windows, [settle.member, settle.spentUsd], {
      warnedAt: 3,
      onFailed: () => settleLater(settle),
      onWarning,
    });

  /** Pushes some of what waited for Redis (Redis is usable). */
  const flush = (now: number) => {
    let sent = 0;
    while (pending.length > 0 && sent < FLUSH_PER_CALL) {
      sendSettle(pending.shift() as PendingSettle);
      sent++;
    }
    for (const [budgetKey, debt] of [...owed.entries()]) {
      if (sent >= FLUSH_PER_CALL) return;
      const longest = Math.max(...debt.windows.map((spec) => spec.ms));
      for (const [start, usd] of debt.spend) {
        debt.spend.delete(start);
        if (start > now - longest) sendSpend(budgetKey, debt.windows, start, usd, start);
        if (++sent >= FLUSH_PER_CALL) break;
      }
      if (debt.spend.size === 0) owed.delete(budgetKey);
    }
  };

  const flushing = (now: number) => {
    if (owed.size > 0 || pending.length > 0) flush(now);
  };

  /**
   * Books a move here, giving its warnings when this replica's figure decides (Redis not usable).
   * Answers whether Redis is usable: then what waited for it has been pushed, and it is to hear of
   * this move next.
   */
  const bookHere = (moved: Move, now: number, onWarning: ((warning: BudgetWarning) => void) | undefined) => {
    const shared = link?.usable() === true;
    const warnings = book(moved, now, !shared);
    if (onWarning !== undefined) for (const warning of warnings) onWarning(warning);
    if (shared) flushing(now);
    return shared;
  };

  /** This replica's decision, on its own buckets, with a lease of its own. */
  const reserveLocally = (
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
    leaseMs: number,
  ): BudgetReserveResult => {
    let fits = true;
    const views = windows.map((spec) => {
      const window = windowOf(budgetKey, spec);
      prune(window, spec, now);
      if (totalOf(window.buckets) + usd > spec.limitUsd + FIT_EPSILON_USD) fits = false;
      return window;
    });
    if (!fits) return { ok: false, at: now, windows: views.map((window) => listOf(window.buckets)) };
    const warnings = book({ budgetKey, windows, at: now, reservedUsd: usd, spentUsd: 0 }, now, true);
    const lease = hold({ budgetKey, windows, at: now, usd, expiresAt: now + leaseMs, member: undefined });
    return { ok: true, at: now, shared: false, warnings, lease };
  };

  /** A copy of this replica's buckets of the windows ending at `now`. */
  const localRead = (budgetKey: string, windows: readonly BudgetWindowSpec[], now: number) =>
    windows.map((spec) => {
      const window = local.get(windowKeyOf(budgetKey, spec));
      if (window === undefined) return new Map<number, Amounts>();
      prune(window, spec, now);
      return new Map([...window.buckets].map(([start, { s, r }]) => [start, { s, r }]));
    });

  /**
   * Takes the lease of a settlement out of this replica's: by id, else (callers that kept none) one
   * of the same time and amount.
   */
  const leaseOf = (budgetKey: string, at: number, usd: number, id: string | undefined) => {
    const mine = leases.get(budgetKey);
    if (mine === undefined) return undefined;
    let key = id;
    if (key === undefined)
      for (const [candidate, lease] of mine) {
        if (lease.usd !== usd) continue;
        key ??= candidate;
        if (lease.at !== at) continue;
        key = candidate;
        break;
      }
    const lease = key === undefined ? undefined : mine.get(key);
    if (key === undefined || lease === undefined) return undefined;
    mine.delete(key);
    if (mine.size === 0) leases.delete(budgetKey);
    return lease;
  };

  return {
    reserve(budgetKey, windows, usd, now, leaseMs = DEFAULT_LEASE_MS): MaybePromise<BudgetReserveResult> {
      sweepLocally(budgetKey, now);
      if (link === undefined || reserveScript === undefined || !link.usable())
        return reserveLocally(budgetKey, windows, usd, now, leaseMs);
      flushing(now);
      const keys = keysOf(link, budgetKey, windows);
      const args = windowArgs(windows);
      args.push(usd, FIT_EPSILON_USD, newLeaseId(), Math.ceil(leaseMs));
      for (const spec of windows) args.push(spec.limitUsd, spec.warnUsd);
      return link
        .run('budget_reserve', () => reserveScript(keys.length, ...keys, ...args), timeoutMs)
        .then((answer): BudgetReserveResult => {
          // Failed or timed out: decided here. Had the script run after all, its lease lapses at
          // the deadline and counts as spent: an error towards the budget, bounded.
          if (answer === FAILED || !Array.isArray(answer))
            return reserveLocally(budgetKey, windows, usd, now, leaseMs);
          const at = Number(answer[1]);
          lapsedIn(answer[2], answer[3]);
          if (Number(answer[0]) !== 1) {
            return {
              ok: false,
              at,
              windows: windows.map((spec, i) => listOf(bucketsOfFields(answer[i + 4], spec, at))),
            };
          }
          // This replica's own figure (the outage fallback), in Redis' bucket.
          book({ budgetKey, windows, at, reservedUsd: usd, spentUsd: 0 }, now, false);
          const member = String(answer[4]);
          const lease = hold({ budgetKey, windows, at, usd, expiresAt: now + leaseMs, member });
          return { ok: true, at, shared: true, warnings: warningsOf(answer[5]), lease };
        });
    },

    settle(budgetKey, windows, at, reservedUsd, spentUsd, now, onWarning, leaseId) {
      const spent = spentUsd > 0 && Number.isFinite(spentUsd) ? spentUsd : 0;
      const reserved = Number.isFinite(reservedUsd) ? reservedUsd : 0;
      sweepLocally(budgetKey, now);
      const lease = leaseOf(budgetKey, at, reserved, leaseId);
      // Lapsed already (here, and in Redis for a Redis lease): counted at its estimate, once.
      if (lease === undefined) return;
      const shared = bookHere(
        { budgetKey, windows, at: lease.at, reservedUsd: -lease.usd, spentUsd: spent },
        now,
        onWarning,
      );
      if (link === undefined) return;
      if (lease.member === undefined) {
        // Reserved here only: Redis learns the spend.
        if (!shared) owe(budgetKey, windows, lease.at, spent);
        else if (spent > 0) sendSpend(budgetKey, windows, lease.at, spent, lease.at, onWarning);
        return;
      }
      const settlement = { budgetKey, windows, member: lease.member, spentUsd: spent };
      if (shared) sendSettle(settlement, onWarning);
      else settleLater(settlement);
    },

    add(budgetKey, windows, usd, now, onWarning) {
      if (!(usd > 0) || !Number.isFinite(usd) || !Number.isFinite(now)) return;
      sweepLocally(budgetKey, now);
      const shared = bookHere({ budgetKey, windows, at: now, reservedUsd: 0, spentUsd: usd }, now, onWarning);
      if (link === undefined) return;
      if (!shared) {
        owe(budgetKey, windows, now, usd);
        return;
      }
      // Spend without a reservation goes in Redis' current bucket (at 0).
      sendSpend(budgetKey, windows, 0, usd, now, onWarning);
    },

    read(budgetKey, windows, now): MaybePromise<BudgetRead> {
      sweepLocally(budgetKey, now);
      if (link === undefined || readScript === undefined || !link.usable())
        return { at: now, windows: localRead(budgetKey, windows, now).map(listOf) };
      const keys = keysOf(link, budgetKey, windows);
      const args = windowArgs(windows);
      return link
        .run('budget_window', () => readScript(keys.length, ...keys, ...args), timeoutMs)
        .then((answer): BudgetRead => {
          const mine = localRead(budgetKey, windows, now);
          if (answer === FAILED || !Array.isArray(answer)) return { at: now, windows: mine.map(listOf) };
          const at = Number(answer[0]);
          lapsedIn(answer[1], answer[2]);
          return {
            at,
            windows: windows.map((spec, i) => {
              const merged = bucketsOfFields(answer[i + 3], spec, at);
              // Never below this replica's own (what it owes Redis is in there).
              for (const [start, own] of mine[i] ?? []) {
                if (!(start > at - spec.ms)) continue;
                const shared = merged.get(start);
                if (shared === undefined) merged.set(start, own);
                else merged.set(start, { s: Math.max(shared.s, own.s), r: Math.max(shared.r, own.r) });
              }
              return listOf(merged);
            }),
          };
        });
    },
  };
}
