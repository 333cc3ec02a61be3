/**
 * Saved upstream calls on the whole client stack (createUpstreamClients) in front of a scripted
 * upstream: single flight always on, the response cache with RESPONSE_CACHE=true, and what each
 * saved call leaves on the operation (source, cost, sponsors, cache counts) and in /metrics.
 * The layers on their own are in test/unit/upstream-sharing.test.ts.
 */
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createSharedState } from '../../src/gateway/shared-state/index.js';
import { compose, dispatchPromise } from '../../src/gateway/upstream/dispatch.js';
import { responseCache } from '../../src/gateway/upstream/interceptors/response-cache.js';
import { createTransport } from '../../src/gateway/upstream/transport.js';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import {
  createTestClients,
  piTransportRequest,
  type TestClients,
  testOperation,
} from '../support/clients.js';
import { metricValue } from '../support/metric-values.js';
import { nullBody, piBody } from '../support/upstream-bodies.js';

const PI = '/api/v1/pi';
const CHECK = '/api/v1/check';

let up: ScriptedUpstream;
const opened: TestClients[] = [];

function clientsWith(env: Record<string, string> = {}): TestClients {
  const clients = createTestClients({
    nullBaseUrl: up.url,
    piBaseUrl: up.url,
    env: { NULL_API_VERSION: 'v1', PI_API_VERSION: 'v1', RETRY_MAX_ATTEMPTS: '1', ...env },
  });
  opened.push(clients);
  return clients;
}

const metric = (clients: TestClients, name: string, labels: Record<string, string>) =>
  metricValue(clients.metrics.registry, name, labels);

beforeAll(async () => {
  up = await startScriptedUpstream();
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await up?.close();
});
beforeEach(() => {
  up.reset();
  up.route('GET', PI, { body: piBody({ sponsored_by: 'Pi Hut', gpu_cost_usd: 0.25 }) });
  up.route('POST', CHECK, { body: nullBody({ sponsored_by: 'NullCorp' }) });
});

describe('response cache (RESPONSE_CACHE=true)', () => {
  it('answers a repeated deterministic pi call from the cache: no new cost, sponsor still shown', async () => {
    const clients = clientsWith({ RESPONSE_CACHE: 'true' });
    const first = testOperation();
    const second = testOperation();
    const a = await clients.piDigits.pi({ digits: 3 }, first);
    const b = await clients.piDigits.pi({ digits: 3 }, second);
    expect(b).toEqual(a);
    expect(up.count('GET', PI)).toBe(1);

    const figures = (o: typeof first) => {
      const { costUsd, upstreamCalls, cacheMisses, cacheHits, sponsors } = o.ledger;
      return { costUsd, upstreamCalls, cacheMisses, cacheHits, sponsors };
    };
    expect(figures(first)).toEqual({
      costUsd: 0.25,
      upstreamCalls: 1,
      cacheMisses: 1,
      cacheHits: 0,
      sponsors: ['Pi Hut'],
    });
    expect(figures(second)).toEqual({
      costUsd: 0,
      upstreamCalls: 0,
      cacheMisses: 0,
      cacheHits: 1,
      sponsors: ['Pi Hut'],
    });
    expect(second.ledger.calls).toEqual([
      expect.objectContaining({ upstream: 'pi-digits', endpoint: 'pi', source: 'cache' }),
    ]);

    const resultOf = (result: string) =>
      metric(clients, 'gateway_response_cache_requests_total', { upstream: 'pi-digits', result });
    expect(await resultOf('miss')).toBe(1);
    expect(await resultOf('hit')).toBe(1);
    expect(
      await metric(clients, 'gateway_dedup_hits_total', { upstream: 'pi-digits', source: 'cache' }),
    ).toBe(1);
    // The cost and the sponsor message were received once.
    expect(
      await metric(clients, 'gateway_gpu_cost_usd_total', { upstream: 'pi-digits', model: 'pi-x-4o' }),
    ).toBe(0.25);
    expect(await metric(clients, 'gateway_sponsor_messages_total', { upstream: 'pi-digits' })).toBe(1);
  });

  it('keeps plain boolean null checks, never a maybe, a check without a value or a sampling model', async () => {
    const clients = clientsWith({ RESPONSE_CACHE: 'true' });
    const twice = async (request: Parameters<TestClients['nullCheck']['check']>[0]) => {
      await clients.nullCheck.check(request, testOperation()).catch(() => undefined);
      await clients.nullCheck.check(request, testOperation()).catch(() => undefined);
    };
    await twice({ hasValue: true, value: null });
    expect(up.count('POST', CHECK)).toBe(1);
    await twice({ hasValue: true, value: 1, model: 'null-x-mini' });
    expect(up.count('POST', CHECK)).toBe(3);
    await twice({ hasValue: true, value: 2, temperature: 0.3 });
    expect(up.count('POST', CHECK)).toBe(5);
    up.route('POST', CHECK, { status: 400, body: { error: { status: 400, code: 'UNDEFINED_VALUE' } } });
    await twice({ hasValue: false });
    expect(up.count('POST', CHECK)).toBe(7);
    up.route('POST', CHECK, { body: nullBody({ is_null: 'maybe' }) });
    await twice({ hasValue: true, value: 'schrodinger' });
    expect(up.count('POST', CHECK)).toBe(9);
  });

  it('never crosses API keys, and forwards each caller’s own key', async () => {
    const clients = clientsWith({ RESPONSE_CACHE: 'true' });
    for (const apiKey of ['demo-pro', 'demo-enterprise', undefined, 'free', 'demo-pro'])
      await clients.piDigits.pi({ digits: 3 }, testOperation({ apiKey }));
    expect(up.count('GET', PI)).toBe(3);
    expect(up.requests.map((r) => r.headers.authorization)).toEqual([
      'Bearer demo-pro',
      'Bearer demo-enterprise',
      undefined,
    ]);
  });

  it('keeps no error', async () => {
    const clients = clientsWith({ RESPONSE_CACHE: 'true' });
    up.route('GET', PI, [{ status: 503 }, { body: piBody() }]);
    await expect(clients.piDigits.pi({ digits: 3 }, testOperation())).rejects.toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
    });
    await clients.piDigits.pi({ digits: 3 }, testOperation());
    await clients.piDigits.pi({ digits: 3 }, testOperation());
    expect(up.count('GET', PI)).toBe(2);
  });

  it('forgets an answer after RESPONSE_CACHE_TTL_MS', async () => {
    // Only the clock moves, no sleep: a real short TTL could pass before the second call on a busy
    // machine, and two upstream calls would then prove nothing (a cache that keeps nothing makes
    // two as well). Faked before the clients exist, so that the cache reads the fake clock.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const clients = clientsWith({ RESPONSE_CACHE: 'true', RESPONSE_CACHE_TTL_MS: '60000' });
      const stored = Date.now();
      await clients.piDigits.pi({ digits: 3 }, testOperation());
      // Within the TTL: a hit, no upstream call.
      vi.setSystemTime(stored + 59_999);
      const within = testOperation();
      await clients.piDigits.pi({ digits: 3 }, within);
      const use = (o: typeof within) => [o.ledger.cacheHits, o.ledger.cacheMisses, o.ledger.upstreamCalls];
      // [cache hits, cache misses, upstream calls]
      expect(use(within)).toEqual([1, 0, 0]);
      expect(up.count('GET', PI)).toBe(1);
      // Past it: forgotten, the upstream is called again.
      vi.setSystemTime(stored + 60_001);
      const after = testOperation();
      await clients.piDigits.pi({ digits: 3 }, after);
      expect(use(after)).toEqual([0, 1, 1]);
      expect(up.count('GET', PI)).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('the response cache and its store’s byte bound', () => {
  it('gives the store each answer’s size: an answer larger than the store’s bytes is not kept', async () => {
    // Regression: answers were stored without a size, counted as 1 KiB each, so a cache of
    // million-digit answers could grow far past its byte bound.
    const state = createSharedState({ logger: pino({ level: 'silent' }), localMaxBytes: 256 * 1024 });
    const transport = createTransport({ upstream: 'pi-digits', baseUrl: up.url });
    try {
      const dispatch = compose(transport.dispatch, responseCache({ store: state.cache }));
      const call = (digits: number) =>
        dispatchPromise(dispatch, {
          ...piTransportRequest(`${PI}?digits=${digits}`),
          shareKey: `pi\n${digits}`,
          cacheable: () => true,
        });
      up.route('GET', PI, (request) => {
        const digits = Number(request.query.digits);
        return { body: piBody({ digits: `3.${'1'.repeat(digits)}`, precision: digits }) };
      });
      // Small answers are kept and reused.
      expect((await call(10)).source).toBe('upstream');
      expect((await call(10)).source).toBe('cache');
      // One of ~1 MB is not (the bound is 256 KiB): each call goes upstream.
      expect((await call(1_000_000)).source).toBe('upstream');
      expect((await call(1_000_000)).source).toBe('upstream');
      // Ten of ~50 KB: at most the ones that fit are kept, the oldest go first.
      for (let i = 0; i < 10; i++) await call(50_000 + i);
      expect(state.cache.size).toBeLessThanOrEqual(5);
      expect(up.count('GET', PI)).toBe(13);
    } finally {
      await transport.close();
    }
  });
});

describe('without the response cache (the default)', () => {
  it('calls the upstream for every sequential call', async () => {
    const clients = clientsWith();
    await clients.piDigits.pi({ digits: 3 }, testOperation());
    await clients.piDigits.pi({ digits: 3 }, testOperation());
    expect(up.count('GET', PI)).toBe(2);
    expect(
      await metric(clients, 'gateway_response_cache_requests_total', {
        upstream: 'pi-digits',
        result: 'miss',
      }),
    ).toBe(0);
  });

  it('shares identical calls in flight: one upstream call, the others cost nothing', async () => {
    up.route('GET', PI, { delayMs: 100, body: piBody({ sponsored_by: 'Pi Hut', gpu_cost_usd: 0.25 }) });
    const clients = clientsWith();
    const operations = [testOperation(), testOperation(), testOperation()];
    const answers = await Promise.all(
      operations.map((operation) => clients.piDigits.pi({ digits: 3 }, operation)),
    );
    expect(new Set(answers.map((a) => a.digits)).size).toBe(1);
    expect(up.count('GET', PI)).toBe(1);
    expect(operations.map((o) => o.ledger.costUsd)).toEqual([0.25, 0, 0]);
    expect(operations.map((o) => o.ledger.upstreamCalls)).toEqual([1, 0, 0]);
    expect(operations.map((o) => o.ledger.calls?.[0]?.source)).toEqual(['upstream', 'shared', 'shared']);
    // Every caller still sees the sponsor message of the answer it used.
    expect(operations.map((o) => o.ledger.sponsors)).toEqual([['Pi Hut'], ['Pi Hut'], ['Pi Hut']]);
    expect(
      await metric(clients, 'gateway_dedup_hits_total', { upstream: 'pi-digits', source: 'inflight' }),
    ).toBe(2);
    expect(
      await metric(clients, 'gateway_gpu_cost_usd_total', { upstream: 'pi-digits', model: 'pi-x-4o' }),
    ).toBe(0.25);
  });

  it('never shares between API keys, nor sampled calls', async () => {
    up.route('GET', PI, { delayMs: 100, body: piBody() });
    const clients = clientsWith();
    await Promise.all([
      clients.piDigits.pi({ digits: 3 }, testOperation({ apiKey: 'demo-pro' })),
      clients.piDigits.pi({ digits: 3 }, testOperation({ apiKey: 'demo-enterprise' })),
      clients.piDigits.pi({ digits: 3, temperature: 0.9 }, testOperation()),
      clients.piDigits.pi({ digits: 3, temperature: 0.9 }, testOperation()),
    ]);
    expect(up.count('GET', PI)).toBe(4);
  });
});
