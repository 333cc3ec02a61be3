/**
 * Single flight: identical deterministic calls in flight at the same moment share one upstream call,
 * within this process and (best effort, when a coordinator is given) across replicas through Redis.
 *
 * Only calls with a `shareKey` take part (the clients set one for deterministic calls only: sharing a
 * sampled answer between callers would deprive each of its own sample). The key includes the caller's
 * name (identity.ts: the sha256 of its API key, or `anonymous`), so an answer never crosses callers
 * (tiers decide 418s, clamps and sponsor messages).
 *
 * The shared call is the first caller's own call (its key, request id, cancellation and deadline):
 * alone, a call behaves exactly as without this layer. If that caller goes away and the call fails
 * for it, each waiter still wanting the answer makes its own call. Waiters get the answer marked
 * `source: 'shared'`: it costs them nothing.
 */
import { callerIdOf } from '../../identity.js';
import type { Dispatch, Interceptor, UpstreamAnswer, UpstreamRequest } from '../dispatch.js';

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
  /** Told of each call saved by sharing (metrics). */
  onShared?: ((request: UpstreamRequest, across: 'process' | 'replicas') => void) | undefined;
}

export function sharingKey(request: UpstreamRequest): string | undefined {
  const shareKey = request.shareKey;
  if (shareKey === undefined) return undefined;
  // Per caller (identity.ts): a cached or shared answer never crosses keys.
  return `${request.upstream}\n${callerIdOf(request.operation?.apiKey)}\n${shareKey}`;
}

interface InFlight {
  promise: Promise<UpstreamAnswer<unknown>>;
  request: UpstreamRequest;
}

const shared = <T>(answer: UpstreamAnswer<T>): UpstreamAnswer<T> => ({ ...answer, source: 'shared' });

export function singleFlight(options: SingleFlightOptions = {}): Interceptor {
  const { coordinator, onShared } = options;
  const lockTtlMs = options.lockTtlMs ?? 5000;
  const inFlight = new Map<string, InFlight>();

  return (next: Dispatch) => {
    /** This process leads: the call itself, published to other replicas when coordinated. */
    const lead = async <T>(key: string, request: UpstreamRequest<T>): Promise<UpstreamAnswer<T>> => {
      if (coordinator === undefined) return next(request);
      if ((await coordinator.claim(key, lockTtlMs)) === 'follow') {
        const published = (await coordinator.await(key, lockTtlMs, request.operation)) as
          | UpstreamAnswer<T>
          | undefined;
        if (published !== undefined) {
          onShared?.(request, 'replicas');
          return shared(published);
        }
        // The other replica's call failed, expired or Redis went away: call ourselves.
        return next(request);
      }
      try {
        const answer = await next(request);
        coordinator.settle(key, { ...answer, deprecation: undefined }, lockTtlMs);
        return answer;
      } catch (error) {
        coordinator.settle(key, undefined, lockTtlMs);
        throw error;
      }
    };

    return function sharing<T>(request: UpstreamRequest<T>): Promise<UpstreamAnswer<T>> {
      const key = sharingKey(request);
      if (key === undefined) return next(request);
      const running = inFlight.get(key);
      if (running !== undefined) {
        return running.promise.then(
          (answer) => {
            onShared?.(request, 'process');
            return shared(answer as UpstreamAnswer<T>);
          },
          (error: unknown) => {
            // Given up by the caller that made it (client gone): not this caller's failure.
            if (running.request.operation?.cancelled && !request.operation?.cancelled)
              return sharing(request);
            throw error;
          },
        );
      }
      const promise = lead(key, request).finally(() => inFlight.delete(key));
      inFlight.set(key, { promise: promise as Promise<UpstreamAnswer<unknown>>, request });
      return promise;
    };
  };
}
