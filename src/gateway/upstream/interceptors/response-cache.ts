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
import type { AnswerHandler, Dispatch, Interceptor, UpstreamAnswer, UpstreamRequest } from '../dispatch.js';
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

/** A call the cache missed: passes the answer up and keeps it when the request says it may. */
class CacheMiss<T> implements AnswerHandler<T> {
  constructor(
    private readonly key: string,
    private readonly request: UpstreamRequest<T>,
    private readonly handler: AnswerHandler<T>,
    private readonly store: AnswerStore,
    private readonly ttlMs: number,
  ) {}

  onAnswer(answer: UpstreamAnswer<T>): void {
    // The decoded answer takes about as much heap as its body text (UTF-16: 2 bytes a character);
    // without a size the memory store counts 1 KiB, and a million-digit answer would slip past
    // its byte bound.
    try {
      if (this.ttlMs > 0 && this.request.cacheable?.(answer.value))
        this.store.set(
          this.key,
          { ...answer, deprecation: undefined },
          this.ttlMs,
          answer.bodyChars === undefined ? undefined : answer.bodyChars * 2,
        );
    } catch (error) {
      // The store's or the request's throw fails the call, as a throw in an async layer did.
      this.handler.onError(error);
      return;
    }
    this.handler.onAnswer(answer);
  }

  onError(error: unknown): void {
    this.handler.onError(error);
  }
}

export function responseCache(options: ResponseCacheOptions): Interceptor {
  const { store, onLookup } = options;
  const ttlMs = options.ttlMs ?? 60_000;
  return (next: Dispatch) => {
    const miss = <T>(key: string, request: UpstreamRequest<T>, handler: AnswerHandler<T>): void => {
      onLookup?.(request, 'miss');
      request.operation?.ledger.cacheMiss();
      next(request, new CacheMiss(key, request, handler, store, ttlMs));
    };
    const hit = <T>(
      request: UpstreamRequest<T>,
      stored: UpstreamAnswer<T>,
      handler: AnswerHandler<T>,
    ): void => {
      onLookup?.(request, 'hit');
      request.operation?.ledger.cacheHit();
      handler.onAnswer({ ...stored, source: 'cache' });
    };
    return function caching<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      if (request.cacheable === undefined) {
        next(request, handler);
        return;
      }
      const key = sharingKey(request);
      if (key === undefined) {
        next(request, handler);
        return;
      }
      const found = store.get(key);
      if (isPromise(found)) {
        // The Redis store's read: the one promise of this layer.
        found.then(
          (stored) =>
            stored === undefined
              ? miss(key, request, handler)
              : hit(request, stored as UpstreamAnswer<T>, handler),
          (error: unknown) => handler.onError(error),
        );
        return;
      }
      if (found === undefined) miss(key, request, handler);
      else hit(request, found as UpstreamAnswer<T>, handler);
    };
  };
}
