/**
 * Cost budgets (COST_BUDGETS, docs/contract.md, Cost): per budget key, several sliding windows at
 * once, each in buckets of its own length (a sixtieth of the window), spend and reservations apart.
 *
 * A reservation is booked in the current bucket of every window of the caller's scope when it fits
 * in all of them (`reserve`); when its operation settles, `settle` takes it out of the reservations
 * and adds what the operation actually cost to the spend, in the same bucket. An operation that
 * crashed keeps its estimate booked until its bucket leaves the window (errs towards the budget),
 * and nothing needs to be expired separately.
 *
 * Every replica keeps its own buckets in memory; with Redis the same amounts go to one hash per budget
 * key and window (`<prefix>budget:<digest of key and window length>`, fields `s<bucket start>` for
 * spend, `r<bucket start>` for reservations, `w` for when the warning was last given), whose TTL is
 * renewed on each write to the window plus two buckets, and whose buckets out of the window are
 * dropped by each script, so a busy key's hash keeps about 120 fields per window.
 *
 * One clock: each script reads Redis' `TIME`, which places the bucket and slides the windows, so
 * replicas whose clocks differ share one window. `reserve` checks and books every window in one
 * script: two replicas never both take the last dollar.
 *
 * A full Redis does not stop a budget write: each writing script first renews its hashes' TTL
 * (`PEXPIRE`, a write Redis never refuses for memory), and once a script has written Redis runs it to
 * its end without checking memory again (scripts are atomic), so a reservation is booked even when
 * maxmemory is reached under `noeviction`. The budget hashes are small, so what they add past
 * maxmemory is small. (Redis may evict them under any other policy: the gateway refuses to start
 * with budgets on such a Redis, create-shared-state.ts.)
 *
 * While Redis is unavailable (or a write fails) this replica decides on its own buckets, and what it
 * booked meanwhile is owed to Redis: pushed at the first write once Redis answers again, so spend made
 * during an outage still counts for every replica after it.
 */
import { LRUCache } from 'lru-cache';
import { budgetRedisKeys } from './redis-keys.js';
import { FAILED, type RedisLink } from './redis-link.js';
import type {
  BudgetBucket,
  BudgetRead,
  BudgetReserveResult,
  BudgetStore,
  BudgetWarning,
  BudgetWindowSpec,
  MaybePromise,
} from './types.js';

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

/**
 * Slack of the fit test, in dollars: sums of binary fractions (0.0042 × 12) must not refuse an
 * operation that fits exactly.
 */
export const FIT_EPSILON_USD = 1e-9;
/** An amount left in a bucket below this after a settlement is float noise: the field is dropped. */
const NOISE_USD = 1e-12;
/** Owed amounts pushed to Redis per store call once it is back (a burst would trip the timeout). */
const FLUSH_PER_CALL = 64;

/** Redis' clock in ms, into `now`. */
const NOW = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)`;

/**
 * `window_of(key, span)`: drops the fields of buckets at or before `now - span` and answers the sum
 * of the others and their flat list. `warn_if(key, span, total, warn)`: answers true, and notes the
 * time in `w`, when `total` reached `warn` and no warning was given within the last `span`.
 */
const HELPERS = `
local function window_of(key, span)
  local cutoff = now - span
  local fields = redis.call('HGETALL', key)
  local total = 0
  local kept = {}
  for i = 1, #fields, 2 do
    local name = fields[i]
    local kind = string.sub(name, 1, 1)
    if kind == 's' or kind == 'r' then
      local start = tonumber(string.sub(name, 2))
      if start == nil or start <= cutoff then
        redis.call('HDEL', key, name)
      else
        total = total + (tonumber(fields[i + 1]) or 0)
        kept[#kept + 1] = name
        kept[#kept + 1] = fields[i + 1]
      end
    end
  end
  return total, kept
end
local function warn_if(key, span, total, warn)
  if warn < 0 or total + ${FIT_EPSILON_USD} < warn then return false end
  local last = tonumber(redis.call('HGET', key, 'w'))
  if last ~= nil and last > now - span then return false end
  redis.call('HSET', key, 'w', string.format('%.0f', now))
  return true
end`;

/**
 * KEYS: one hash per window. ARGV[1] = dollars, ARGV[2] = slack, then per window i: ARGV[4i-1] span,
 * ARGV[4i] bucket, ARGV[4i+1] limit, ARGV[4i+2] warning figure. Books ARGV[1] as reserved in the
 * current bucket of every window when every window's total plus it stays within its limit (+ slack):
 * answers {1, now, {index, total, …} of windows due a warning}; else books nothing and answers
 * {0, now, fields of window 1, fields of window 2, …}.
 */
const RESERVE = `${NOW}${HELPERS}
local usd = tonumber(ARGV[1])
local slack = tonumber(ARGV[2])
local totals = {}
local views = {}
local fits = true
for i = 1, #KEYS do
  local total, kept = window_of(KEYS[i], tonumber(ARGV[4 * i - 1]))
  totals[i] = total
  views[i] = kept
  if total + usd > tonumber(ARGV[4 * i + 1]) + slack then fits = false end
end
if not fits then
  local answer = {0, now}
  for i = 1, #KEYS do answer[i + 2] = views[i] end
  return answer
end
local warned = {}
for i = 1, #KEYS do
  local span = tonumber(ARGV[4 * i - 1])
  local step = tonumber(ARGV[4 * i])
  -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
  redis.call('PEXPIRE', KEYS[i], span + 2 * step)
  redis.call('HINCRBYFLOAT', KEYS[i], 'r' .. string.format('%.0f', now - (now % step)), ARGV[1])
  redis.call('PEXPIRE', KEYS[i], span + 2 * step)
  local after = totals[i] + usd
  if warn_if(KEYS[i], span, after, tonumber(ARGV[4 * i + 2])) then
    warned[#warned + 1] = i
    warned[#warned + 1] = tostring(after)
  end
end
return {1, now, warned}`;

/**
 * KEYS: one hash per window. ARGV[1] = the bucket's time (ms; 0: now), ARGV[2] = signed dollars for
 * the reservations, ARGV[3] = signed dollars for the spend, then per window i: ARGV[3i+1] span,
 * ARGV[3i+2] bucket, ARGV[3i+3] warning figure. Moves the amounts in the bucket of ARGV[1] of each
 * window that still holds it; answers {index, total, …} of the windows due a warning.
 */
const MOVE = `${NOW}${HELPERS}
local at = tonumber(ARGV[1])
if at <= 0 then at = now end
local moves = {{'r', tonumber(ARGV[2])}, {'s', tonumber(ARGV[3])}}
local warned = {}
for i = 1, #KEYS do
  local span = tonumber(ARGV[3 * i + 1])
  local step = tonumber(ARGV[3 * i + 2])
  local start = at - (at % step)
  if start > now - span then
    -- First a write Redis never refuses for memory: the rest of the script then runs even when full.
    redis.call('PEXPIRE', KEYS[i], span + 2 * step)
    for _, move in ipairs(moves) do
      if move[2] ~= 0 then
        local field = move[1] .. string.format('%.0f', start)
        local left = tonumber(redis.call('HINCRBYFLOAT', KEYS[i], field, move[2]))
        if math.abs(left) < ${NOISE_USD} then redis.call('HDEL', KEYS[i], field) end
      end
    end
    redis.call('PEXPIRE', KEYS[i], span + 2 * step)
    local total = window_of(KEYS[i], span)
    if moves[1][2] + moves[2][2] > 0 and warn_if(KEYS[i], span, total, tonumber(ARGV[3 * i + 3])) then
      warned[#warned + 1] = i
      warned[#warned + 1] = tostring(total)
    end
  end
end
return warned`;

/** KEYS: one hash per window. Answers {now, fields of window 1, …}; writes nothing. */
const READ = `${NOW}
local answer = {now}
for i = 1, #KEYS do answer[i + 1] = redis.call('HGETALL', KEYS[i]) end
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

/** What this replica booked in one window that Redis has not counted yet. */
interface Owed {
  budgetKey: string;
  spec: BudgetWindowSpec;
  buckets: Map<number, Amounts>;
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

export function createBudgetStore(link: RedisLink | undefined, maxKeys: number): BudgetStore {
  // Bounded: budget keys are API keys (and the free tier); the least recently used go first. A key
  // has a few windows.
  const local = new LRUCache<string, LocalWindow>({ max: maxKeys * 4 });
  const owed = new LRUCache<string, Owed>({ max: maxKeys * 4 });
  const reserveScript = link?.script('sharedStateBudgetReserve', undefined, RESERVE);
  const moveScript = link?.script('sharedStateBudgetMove', undefined, MOVE);
  const readScript = link?.script('sharedStateBudgetRead', undefined, READ);

  const windowOf = (budgetKey: string, spec: BudgetWindowSpec): LocalWindow => {
    const key = windowKeyOf(budgetKey, spec);
    let window = local.get(key);
    if (window === undefined) {
      window = { buckets: new Map(), warnedAt: Number.NEGATIVE_INFINITY };
      local.set(key, window);
    }
    return window;
  };

  // One hash tag per budget key: a script touches every window of it, in one Cluster slot.
  const redisKeysOf = (shared: RedisLink, budgetKey: string, windows: readonly BudgetWindowSpec[]) =>
    budgetRedisKeys(
      shared.keyPrefix,
      budgetKey,
      windows.map((spec) => spec.ms),
    ).windows;

  /** Whether this process' window is due its warning at `total` (memory mode and outages). */
  const dueLocally = (window: LocalWindow, spec: BudgetWindowSpec, total: number, now: number) => {
    if (spec.warnUsd < 0 || total + FIT_EPSILON_USD < spec.warnUsd || window.warnedAt > now - spec.ms)
      return false;
    window.warnedAt = now;
    return true;
  };

  /**
   * Moves amounts in this process' buckets; `decide`: it is the figure that decides (no Redis), so
   * the warnings are this process' to give.
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

  const owe = ({ budgetKey, windows, at, reservedUsd, spentUsd }: Move) => {
    if (link === undefined) return;
    for (const spec of windows) {
      const key = windowKeyOf(budgetKey, spec);
      let debt = owed.get(key);
      if (debt === undefined) {
        debt = { budgetKey, spec, buckets: new Map() };
        owed.set(key, debt);
      }
      move(debt.buckets, bucketOf(at, spec), reservedUsd, spentUsd);
    }
  };

  /**
   * Sends one move to Redis (in the bucket of `at`; 0: Redis' current one); owed again, in the bucket
   * of `owedAt`, when the write fails.
   */
  const send = (
    moved: Move,
    owedAt: number,
    operation: 'budget_add' | 'budget_adjust',
    onWarning?: (warning: BudgetWarning) => void,
  ) => {
    if (link === undefined || moveScript === undefined) return;
    const { budgetKey, windows, at, reservedUsd, spentUsd } = moved;
    const args: Array<string | number> = [at, reservedUsd, spentUsd];
    for (const spec of windows) args.push(spec.ms, spec.bucketMs, spec.warnUsd);
    const keys = redisKeysOf(link, budgetKey, windows);
    void link
      .run(operation, () => moveScript(keys.length, ...keys, ...args))
      .then((reply) => {
        if (reply === FAILED) owe({ ...moved, at: owedAt });
        else if (onWarning !== undefined) for (const warning of warningsOf(reply)) onWarning(warning);
      });
  };

  /** Pushes some of what is owed (Redis is usable). */
  const flush = (now: number) => {
    let sent = 0;
    for (const [key, debt] of [...owed.entries()]) {
      for (const [start, { s, r }] of debt.buckets) {
        debt.buckets.delete(start);
        if (start > now - debt.spec.ms)
          send(
            { budgetKey: debt.budgetKey, windows: [debt.spec], at: start, reservedUsd: r, spentUsd: s },
            start,
            'budget_add',
          );
        if (++sent >= FLUSH_PER_CALL) return;
      }
      owed.delete(key);
    }
  };

  /** Books here, and in Redis when usable (after what was owed), or owes it. */
  const share = (
    moved: Move,
    now: number,
    operation: 'budget_add' | 'budget_adjust',
    onWarning?: (warning: BudgetWarning) => void,
  ) => {
    const shared = link?.usable() === true;
    const warnings = book(moved, now, !shared);
    if (onWarning !== undefined) for (const warning of warnings) onWarning(warning);
    if (link === undefined) return;
    if (!shared) {
      owe(moved);
      return;
    }
    if (owed.size > 0) flush(now);
    // Spend without a reservation goes in Redis' current bucket (at 0).
    send({ ...moved, at: operation === 'budget_add' ? 0 : moved.at }, moved.at, operation, onWarning);
  };

  /** This replica's decision, on its own buckets. */
  const reserveLocally = (
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
  ): BudgetReserveResult => {
    let fits = true;
    const views = windows.map((spec) => {
      const window = windowOf(budgetKey, spec);
      prune(window, spec, now);
      if (totalOf(window.buckets) + usd > spec.limitUsd + FIT_EPSILON_USD) fits = false;
      return window;
    });
    if (!fits) return { ok: false, at: now, windows: views.map((window) => listOf(window.buckets)) };
    const reserved: Move = { budgetKey, windows, at: now, reservedUsd: usd, spentUsd: 0 };
    const warnings = book(reserved, now, true);
    owe(reserved);
    return { ok: true, at: now, shared: false, warnings };
  };

  /** A copy of this replica's buckets of the windows ending at `now`. */
  const localRead = (budgetKey: string, windows: readonly BudgetWindowSpec[], now: number) =>
    windows.map((spec) => {
      const window = local.get(windowKeyOf(budgetKey, spec));
      if (window === undefined) return new Map<number, Amounts>();
      prune(window, spec, now);
      return new Map([...window.buckets].map(([start, { s, r }]) => [start, { s, r }]));
    });

  return {
    reserve(budgetKey, windows, usd, now): MaybePromise<BudgetReserveResult> {
      if (link === undefined || reserveScript === undefined || !link.usable())
        return reserveLocally(budgetKey, windows, usd, now);
      if (owed.size > 0) flush(now);
      const keys = redisKeysOf(link, budgetKey, windows);
      const args: Array<string | number> = [usd, FIT_EPSILON_USD];
      for (const spec of windows) args.push(spec.ms, spec.bucketMs, spec.limitUsd, spec.warnUsd);
      return link
        .run('budget_reserve', () => reserveScript(keys.length, ...keys, ...args))
        .then((answer): BudgetReserveResult => {
          // Failed or timed out: decided here. Had the script run after all, Redis counts the
          // estimate twice until its bucket leaves the window: an error towards the budget.
          if (answer === FAILED || !Array.isArray(answer))
            return reserveLocally(budgetKey, windows, usd, now);
          const at = Number(answer[1]);
          if (Number(answer[0]) !== 1) {
            return {
              ok: false,
              at,
              windows: windows.map((spec, i) => listOf(bucketsOfFields(answer[i + 2], spec, at))),
            };
          }
          // This replica's own figure (the outage fallback), in Redis' bucket.
          book({ budgetKey, windows, at, reservedUsd: usd, spentUsd: 0 }, now, false);
          return { ok: true, at, shared: true, warnings: warningsOf(answer[2]) };
        });
    },

    settle(budgetKey, windows, at, reservedUsd, spentUsd, now, onWarning) {
      const spent = spentUsd > 0 && Number.isFinite(spentUsd) ? spentUsd : 0;
      const reserved = Number.isFinite(reservedUsd) ? reservedUsd : 0;
      if (reserved === 0 && spent === 0) return;
      share(
        { budgetKey, windows, at, reservedUsd: -reserved, spentUsd: spent },
        now,
        'budget_adjust',
        onWarning,
      );
    },

    add(budgetKey, windows, usd, now, onWarning) {
      if (!(usd > 0) || !Number.isFinite(usd) || !Number.isFinite(now)) return;
      share({ budgetKey, windows, at: now, reservedUsd: 0, spentUsd: usd }, now, 'budget_add', onWarning);
    },

    read(budgetKey, windows, now): MaybePromise<BudgetRead> {
      if (link === undefined || readScript === undefined || !link.usable())
        return { at: now, windows: localRead(budgetKey, windows, now).map(listOf) };
      const keys = redisKeysOf(link, budgetKey, windows);
      return link
        .run('budget_window', () => readScript(keys.length, ...keys))
        .then((answer): BudgetRead => {
          const mine = localRead(budgetKey, windows, now);
          if (answer === FAILED || !Array.isArray(answer)) return { at: now, windows: mine.map(listOf) };
          const at = Number(answer[0]);
          return {
            at,
            windows: windows.map((spec, i) => {
              const merged = bucketsOfFields(answer[i + 1], spec, at);
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
