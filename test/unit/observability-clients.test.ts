/**
 * The client wrapper over class-based clients like the HTTP ones: state in #private fields, extra
 * methods (breakerState) that must keep working, breaker state read at scrape time.
 */
import DataLoader from 'dataloader';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CountingCacheMap } from '../../src/gateway/observability/counting-cache-map.js';
import { createObservability } from '../../src/gateway/observability/create-observability.js';
import { UpstreamError } from '../../src/gateway/upstream/errors.js';
import type {
  CallOptions,
  HealthProbe,
  InferenceResponse,
  NullCheckClient,
  NullCheckResponse,
  NullHealthBody,
  PiDigitsClient,
  PiHealthBody,
  PiResponse,
  UpstreamClients,
} from '../../src/gateway/upstream/types.js';

type Breaker = HealthProbe<unknown>['breaker'];

class PrivateNullClient implements NullCheckClient {
  #breaker: Breaker = 'closed';
  #closed = false;
  #calls = 0;
  get calls() {
    return this.#calls;
  }
  get closed() {
    return this.#closed;
  }
  trip(state: Breaker) {
    this.#breaker = state;
  }
  breakerState(): Breaker {
    return this.#breaker;
  }
  async check(): Promise<NullCheckResponse> {
    this.#calls++;
    return {
      answer: { kind: 'maybe' },
      confidence: 0.5,
      model: 'null-x-mini',
      inferenceTimeMs: 1,
      gpuCostUsd: 0.25,
      expertsConsulted: 1,
      sponsoredBy: null,
      disclaimer: null,
      raw: {},
    };
  }
  async health(): Promise<HealthProbe<NullHealthBody>> {
    return {
      reachable: false,
      latencyMs: 1,
      statusCode: null,
      body: null,
      error: 'down',
      breaker: this.#breaker,
    };
  }
  async close() {
    this.#closed = true;
  }
}

class PrivatePiClient implements PiDigitsClient {
  #breaker: Breaker = 'open';
  breakerState(): Breaker {
    return this.#breaker;
  }
  async pi(_r: unknown, _o?: CallOptions): Promise<PiResponse> {
    throw new UpstreamError('UPSTREAM_UNAVAILABLE', 'circuit open', { upstream: 'pi-digits' });
  }
  async inference(): Promise<InferenceResponse> {
    return {
      digits: '3.14',
      chainOfThought: null,
      tokensUsed: 10,
      cost: '$0.50',
      costUsd: 0.5,
      precision: 2,
      model: null,
      constantMarker: null,
      raw: {},
    };
  }
  async health(): Promise<HealthProbe<PiHealthBody>> {
    throw new Error('never by contract');
  }
  async close() {}
}

function setup() {
  const observability = createObservability({
    config: { observability: { sponsorLogIntervalMs: 60_000, tracing: false } },
    logger: pino({ level: 'silent' }),
    defaultMetrics: false,
  });
  const nullCheck = new PrivateNullClient();
  const piDigits = new PrivatePiClient();
  let closedAll = false;
  const raw: UpstreamClients & { close(): Promise<void> } = {
    nullCheck,
    piDigits,
    async close() {
      closedAll = true;
    },
  };
  const clients = observability.instrumentClients(raw);
  return { observability, clients, nullCheck, closed: () => closedAll };
}

describe('instrumented upstream clients', () => {
  it('keeps class clients with #private state working, extra methods included', async () => {
    const { clients, nullCheck, closed } = setup();
    const answer = await clients.nullCheck.check({ hasValue: true, value: 1 });
    expect(answer.answer.kind).toBe('maybe');
    expect(nullCheck.calls).toBe(1);
    expect((clients.nullCheck as unknown as PrivateNullClient).breakerState()).toBe('closed');
    expect((clients.nullCheck as unknown as PrivateNullClient).calls).toBe(1);
    await clients.nullCheck.close();
    expect(nullCheck.closed).toBe(true);
    await clients.close();
    expect(closed()).toBe(true);
  });

  it('passes failures through unchanged', async () => {
    const { clients } = setup();
    await expect(clients.piDigits.pi({ digits: 1 })).rejects.toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
    await expect(clients.piDigits.health()).rejects.toThrow('never by contract');
  });

  it('reads each breaker state at scrape time', async () => {
    const { observability, nullCheck } = setup();
    let text = await observability.metrics.render();
    expect(text).toContain('gateway_upstream_breaker_state{upstream="pi-digits",state="open"} 1');
    expect(text).toContain('gateway_upstream_breaker_state{upstream="null-check",state="closed"} 1');
    nullCheck.trip('half-open');
    text = await observability.metrics.render();
    expect(text).toContain('gateway_upstream_breaker_state{upstream="null-check",state="half-open"} 1');
    expect(text).toContain('gateway_upstream_breaker_state{upstream="null-check",state="closed"} 0');
  });

  it('counts GPU cost of answers outside any operation, the parsed inference cost included', async () => {
    const { observability, clients } = setup();
    await clients.nullCheck.check({ hasValue: false });
    await clients.piDigits.inference({ desiredDigits: 2, liabilityWaiverSigned: true });
    const text = await observability.metrics.render();
    expect(text).toContain('gateway_upstream_gpu_cost_usd_total{upstream="null-check"} 0.25');
    expect(text).toContain('gateway_upstream_gpu_cost_usd_total{upstream="pi-digits"} 0.5');
  });
});

describe('dedup hits', () => {
  it('counts DataLoader cache hits through a CountingCacheMap', async () => {
    const { observability } = setup();
    const counter = observability.dedupHitCounter('pi-digits', 'dataloader');
    expect(observability.dedupHitCounter('pi-digits', 'dataloader')).toBe(counter);
    let upstreamCalls = 0;
    const loader = new DataLoader<number, number, number>(
      async (keys) => {
        upstreamCalls += keys.length;
        return keys.map((k) => k * 2);
      },
      { batch: false, cacheMap: new CountingCacheMap(counter) },
    );
    const answers = await Promise.all([loader.load(1), loader.load(1), loader.load(2), loader.load(1)]);
    expect(answers).toEqual([2, 2, 4, 2]);
    expect(upstreamCalls).toBe(2);
    expect(await observability.metrics.render()).toContain(
      'gateway_dedup_hits_total{upstream="pi-digits",source="dataloader"} 2',
    );
  });
});
