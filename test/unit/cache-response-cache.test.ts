/**
 * The deterministic-answer cache (src/cache/response-cache.ts) around stub clients: what is cached,
 * how keys separate API keys, single flight, errors, eviction, metrics.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import {
  createResponseCache,
  nullCheckCacheKey,
  piCacheKey,
  type ResponseCacheOptions,
} from '../../src/gateway/cache/response-cache.js';
import type {
  CallOptions,
  NullCheckRequest,
  NullCheckResponse,
  PiRequest,
  PiResponse,
  UpstreamClients,
} from '../../src/gateway/upstream/types.js';

const piAnswer = (request: PiRequest, sponsor = 'Pi Hut'): PiResponse => ({
  digits: `3.${'1415926535'.slice(0, request.digits ?? 3)}`,
  precision: request.digits ?? 3,
  confidence: 0.99,
  model: request.model ?? 'pi-x-4o',
  inferenceTimeMs: 42,
  gpuCostUsd: 0.0003,
  sponsoredBy: sponsor,
  disclaimer: 'may differ',
  constantMarker: null,
  raw: {},
});

const nullAnswer = (request: NullCheckRequest): NullCheckResponse => ({
  answer: { kind: 'boolean', isNull: request.value === null },
  confidence: 0.97,
  model: request.model ?? 'null-x-4o',
  inferenceTimeMs: 17,
  gpuCostUsd: 0.0002,
  expertsConsulted: 8,
  sponsoredBy: 'NullCorp',
  disclaimer: 'd',
  raw: {},
});

/** Stub clients whose calls are counted; `gate` (when given) holds every answer until released. */
function stubClients(gate?: Promise<void>) {
  const pi = vi.fn(async (request: PiRequest, _options?: CallOptions) => {
    await gate;
    return piAnswer(request);
  });
  const check = vi.fn(async (request: NullCheckRequest, _options?: CallOptions) => {
    await gate;
    return nullAnswer(request);
  });
  const health = vi.fn(async () => ({
    reachable: true,
    latencyMs: 1,
    statusCode: 200,
    body: null,
    error: null,
    breaker: 'closed' as const,
  }));
  const clients = {
    nullCheck: { check, health, close: async () => {}, breakerState: () => 'closed' as const },
    piDigits: {
      pi,
      inference: vi.fn(async () => {
        throw new Error('not used');
      }),
      health,
      close: async () => {},
    },
  };
  return { clients: clients as unknown as UpstreamClients & typeof clients, pi, check };
}

function setup(options: ResponseCacheOptions = {}, gate?: Promise<void>) {
  const stub = stubClients(gate);
  const cache = createResponseCache(options);
  return { ...stub, cache, cached: cache.decorate(stub.clients) };
}

const call = (apiKey?: string): CallOptions => ({ apiKey, requestId: 'r' });

describe('what is cached', () => {
  it('answers a repeated deterministic pi call from the cache, sponsor message included', async () => {
    const { cached, pi, cache } = setup();
    const first = await cached.piDigits.pi({ digits: 5 }, call());
    const options = call();
    const second = await cached.piDigits.pi({ digits: 5 }, options);
    expect(pi).toHaveBeenCalledTimes(1);
    expect(second).toEqual(first);
    expect(second.sponsoredBy).toBe('Pi Hut');
    expect(cache.statsFor(options)).toEqual({ hits: 1, misses: 0, sponsors: ['Pi Hut'] });
    expect(cache.size).toBe(1);
  });

  it('caches omitted model and temperature, pi-x-4o and temperature 0', async () => {
    const { cached, pi } = setup();
    for (const request of [
      {},
      { model: 'pi-x-4o' },
      { temperature: 0 },
      { model: 'pi-x-4o', temperature: 0 },
    ]) {
      await cached.piDigits.pi(request, call());
      await cached.piDigits.pi(request, call());
    }
    // Exact arguments are the key: 4 distinct requests, each called once.
    expect(pi).toHaveBeenCalledTimes(4);
  });

  it('never caches a model or temperature that may answer differently', async () => {
    const { cached, pi, check } = setup();
    for (const request of [
      { model: 'pi-x-mini' },
      { model: 'pi-x-opus-almost-correct' },
      { temperature: 0.5 },
    ]) {
      await cached.piDigits.pi(request, call());
      await cached.piDigits.pi(request, call());
    }
    expect(pi).toHaveBeenCalledTimes(6);
    for (const request of [
      { hasValue: true, value: 1, model: 'null-x-mini' },
      { hasValue: true, value: 1, temperature: 0.1 },
    ]) {
      await cached.nullCheck.check(request, call());
      await cached.nullCheck.check(request, call());
    }
    expect(check).toHaveBeenCalledTimes(4);
  });

  it('caches null-x-4o and null-x-opus checks, keeping null, values and omitted value apart', async () => {
    const { cached, check } = setup();
    const requests: NullCheckRequest[] = [
      { hasValue: true, value: null },
      { hasValue: true, value: 'null' },
      { hasValue: true, value: { a: [1, null] } },
      { hasValue: true, value: null, model: 'null-x-opus' },
    ];
    for (const request of requests) {
      const a = await cached.nullCheck.check(request, call());
      const b = await cached.nullCheck.check(request, call());
      expect(b).toEqual(a);
    }
    expect(check).toHaveBeenCalledTimes(requests.length);
    // An omitted value is the UNDEFINED_VALUE error upstream: never cached.
    await cached.nullCheck.check({ hasValue: false }, call());
    await cached.nullCheck.check({ hasValue: false }, call());
    expect(check).toHaveBeenCalledTimes(requests.length + 2);
    expect(nullCheckCacheKey({ hasValue: false }, undefined)).toBeUndefined();
  });

  it('does not keep a non-boolean check answer', async () => {
    const { clients } = stubClients();
    clients.nullCheck.check.mockImplementation(async (request: NullCheckRequest) => ({
      ...nullAnswer(request),
      answer: { kind: 'maybe' as const },
    }));
    const cached = createResponseCache().decorate(clients);
    await cached.nullCheck.check({ hasValue: true, value: 1 }, call());
    await cached.nullCheck.check({ hasValue: true, value: 1 }, call());
    expect(clients.nullCheck.check).toHaveBeenCalledTimes(2);
  });
});

describe('keys', () => {
  it('never shares an answer across API keys; no key and "free" are the same free tier', async () => {
    const { cached, pi } = setup();
    await cached.piDigits.pi({ digits: 3 }, call('demo-pro'));
    await cached.piDigits.pi({ digits: 3 }, call('demo-enterprise'));
    await cached.piDigits.pi({ digits: 3 }, call(undefined));
    await cached.piDigits.pi({ digits: 3 }, call('free'));
    await cached.piDigits.pi({ digits: 3 }, call('demo-pro'));
    expect(pi).toHaveBeenCalledTimes(3);
    expect(piCacheKey({ digits: 3 }, 'a')).not.toBe(piCacheKey({ digits: 3 }, 'b'));
    expect(piCacheKey({ digits: 3 }, undefined)).toBe(piCacheKey({ digits: 3 }, 'free'));
  });

  it('passes the key and request id of the caller to the upstream call', async () => {
    const { cached, pi } = setup();
    await cached.piDigits.pi({ digits: 3 }, { apiKey: 'demo-pro', requestId: 'req-1', deadline: 123 });
    expect(pi.mock.calls[0]?.[1]).toEqual({ apiKey: 'demo-pro', requestId: 'req-1', deadline: 123 });
  });
});

describe('single flight and errors', () => {
  it('coalesces identical concurrent calls into one upstream call', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { cached, pi, cache } = setup({}, gate);
    const options = Array.from({ length: 5 }, () => call());
    const pending = options.map((o) => cached.piDigits.pi({ digits: 7 }, o));
    release();
    const answers = await Promise.all(pending);
    expect(pi).toHaveBeenCalledTimes(1);
    expect(new Set(answers.map((a) => a.digits)).size).toBe(1);
    expect(options.map((o) => cache.statsFor(o))).toEqual([
      { hits: 0, misses: 1, sponsors: undefined },
      ...Array.from({ length: 4 }, () => ({ hits: 1, misses: 0, sponsors: ['Pi Hut'] })),
    ]);
  });

  it('does not cache errors, and a failed shared call fails every waiter', async () => {
    const { clients } = stubClients();
    let fail = true;
    clients.piDigits.pi.mockImplementation(async (request: PiRequest) => {
      await Promise.resolve();
      if (fail) throw Object.assign(new Error('teapot'), { code: 'TIER_FORBIDDEN' });
      return piAnswer(request);
    });
    const cached = createResponseCache().decorate(clients);
    const results = await Promise.allSettled([
      cached.piDigits.pi({ digits: 9 }, call()),
      cached.piDigits.pi({ digits: 9 }, call()),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(clients.piDigits.pi).toHaveBeenCalledTimes(1);
    fail = false;
    await expect(cached.piDigits.pi({ digits: 9 }, call())).resolves.toMatchObject({ precision: 9 });
    expect(clients.piDigits.pi).toHaveBeenCalledTimes(2);
  });

  it('a waiter makes its own call when the caller it joined gives up', async () => {
    const { clients } = stubClients();
    clients.piDigits.pi.mockImplementation(
      (request: PiRequest, options?: CallOptions) =>
        new Promise<PiResponse>((resolve, reject) => {
          const signal = options?.signal;
          if (signal === undefined) {
            setImmediate(() => resolve(piAnswer(request)));
            return;
          }
          signal.addEventListener('abort', () => reject(new Error('cancelled')), { once: true });
        }),
    );
    const cache = createResponseCache();
    const cached = cache.decorate(clients);
    const first = new AbortController();
    const gone = cached.piDigits.pi({ digits: 8 }, { requestId: 'a', signal: first.signal });
    const waiter = cached.piDigits.pi({ digits: 8 }, { requestId: 'b' });
    first.abort();
    await expect(gone).rejects.toThrow('cancelled');
    await expect(waiter).resolves.toMatchObject({ precision: 8 });
    expect(clients.piDigits.pi).toHaveBeenCalledTimes(2);
  });

  it('with a TTL of 0 keeps nothing but still shares concurrent calls', async () => {
    const { cached, pi, cache } = setup({ ttlMs: 0 });
    await Promise.all([cached.piDigits.pi({ digits: 2 }, call()), cached.piDigits.pi({ digits: 2 }, call())]);
    expect(pi).toHaveBeenCalledTimes(1);
    await cached.piDigits.pi({ digits: 2 }, call());
    expect(pi).toHaveBeenCalledTimes(2);
    expect(cache.size).toBe(0);
  });
});

describe('limits', () => {
  it('expires entries after the TTL', async () => {
    const { cached, pi } = setup({ ttlMs: 20 });
    await cached.piDigits.pi({ digits: 4 }, call());
    await sleep(60);
    await cached.piDigits.pi({ digits: 4 }, call());
    expect(pi).toHaveBeenCalledTimes(2);
  });

  it('evicts the least recently used entry past maxEntries', async () => {
    const { cached, pi, cache } = setup({ maxEntries: 2 });
    await cached.piDigits.pi({ digits: 1 }, call());
    await cached.piDigits.pi({ digits: 2 }, call());
    await cached.piDigits.pi({ digits: 1 }, call()); // 1 is now the most recently used
    await cached.piDigits.pi({ digits: 3 }, call()); // evicts 2
    expect(cache.size).toBe(2);
    await cached.piDigits.pi({ digits: 1 }, call());
    expect(pi).toHaveBeenCalledTimes(3);
    await cached.piDigits.pi({ digits: 2 }, call());
    expect(pi).toHaveBeenCalledTimes(4);
  });

  it('keeps no answer larger than maxBytes', async () => {
    const { cached, pi } = setup({ maxBytes: 1024 });
    await cached.piDigits.pi({ digits: 3 }, call());
    await cached.piDigits.pi({ digits: 3 }, call());
    expect(pi).toHaveBeenCalledTimes(1);
    const { clients } = stubClients();
    clients.piDigits.pi.mockImplementation(async () => ({
      ...piAnswer({}),
      digits: `3.${'1'.repeat(5000)}`,
    }));
    const small = createResponseCache({ maxBytes: 1024 }).decorate(clients);
    await small.piDigits.pi({ digits: 5000 }, call());
    await small.piDigits.pi({ digits: 5000 }, call());
    expect(clients.piDigits.pi).toHaveBeenCalledTimes(2);
  });
});

describe('the decorated clients', () => {
  it('pass every other member through to the inner clients', async () => {
    const { cached, clients } = setup();
    await cached.nullCheck.health();
    expect(clients.nullCheck.health).toHaveBeenCalledTimes(1);
    expect((cached.nullCheck as unknown as { breakerState(): string }).breakerState()).toBe('closed');
    await expect(
      cached.piDigits.inference({ desiredDigits: 1, liabilityWaiverSigned: true }),
    ).rejects.toThrow('not used');
  });

  it('count hits, coalesced calls and misses in metrics, and report saved calls', async () => {
    const registry = new Registry();
    const saved: string[] = [];
    const { cached } = setup({
      registry,
      onSaved: (upstream, source) => saved.push(`${upstream}:${source}`),
    });
    await Promise.all([cached.piDigits.pi({ digits: 6 }, call()), cached.piDigits.pi({ digits: 6 }, call())]);
    await cached.piDigits.pi({ digits: 6 }, call());
    await cached.nullCheck.check({ hasValue: true, value: null }, call());
    const text = await registry.metrics();
    expect(text).toContain('gateway_response_cache_requests_total{upstream="pi-digits",result="miss"} 1');
    expect(text).toContain(
      'gateway_response_cache_requests_total{upstream="pi-digits",result="coalesced"} 1',
    );
    expect(text).toContain('gateway_response_cache_requests_total{upstream="pi-digits",result="hit"} 1');
    expect(text).toContain('gateway_response_cache_requests_total{upstream="null-check",result="miss"} 1');
    expect(text).toContain('gateway_response_cache_entries 2');
    expect(saved).toEqual(['pi-digits:inflight', 'pi-digits:cache']);
  });
});
