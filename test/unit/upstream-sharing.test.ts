/**
 * The layers that save upstream calls, over stub dispatches: which calls may be shared (share keys),
 * single flight (identical calls in flight share one, within the process and through a cross-replica
 * coordinator) and the response cache (deterministic answers reused per API key within a TTL).
 * The same layers on the whole client stack, with metrics, are in
 * test/integration/upstream-sharing.test.ts; the store's LRU and byte bounds in shared-state-memory.
 */
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { UpstreamCallError } from '../../src/gateway/errors.js';
import { keyCaller } from '../../src/gateway/identity.js';
import { Operation } from '../../src/gateway/operation/operation.js';
import { createSharedState } from '../../src/gateway/shared-state/index.js';
import {
  compose,
  fromPromised,
  type HttpForm,
  type Interceptor,
  type PromiseDispatch,
  promised,
  type UpstreamAnswer,
  type UpstreamRequest,
} from '../../src/gateway/upstream/dispatch.js';
import {
  type AnswerStore,
  type ResponseCacheOptions,
  responseCache as responseCacheLayer,
} from '../../src/gateway/upstream/interceptors/response-cache.js';
import {
  type FlightCoordinator,
  type SingleFlightOptions,
  sharingKey,
  singleFlight as singleFlightLayer,
} from '../../src/gateway/upstream/interceptors/single-flight.js';
import { nullCheckShareKey } from '../../src/gateway/upstream/null-check-client.js';
import { piShareKey } from '../../src/gateway/upstream/pi-digits-client.js';
import { errorFromFailure, errorFromStatus } from '../../src/gateway/upstream/status-mapping.js';
import { rejection } from '../support/rejections.js';
import { gate } from '../support/waits.js';

/** A layer over a stub upstream (a promise function), called through the promise edge adapter. */
const over =
  (interceptor: Interceptor) =>
  (next: PromiseDispatch): PromiseDispatch =>
    promised(interceptor(fromPromised(next)));
const singleFlight = (options?: SingleFlightOptions) => over(singleFlightLayer(options));
const responseCache = (options: ResponseCacheOptions) => over(responseCacheLayer(options));

// --- stubs ---------------------------------------------------------------------------------------

interface Digits {
  digits: string;
  kind: 'boolean' | 'maybe';
}

const f: HttpForm<Digits> = {
  endpoint: 'pi',
  version: 'v1',
  method: 'GET',
  path: '/api/v1/pi?digits=3',
  retry: 'idempotent',
  decode: (json) => json as Digits,
  facts: () => ({ costUsd: 0.01, sponsor: 'Pi Hut', model: 'pi-x-4o' }),
};

const operationOf = (apiKey?: string, requestId = 'r') =>
  new Operation({ caller: keyCaller(apiKey), requestId, deadlineMs: 15_000 });

function request(
  operation: Operation | undefined,
  extra: Partial<UpstreamRequest<Digits>> = {},
): UpstreamRequest<Digits> {
  return {
    upstream: 'pi-digits',
    forms: { v1: f },
    form: f,
    shareKey: 'pi\n3',
    cacheable: (value) => value.kind === 'boolean',
    operation,
    ...extra,
  };
}

const answerOf = (req: UpstreamRequest, value: Digits): UpstreamAnswer<Digits> => ({
  value,
  source: 'upstream',
  endpoint: req.form.endpoint,
  statusCode: 200,
  facts: { costUsd: 0.01, sponsor: 'Pi Hut', model: 'pi-x-4o' },
});

/**
 * A stub upstream: each call waits for `gate` (when given), then answers `3.14` (or what `answer`
 * returns; a thrown error is the call's failure). Calls whose operation is cancelled fail as cancelled
 * once the gate opens, like the transport.
 */
function stubUpstream(options: { gate?: Promise<void>; answer?: (n: number) => Digits } = {}) {
  const seen: UpstreamRequest[] = [];
  const dispatch = (async (req: UpstreamRequest<Digits>) => {
    const n = seen.length;
    seen.push(req);
    await options.gate;
    if (req.operation?.cancelled) throw errorFromFailure('cancelled', 'pi-digits');
    return answerOf(req, options.answer?.(n) ?? { digits: '3.14', kind: 'boolean' });
  }) as PromiseDispatch;
  return { dispatch, seen, calls: () => seen.length };
}

// --- share keys ----------------------------------------------------------------------------------

describe('share keys: which calls are deterministic', () => {
  it('pi: the default model or pi-x-4o at temperature 0 (or omitted), exact arguments kept apart', () => {
    const keys = [{}, { model: 'pi-x-4o' }, { temperature: 0 }, { model: 'pi-x-4o', temperature: 0 }].map(
      piShareKey,
    );
    for (const key of keys) expect(key).toBeDefined();
    // Omitted and explicit defaults are not normalized: 4 distinct keys.
    expect(new Set(keys).size).toBe(4);
    expect(piShareKey({ digits: 3 })).not.toBe(piShareKey({ digits: 4 }));
    expect(piShareKey({ digits: 3 })).not.toBe(piShareKey({ digits: 3, sponsored: false }));
  });

  it('pi: never a model or temperature that may answer differently', () => {
    for (const request of [
      { model: 'pi-x-mini' },
      { model: 'pi-x-opus-almost-correct' },
      { temperature: 0.5 },
    ])
      expect(piShareKey(request)).toBeUndefined();
  });

  it('null check: null-x-4o, null-x-opus or the default at temperature 0, with a value', () => {
    const requests = [
      { hasValue: true, value: null },
      { hasValue: true, value: 'null' },
      { hasValue: true, value: { a: [1, null] } },
      { hasValue: true, value: null, model: 'null-x-opus' },
      { hasValue: true, value: null, model: 'null-x-4o', temperature: 0 },
      { hasValue: true, value: null, strictMode: true },
    ];
    const keys = requests.map(nullCheckShareKey);
    for (const key of keys) expect(key).toBeDefined();
    expect(new Set(keys).size).toBe(requests.length);
  });

  it('null check: never without a value (an UNDEFINED_VALUE error), nor a sampling model or temperature', () => {
    for (const request of [
      { hasValue: false },
      { hasValue: true, value: undefined },
      { hasValue: true, value: 1, model: 'null-x-mini' },
      { hasValue: true, value: 1, temperature: 0.1 },
    ])
      expect(nullCheckShareKey(request)).toBeUndefined();
  });

  it('the sharing key carries the upstream and the API key; no key and "free" are the same free tier', () => {
    const key = (apiKey?: string) => sharingKey(request(operationOf(apiKey)));
    expect(key('demo-pro')).not.toBe(key('demo-enterprise'));
    expect(key('demo-pro')).not.toBe(key(undefined));
    expect(key(undefined)).toBe(key('free'));
    expect(sharingKey(request(undefined))).toBe(key('free'));
    expect(key('k')).not.toBe(sharingKey({ ...request(operationOf('k')), upstream: 'null-check' }));
    expect(sharingKey(request(operationOf('k'), { shareKey: undefined }))).toBeUndefined();
  });
});

// --- single flight -------------------------------------------------------------------------------

describe('single flight', () => {
  it('makes identical calls in flight share one upstream call, the first caller’s own', async () => {
    const g = gate();
    const upstream = stubUpstream({ gate: g.opened });
    const shared = vi.fn();
    const dispatch = singleFlight({ onShared: shared })(upstream.dispatch);
    const operations = Array.from({ length: 5 }, (_, i) => operationOf(undefined, `op-${i}`));
    const pending = operations.map((operation) => dispatch(request(operation)));
    g.open();
    const answers = await Promise.all(pending);
    expect(upstream.calls()).toBe(1);
    expect(upstream.seen[0]?.operation).toBe(operations[0]);
    expect(answers.map((a) => a.source)).toEqual(['upstream', 'shared', 'shared', 'shared', 'shared']);
    expect(new Set(answers.map((a) => a.value.digits))).toEqual(new Set(['3.14']));
    expect(shared).toHaveBeenCalledTimes(4);
    expect(shared.mock.calls.map((call) => call[1])).toEqual(['process', 'process', 'process', 'process']);
  });

  it('never shares between API keys', async () => {
    const g = gate();
    const upstream = stubUpstream({ gate: g.opened });
    const dispatch = singleFlight()(upstream.dispatch);
    const pending = [
      dispatch(request(operationOf('demo-pro'))),
      dispatch(request(operationOf('demo-enterprise'))),
      dispatch(request(operationOf(undefined))),
      dispatch(request(operationOf('free'))),
    ];
    g.open();
    const answers = await Promise.all(pending);
    expect(upstream.calls()).toBe(3);
    expect(upstream.seen.map((r) => r.operation?.caller.upstreamKey)).toEqual([
      'demo-pro',
      'demo-enterprise',
      undefined,
    ]);
    expect(answers.map((a) => a.source)).toEqual(['upstream', 'upstream', 'upstream', 'shared']);
  });

  it('never shares calls without a share key, nor different share keys', async () => {
    const g = gate();
    const upstream = stubUpstream({ gate: g.opened });
    const dispatch = singleFlight()(upstream.dispatch);
    const pending = [
      dispatch(request(operationOf(), { shareKey: undefined })),
      dispatch(request(operationOf(), { shareKey: undefined })),
      dispatch(request(operationOf(), { shareKey: 'pi\n4' })),
      dispatch(request(operationOf(), { shareKey: 'pi\n5' })),
    ];
    g.open();
    await Promise.all(pending);
    expect(upstream.calls()).toBe(4);
  });

  it('keeps nothing once the call has landed: the next identical call is a new call', async () => {
    const upstream = stubUpstream();
    const dispatch = singleFlight()(upstream.dispatch);
    await dispatch(request(operationOf()));
    const again = await dispatch(request(operationOf()));
    expect(again.source).toBe('upstream');
    expect(upstream.calls()).toBe(2);
  });

  it('fails every waiter with the shared call’s failure, and keeps no failure', async () => {
    const g = gate();
    const failure = errorFromStatus({
      upstream: 'pi-digits',
      endpoint: 'pi',
      statusCode: 418,
      text: undefined,
      retryAfter: undefined,
    });
    let fail = true;
    const seen: UpstreamRequest[] = [];
    const dispatch = singleFlight()((async (req: UpstreamRequest<Digits>) => {
      seen.push(req);
      await g.opened;
      if (fail) throw failure;
      return answerOf(req, { digits: '3.14', kind: 'boolean' });
    }) as PromiseDispatch);
    const pending = [dispatch(request(operationOf())), dispatch(request(operationOf()))];
    g.open();
    // Joins while the call is still in flight (it settles a few microtasks later).
    pending.push(dispatch(request(operationOf())));
    const results = await Promise.allSettled(pending);
    expect(results.map((r) => (r.status === 'rejected' ? r.reason : r.value.source))).toEqual([
      failure,
      failure,
      failure,
    ]);
    expect(seen).toHaveLength(1);
    fail = false;
    expect((await dispatch(request(operationOf()))).source).toBe('upstream');
    expect(seen).toHaveLength(2);
  });

  it('does not fail the waiters when the caller that made the call goes away: each makes its own', async () => {
    const g = gate();
    const upstream = stubUpstream({ gate: g.opened });
    const dispatch = singleFlight()(upstream.dispatch);
    const leader = operationOf(undefined, 'leader');
    const waiters = [
      operationOf(undefined, 'w1'),
      operationOf(undefined, 'w2'),
      operationOf(undefined, 'w3'),
    ];
    const gone = rejection(dispatch(request(leader)));
    const pending = waiters.map((operation) => dispatch(request(operation)));
    leader.cancel(new Error('client went away'));
    g.open();
    expect(await gone).toMatchObject({ kind: 'cancelled' });
    const answers = await Promise.all(pending);
    expect(answers.map((a) => a.value.digits)).toEqual(['3.14', '3.14', '3.14']);
    // The first waiter made the new call with its own operation; the others shared it.
    expect(upstream.calls()).toBe(2);
    expect(upstream.seen[1]?.operation).toBe(waiters[0]);
    expect(answers.map((a) => a.source)).toEqual(['upstream', 'shared', 'shared']);
  });

  it('gives a waiter that went away too the failure, without a new call', async () => {
    const g = gate();
    const upstream = stubUpstream({ gate: g.opened });
    const dispatch = singleFlight()(upstream.dispatch);
    const leader = operationOf();
    const waiter = operationOf();
    const first = rejection(dispatch(request(leader)));
    const second = rejection(dispatch(request(waiter)));
    leader.cancel('gone');
    waiter.cancel('gone');
    g.open();
    expect(await first).toBeInstanceOf(UpstreamCallError);
    expect(await second).toBeInstanceOf(UpstreamCallError);
    expect(upstream.calls()).toBe(1);
  });

  describe('across replicas (a coordinator)', () => {
    function coordinator(claim: 'lead' | 'follow', published: unknown) {
      const settled: Array<[string, unknown]> = [];
      const coord: FlightCoordinator = {
        claim: vi.fn(async () => claim),
        settle: vi.fn((key: string, value: unknown) => {
          settled.push([key, value]);
        }),
        await: vi.fn(async () => published),
      };
      return { coord, settled };
    }

    it('a follower takes the answer another replica published, marked shared, without a call', async () => {
      const upstream = stubUpstream();
      const published = answerOf(request(undefined), { digits: '3.1415', kind: 'boolean' });
      const { coord } = coordinator('follow', published);
      const shared = vi.fn();
      const answer = await singleFlight({ coordinator: coord, claim: 'always', onShared: shared })(
        upstream.dispatch,
      )(request(operationOf()));
      expect(answer).toMatchObject({ source: 'shared', value: { digits: '3.1415' } });
      expect(upstream.calls()).toBe(0);
      expect(shared.mock.calls[0]?.[1]).toBe('replicas');
    });

    it('a follower that gets nothing in time makes its own call', async () => {
      const upstream = stubUpstream();
      const { coord } = coordinator('follow', undefined);
      const answer = await singleFlight({ coordinator: coord, claim: 'always' })(upstream.dispatch)(
        request(operationOf()),
      );
      expect(answer.source).toBe('upstream');
      expect(upstream.calls()).toBe(1);
    });

    it('the leader publishes its answer (without deprecation) or, when it failed, nothing', async () => {
      const { coord, settled } = coordinator('lead', undefined);
      const ok = (async (req: UpstreamRequest<Digits>) => ({
        ...answerOf(req, { digits: '3.14', kind: 'boolean' }),
        deprecation: { sunset: 'Thu, 01 Jan 2026 00:00:00 GMT' },
      })) as PromiseDispatch;
      const key = sharingKey(request(operationOf('k'))) as string;
      const answer = await singleFlight({ coordinator: coord, claim: 'always' })(ok)(
        request(operationOf('k')),
      );
      expect(answer.deprecation).toBeDefined();
      expect(settled[0]?.[0]).toBe(key);
      expect(settled[0]?.[1]).toMatchObject({ value: { digits: '3.14' }, deprecation: undefined });

      const failing = (async () => {
        throw errorFromFailure('timeout', 'pi-digits');
      }) as PromiseDispatch;
      await rejection(
        singleFlight({ coordinator: coord, claim: 'always' })(failing)(request(operationOf('k'))),
      );
      expect(settled[1]).toEqual([key, undefined]);
    });

    it('claims only a key this process called recently: a new key costs the coordinator nothing', async () => {
      const upstream = stubUpstream();
      const { coord, settled } = coordinator('lead', undefined);
      let time = 0;
      const dispatch = singleFlight({ coordinator: coord, recentMs: 1000, now: () => time })(
        upstream.dispatch,
      );
      // Distinct keys, each called once: straight to the upstream, never claimed nor settled.
      for (const digits of [1, 2, 3]) await dispatch(request(operationOf(), { shareKey: `pi ${digits}` }));
      expect(coord.claim).not.toHaveBeenCalled();
      expect(settled).toEqual([]);
      // The same key again within recentMs: it may coincide with another replica's call, so it claims.
      time = 1000;
      await dispatch(request(operationOf(), { shareKey: 'pi 1' }));
      expect(coord.claim).toHaveBeenCalledTimes(1);
      expect(settled).toHaveLength(1);
      // Called at 1000, then not for longer than recentMs: new again.
      time = 2001;
      await dispatch(request(operationOf(), { shareKey: 'pi 1' }));
      expect(coord.claim).toHaveBeenCalledTimes(1);
      expect(upstream.calls()).toBe(5);
    });

    it('forgets the least recently called keys past recentMaxKeys', async () => {
      const upstream = stubUpstream();
      const { coord } = coordinator('lead', undefined);
      const dispatch = singleFlight({ coordinator: coord, recentMaxKeys: 2 })(upstream.dispatch);
      for (const key of ['a', 'b', 'c', 'a']) await dispatch(request(operationOf(), { shareKey: key }));
      expect(coord.claim).not.toHaveBeenCalled(); // 'a' was forgotten when 'c' came
      await dispatch(request(operationOf(), { shareKey: 'c' }));
      expect(coord.claim).toHaveBeenCalledTimes(1);
    });

    it('calls without a share key never touch the coordinator', async () => {
      const upstream = stubUpstream();
      const { coord } = coordinator('follow', undefined);
      await singleFlight({ coordinator: coord, claim: 'always' })(upstream.dispatch)(
        request(operationOf(), { shareKey: undefined }),
      );
      expect(coord.claim).not.toHaveBeenCalled();
      expect(upstream.calls()).toBe(1);
    });
  });
});

// --- response cache ------------------------------------------------------------------------------

describe('response cache', () => {
  const silent = pino({ level: 'silent' });

  function setup(options: { ttlMs?: number; store?: AnswerStore; answer?: (n: number) => Digits } = {}) {
    let time = 1_000_000;
    const state = createSharedState({ logger: silent, now: () => time });
    const upstream = stubUpstream({ answer: options.answer });
    const lookups: string[] = [];
    const dispatch = responseCache({
      store: options.store ?? state.cache,
      ttlMs: options.ttlMs,
      onLookup: (_req, result) => lookups.push(result),
    })(upstream.dispatch);
    return {
      dispatch,
      upstream,
      lookups,
      store: state.cache,
      advance: (ms: number) => {
        time += ms;
      },
    };
  }

  it('answers a repeated cacheable call from the cache, marked source cache, counted on the operation', async () => {
    const { dispatch, upstream, lookups, store } = setup();
    const first = operationOf();
    const second = operationOf();
    const a = await dispatch(request(first));
    const b = await dispatch(request(second));
    expect(upstream.calls()).toBe(1);
    expect(a.source).toBe('upstream');
    expect(b.source).toBe('cache');
    expect(b.value).toEqual(a.value);
    // The sponsor and cost facts travel with the answer; the observer decides what they count for.
    expect(b.facts).toEqual(a.facts);
    expect(lookups).toEqual(['miss', 'hit']);
    expect([
      first.ledger.cacheMisses,
      first.ledger.cacheHits,
      second.ledger.cacheMisses,
      second.ledger.cacheHits,
    ]).toEqual([1, 0, 0, 1]);
    expect(store.size).toBe(1);
  });

  it('never crosses API keys', async () => {
    const { dispatch, upstream } = setup();
    for (const apiKey of ['demo-pro', 'demo-enterprise', undefined, 'free', 'demo-pro'])
      await dispatch(request(operationOf(apiKey)));
    expect(upstream.calls()).toBe(3);
    expect(upstream.seen.map((r) => r.operation?.caller.upstreamKey)).toEqual([
      'demo-pro',
      'demo-enterprise',
      undefined,
    ]);
  });

  it('keeps only answers the request calls cacheable (a plain boolean, not a maybe)', async () => {
    const { dispatch, upstream, store } = setup({ answer: () => ({ digits: '3.14', kind: 'maybe' }) });
    await dispatch(request(operationOf()));
    await dispatch(request(operationOf()));
    expect(upstream.calls()).toBe(2);
    expect(store.size).toBe(0);
  });

  it('leaves requests without `cacheable` or without a share key alone: no lookup, no count', async () => {
    const { dispatch, upstream, lookups } = setup();
    const operation = operationOf();
    await dispatch(request(operation, { cacheable: undefined }));
    await dispatch(request(operation, { cacheable: undefined }));
    await dispatch(request(operation, { shareKey: undefined }));
    await dispatch(request(operation, { shareKey: undefined }));
    expect(upstream.calls()).toBe(4);
    expect(lookups).toEqual([]);
    expect([operation.ledger.cacheHits, operation.ledger.cacheMisses]).toEqual([0, 0]);
  });

  it('never keeps an error', async () => {
    let fail = true;
    const state = createSharedState({ logger: silent });
    let calls = 0;
    const dispatch = responseCache({ store: state.cache })((async (req: UpstreamRequest<Digits>) => {
      calls++;
      if (fail) throw errorFromFailure('timeout', 'pi-digits');
      return answerOf(req, { digits: '3.14', kind: 'boolean' });
    }) as PromiseDispatch);
    await rejection(dispatch(request(operationOf())));
    expect(state.cache.size).toBe(0);
    fail = false;
    expect((await dispatch(request(operationOf()))).source).toBe('upstream');
    expect((await dispatch(request(operationOf()))).source).toBe('cache');
    expect(calls).toBe(2);
  });

  it('reuses an answer within its TTL only', async () => {
    const { dispatch, upstream, advance } = setup({ ttlMs: 1000 });
    await dispatch(request(operationOf()));
    advance(999);
    expect((await dispatch(request(operationOf()))).source).toBe('cache');
    advance(1);
    expect((await dispatch(request(operationOf()))).source).toBe('upstream');
    expect(upstream.calls()).toBe(2);
  });

  it('keeps nothing with a TTL of 0', async () => {
    const { dispatch, upstream, store } = setup({ ttlMs: 0 });
    await dispatch(request(operationOf()));
    await dispatch(request(operationOf()));
    expect(upstream.calls()).toBe(2);
    expect(store.size).toBe(0);
  });

  it('does not keep the deprecation of the answer it stores', async () => {
    const state = createSharedState({ logger: silent });
    const dispatch = responseCache({ store: state.cache })((async (req: UpstreamRequest<Digits>) => ({
      ...answerOf(req, { digits: '3.14', kind: 'boolean' }),
      deprecation: { sunset: null },
    })) as PromiseDispatch);
    expect((await dispatch(request(operationOf()))).deprecation).toEqual({ sunset: null });
    const hit = await dispatch(request(operationOf()));
    expect(hit.source).toBe('cache');
    expect(hit.deprecation).toBeUndefined();
  });

  it('works with a store that answers later (Redis)', async () => {
    const kept = new Map<string, unknown>();
    const store: AnswerStore = {
      get: (key) => Promise.resolve(kept.get(key)),
      set: (key, value) => {
        kept.set(key, value);
      },
    };
    const { dispatch, upstream, lookups } = setup({ store });
    expect((await dispatch(request(operationOf()))).source).toBe('upstream');
    expect((await dispatch(request(operationOf()))).source).toBe('cache');
    expect(upstream.calls()).toBe(1);
    expect(lookups).toEqual(['miss', 'hit']);
  });

  it('with a TTL of 0 keeps nothing, while single flight below still shares concurrent calls', async () => {
    const state = createSharedState({ logger: silent });
    const g = gate();
    const upstream = stubUpstream({ gate: g.opened });
    const dispatch = promised(
      compose(
        fromPromised(upstream.dispatch),
        responseCacheLayer({ store: state.cache, ttlMs: 0 }),
        singleFlightLayer(),
      ),
    );
    const pending = [dispatch(request(operationOf())), dispatch(request(operationOf()))];
    g.open();
    expect((await Promise.all(pending)).map((a) => a.source)).toEqual(['upstream', 'shared']);
    expect((await dispatch(request(operationOf()))).source).toBe('upstream');
    expect(upstream.calls()).toBe(2);
    expect(state.cache.size).toBe(0);
  });

  it('above single flight: concurrent identical misses share one call, later calls hit', async () => {
    const state = createSharedState({ logger: silent });
    const g = gate();
    const upstream = stubUpstream({ gate: g.opened });
    const dispatch = promised(
      compose(
        fromPromised(upstream.dispatch),
        responseCacheLayer({ store: state.cache }),
        singleFlightLayer(),
      ),
    );
    const pending = [dispatch(request(operationOf())), dispatch(request(operationOf()))];
    g.open();
    expect((await Promise.all(pending)).map((a) => a.source)).toEqual(['upstream', 'shared']);
    expect((await dispatch(request(operationOf()))).source).toBe('cache');
    expect(upstream.calls()).toBe(1);
  });
});
