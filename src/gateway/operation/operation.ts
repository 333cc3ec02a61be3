/**
 * One GraphQL operation, split by owner:
 * - its request facts (API key, request id, cost cap, deadline, batch): read-only, given at creation;
 * - its cancellation (the client went away, the gateway shuts down): `cancel`, and what watches it;
 * - its call ledger (`ledger`, the operation itself: one record per operation, not two): what its
 *   upstream calls did, written only through the ledger's methods, by the upstream layers (observer,
 *   response cache);
 * - its cost admission (`admission`): owned by cost control (cost/cost-control.ts), which alone makes
 *   and settles it, once;
 * - its report (type, name, whether it ran, its span): written by the pipeline's steps.
 *
 * Created once per operation by the request pipeline (request/pipeline.ts), on either lane; carried by
 * the GraphQL context and by every upstream request. Nothing is ever looked up by a value the caller
 * sends (such as its x-request-id): two concurrent operations are two objects, whatever their headers.
 *
 * Why a plain cancellation flag with listeners rather than an AbortController per operation: most
 * operations are never cancelled, and the upstream attempts that need an AbortSignal make their own
 * (an AbortController per attempt, upstream/transport.ts); a listener set costs an object only when something watches.
 */

import type { Span } from '@opentelemetry/api';
import type { GraphQLError } from 'graphql';
import type { UpstreamName } from '../errors.js';
import type { Caller } from '../identity.js';
import type { ModelCall } from './operation-plan.js';

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

/** The cost estimate of an operation's model calls (cost/cost-model.ts), made once. */
export interface CostEstimate {
  /** US dollars, rounded to a millionth of a cent. */
  readonly usd: number;
  /** Per distinct upstream call: [upstream, model, US dollars] (the estimate metric's series). */
  readonly calls: ReadonlyArray<readonly [upstream: UpstreamName, model: string, usd: number]>;
}

/**
 * What cost control admitted for an operation (cost/cost-control.ts): the estimate, and the budget
 * reservation until it settles. Made and settled by cost control only.
 */
export interface CostAdmission {
  /** The estimate (made at admission when a cap or a budget needs it, else on demand). */
  estimate(): CostEstimate;
  /** The model a field (by response key) was admitted with instead of its own (a fallback), if any. */
  modelFor(key: string): string | undefined;
  /** The fields answered by a cheaper model than they asked for (`extensions.cost.fallbacks`). */
  readonly fallbacks: readonly { path: string; requestedModel: string; usedModel: string }[] | undefined;
  /** The fields whose model routing by quality chose (`extensions.cost.routing`). */
  readonly routing?:
    | readonly {
        path: string;
        minAccuracy: number;
        model: string;
        accuracyLowerBound: number | null;
        answers: number;
        explored?: true;
      }[]
    | undefined;
  /** Whether a budget reservation is held: the operation's costs are billed when it settles. */
  readonly reserving: boolean;
}

/**
 * What the operations of one HTTP request carrying an array of operations share: the estimates
 * admitted under its X-Max-Cost-Usd and the upstream calls admitted under MAX_UPSTREAM_CALLS, which
 * count the batch as a whole.
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

/** A logical upstream call in flight (`CallLedger.begin`), with the model call it may be billed for. */
export interface CallInFlight {
  readonly pricing: ModelCall | undefined;
  /** Set when the operation was cancelled while this call was in flight, until it answers. */
  abandoned: boolean;
}

/**
 * What an operation's upstream calls did: its records, sponsors, cost and cache use, and the calls in
 * flight. The upstream layers write it through these methods; the report and cost control read it.
 */
export class CallLedger {
  /** A handful at most (an operation's distinct calls): an array costs less than a Set. */
  #inFlight: CallInFlight[] | undefined = undefined;
  #abandoned: CallInFlight[] | undefined = undefined;
  #calls: UpstreamCallRecord[] | undefined = undefined;
  #sponsors: string[] | undefined = undefined;
  #costUsd = 0;
  #upstreamCalls = 0;
  #cacheHits = 0;
  #cacheMisses = 0;

  /** Logical upstream calls, in completion order; undefined until the first. */
  get calls(): readonly UpstreamCallRecord[] | undefined {
    return this.#calls;
  }
  /** Distinct sponsor messages of the answers the operation used, in arrival order. */
  get sponsors(): readonly string[] | undefined {
    return this.#sponsors;
  }
  /** What the upstreams reported for the operation's own calls (cache hits and shared calls add nothing). */
  get costUsd(): number {
    return this.#costUsd;
  }
  /** HTTP attempts an upstream answered (retries included). */
  get upstreamCalls(): number {
    return this.#upstreamCalls;
  }
  /** Answers served from the response cache. */
  get cacheHits(): number {
    return this.#cacheHits;
  }
  /** Cacheable calls that had to go upstream. */
  get cacheMisses(): number {
    return this.#cacheMisses;
  }
  /** Whether any upstream was called, from the cache or not (extensions.cost is shown then). */
  get touchedUpstream(): boolean {
    return this.#calls !== undefined;
  }

  /** A logical call starts (the observer, outermost layer). */
  begin(pricing: ModelCall | undefined): CallInFlight {
    const call: CallInFlight = { pricing, abandoned: false };
    if (this.#inFlight === undefined) this.#inFlight = [call];
    else this.#inFlight.push(call);
    return call;
  }

  /** The call ended; `answered`: the upstream answered it (so it is billed as reported, not estimated). */
  end(call: CallInFlight, answered: boolean): void {
    const inFlight = this.#inFlight;
    if (inFlight !== undefined) {
      const index = inFlight.indexOf(call);
      if (index !== -1) inFlight.splice(index, 1);
    }
    if (answered) call.abandoned = false;
  }

  /** The operation was cancelled: the calls in flight now are abandoned (the upstream may bill them). */
  abandon(): void {
    if (this.#inFlight === undefined) return;
    for (const call of this.#inFlight) {
      call.abandoned = true;
      this.#abandoned ??= [];
      this.#abandoned.push(call);
    }
  }

  /** The calls abandoned in flight that never answered: what cost control bills at their estimate. */
  get abandoned(): readonly CallInFlight[] {
    return this.#abandoned?.filter((call) => call.abandoned) ?? [];
  }

  /** A logical call ended (answered, shared, cached or failed). */
  record(call: UpstreamCallRecord): void {
    if (this.#calls === undefined) this.#calls = [call];
    else this.#calls.push(call);
  }
  /** An answer the operation used carried a sponsor message. */
  sponsor(message: string): void {
    if (this.#sponsors === undefined) this.#sponsors = [message];
    else if (!this.#sponsors.includes(message)) this.#sponsors.push(message);
  }
  /** An upstream answered one HTTP attempt. */
  answered(): void {
    this.#upstreamCalls++;
  }
  /** An upstream reported what one of the operation's own answers cost. */
  spent(usd: number): void {
    this.#costUsd += usd;
  }
  cacheHit(): void {
    this.#cacheHits++;
  }
  cacheMiss(): void {
    this.#cacheMisses++;
  }
}

export interface OperationInit {
  /** Who the caller is (identity.ts): its name, tier and what goes upstream as its key. */
  caller: Caller;
  requestId: string;
  /** Overall time allowed, in ms (OPERATION_DEADLINE_MS); 0: none. */
  deadlineMs: number;
  /** The operation name from the request, when it gave one. */
  name?: string | null | undefined;
  /** The caller's cost cap (X-Max-Cost-Usd), already validated. */
  maxCostUsd?: number | undefined;
  /** The batch this operation is one of; undefined for an operation that came alone. */
  batch?: OperationBatch | undefined;
  /**
   * The refusal of the caller's credential (identity.ts) or of a malformed request header
   * (X-Max-Cost-Usd), answered at admission.
   */
  headerRefusal?: GraphQLError | undefined;
  /** The client's address (request/facts.ts), for bounds per client without an API key. */
  address?: string | undefined;
  /** Cheaper models rather than BUDGET_EXCEEDED (X-Budget-Fallback: cheaper-model). @default false */
  fallback?: boolean | undefined;
}

/**
 * One operation's record. It is its own call ledger (`ledger` is the operation itself): one object per
 * operation rather than two, its ledger's writers and readers unchanged.
 */
export class Operation extends CallLedger implements Cancellation {
  readonly caller: Caller;
  readonly requestId: string;
  /** `performance.now()` at creation. */
  readonly startedAt = performance.now();
  /** Absolute deadline in `Date.now()` ms; Infinity when none. */
  readonly deadline: number;
  readonly maxCostUsd: number | undefined;
  readonly batch: OperationBatch | undefined;
  readonly headerRefusal: GraphQLError | undefined;
  readonly address: string | undefined;
  readonly fallback: boolean;

  #admission: CostAdmission | undefined = undefined;

  // The report, written by the pipeline's steps.
  name: string | null;
  type = 'query';
  /** True once the document passed parsing and validation and was about to run. */
  executed = false;
  /** True when the limits or the cost checks refused it before any resolver ran. */
  rejected = false;
  span: Span | undefined = undefined;

  #cancelled = false;
  #reason: unknown = undefined;
  /**
   * What the cancellation aborts: upstream attempts (objects, not closures: one per attempt) and the
   * listeners of `onCancel`, wrapped alike; in the order they came.
   */
  #watchers: Abortable[] | undefined = undefined;

  constructor(init: OperationInit) {
    super();
    this.caller = init.caller;
    this.requestId = init.requestId;
    this.deadline = init.deadlineMs > 0 ? Date.now() + init.deadlineMs : Number.POSITIVE_INFINITY;
    this.name = init.name ?? null;
    this.maxCostUsd = init.maxCostUsd;
    this.batch = init.batch;
    this.headerRefusal = init.headerRefusal;
    this.address = init.address;
    this.fallback = init.fallback ?? false;
  }

  /** What its upstream calls did: the operation's own ledger. */
  get ledger(): CallLedger {
    return this;
  }

  /** Cost control's admission, once admitted (cost/cost-control.ts). */
  get admission(): CostAdmission | undefined {
    return this.#admission;
  }

  /** Cost control's alone: the admission it made (each step down of a fallback makes a new one). */
  admit(admission: CostAdmission): void {
    this.#admission = admission;
  }

  get cancelled(): boolean {
    return this.#cancelled;
  }

  get reason(): unknown {
    return this.#reason;
  }

  cancel(reason: unknown): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    this.#reason = reason;
    this.abandon();
    const watchers = this.#watchers;
    this.#watchers = undefined;
    if (watchers !== undefined) for (const watcher of watchers) watcher.abort(reason);
  }

  /** Something to abort when the operation is cancelled (aborted at once if it is already). */
  attach(attempt: Abortable): void {
    if (this.cancelled) {
      attempt.abort(this.reason);
      return;
    }
    // A few at a time (an attempt's signal, a retry's and a breaker's listener): an array costs less
    // than a Set, and is searched as fast.
    const watchers = this.#watchers;
    if (watchers === undefined) this.#watchers = [attempt];
    else if (!watchers.includes(attempt)) watchers.push(attempt);
  }

  detach(attempt: Abortable): void {
    const watchers = this.#watchers;
    if (watchers === undefined) return;
    const index = watchers.indexOf(attempt);
    if (index !== -1) watchers.splice(index, 1);
  }

  onCancel(listener: (reason: unknown) => void): () => void {
    const watcher: Abortable = { abort: listener };
    this.attach(watcher);
    return () => this.detach(watcher);
  }
}
