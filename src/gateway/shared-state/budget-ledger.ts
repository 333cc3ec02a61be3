/**
 * The outage ledger of the Redis budget store: what this replica owes Redis while Redis is away, and
 * its flush once Redis is back, so that spend made during an outage counts for every replica after
 * it, exactly once.
 *
 * Two kinds of debt. Spend (`owe`): the actual cost of an operation reserved here only (memory,
 * during an outage, or when its reserve script failed), or the estimate of such a reservation whose
 * local lease lapsed; kept per budget key in one amount per bucket of the key's finest window, so the
 * ledger is bounded and each amount lands in the right bucket of every window. What a replica
 * reserved locally is never pushed to Redis as a reservation: a replica that died after pushing it
 * would leave it there, leaseless. Settlements (`settleLater`): a Redis lease settled while Redis was
 * away, sent again once it is back (the settle script is idempotent: a lease that lapsed meanwhile
 * books nothing twice); at most MAX_PENDING_SETTLES, past which their leases lapse in Redis.
 */
import { LRUCache } from 'lru-cache';
import type { BudgetWindowSpec } from './types.js';

/** Owed amounts pushed to Redis per store call once it is back (a burst would trip the timeout). */
export const FLUSH_PER_CALL = 64;
/** Redis settlements waiting for Redis to be back, at most (past it, their leases lapse). */
const MAX_PENDING_SETTLES = 10_000;

/** A settlement of a Redis lease that waits for Redis. */
export interface PendingSettle {
  budgetKey: string;
  windows: readonly BudgetWindowSpec[];
  member: string;
  spentUsd: number;
}

/** Spend this replica booked that Redis has not counted yet, per budget key, by bucket time. */
interface Owed {
  windows: readonly BudgetWindowSpec[];
  spend: Map<number, number>;
}

/** How the ledger sends what it flushes (the Redis store's writes; each owes again when it fails). */
export interface LedgerSender {
  /** Spend into the bucket of `at` (this replica's clock) of each window. */
  spend(budgetKey: string, windows: readonly BudgetWindowSpec[], at: number, usd: number): void;
  settle(settle: PendingSettle): void;
}

export interface OutageLedger {
  /** Spend Redis has not counted yet, in the bucket of `at` (this replica's clock). */
  owe(budgetKey: string, windows: readonly BudgetWindowSpec[], at: number, usd: number): void;
  /** A settlement of a Redis lease waits for Redis. */
  settleLater(settle: PendingSettle): void;
  /** Pushes some of what waited (Redis is usable): at most FLUSH_PER_CALL amounts per call. */
  flush(now: number, send: LedgerSender): void;
  /** Whether anything waits. */
  readonly empty: boolean;
}

export function createOutageLedger(maxKeys: number): OutageLedger {
  const owed = new LRUCache<string, Owed>({ max: maxKeys });
  const pending: PendingSettle[] = [];
  return {
    owe(budgetKey, windows, at, usd) {
      if (!(usd > 0)) return;
      let debt = owed.get(budgetKey);
      if (debt === undefined) {
        debt = { windows, spend: new Map() };
        owed.set(budgetKey, debt);
      }
      // One amount per bucket of the finest window: bounded, and in the right bucket of every window.
      const finest = Math.min(...windows.map((spec) => spec.bucketMs));
      const start = at - (at % finest);
      debt.spend.set(start, (debt.spend.get(start) ?? 0) + usd);
    },
    settleLater(settle) {
      if (pending.length < MAX_PENDING_SETTLES) pending.push(settle);
    },
    flush(now, send) {
      if (owed.size === 0 && pending.length === 0) return;
      let sent = 0;
      while (pending.length > 0 && sent < FLUSH_PER_CALL) {
        send.settle(pending.shift() as PendingSettle);
        sent++;
      }
      for (const [budgetKey, debt] of [...owed.entries()]) {
        if (sent >= FLUSH_PER_CALL) return;
        const longest = Math.max(...debt.windows.map((spec) => spec.ms));
        for (const [start, usd] of debt.spend) {
          debt.spend.delete(start);
          if (start > now - longest) send.spend(budgetKey, debt.windows, start, usd);
          if (++sent >= FLUSH_PER_CALL) break;
        }
        if (debt.spend.size === 0) owed.delete(budgetKey);
      }
    },
    get empty() {
      return owed.size === 0 && pending.length === 0;
    },
  };
}
