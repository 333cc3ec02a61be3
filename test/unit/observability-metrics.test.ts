import { register as globalRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createGatewayMetrics, OTHER_OPERATION } from '../../src/gateway/observability/gateway-metrics.js';

/** The value of one sample line of the exposition text, or undefined when absent. */
function sample(text: string, name: string, labels: string): number | undefined {
  const prefix = `${name}{${labels}} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(prefix.length));
}

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

  it('counts operations by name, type and outcome and observes their latency in seconds', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    m.recordOperation('Pi', 'query', 'ok', 4);
    m.recordOperation('Pi', 'query', 'ok', 40);
    m.recordOperation('Pi', 'query', 'partial', 7);
    m.recordOperation(null, 'query', 'invalid', 1);
    const text = await m.render();
    expect(sample(text, 'gateway_operations_total', 'operation="Pi",type="query",outcome="ok"')).toBe(2);
    expect(sample(text, 'gateway_operations_total', 'operation="Pi",type="query",outcome="partial"')).toBe(1);
    expect(
      sample(text, 'gateway_operations_total', 'operation="(anonymous)",type="query",outcome="invalid"'),
    ).toBe(1);
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

  it('accumulates GPU cost, sponsor messages and dedup hits; known series start at 0', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    let text = await m.render();
    expect(sample(text, 'gateway_upstream_gpu_cost_usd_total', 'upstream="pi-digits"')).toBe(0);
    expect(sample(text, 'gateway_dedup_hits_total', 'upstream="null-check",source="dataloader"')).toBe(0);
    m.recordGpuCost('pi-digits', 0.25);
    m.recordGpuCost('pi-digits', 0.5);
    m.recordGpuCost('pi-digits', Number.NaN);
    m.recordGpuCost('pi-digits', -3);
    m.recordSponsorMessage('null-check');
    m.recordDedupHit('null-check', 'dataloader');
    m.recordDedupHit('null-check', 'dataloader');
    text = await m.render();
    expect(sample(text, 'gateway_upstream_gpu_cost_usd_total', 'upstream="pi-digits"')).toBe(0.75);
    expect(sample(text, 'gateway_sponsor_messages_total', 'upstream="null-check"')).toBe(1);
    expect(sample(text, 'gateway_dedup_hits_total', 'upstream="null-check",source="dataloader"')).toBe(2);
  });

  it('shows the breaker state as a state set: 1 for the current state only', async () => {
    const m = createGatewayMetrics({ defaultMetrics: false });
    let text = await m.render();
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="closed"')).toBe(1);
    m.setBreakerState('pi-digits', 'open');
    text = await m.render();
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="closed"')).toBe(0);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="pi-digits",state="open"')).toBe(1);
    expect(sample(text, 'gateway_upstream_breaker_state', 'upstream="null-check",state="closed"')).toBe(1);
  });

  it('includes the default process metrics unless turned off', async () => {
    const withDefaults = createGatewayMetrics();
    const without = createGatewayMetrics({ defaultMetrics: false });
    expect(await withDefaults.render()).toContain('process_cpu_user_seconds_total');
    expect(await without.render()).not.toContain('process_cpu_user_seconds_total');
    expect(withDefaults.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });
});
