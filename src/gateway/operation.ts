/**
 * One GraphQL operation's state, in one object: who calls (API key, request id), its cancellation
 * and absolute deadline, and its report (upstream calls, sponsor messages, cost, cache use, outcome).
 *
 * Created once per operation, by the fast path or by the Yoga plugin, carried by the GraphQL context
 * and by every upstream request; the cache, the clients and the observability write to it directly.
 * Nothing is ever looked up by a value the caller sends (such as its x-request-id): two concurrent
 * operations are two objects, whatever their headers say.
 *
 * Why a plain cancellation flag with listeners instead of an AbortController: on Node 20 an
 * AbortSignal with listeners costs tens of µs per request in allocation and GC; this costs an object.
 */
import type { UpstreamName } from './errors.js';
import type { Span } from './observability/tracing.js';
import type { OperationPlan } from './operation-plan.js';

/** What one operation's upstream calls looked like, for its log line. */
export interface UpstreamCallRecord {
  upstream: string;
  endpoint: string;
  /** HTTP status of the answer; null when there was none (timeout, refused, open circuit). */
  status: number | null;
  durationMs: number;
  /** Where the answer came from: the upstream itself, the response cache, or another call in flight. */
  source: 'upstream' | 'cache' | 'shared';
  /** The error code when the call failed. */
  code?: string;
}

/** What an operation's cancellation aborts: an upstream attempt's signal, or an `onCancel` listener. */
export interface Abortable {
  abort(reason: unknown): void;
}

/**
 * What an operation reserved of its key's hourly budget (cost/cost-control.ts), returned or billed
 * when the operation settles.
 */
export interface Reservation {
  /** Called once, with what the operation's own calls cost until then. */
  settle(actualUsd: number): void;
}

/** The cost estimate of an operation's model calls (cost/cost-model.ts), made once. */
export interface CostEstimate {
  /** US dollars, rounded to a millionth of a cent. */
  readonly usd: number;
  /** Per distinct upstream call: [upstream, model, US dollars] (the estimate metric's series). */
  readonly calls: ReadonlyArray<readonly [upstream: UpstreamName, model: string, usd: number]>;
}

/**
 * What the operations of one batch (one HTTP request carrying an array of operations) share: the
 * estimates admitted under its X-Max-Cost-Usd and the upstream calls admitted under
 * MAX_UPSTREAM_CALLS, which count the batch as a whole.
 */
export interface OperationBatch {
  estimatedUsd: number;
  upstreamCalls: number;
}

/** A cancellation flag others can watch. */
export interface Cancellation {
  readonly cancelled: boolean;
  readonly reason: unknown;
  /** Calls `listener` once on cancellation (at once if already cancelled). Returns the unsubscribe. */
  onCancel(listener: (reason: unknown) => void): () => void;
}

export interface OperationInit {
  apiKey: string | undefined;
  requestId: string;
  /** Overall time allowed, in ms (OPERATION_DEADLINE_MS); 0: none. */
  deadlineMs: number;
  /** The operation name from the request, when it gave one. */
  name?: string | null | undefined;
  /** The caller's cost cap (X-Max-Cost-Usd), already validated. */
  maxCostUsd?: number | undefined;
}

export class Operation implements Cancellation {
  readonly apiKey: string | undefined;
  readonly requestId: string;
  /** `performance.now()` at creation. */
  readonly startedAt = performance.now();
  /** Absolute deadline in `Date.now()` ms; Infinity when none. */
  readonly deadline: number;
  readonly maxCostUsd: number | undefined;

  name: string | null;
  type = 'query';
  /** True once the document passed parsing and validation and was about to run. */
  executed = false;
  /** True when the limits or the cost checks refused it before any resolver ran. */
  rejected = false;
  span: Span | undefined = undefined;

  /** Logical upstream calls, in completion order. */
  calls: UpstreamCallRecord[] | undefined = undefined;
  /** Distinct sponsor messages of the answers this operation used, in arrival order. */
  sponsors: string[] | undefined = undefined;
  /** What the upstreams reported for this operation's own calls (cache hits and shared calls add nothing). */
  costUsd = 0;
  /** HTTP attempts an upstream answered (retries included). */
  upstreamCalls = 0;
  /**
   * The estimate, once made: at admission when a cap or a budget needs it, else when the operation
   * reports (cost/cost-control.ts `finish`).
   */
  estimate: CostEstimate | undefined = undefined;
  /** The batch this operation is one of; undefined for an operation that came alone. */
  batch: OperationBatch | undefined = undefined;
  /** Whether the estimate was counted in the metrics (once, where the operation ends). */
  estimateCounted = false;
  /** What the estimate is made from (set at admission): the plan and the variables. */
  costPlan: OperationPlan | undefined = undefined;
  costVariables: Record<string, unknown> | undefined = undefined;
  /** Answers served from the response cache. */
  cacheHits = 0;
  /** Cacheable calls that had to go upstream. */
  cacheMisses = 0;

  cancelled = false;
  reason: unknown = undefined;
  /**
   * What the cancellation aborts: upstream attempts (objects, not closures: one per attempt) and the
   * listeners of `onCancel`, wrapped alike.
   */
  #watchers: Set<Abortable> | undefined = undefined;
  /** The budget reservation until it settles. */
  #reservation: Reservation | undefined = undefined;

  constructor(init: OperationInit) {
    this.apiKey = init.apiKey;
    this.requestId = init.requestId;
    this.deadline = init.deadlineMs > 0 ? Date.now() + init.deadlineMs : Number.POSITIVE_INFINITY;
    this.name = init.name ?? null;
    this.maxCostUsd = init.maxCostUsd;
  }

  /** Whether any upstream was called, from the cache or not (extensions.cost is shown then). */
  get touchedUpstream(): boolean {
    return this.calls !== undefined;
  }

  cancel(reason: unknown): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.reason = reason;
    const watchers = this.#watchers;
    this.#watchers = undefined;
    if (watchers !== undefined) for (const watcher of watchers) watcher.abort(reason);
    // The client went away: what it reserved and did not spend goes back now, not when the
    // aborted calls have unwound (a cost reported after this is billed as it comes).
    this.settle();
  }

  /** Holds a budget reservation until `settle` (settled at once when already cancelled). */
  reserve(reservation: Reservation): void {
    this.#reservation = reservation;
    if (this.cancelled) this.settle();
  }

  /** Whether a reservation is held: costs are then billed when it settles, not as they come. */
  get reserving(): boolean {
    return this.#reservation !== undefined;
  }

  /**
   * Settles the reservation, if any, to what the operation's calls cost so far. Idempotent: called
   * where an operation ends (its report), on cancellation, and as a backstop when no result was made.
   */
  settle(): void {
    const reservation = this.#reservation;
    if (reservation === undefined) return;
    this.#reservation = undefined;
    reservation.settle(this.costUsd);
  }

  /** Something to abort when the operation is cancelled (aborted at once if it is already). */
  attach(attempt: Abortable): void {
    if (this.cancelled) {
      attempt.abort(this.reason);
      return;
    }
    this.#watchers ??= new Set();
    this.#watchers.add(attempt);
  }

  detach(attempt: Abortable): void {
    this.#watchers?.delete(attempt);
  }

  onCancel(listener: (reason: unknown) => void): () => void {
    const watcher: Abortable = { abort: listener };
    this.attach(watcher);
    return () => this.detach(watcher);
  }

  addCall(call: UpstreamCallRecord): void {
    if (this.calls === undefined) this.calls = [call];
    else this.calls.push(call);
  }

  addSponsor(message: string): void {
    if (this.sponsors === undefined) this.sponsors = [message];
    else if (!this.sponsors.includes(message)) this.sponsors.push(message);
  }
}
