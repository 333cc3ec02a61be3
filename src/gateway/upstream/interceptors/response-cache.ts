/**
 * The response cache (opt-in, RESPONSE_CACHE=true): deterministic answers reused within a TTL, in
 * memory or, with REDIS_URL, shared by every replica (src/gateway/shared-state).
 *
 * Only calls whose request says `cacheable` take part (the clients decide: temperature 0 of the
 * models the reference services document as deterministic), and only answers it accepts are kept
 * (a null check's plain boolean, not a "maybe"). Keys carry the API key (or `free`), so an answer, a
 * clamp or a sponsor message never crosses callers. Errors are never kept. An answer served from here
 * is marked `source: 'cache'`: it reports no new cost.
 */
import { isPromise } from '../../../shared/is-promise.js';
import type { Dispatch, Interceptor, UpstreamAnswer, UpstreamRequest } from '../dispatch.js';
import { sharingKey } from './single-flight.js';

/** Where answers are kept (src/gateway/shared-state): synchronous in memory, a promise via Redis. */
export interface AnswerStore {
  get(key: string): unknown | undefined | Promise<unknown | undefined>;
  /** `bytes`: the caller's estimate of the value's size, for the store's byte bound. */
  set(key: string, value: unknown, ttlMs: number, bytes?: number): void;
}

export interface ResponseCacheOptions {
  store: AnswerStore;
  /** How long an answer is reused, in ms. 0 keeps nothing. @default 60000 */
  ttlMs?: number;
  /** Told of each lookup (metrics). */
  onLookup?: ((request: UpstreamRequest, result: 'hit' | 'miss') => void) | undefined;
}

export function responseCache(options: ResponseCacheOptions): Interceptor {
  const { store, onLookup } = options;
  const ttlMs = options.ttlMs ?? 60_000;
  return (next: Dispatch) => {
    const miss = <T>(key: string, request: UpstreamRequest<T>): Promise<UpstreamAnswer<T>> => {
      onLookup?.(request, 'miss');
      request.operation?.ledger.cacheMiss();
      return next(request).then((answer) => {
        // The decoded answer takes about as much heap as its body text (UTF-16: 2 bytes a character);
        // without a size the memory store counts 1 KiB, and a million-digit answer would slip past
        // its byte bound.
        if (ttlMs > 0 && request.cacheable?.(answer.value))
          store.set(
            key,
            { ...answer, deprecation: undefined },
            ttlMs,
            answer.bodyChars === undefined ? undefined : answer.bodyChars * 2,
          );
        return answer;
      });
    };
    const hit = <T>(request: UpstreamRequest<T>, stored: UpstreamAnswer<T>): UpstreamAnswer<T> => {
      onLookup?.(request, 'hit');
      request.operation?.ledger.cacheHit();
      return { ...stored, source: 'cache' };
    };
    return function caching<T>(request: UpstreamRequest<T>): Promise<UpstreamAnswer<T>> {
      if (request.cacheable === undefined) return next(request);
      const key = sharingKey(request);
      if (key === undefined) return next(request);
      const found = store.get(key);
      if (isPromise(found)) {
        return found.then((stored) =>
          stored === undefined ? miss(key, request) : hit(request, stored as UpstreamAnswer<T>),
        );
      }
      return found === undefined
        ? miss(key, request)
        : Promise.resolve(hit(request, found as UpstreamAnswer<T>));
    };
  };
}
