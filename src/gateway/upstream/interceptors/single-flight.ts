/**
 * Single flight: identical deterministic calls in flight at the same moment share one upstream call,
 * within this process and (best effort, when a coordinator is given) across replicas through Redis.
 *
 * Only calls with a `shareKey` take part (the clients set one for deterministic calls only: sharing a
 * sampled answer between callers would deprive each of its own sample). The key includes the caller's
 * name (identity.ts: the sha256 of its API key, or `anonymous`), so an answer never crosses callers
 * (tiers decide 418s, clamps and sponsor messages).
 *
 * Across replicas a claim costs Redis a `SET NX` and the leader a settle script, so only a call that may
 * coincide with another replica's claims: one whose key this process has itself called within the
 * last `recentMs` (a key in flight here is shared in-process before that point). A key seen here for
 * the first time (every call of a distinct value) goes straight to the upstream and costs Redis
 * nothing; so a burst of identical new calls reaches the upstream at most once per replica, and from
 * a replica's second call of the key on they are shared across replicas (docs/operations.md).
 *
 * The shared call is the first caller's own call (its key, request id, cancellation and deadline):
 * alone, a call behaves exactly as without this layer. If that caller goes away and the call fails
 * for it, each waiter still wanting the answer makes its own call. Waiters get the answer marked
 * `source: 'shared'`: it costs them nothing.
 */
import { LRUCache } from 'lru-cache';
import { ANONYMOUS } from '../../identity.js';
import {
  type AnswerHandler,
  type Dispatch,
  dispatchPromise,
  type Interceptor,
  type UpstreamAnswer,
  type UpstreamRequest,
} from '../dispatch.js';

/** Coordination of one call across replicas (src/gateway/shared-state). */
export interface FlightCoordinator {
  claim(key: string, ttlMs: number): Promise<'lead' | 'follow'>;
  settle(key: string, value: unknown | undefined, ttlMs: number): void;
  await(key: string, waitMs: number, signal?: { readonly cancelled: boolean }): Promise<unknown | undefined>;
}

export interface SingleFlightOptions {
  /** Cross-replica coordination; undefined: this process only. */
  coordinator?: FlightCoordinator | undefined;
  /** How long a cross-replica lock (and a follower's wait) lasts, in ms. @default 5000 */
  lockTtlMs?: number;
  /**
   * Which calls claim across replicas: `recent`, a key this process called within `recentMs` (a new
   * key costs Redis nothing); `always`, every call with a share key.
   * @default 'recent'
   */
  claim?: 'recent' | 'always';
  /** How long a called key counts as recent, in ms. @default 10000 */
  recentMs?: number;
  /** Most keys remembered as recent (the least recently called are forgotten first). @default 10000 */
  recentMaxKeys?: number;
  /** Clock of `recentMs`, in ms. @default performance.now */
  now?: () => number;
  /** Told of each call saved by sharing (metrics). */
  onShared?: ((request: UpstreamRequest, across: 'process' | 'replicas') => void) | undefined;
}

export function sharingKey(request: UpstreamRequest): string | undefined {
  const shareKey = request.shareKey;
  if (shareKey === undefined) return undefined;
  // Per caller (identity.ts): a cached or shared answer never crosses keys.
  return `${request.upstream}\n${request.operation?.caller.id ?? ANONYMOUS}\n${shareKey}`;
}

/** Characters of keys remembered as recent (2 bytes each at most): 8 MiB of keys. */
const RECENT_MAX_CHARS = 4 * 1024 * 1024;

const shared = <T>(answer: UpstreamAnswer<T>): UpstreamAnswer<T> => ({ ...answer, source: 'shared' });

/** A caller waiting for another caller's call. */
interface Waiter {
  request: UpstreamRequest;
  handler: AnswerHandler;
}

export function singleFlight(options: SingleFlightOptions = {}): Interceptor {
  const { coordinator, onShared } = options;
  const lockTtlMs = options.lockTtlMs ?? 5000;
  const inFlight = new Map<string, Flight<unknown>>();
  const recentMs = options.recentMs ?? 10_000;
  const now = options.now ?? (() => performance.now());
  /** Key → when this process last called it. Bounded in keys and in characters (keys hold values). */
  const recent =
    coordinator === undefined || options.claim === 'always'
      ? undefined
      : new LRUCache<string, number>({
          max: options.recentMaxKeys ?? 10_000,
          maxSize: RECENT_MAX_CHARS,
          sizeCalculation: (_, key) => Math.max(1, key.length),
        });

  /** Whether a call of `key` may coincide with another replica's: recorded as called either way. */
  const worthClaiming = (key: string): boolean => {
    if (recent === undefined) return true;
    const time = now();
    const seen = recent.get(key);
    // A key longer than the bound is never remembered (lru-cache refuses it): it is never claimed.
    recent.set(key, time);
    return seen !== undefined && time - seen <= recentMs;
  };

  /**
   * One call in flight, made for its first caller (whose handler hears first, as its own call) and
   * shared with the callers that came while it ran.
   */
  class Flight<T> implements AnswerHandler<T> {
    waiters: Waiter[] | undefined = undefined;

    constructor(
      private readonly next: Dispatch,
      readonly key: string,
      readonly request: UpstreamRequest<T>,
      private readonly handler: AnswerHandler<T>,
    ) {}

    onAnswer(answer: UpstreamAnswer<T>): void {
      inFlight.delete(this.key);
      this.handler.onAnswer(answer);
      const waiters = this.waiters;
      if (waiters === undefined) return;
      for (const waiter of waiters) {
        onShared?.(waiter.request, 'process');
        waiter.handler.onAnswer(shared(answer));
      }
    }

    onError(error: unknown): void {
      inFlight.delete(this.key);
      this.handler.onError(error);
      const waiters = this.waiters;
      if (waiters === undefined) return;
      for (const waiter of waiters) {
        // Given up by the caller that made it (client gone): not this caller's failure.
        if (this.request.operation?.cancelled && !waiter.request.operation?.cancelled)
          // After the failed call's own callback has returned, as an awaited retry was.
          queueMicrotask(() => sharing(this.next, waiter.request, waiter.handler));
        else waiter.handler.onError(error);
      }
    }
  }

  /** Across replicas (Redis): claim the call, or wait for the replica that has it. */
  const leadAcrossReplicas = async <T>(
    next: Dispatch,
    key: string,
    request: UpstreamRequest<T>,
  ): Promise<UpstreamAnswer<T>> => {
    const claimer = coordinator as FlightCoordinator;
    if ((await claimer.claim(key, lockTtlMs)) === 'follow') {
      const published = (await claimer.await(key, lockTtlMs, request.operation)) as
        | UpstreamAnswer<T>
        | undefined;
      if (published !== undefined) {
        onShared?.(request, 'replicas');
        return shared(published);
      }
      // The other replica's call failed, expired or Redis went away: call ourselves.
      return dispatchPromise(next, request);
    }
    try {
      const answer = await dispatchPromise(next, request);
      claimer.settle(key, { ...answer, deprecation: undefined }, lockTtlMs);
      return answer;
    } catch (error) {
      claimer.settle(key, undefined, lockTtlMs);
      throw error;
    }
  };

  function sharing<T>(next: Dispatch, request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
    const key = sharingKey(request);
    if (key === undefined) {
      next(request, handler);
      return;
    }
    const running = inFlight.get(key);
    if (running !== undefined) {
      const waiter: Waiter = { request: request as UpstreamRequest, handler: handler as AnswerHandler };
      if (running.waiters === undefined) running.waiters = [waiter];
      else running.waiters.push(waiter);
      return;
    }
    // In the map before the call starts: the call may answer before `next` returns.
    const flight = new Flight(next, key, request, handler);
    inFlight.set(key, flight as Flight<unknown>);
    if (coordinator === undefined || !worthClaiming(key)) {
      next(request, flight);
      return;
    }
    leadAcrossReplicas(next, key, request).then(
      (answer) => flight.onAnswer(answer),
      (error: unknown) => flight.onError(error),
    );
  }

  return (next: Dispatch) =>
    function singleFlighted<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      sharing(next, request, handler);
    };
}
