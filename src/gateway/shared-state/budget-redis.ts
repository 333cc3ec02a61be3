/**
 * The budget store with Redis (REDIS_URL; budget-store.ts says what a budget is): every replica's
 * figures in one hash per budget key and window, and the leases in one sorted set per budget key,
 * written by the Lua scripts of budget-scripts.ts. Each replica also books everything in its own
 * buckets (budget-memory.ts): the figure it decides on while Redis is away, and what it owes Redis
 * meanwhile goes to the outage ledger (budget-ledger.ts), flushed before its next write once Redis is
 * back.
 */
import { createOutageLedger, type LedgerSender, type PendingSettle } from './budget-ledger.js';
import {
  createMemoryBudget,
  isSpend,
  type OnWarning,
  settlementOf,
  spendOf,
  warnAll,
} from './budget-memory.js';
import { BUDGET_SCRIPTS } from './budget-scripts.js';
import { createBudgetShares } from './budget-shares.js';
import {
  type Amounts,
  bucketsOfFields,
  DEFAULT_LEASE_MS,
  FIT_EPSILON_USD,
  listOf,
  type Move,
  totalOf,
  warningsOf,
  windowArgs,
} from './budget-windows.js';
import { budgetRedisKeys } from './redis-keys.js';
import { FAILED, type RedisLink, type ScriptCall } from './redis-link.js';
import { createReplicaRegistry } from './replica-registry.js';
import type {
  BudgetRead,
  BudgetReserveResult,
  BudgetStore,
  BudgetWindowSpec,
  MaybePromise,
} from './types.js';

export interface RedisBudgetStoreOptions {
  /** Longest wait for one budget script, in ms (REDIS_BUDGET_TIMEOUT_MS). */
  timeoutMs?: number | undefined;
  /** Hears of leases that lapsed (count, their estimates in USD), once each, whoever noticed. */
  onLapse?: ((count: number, usd: number) => void) | undefined;
  /** Hears of each share top-up Redis granted (budget-shares.ts). */
  onShareRefill?: (() => void) | undefined;
  /**
   * How often this replica beats into the replica registry (replica-registry.ts), in ms; 0: never.
   * @default REPLICA_HEARTBEAT_MS
   */
  replicaHeartbeatMs?: number | undefined;
  /**
   * Beat from the start (budgets in use); else from the store's first call.
   * @default false
   */
  beatAtStart?: boolean | undefined;
  /**
   * The fewest replicas an outage's part is divided by until the registry is read (EXPECTED_REPLICAS).
   * @default 1
   */
  expectedReplicas?: number | undefined;
}

/** The Redis store, and what its shares hold now. */
export interface RedisBudgetStore extends BudgetStore {
  /** USD this replica's shares hold (budget-shares.ts). */
  sharesHeldUsd(): number;
  /** The replicas this one counts now (registry and lease sets; what an outage's part is ÷ by). */
  replicas(): number;
}

export function createRedisBudgetStore(
  link: RedisLink,
  maxKeys: number,
  options: RedisBudgetStoreOptions = {},
): RedisBudgetStore {
  const { timeoutMs, onLapse } = options;
  const ledger = createOutageLedger(maxKeys);
  const memory = createMemoryBudget(maxKeys, {
    onLapse,
    // Reserved here only: Redis learns its estimate as spend.
    onLocalLapse: (lease) => ledger.owe(lease.budgetKey, lease.windows, lease.at, lease.usd),
  });
  const reserveScript = link.script('sharedStateBudgetReserve', undefined, BUDGET_SCRIPTS.reserve);
  const settleScript = link.script('sharedStateBudgetSettle', undefined, BUDGET_SCRIPTS.settle);
  const addScript = link.script('sharedStateBudgetAdd', undefined, BUDGET_SCRIPTS.add);
  const readScript = link.script('sharedStateBudgetRead', undefined, BUDGET_SCRIPTS.read);

  /** KEYS of a budget script: the lease set, then each window's hash. */
  const keysOf = (budgetKey: string, windows: readonly BudgetWindowSpec[]) => {
    const keys = budgetRedisKeys(
      link.keyPrefix,
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

  const registry = createReplicaRegistry({
    link,
    token: memory.token,
    intervalMs: options.replicaHeartbeatMs,
    timeoutMs,
    expected: options.expectedReplicas,
  });
  if (options.beatAtStart) registry.start();
  const shares = createBudgetShares(link.script('sharedStateBudgetShare', undefined, BUDGET_SCRIPTS.share), {
    link,
    timeoutMs,
    keysOf,
    token: memory.token,
    lapsedIn,
    onRefill: options.onShareRefill,
    onTick: () => ledger.flush(Date.now(), sender),
    maxKeys,
    registered: registry.count,
  });

  // Back: what this replica owes goes at once, not with its next write or tick, so that the other
  // replicas, deciding in Redis again, count it as soon as possible.
  link.onConnect(() => {
    ledger.flush(Date.now(), sender);
    shares.flushNow();
  });

  /**
   * Decided here (Redis away, or its script failed): this replica's part of what was left at its last
   * contact with Redis for the key; a key it never reached Redis for, on its own buckets with each
   * limit divided by the replicas it last saw.
   */
  const decideHere = (
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
    leaseMs: number,
  ): BudgetReserveResult => {
    const fits = shares.outageFits(budgetKey, usd);
    if (fits === false)
      return { ok: false, at: now, windows: memory.read(budgetKey, windows, now).map(listOf) };
    const replicas = shares.replicas();
    return memory.reserve(budgetKey, windows, usd, now, leaseMs, (spec) =>
      fits === true ? Number.POSITIVE_INFINITY : spec.limitUsd / replicas,
    );
  };

  /** Per operation, in one script (no share, or none with room). */
  const reserveInRedis = (
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    usd: number,
    now: number,
    leaseMs: number,
  ): Promise<BudgetReserveResult> => {
    ledger.flush(now, sender);
    const keys = keysOf(budgetKey, windows);
    const args = windowArgs(windows);
    args.push(usd, FIT_EPSILON_USD, memory.newLeaseId(), Math.ceil(leaseMs));
    for (const spec of windows) args.push(spec.limitUsd, spec.warnUsd);
    args.push(memory.token);
    return link
      .run('budget_reserve', () => reserveScript(keys.length, ...keys, ...args), timeoutMs)
      .then((answer): BudgetReserveResult => {
        // Failed or timed out: decided here. Had the script run after all, its lease lapses at
        // the deadline and counts as spent: an error towards the budget, bounded.
        if (answer === FAILED || !Array.isArray(answer))
          return decideHere(budgetKey, windows, usd, now, leaseMs);
        const at = Number(answer[1]);
        lapsedIn(answer[2], answer[3]);
        if (Number(answer[0]) !== 1) {
          const seen = windows.map((spec, i) => bucketsOfFields(answer[i + 4], spec, at));
          // A refusal is a contact too: should Redis go away now, this replica's part is of what is
          // left now, not of what an earlier admission saw (the other replicas spent since).
          const left = Math.min(
            ...windows.map((spec, i) => spec.limitUsd - totalOf(seen[i] as Map<number, Amounts>)),
          );
          shares.contact(budgetKey, windows, usd, left, 1);
          return { ok: false, at, windows: seen.map(listOf) };
        }
        // This replica's own figure (the outage fallback), in Redis' bucket.
        memory.book({ budgetKey, windows, at, reservedUsd: usd, spentUsd: 0 }, now, false);
        const member = String(answer[4]);
        const lease = memory.hold({ budgetKey, windows, at, usd, expiresAt: now + leaseMs, member });
        shares.contact(budgetKey, windows, usd, Number(answer[6]), Number(answer[7]));
        return { ok: true, at, shared: true, warnings: warningsOf(answer[5]), lease };
      });
  };

  /**
   * Runs a writing budget script on a key's windows: its own arguments `own` between the windows'
   * spans and their warning figures. Failed: `onFailed`; else counts what its sweep lapsed and gives
   * the warnings of its reply at `warnedAt`.
   */
  const write = (
    operation: 'budget_add' | 'budget_adjust',
    script: ScriptCall,
    budgetKey: string,
    windows: readonly BudgetWindowSpec[],
    own: Array<string | number>,
    outcome: { warnedAt: number; onFailed: () => void; onWarning?: OnWarning },
  ) => {
    const keys = keysOf(budgetKey, windows);
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
    onWarning?: OnWarning,
  ) =>
    write('budget_add', addScript, budgetKey, windows, [at, usd], {
      warnedAt: 2,
      onFailed: () => ledger.owe(budgetKey, windows, owedAt, usd),
      onWarning,
    });

  /** Settles a Redis lease there; waits for Redis again when the script fails (it is idempotent). */
  const sendSettle = (settle: PendingSettle, onWarning?: OnWarning) =>
    write('budget_adjust', settleScript, settle.budgetKey, settle.windows, [settle.member, settle.spentUsd], {
      warnedAt: 3,
      onFailed: () => ledger.settleLater(settle),
      onWarning,
    });

  const sender: LedgerSender = {
    spend: (budgetKey, windows, at, usd) => sendSpend(budgetKey, windows, at, usd, at),
    settle: (settle) => sendSettle(settle),
  };

  /**
   * Books a move here, giving its warnings when this replica's figure decides (Redis not usable).
   * Answers whether Redis is usable: then what waited for it has been pushed, and it is to hear of
   * this move next.
   */
  const bookHere = (moved: Move, now: number, onWarning: OnWarning) => {
    const shared = link.usable();
    warnAll(memory.book(moved, now, !shared), onWarning);
    if (shared) ledger.flush(now, sender);
    return shared;
  };

  return {
    reserve(budgetKey, windows, usd, now, leaseMs = DEFAULT_LEASE_MS): MaybePromise<BudgetReserveResult> {
      registry.start();
      memory.sweep(budgetKey, now);
      const shared = shares.admit(budgetKey, windows, usd, now, leaseMs);
      if (!(shared instanceof Promise)) {
        if (shared !== undefined) return shared;
        if (!link.usable()) return decideHere(budgetKey, windows, usd, now, leaseMs);
        return reserveInRedis(budgetKey, windows, usd, now, leaseMs);
      }
      // A refill under way: once it is done, the share again, else per operation.
      return shared.then(() => {
        const again = shares.admit(budgetKey, windows, usd, now, leaseMs);
        if (again !== undefined && !(again instanceof Promise)) return again;
        if (!link.usable()) return decideHere(budgetKey, windows, usd, now, leaseMs);
        return reserveInRedis(budgetKey, windows, usd, now, leaseMs);
      });
    },

    settle(budgetKey, windows, at, reservedUsd, spentUsd, now, onWarning, leaseId) {
      const spent = spendOf(spentUsd);
      if (shares.settle(leaseId, spent)) return;
      const lease = memory.release(budgetKey, at, reservedUsd, leaseId, now);
      // Lapsed already (here, and in Redis for a Redis lease): counted at its estimate, once.
      if (lease === undefined) return;
      const shared = bookHere(settlementOf(lease, windows, spent), now, onWarning);
      if (lease.member === undefined) {
        shares.outageSettle(budgetKey, lease.usd, spent);
        // Reserved here only: Redis learns the spend.
        if (!shared) ledger.owe(budgetKey, windows, lease.at, spent);
        else if (spent > 0) sendSpend(budgetKey, windows, lease.at, spent, lease.at, onWarning);
        return;
      }
      const settlement = { budgetKey, windows, member: lease.member, spentUsd: spent };
      if (shared) sendSettle(settlement, onWarning);
      else ledger.settleLater(settlement);
    },

    add(budgetKey, windows, usd, now, onWarning) {
      if (!isSpend(usd, now)) return;
      memory.sweep(budgetKey, now);
      const shared = bookHere({ budgetKey, windows, at: now, reservedUsd: 0, spentUsd: usd }, now, onWarning);
      if (!shared) {
        ledger.owe(budgetKey, windows, now, usd);
        return;
      }
      // Spend without a reservation goes in Redis' current bucket (at 0).
      sendSpend(budgetKey, windows, 0, usd, now, onWarning);
    },

    read(budgetKey, windows, now): MaybePromise<BudgetRead> {
      if (!link.usable()) return memory.figures(budgetKey, windows, now);
      memory.sweep(budgetKey, now);
      // Holding a share: its last script's figures (at most VIEW_MS old), no round trip.
      const view = shares.view(budgetKey, windows, now);
      if (view !== undefined) return view;
      const keys = keysOf(budgetKey, windows);
      const args = windowArgs(windows);
      return link
        .run('budget_window', () => readScript(keys.length, ...keys, ...args), timeoutMs)
        .then((answer): BudgetRead => {
          const mine = memory.read(budgetKey, windows, now);
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

    sharesHeldUsd: () => shares.heldUsd(),

    replicas: () => shares.replicas(),

    close: async () => {
      await Promise.all([shares.close(), registry.close()]);
    },
  };
}
