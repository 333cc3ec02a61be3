/**
 * The deterministic-answer cache: a decorator around the UpstreamClients that answers repeated
 * deterministic calls from memory and lets identical concurrent calls share one upstream call.
 *
 * What is deterministic (the reference services' contract, §4): at temperature 0, `null-x-4o` and
 * `null-x-opus` answer by strict equality and `pi-x-4o` returns the true digits. An omitted model is
 * the service default (`null-x-4o`, `pi-x-4o`) and an omitted temperature is 0, so omitted arguments
 * qualify too. So:
 *   - POST /check is cached when a value was sent (an omitted value is the UNDEFINED_VALUE error),
 *     the model is omitted, null-x-4o or null-x-opus, the temperature omitted or 0, and the answer is a
 *     plain boolean;
 *   - GET /pi is cached when the model is omitted or pi-x-4o and the temperature omitted or 0;
 *   - nothing else (inference costs money per call, health must be live).
 *
 * Keys: the endpoint, the caller's API key (or `free` for none: the free tier) and the request's
 * arguments exactly as sent, so an answer never crosses API keys (tiers decide 418s, clamps and
 * sponsor messages). Errors are never cached; a failed shared call fails its waiters, each retrying
 * afresh next time. Entries live `ttlMs` (0: nothing is kept, only concurrent calls are shared) and
 * the least recently used go first past `maxEntries` or `maxBytes` (sizes are estimated).
 *
 * A cached answer is the whole upstream answer, sponsor message included: it stays in the response,
 * and the cache plugin adds it to `extensions.sponsoredBy` (the observability plugin only sees real
 * upstream answers). Its metadata (inferenceTimeMs, gpuCostUsd) is that of the call that filled it.
 *
 * A shared (coalesced) call is the first caller's own call (its key, request id, signal and deadline):
 * alone, a call behaves exactly as without the cache. When that caller gives up (client gone, deadline)
 * and the call fails for it, each waiter still wanting the answer makes its own call.
 */
import { LRUCache } from 'lru-cache';
import { Counter, Gauge, type Registry } from 'prom-client';
import type {
  CallOptions,
  NullCheckClient,
  NullCheckRequest,
  NullCheckResponse,
  PiDigitsClient,
  PiRequest,
  PiResponse,
  UpstreamClients,
  UpstreamName,
} from '../upstream/types.js';

/** How one cacheable call was served. */
export type CacheOutcome = 'hit' | 'coalesced' | 'miss';

export interface ResponseCacheOptions {
  /**
   * How long an answer is reused, in ms (RESPONSE_CACHE_TTL_MS). 0 keeps nothing: identical
   * concurrent calls are still shared.
   * @default 60000
   */
  ttlMs?: number;
  /**
   * Most answers kept (RESPONSE_CACHE_MAX_ENTRIES); least recently used first out.
   * @default 10000
   */
  maxEntries?: number;
  /**
   * Most bytes kept, estimated from the answers' sizes (a million digits of pi is ~1 MB).
   * @default 67108864 (64 MiB)
   */
  maxBytes?: number;
  /** Registers `gateway_response_cache_*` metrics on this registry when given. */
  registry?: Registry;
  /** Told of every upstream call saved (the observability dedup counter). */
  onSaved?: (upstream: UpstreamName, source: 'cache' | 'inflight') => void;
}

/** What one operation's calls found in the cache (the plugin's `extensions.cache`). */
export interface OperationCacheStats {
  hits: number;
  misses: number;
  /** Sponsor messages of the answers served without an upstream call of this operation. */
  sponsors: string[] | undefined;
}

export interface ResponseCache {
  /** The same clients, with `nullCheck.check` and `piDigits.pi` answered through the cache. */
  decorate<T extends UpstreamClients>(clients: T): T;
  /** The stats of the operation whose upstream calls used these CallOptions, if any call was cacheable. */
  statsFor(options: CallOptions): OperationCacheStats | undefined;
  /** Answers currently kept. */
  readonly size: number;
  /** Forgets every answer (calls in flight are still shared). */
  clear(): void;
}

const NULL_MODELS = new Set([undefined, 'null-x-4o', 'null-x-opus']);
const PI_MODELS = new Set([undefined, 'pi-x-4o']);

const isZero = (temperature: number | undefined) => temperature === undefined || temperature === 0;

/** The cache key of a check, or undefined when the call is not deterministic. */
export function nullCheckCacheKey(request: NullCheckRequest, apiKey: string | undefined): string | undefined {
  if (!request.hasValue || !NULL_MODELS.has(request.model) || !isZero(request.temperature)) return undefined;
  // Omitted model/temperature/strictMode stay apart from explicit ones (never normalized to defaults).
  return `check\n${apiKey ?? 'free'}\n${JSON.stringify([
    request.value,
    request.model ?? null,
    request.temperature ?? null,
    request.strictMode ?? null,
  ])}`;
}

/** The cache key of a pi call, or undefined when the call is not deterministic. */
export function piCacheKey(request: PiRequest, apiKey: string | undefined): string | undefined {
  if (!PI_MODELS.has(request.model) || !isZero(request.temperature)) return undefined;
  return `pi\n${apiKey ?? 'free'}\n${request.digits ?? ''}\n${request.model ?? ''}\n${request.temperature ?? ''}\n${request.sponsored ?? ''}`;
}

/** A call in flight and the options of the caller that made it. */
interface Shared<Res> {
  promise: Promise<Res>;
  options: CallOptions | undefined;
}

interface Entry {
  value: NullCheckResponse | PiResponse;
  bytes: number;
}

/** Rough heap size of an answer: its strings (UTF-16) plus a fixed share for the rest. */
function estimateBytes(key: string, value: NullCheckResponse | PiResponse): number {
  let bytes = 512 + key.length * 2;
  if ('digits' in value) bytes += value.digits.length * 2;
  if (value.sponsoredBy) bytes += value.sponsoredBy.length * 2;
  if (value.disclaimer) bytes += value.disclaimer.length * 2;
  return bytes;
}

/**
 * Calls by another object: the HTTP clients keep state in #private fields, so their methods must run
 * on them. Overrides win; every other member is read from `inner` (functions bound to it, once).
 */
function delegate<T extends object>(inner: T, overrides: Partial<T>): T {
  const bound = new Map<PropertyKey, unknown>();
  // The target is a fresh object (no own properties, so no Proxy invariants to keep: `inner` may have
  // read-only ones); reads go to `inner` itself.
  return new Proxy(Object.create(inner) as T, {
    get(_target, prop) {
      if (Object.hasOwn(overrides, prop)) return (overrides as Record<PropertyKey, unknown>)[prop];
      const target = inner;
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      let fn = bound.get(prop);
      if (fn === undefined) {
        fn = (value as (...args: unknown[]) => unknown).bind(target);
        bound.set(prop, fn);
      }
      return fn;
    },
  });
}

export function createResponseCache(options: ResponseCacheOptions = {}): ResponseCache {
  const ttlMs = options.ttlMs ?? 60_000;
  const store =
    ttlMs > 0
      ? new LRUCache<string, Entry>({
          max: options.maxEntries ?? 10_000,
          maxSize: options.maxBytes ?? 64 * 1024 * 1024,
          sizeCalculation: (entry) => entry.bytes,
          ttl: ttlMs,
          // Expired entries are dropped when met, no timer per entry.
          ttlAutopurge: false,
        })
      : undefined;
  const inFlight = new Map<string, Shared<NullCheckResponse | PiResponse>>();
  const perOperation = new WeakMap<CallOptions, OperationCacheStats>();

  const lookups = options.registry
    ? new Counter({
        name: 'gateway_response_cache_requests_total',
        help: 'Cacheable upstream calls by how the deterministic-answer cache served them: hit (stored answer), coalesced (shared an identical call in flight), miss (called the upstream).',
        labelNames: ['upstream', 'result'] as const,
        registers: [options.registry],
      })
    : undefined;
  if (options.registry) {
    new Gauge({
      name: 'gateway_response_cache_entries',
      help: 'Answers kept by the deterministic-answer cache.',
      registers: [options.registry],
      collect() {
        this.set(store?.size ?? 0);
      },
    });
  }
  const counters = new Map<string, { inc(): void }>();
  const count = (upstream: UpstreamName, outcome: CacheOutcome) => {
    if (lookups === undefined) return;
    const key = `${upstream}\n${outcome}`;
    let counter = counters.get(key);
    if (counter === undefined) {
      counter = lookups.labels(upstream, outcome);
      counters.set(key, counter);
    }
    counter.inc();
  };

  const record = (
    callOptions: CallOptions | undefined,
    upstream: UpstreamName,
    outcome: CacheOutcome,
    value: NullCheckResponse | PiResponse | undefined,
  ) => {
    count(upstream, outcome);
    if (outcome !== 'miss') options.onSaved?.(upstream, outcome === 'hit' ? 'cache' : 'inflight');
    if (callOptions === undefined) return;
    let stats = perOperation.get(callOptions);
    if (stats === undefined) {
      stats = { hits: 0, misses: 0, sponsors: undefined };
      perOperation.set(callOptions, stats);
    }
    if (outcome === 'miss') {
      stats.misses++;
      return;
    }
    stats.hits++;
    const sponsor = value?.sponsoredBy;
    if (sponsor) {
      if (stats.sponsors === undefined) stats.sponsors = [sponsor];
      else if (!stats.sponsors.includes(sponsor)) stats.sponsors.push(sponsor);
    }
  };

  /** One cacheable call: stored answer, else the identical call in flight, else a new upstream call. */
  function cached<Res extends NullCheckResponse | PiResponse>(
    upstream: UpstreamName,
    key: string,
    callOptions: CallOptions | undefined,
    call: (options: CallOptions | undefined) => Promise<Res>,
    keep: (value: Res) => boolean,
  ): Promise<Res> {
    const entry = store?.get(key);
    if (entry !== undefined) {
      record(callOptions, upstream, 'hit', entry.value);
      return Promise.resolve(entry.value as Res);
    }
    const shared = inFlight.get(key) as Shared<Res> | undefined;
    if (shared !== undefined) {
      return shared.promise.then(
        (value) => {
          record(callOptions, upstream, 'coalesced', value);
          return value;
        },
        (error: unknown) => {
          // The call was given up by the caller that made it (client gone, its deadline): that is not
          // this caller's failure, so it makes its own call, unless it gave up too.
          if (shared.options?.signal?.aborted && !callOptions?.signal?.aborted)
            return cached(upstream, key, callOptions, call, keep);
          throw error;
        },
      );
    }
    record(callOptions, upstream, 'miss', undefined);
    // The caller's own options (signal and deadline included): an uncontended call behaves exactly as
    // without the cache. Waiters that join it are protected below from this caller's abort.
    const promise = call(callOptions).then(
      (value) => {
        inFlight.delete(key);
        if (store !== undefined && keep(value)) store.set(key, { value, bytes: estimateBytes(key, value) });
        return value;
      },
      (error: unknown) => {
        inFlight.delete(key);
        throw error;
      },
    );
    inFlight.set(key, { promise, options: callOptions });
    return promise;
  }

  const keepBoolean = (value: NullCheckResponse) => value.answer.kind === 'boolean';
  const keepAll = () => true;

  return {
    decorate<T extends UpstreamClients>(clients: T): T {
      const inner = clients.nullCheck;
      const innerPi = clients.piDigits;
      const nullCheck = delegate<NullCheckClient>(inner, {
        check(request: NullCheckRequest, callOptions?: CallOptions) {
          const key = nullCheckCacheKey(request, callOptions?.apiKey);
          if (key === undefined) return inner.check(request, callOptions);
          return cached('null-check', key, callOptions, (o) => inner.check(request, o), keepBoolean);
        },
      });
      const piDigits = delegate<PiDigitsClient>(innerPi, {
        pi(request: PiRequest, callOptions?: CallOptions) {
          const key = piCacheKey(request, callOptions?.apiKey);
          if (key === undefined) return innerPi.pi(request, callOptions);
          return cached('pi-digits', key, callOptions, (o) => innerPi.pi(request, o), keepAll);
        },
      });
      return delegate<T>(clients, { nullCheck, piDigits } as Partial<T>);
    },
    statsFor: (callOptions) => perOperation.get(callOptions),
    get size() {
      return store?.size ?? 0;
    },
    clear() {
      store?.clear();
    },
  };
}
