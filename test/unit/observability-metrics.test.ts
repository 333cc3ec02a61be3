import { Counter, Gauge, register as globalRegistry, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createCostMetrics } from '../../src/gateway/observability/cost-metrics.js';
import { boundedLabel } from '../../src/gateway/observability/metric-labels.js';
import {
  createGatewayMetrics,
  createSharedStateMetrics,
  OTHER_OPERATION,
} from '../../src/gateway/observability/metrics.js';
import { sample } from '../support/metric-values.js';

describe('gateway metrics', () => {
  it('uses a registry per instance, so many gateways can coexist, and never the global one', async () => {
    const a = createGatewayMetrics({ defaultMetrics: false });
    const b = createGatewayMetrics({ defaultMetrics: false });
    a.recordOperation('Pi', 'query', 'ok', 12);
    expect(a.registry).not.toBe(b.registry);
    expect(a.registry).not.toBe(globalRegistry);
    expect(
      sample(await a.render(), 'gateway_operations_total', 'operation="Pi",type="query",outcome="ok"'),
    ).toBe(1);
    expect(
      sample(await b.render(), 'gateway_operations_total', 'operation="Pi",type="query",outcome="ok"'),
    ).toBe(undefined);
    expect(await globalRegistry.metrics()).not.toContain('gateway_operations_total');
  });

  it('registers on a registry it is given (the shared state adds its own metrics there)', async () => {
    const registry = new Registry();
    const m = createGatewayMetrics({ registry, defaultMetrics: false });
    m.recordOperation('Pi', 'query', 'ok', 1);
    expect(m.registry).toBe(registry);
    expect(await registry.metrics()).toContain(
      'gateway_operations_total{operation="Pi",type="query",outcome="ok"} 1',
    );
  });

  it('counts operations by name, type and outcome and observes their latency in seconds', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    m.recordOperation('Pi', 'query', 'ok', 4);
    m.recordOperation('Pi', 'query', 'ok', 40);
    m.recordOperation('Pi', 'query', 'partial', 7);
    m.recordOperation(null, 'query', 'invalid', 1);
    m.recordOperation('', 'query', 'invalid', 1);
    m.recordOperation('Pi', 'query', 'cancelled', 2);
    const text = await m.render();
    expect(sample(text, 'gateway_operations_total', 'operation="Pi",type="query",outcome="ok"')).toBe(2);
    expect(sample(text, 'gateway_operations_total', 'operation="Pi",type="query",outcome="partial"')).toBe(1);
    expect(
      sample(text, 'gateway_operations_total', 'operation="(anonymous)",type="query",outcome="invalid"'),
    ).toBe(2);
    expect(sample(text, 'gateway_operations_total', 'operation="Pi",type="query",outcome="cancelled"')).toBe(
      1,
    );
    expect(
      sample(text, 'gateway_operation_duration_seconds_count', 'operation="Pi",type="query",outcome="ok"'),
    ).toBe(2);
    const sum = sample(
      text,
      'gateway_operation_duration_seconds_sum',
      'operation="Pi",type="query",outcome="ok"',
    );
    expect(sum).toBeCloseTo(0.044, 6);
    expect(
      sample(
        text,
        'gateway_operation_duration_seconds_bucket',
        'le="0.005",operation="Pi",type="query",outcome="ok"',
      ),
    ).toBe(1);
  });

  it('caps client-chosen operation names so /metrics cannot grow without bound', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false, maxOperationNames: 3 });
    for (let i = 0; i < 10; i++) m.recordOperation(`Op${i}`, 'query', 'ok', 1);
    m.recordOperation('Op0', 'query', 'ok', 1);
    m.recordOperation('x'.repeat(500), 'query', 'ok', 1);
    const text = await m.render();
    expect(sample(text, 'gateway_operations_total', 'operation="Op0",type="query",outcome="ok"')).toBe(2);
    expect(sample(text, 'gateway_operations_total', 'operation="Op3",type="query",outcome="ok"')).toBe(
      undefined,
    );
    expect(
      sample(text, 'gateway_operations_total', `operation="${OTHER_OPERATION}",type="query",outcome="ok"`),
    ).toBe(8);
  });

  it('counts upstream attempts by upstream, endpoint, status and outcome; no answer is status "none"', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    m.recordUpstreamCall('pi-digits', 'pi', 200, 'ok', 3);
    m.recordUpstreamCall('pi-digits', 'pi', 200, 'ok', 5);
    m.recordUpstreamCall('pi-digits', 'pi', 503, 'unavailable', 2);
    m.recordUpstreamCall('null-check', 'check', null, 'timeout', 5000);
    const text = await m.render();
    expect(
      sample(
        text,
        'gateway_upstream_requests_total',
        'upstream="pi-digits",endpoint="pi",status="200",outcome="ok"',
      ),
    ).toBe(2);
    expect(
      sample(
        text,
        'gateway_upstream_requests_total',
        'upstream="pi-digits",endpoint="pi",status="503",outcome="unavailable"',
      ),
    ).toBe(1);
    expect(
      sample(
        text,
        'gateway_upstream_requests_total',
        'upstream="null-check",endpoint="check",status="none",outcome="timeout"',
      ),
    ).toBe(1);
    expect(
      sample(text, 'gateway_upstream_request_duration_seconds_count', 'upstream="pi-digits",endpoint="pi"'),
    ).toBe(3);
  });

  it('accumulates GPU cost per upstream and model, sponsor messages and dedup hits; known series start at 0', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    let text = await m.render();
    // The per-upstream cost metric was replaced by one per upstream and model.
    expect(text).not.toContain('gateway_upstream_gpu_cost_usd_total');
    expect(text).toContain('# TYPE gateway_gpu_cost_usd_total counter');
    for (const upstream of ['null-check', 'pi-digits']) {
      expect(sample(text, 'gateway_sponsor_messages_total', `upstream="${upstream}"`)).toBe(0);
      for (const source of ['dataloader', 'inflight', 'replicas', 'cache'])
        expect(sample(text, 'gateway_dedup_hits_total', `upstream="${upstream}",source="${source}"`)).toBe(0);
    }
    m.recordGpuCost('pi-digits', 'pi-x-4o', 0.25);
    m.recordGpuCost('pi-digits', 'pi-x-4o', 0.5);
    m.recordGpuCost('pi-digits', 'pi-x-mini', 0.125);
    m.recordGpuCost('null-check', null, 0.5);
    // Guards: a counter cannot go down, and NaN/Infinity would poison the sum.
    m.recordGpuCost('pi-digits', 'pi-x-4o', Number.NaN);
    m.recordGpuCost('pi-digits', 'pi-x-4o', Number.POSITIVE_INFINITY);
    m.recordGpuCost('pi-digits', 'pi-x-4o', -3);
    m.recordGpuCost('pi-digits', 'pi-x-4o', 0);
    m.recordSponsorMessage('null-check');
    m.recordDedupHit('null-check', 'dataloader');
    m.recordDedupHit('null-check', 'dataloader');
    m.recordDedupHit('pi-digits', 'inflight');
    m.recordDedupHit('pi-digits', 'replicas');
    m.recordDedupHit('pi-digits', 'cache');
    text = await m.render();
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="pi-x-4o"')).toBe(0.75);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="pi-x-mini"')).toBe(0.125);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="null-check",model="unknown"')).toBe(0.5);
    expect(sample(text, 'gateway_sponsor_messages_total', 'upstream="null-check"')).toBe(1);
    expect(sample(text, 'gateway_dedup_hits_total', 'upstream="null-check",source="dataloader"')).toBe(2);
    for (const source of ['inflight', 'replicas', 'cache'])
      expect(sample(text, 'gateway_dedup_hits_total', `upstream="pi-digits",source="${source}"`)).toBe(1);
  });

  it('caps the model label: model names come from the upstreams', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    for (let i = 0; i < 60; i++) m.recordGpuCost('pi-digits', `model-${i}`, 1);
    m.recordGpuCost('pi-digits', 'x'.repeat(500), 1);
    const text = await m.render();
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="model-0"')).toBe(1);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="model-49"')).toBe(1);
    expect(sample(text, 'gateway_gpu_cost_usd_total', 'upstream="pi-digits",model="model-50"')).toBe(
      undefined,
    );
    expect(
      sample(text, 'gateway_gpu_cost_usd_total', `upstream="pi-digits",model="${OTHER_OPERATION}"`),
    ).toBe(11);
  });

  it('counts deprecated answers per endpoint, budget refusals per reason and response cache use', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    let text = await m.render();
    expect(sample(text, 'gateway_budget_refusals_total', 'reason="max-cost"')).toBe(0);
    expect(sample(text, 'gateway_budget_refusals_total', 'reason="hourly-budget"')).toBe(0);
    for (const upstream of ['null-check', 'pi-digits'])
      for (const result of ['hit', 'miss'])
        expect(
          sample(text, 'gateway_response_cache_requests_total', `upstream="${upstream}",result="${result}"`),
        ).toBe(0);
    // Without a source (RESPONSE_CACHE off) the cache holds nothing.
    expect(text).toContain('gateway_response_cache_entries 0');
    m.recordDeprecated('null-check', 'check');
    m.recordDeprecated('null-check', 'check');
    m.recordDeprecated('pi-digits', 'pi');
    m.recordBudgetRefusal('max-cost');
    m.recordBudgetRefusal('hourly-budget');
    m.recordBudgetRefusal('hourly-budget');
    m.recordCacheLookup('pi-digits', 'hit');
    m.recordCacheLookup('pi-digits', 'miss');
    m.recordCacheLookup('pi-digits', 'miss');
    let entries = 7;
    m.setCacheSizeSource(() => entries);
    text = await m.render();
    expect(sample(text, 'gateway_upstream_deprecated_total', 'upstream="null-check",endpoint="check"')).toBe(
      2,
    );
    expect(sample(text, 'gateway_upstream_deprecated_total', 'upstream="pi-digits",endpoint="pi"')).toBe(1);
    expect(sample(text, 'gateway_budget_refusals_total', 'reason="max-cost"')).toBe(1);
    expect(sample(text, 'gateway_budget_refusals_total', 'reason="hourly-budget"')).toBe(2);
    expect(sample(text, 'gateway_response_cache_requests_total', 'upstream="pi-digits",result="hit"')).toBe(
      1,
    );
    expect(sample(text, 'gateway_response_cache_requests_total', 'upstream="pi-digits",result="miss"')).toBe(
      2,
    );
    expect(text).toContain('gateway_response_cache_entries 7');
    // Read at each scrape.
    entries = 3;
    expect(await m.render()).toContain('gateway_response_cache_entries 3');
  });

  it('shows the breaker state as a state set, read from its source at each scrape: 1 for the current state only', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    let text = await m.render();
    // No source yet: closed.
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="closed"')).toBe(1);
    let state: 'closed' | 'open' | 'half-open' | 'disabled' = 'open';
    m.addBreakerSource('pi-digits', () => state);
    text = await m.render();
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="closed"')).toBe(0);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="open"')).toBe(1);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="null-check",state="closed"')).toBe(1);
    state = 'half-open';
    text = await m.render();
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="open"')).toBe(0);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="half-open"')).toBe(1);
    state = 'disabled';
    text = await m.render();
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="disabled"')).toBe(1);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="half-open"')).toBe(0);
  });

  it('are prom-client’s own Counter, Gauge and Histogram, every area on the one registry', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    createSharedStateMetrics(m.registry, { redis: true });
    const metrics = m.registry.getMetricsAsArray();
    expect(metrics.length).toBeGreaterThan(20);
    for (const metric of metrics)
      expect(
        metric instanceof Counter || metric instanceof Gauge || metric instanceof Histogram,
        metric.name,
      ).toBe(true);
    const names = metrics.map((metric) => metric.name);
    for (const name of [
      'gateway_operations_total',
      'gateway_upstream_request_duration_seconds',
      'gateway_gpu_cost_usd_total',
      'gateway_model_answers_total',
      'gateway_redis_up',
    ])
      expect(names).toContain(name);
  });

  it('refuses an area made twice on one registry (prom-client refuses a metric name twice)', () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    expect(() => createCostMetrics(m.registry, { modelLabel: boundedLabel(1, 'unknown') })).toThrow(
      /already been registered/,
    );
  });

  it('includes the default process metrics unless turned off', async () => {
    const withDefaults = createGatewayMetrics();
    const without = createGatewayMetrics({ defaultMetrics: false });
    expect(await withDefaults.render()).toContain('process_cpu_user_seconds_total');
    expect(await without.render()).not.toContain('process_cpu_user_seconds_total');
    expect(withDefaults.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });
});
