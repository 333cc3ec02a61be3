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
 * While Redis is unavailable (or a reserve fails) this replica decides on its share and its part of
 * what was left at its last contact (budget-shares.ts), with leases of its own (the same rule, on its
 * clock). What it reserves then is never pushed to Redis as a
 * reservation (a replica that died after pushing it would leave it there): what it owes Redis is only
 * spend, booked when such an operation settles (its actual cost) or its local lease lapses (its
 * estimate), and pushed at the first write once Redis answers again, so spend made during an outage
 * still counts for every replica after it. A Redis lease settled while Redis is away is settled there
 * once it is back (or has lapsed meanwhile: then nothing is booked twice).
 *
 * With Redis, a replica whose key has a budget large against its operations' estimates takes a share
 * of it (budget-shares.ts) and admits operations against that in memory: Redis is touched per refill
 * or write-back, not per operation.
 *
 * Files: budget-windows.ts (buckets, constants), budget-shares.ts (shares), budget-memory.ts (this process' buckets and leases:
 * the whole store in memory mode), budget-redis.ts (the store with Redis), budget-ledger.ts (what is
 * owed to Redis during an outage, and its flush), budget-scripts.ts and the budget-*.lua files beside
 * it (the scripts, read at start).
 */
import { createMemoryBudgetStore } from './budget-memory.js';
import { createRedisBudgetStore } from './budget-redis.js';
import type { RedisLink } from './redis-link.js';
import type { BudgetStore } from './types.js';

export {
  DEFAULT_LEASE_MARGIN_MS,
  DEFAULT_LEASE_MS,
  FIT_EPSILON_USD,
  LONGEST_DEADLINE_MS,
} from './budget-windows.js';

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
  /** Hears of each budget share top-up Redis granted (budget-shares.ts). */
  onShareRefill?: () => void;
  /**
   * How often a replica beats into the replica registry (replica-registry.ts), in ms; 0: never.
   * @default REPLICA_HEARTBEAT_MS (2 s)
   */
  replicaHeartbeatMs?: number | undefined;
  /**
   * Beat from the start (budgets in use), else from the first reserve.
   * @default false
   */
  beatAtStart?: boolean | undefined;
  /**
   * The fewest replicas an outage's part of a remainder is divided by until the replica registry is
   * read (EXPECTED_REPLICAS).
   * @default 1
   */
  expectedReplicas?: number | undefined;
}

/** The budgets in Redis when there is a link (REDIS_URL), else in this process. */
export function createBudgetStore(
  link: RedisLink | undefined,
  maxKeys: number,
  options: BudgetStoreOptions = {},
): BudgetStore & { sharesHeldUsd?: () => number; replicas?: () => number } {
  if (link === undefined) return createMemoryBudgetStore(maxKeys, options.onLapse);
  return createRedisBudgetStore(link, maxKeys, options);
}
