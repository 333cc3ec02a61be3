/**
 * Budget shares (docs/contract.md, More than one machine): a replica takes a share of a budget key's
 * remainder from Redis and admits operations against it in memory, so an operation under a budget
 * that is large against its estimate pays no Redis round trip of its own for the budget. The share
 * is booked in Redis as reserved (every replica's `budget` field shows it) and is a lease like a
 * reservation: one script (budget-share.lua) takes it, refills it, writes back what was spent from it
 * and gives back what is unused; a share whose replica stops renewing it (killed, cut off) lapses
 * into spend at its whole amount (`gateway_budget_lapsed_*`), which covers the operations it had in
 * flight at their estimates.
 *
 * Sizes (per replica and budget key; `e` the key's latest operation estimate on this replica):
 * - the target a replica holds is its recent spend rate over SHARE_HORIZON_MS (the rate an EWMA of
 *   what it admitted per flush interval), at least SHARE_MIN_OPS × e;
 * - a top-up is at most what is left in the tightest window (after what the replica keeps) ÷ (2 ×
 *   the replicas using the key), none below e, and none at all when less than SHARE_FLOOR_OPS × e is
 *   left: then no share grows, what one holds is used up by its own operations or given back when
 *   idle, and the last dollars go one at a time, by the exact per-operation reserve: shares shrink
 *   as the remainder nears the limit, and the bound of docs/contract.md, Cost is unchanged.
 * - written back every SHARE_FLUSH_MS while there is spend to write, renewed every third of
 *   SHARE_LEASE_MS, refilled when its room falls under half the target, given back after
 *   SHARE_IDLE_MS without an operation, and at `close()`.
 *
 * A share script may run unheard of (a Sentinel primary killed before its reply, a reply past the
 * timeout): the next finds its lease by the replica's token and books spend from a running total.
 *
 * Replicas know each other through Redis: the replica registry (replica-registry.ts, every replica's
 * beat) and, per key, the distinct tokens in its lease set. While Redis cannot be reached, a replica
 * spends its share, and past it only its part of what was left when it last reached Redis (that
 * remainder ÷ the replicas counting: the most of the registry's last count and the key's): `outageFits`.
 */
import { LRUCache } from 'lru-cache';
import type { Amounts } from './budget-windows.js';
import { bucketOf, bucketsOfFields, warningsOf, windowArgs } from './budget-windows.js';
import { FAILED, type RedisLink, type ScriptCall } from './redis-link.js';
import type { BudgetRead, BudgetReserveResult, BudgetWarning, BudgetWindowSpec } from './types.js';

/** How often shares write back spend (and renew, refill, go back when idle), in ms. */
export const SHARE_FLUSH_MS = 250;
/** A share not renewed for this long lapses into spend (its replica dead or cut off), in ms. */
export const SHARE_LEASE_MS = 10_000;
/** A share without an operation for this long goes back, in ms. */
export const SHARE_IDLE_MS = 1_000;
/** What a replica holds: its spend over this horizon, in ms. */
export const SHARE_HORIZON_MS = 1_000;
/** …and at least this many operations' estimates. */
export const SHARE_MIN_OPS = 4;
/** Below this many estimates left in the tightest window: no share, the exact per-operation reserve. */
export const SHARE_FLOOR_OPS = 32;
/** How long a replica remembers how many replicas it counted on a key, in ms. */
const REPLICAS_KEPT_MS = 10_000;
/** The `budget` field answers from the last share script's view while it is younger than this, in ms. */
const VIEW_MS = 1_000;

interface Share {
  readonly budgetKey: string;
  windows: readonly BudgetWindowSpec[];
  /** Its lease in Redis; '' none. */
  member: string;
  /** What the lease holds, less spend on its way to Redis. */
  held: number;
  /** Estimates of the operations admitted against it and not settled. */
  inflight: number;
  /** What settled operations spent, not yet written back. */
  spent: number;
  /** Every dollar written back since it was made: Redis books what it has not yet (budget-share.lua). */
  sent: number;
  /** A call failed, maybe after it ran: Redis may hold a lease this replica has not heard of. */
  unsure: boolean;
  /** Bumped when the lease lapsed: operations of an older generation were counted by the lapse. */
  gen: number;
  /** The script in flight (one at a time). */
  busy: Promise<void> | undefined;
  /** It gives back the room: admissions wait for it (what they would take may be gone). */
  giving: boolean;
  estimate: number;
  /** What it aims to hold (the target), USD. */
  size: number;
  /** When it last asked for a top-up (local ms). */
  lastRefill: number;
  lastUse: number;
  lastSent: number;
  admitted: number;
  /** USD per ms (EWMA). */
  rate: number;
  /** Redis' figures at the last script, plus the share: `at` Redis time, `seen` local time. */
  view: { at: number; seen: number; windows: Map<number, Amounts>[] } | undefined;
  warnings: BudgetWarning[];
}

interface ShareOp {
  readonly share: Share;
  readonly usd: number;
  readonly gen: number;
  /** Its lease's end (local ms): never settled by then, it counts as spent at its estimate. */
  readonly expiresAt: number;
}

export interface BudgetSharesOptions {
  link: RedisLink;
  timeoutMs?: number | undefined;
  /** KEYS of a budget script for a key. */
  keysOf: (budgetKey: string, windows: readonly BudgetWindowSpec[]) => string[];
  /** This replica's token (the replica set's member). */
  token: string;
  /** Counts what a script's sweep lapsed. */
  lapsedIn: (count: unknown, usd: unknown) => void;
  /** Hears of each top-up Redis granted. */
  onRefill?: (() => void) | undefined;
  /** Budget keys whose outage part is kept, at most (the least recently used go first). */
  maxKeys: number;
  /** Runs at each flush interval while Redis is usable (the outage ledger's flush: shares make other writes rare). */
  onTick?: (() => void) | undefined;
  /** The replicas the registry counted at its last beat (replica-registry.ts); 1 without it. */
  registered?: (() => number) | undefined;
}

export interface BudgetShares {
  /**
   * Admits `usd` against this replica's share of the key: a result when it fits, a promise to wait
   * for (a refill under way; try again once after it), or undefined (no share, or no room).
   */
  admit(
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
    leaseMs: number,
  ): BudgetReserveResult | Promise<void> | undefined;
  /** Settles an operation admitted against a share; false when `lease` is not one. */
  settle(lease: string | undefined, spentUsd: number): boolean;
  /** What a per-operation reserve learnt: `left` in the tightest window, `replicas` counting. */
  contact(
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    left: number,
    replicas: number,
  ): void;
  /**
   * While Redis is away: whether `usd` fits this replica's part of what was left at its last contact
   * (booked when it does); undefined when it never reached Redis for this key.
   */
  outageFits(budgetKey: string, usd: number): boolean | undefined;
  /** An operation admitted by `outageFits` settled: its unspent estimate goes back to the part. */
  outageSettle(budgetKey: string, usd: number, spentUsd: number): void;
  /** The most replicas counting: the last key's count, or the registry's if more (1 before either). */
  replicas(): number;
  /** The key's figures from the last share script, while fresh; else undefined. */
  view(budgetKey: string, windows: readonly BudgetWindowSpec[], now: number): BudgetRead | undefined;
  /** Writes back what the shares spent now (Redis is back: before other replicas decide without it). */
  flushNow(): void;
  /** USD this replica's shares hold now. */
  heldUsd(): number;
  /** Writes back every share and gives back what is unused. */
  close(): Promise<void>;
}

export function createBudgetShares(script: ScriptCall, options: BudgetSharesOptions): BudgetShares {
  const { link, timeoutMs, keysOf, token, lapsedIn, onRefill, onTick, maxKeys } = options;
  const registered = options.registered ?? (() => 1);
  const shares = new Map<string, Share>();
  const ops = new Map<string, ShareOp>();
  /**
   * Per key: what was left at the last contact (÷ `halves`), what this replica has spent of it since
   * during an outage, and the replicas the key counted lately (the most within REPLICAS_KEPT_MS).
   */
  const parts = new LRUCache<string, { left: number; used: number; replicas: number; seen: number }>({
    max: maxKeys,
  });
  /** The replicas a contact counts: the most counted for the key within REPLICAS_KEPT_MS. */
  const counted = (budgetKey: string, replicas: number) => {
    const before = parts.get(budgetKey);
    const now = performance.now();
    const kept = before !== undefined && now - before.seen < REPLICAS_KEPT_MS ? before.replicas : 1;
    return Math.max(1, replicas, kept);
  };
  const noteContact = (budgetKey: string, left: number, replicas: number, halves: number) => {
    const count = counted(budgetKey, replicas);
    replicasSeen = count;
    parts.set(budgetKey, {
      left: Math.max(0, left) / halves,
      used: 0,
      replicas: count,
      seen: performance.now(),
    });
  };
  /**
   * This replica's part of what was left: ÷ the most of the key's count at the contact and the
   * registry's last (replicas whose operations on the key never overlapped still count each other).
   */
  const partOf = (part: { left: number; replicas: number }) =>
    part.left / Math.max(part.replicas, registered());
  let replicasSeen = 1;
  let opCount = 0;
  let lastTick = performance.now();
  let closed = false;

  const roomOf = (share: Share) => share.held - share.inflight - share.spent;
  const owes = (share: Share) => share.spent > 0 || share.unsure;
  const targetOf = (share: Share) => Math.max(SHARE_MIN_OPS * share.estimate, share.size);

  const newShare = (budgetKey: string, windows: readonly BudgetWindowSpec[], usd: number): Share => {
    const share: Share = {
      budgetKey,
      windows,
      member: '',
      held: 0,
      inflight: 0,
      spent: 0,
      sent: 0,
      unsure: false,
      gen: 0,
      busy: undefined,
      giving: false,
      estimate: usd,
      size: SHARE_MIN_OPS * usd,
      lastRefill: Number.NEGATIVE_INFINITY,
      lastUse: performance.now(),
      lastSent: performance.now(),
      admitted: 0,
      rate: 0,
      view: undefined,
      warnings: [],
    };
    shares.set(budgetKey, share);
    return share;
  };

  /**
   * One share script: writes back what was spent, keeps what is held (`giveBack`: only what is in
   * flight; admissions wait for it), asks for a top-up up to the target. Operations admitted while a
   * refill runs take from what it keeps, so they stay covered whatever it answers.
   */
  const call = (share: Share, giveBack: boolean): Promise<void> => {
    if (share.busy !== undefined) return share.busy;
    share.held -= share.spent;
    share.sent += share.spent;
    share.spent = 0;
    // Spend past the estimates may have eaten into what covers the operations in flight: kept anyway.
    const keep = giveBack ? share.inflight : Math.max(share.held, share.inflight);
    share.held = keep;
    share.giving = giveBack;
    const room = keep - share.inflight;
    let more = 0;
    if (!giveBack && !closed) {
      // Sized from this replica's spend: doubled while refills come within the horizon, else the
      // recent rate over it.
      const at = performance.now();
      share.size =
        at - share.lastRefill < SHARE_HORIZON_MS
          ? 2 * share.size
          : Math.max(SHARE_MIN_OPS * share.estimate, share.rate * SHARE_HORIZON_MS);
      share.lastRefill = at;
      more = Math.max(0, targetOf(share) - room);
    }
    const { budgetKey, windows } = share;
    const keys = keysOf(budgetKey, windows);
    const args = windowArgs(windows);
    args.push(share.member, share.sent, keep, keep, more, share.estimate);
    args.push(SHARE_FLOOR_OPS * share.estimate, SHARE_LEASE_MS, token);
    for (const spec of windows) args.push(spec.limitUsd, spec.warnUsd);
    share.lastSent = performance.now();
    const seen = Date.now();
    const running = link
      .run('budget_adjust', () => script(keys.length, ...keys, ...args), timeoutMs)
      .then((reply) => {
        // Failed, maybe after it ran (reply lost or late): `unsure` and `sent` say what to recover.
        const failed = reply === FAILED || !Array.isArray(reply);
        share.unsure = failed;
        if (failed) return;
        const at = Number(reply[0]);
        lapsedIn(reply[1], reply[2]);
        const amount = Number(reply[5]) || 0;
        const found = Number(reply[3]) === 1;
        if (!found && share.member !== '') {
          // Lapsed: its whole amount counted as spent, the operations in flight with it.
          share.gen++;
          share.inflight = 0;
          share.spent = 0;
        }
        if (amount > (found ? keep : 0)) onRefill?.();
        share.member = String(reply[4]);
        share.held = amount;
        // The other half of what is left is what the replicas' shares may still take: a part of half
        // keeps the sum within what was left however their last contacts are spread.
        noteContact(budgetKey, Number(reply[6]) || 0, Number(reply[7]) || 1, 2);
        share.warnings.push(...warningsOf(reply[8]));
        const views = windows.map((spec, i) => {
          const buckets = bucketsOfFields(reply[i + 9], spec, at);
          const start = bucketOf(at, spec);
          const bucket = buckets.get(start) ?? { s: 0, r: 0 };
          bucket.r += amount;
          buckets.set(start, bucket);
          return buckets;
        });
        share.view = { at, seen, windows: views };
      })
      .finally(() => {
        share.busy = undefined;
        share.giving = false;
      });
    share.busy = running;
    return running;
  };

  /**
   * Operations admitted against a share and never settled by their lease's end (a bug, a hung caller)
   * count as spent at their estimates, like a lapsed reservation: the share never holds them forever.
   */
  const sweep = (now: number) => {
    let count = 0;
    let usd = 0;
    for (const [lease, op] of ops) {
      if (op.expiresAt > now) continue;
      ops.delete(lease);
      if (op.gen !== op.share.gen) continue;
      op.share.inflight = Math.max(0, op.share.inflight - op.usd);
      op.share.spent += op.usd;
      count++;
      usd += op.usd;
    }
    if (count > 0) lapsedIn(count, usd);
  };

  const tick = () => {
    const now = performance.now();
    sweep(now);
    const elapsed = Math.max(1, now - lastTick);
    lastTick = now;
    const usable = link.usable();
    if (usable) onTick?.();
    for (const share of shares.values()) {
      share.rate = 0.5 * share.rate + (0.5 * share.admitted) / elapsed;
      share.admitted = 0;
      if (!usable || share.busy !== undefined) continue;
      const idle = now - share.lastUse > SHARE_IDLE_MS;
      if (idle && (share.held - share.inflight > 0 || share.unsure)) void call(share, true);
      else if (owes(share) || (share.held > 0 && now - share.lastSent > SHARE_LEASE_MS / 3))
        void call(share, false);
      else if (idle && share.held === 0 && share.inflight === 0 && now - share.lastUse > SHARE_LEASE_MS)
        shares.delete(share.budgetKey);
    }
  };
  const timer = setInterval(tick, SHARE_FLUSH_MS);
  timer.unref();

  return {
    admit(budgetKey, windows, usd, now, leaseMs) {
      const share = shares.get(budgetKey);
      if (share === undefined || closed) return undefined;
      if (share.giving && share.busy !== undefined) return share.busy;
      share.windows = windows;
      if (roomOf(share) + 1e-12 < usd) {
        // Out of room: a refill (Redis usable), and the caller tries again once after it.
        if (share.busy !== undefined) return share.busy;
        if (share.held > 0 || share.member !== '') share.estimate = usd;
        return link.usable() && share.member !== '' ? call(share, false) : undefined;
      }
      share.inflight += usd;
      share.estimate = usd;
      share.admitted += usd;
      share.lastUse = performance.now();
      const lease = `~${(opCount++).toString(36)}`;
      ops.set(lease, { share, usd, gen: share.gen, expiresAt: performance.now() + leaseMs });
      if (roomOf(share) < targetOf(share) / 2 && link.usable()) void call(share, false);
      const at = share.view === undefined ? now : share.view.at + (Date.now() - share.view.seen);
      return { ok: true, at, shared: true, warnings: share.warnings.splice(0), lease };
    },

    settle(lease, spentUsd) {
      if (lease === undefined || lease[0] !== '~') return false;
      const op = ops.get(lease);
      if (op === undefined) return false;
      ops.delete(lease);
      const { share, usd, gen } = op;
      // Of a lapsed lease: counted at its whole amount already.
      if (gen !== share.gen) return true;
      share.inflight = Math.max(0, share.inflight - usd);
      share.spent += spentUsd;
      return true;
    },

    contact(budgetKey, windows, usd, left, replicas) {
      // A share for a key this replica reserved for within SHARE_IDLE_MS: sporadic traffic would pay
      // a take and a give-back per operation.
      const last = parts.get(budgetKey)?.seen;
      noteContact(budgetKey, left, replicas, 1);
      if (closed || last === undefined || performance.now() - last > SHARE_IDLE_MS) return;
      if (!(left >= SHARE_FLOOR_OPS * usd)) return;
      const share = shares.get(budgetKey) ?? newShare(budgetKey, windows, usd);
      share.estimate = usd;
      if (share.member === '' && share.busy === undefined) void call(share, false);
    },

    outageFits(budgetKey, usd) {
      const part = parts.get(budgetKey);
      if (part === undefined) return undefined;
      if (partOf(part) - part.used + 1e-9 < usd) return false;
      part.used += usd;
      return true;
    },

    outageSettle(budgetKey, usd, spentUsd) {
      const part = parts.get(budgetKey);
      if (part !== undefined) part.used = Math.max(0, part.used - usd + spentUsd);
    },

    replicas: () => Math.max(replicasSeen, registered()),

    view(budgetKey, windows, now) {
      const view = shares.get(budgetKey)?.view;
      if (view === undefined || Date.now() - view.seen > VIEW_MS || view.windows.length !== windows.length)
        return undefined;
      const at = view.at + (now - view.seen);
      return {
        at,
        windows: view.windows.map((buckets, i) => {
          const spec = windows[i] as BudgetWindowSpec;
          return [...buckets]
            .filter(([start]) => start > at - spec.ms)
            .map(([start, { s, r }]): [number, number, number] => [start, s, r])
            .sort((x, y) => x[0] - y[0]);
        }),
      };
    },

    flushNow() {
      for (const share of shares.values())
        if (owes(share) && share.busy === undefined && !closed) void call(share, false);
    },

    heldUsd() {
      let held = 0;
      for (const share of shares.values()) held += share.held;
      return held;
    },

    async close() {
      closed = true;
      clearInterval(timer);
      if (!link.usable()) return;
      await Promise.all(
        [...shares.values()].map(async (share) => {
          if (share.busy !== undefined) await share.busy;
          if (share.member !== '' || owes(share)) await call(share, true);
        }),
      );
    },
  };
}
