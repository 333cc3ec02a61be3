/**
 * The shape of /metrics after a representative set of operations, held against a committed record
 * (test/fixtures/metrics-exposition.txt): every `# HELP` and `# TYPE` line and every series' name and
 * labels (bucket bounds included), values aside. The record was taken before the metrics moved from
 * hand-kept tallies to prom-client's own Counter and Histogram (issue 39); no metric name, label,
 * help text or bucket may change with how the metrics are kept.
 *
 * Lines are compared as a sorted set: Prometheus gives no meaning to the order of families or of a
 * family's series, and prom-client lists a family's series in the order they were first touched.
 *
 * A real gateway (`createApp`) in front of a scripted upstream (deterministic answers, so the label
 * sets are too): isNull, pi and inference calls, a response-cache hit, a call shared in an operation,
 * routing by quality, wrong answers scored against the truth, a deprecated and a sponsored answer, an
 * upstream failure, an invalid document, a refusal by X-Max-Cost-Usd, a budget warning and a call
 * abandoned by a client that went away.
 */
import { describe, expect, it } from 'vitest';
import { scriptModels } from '../fixtures/scripted-models.js';
import { gql } from '../support/graphql-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';
import { until } from '../support/waits.js';

const scripted = useScriptedGateways();

/** Each line of a text exposition without its value: `# HELP`/`# TYPE` lines whole, sorted. */
function expositionShape(text: string): string[] {
  const lines = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) lines.add(line);
    else lines.add(line.slice(0, line.lastIndexOf(' ')));
  }
  return [...lines].sort();
}

describe('the metrics exposition', () => {
  it('keeps every help text, type, series name and label set', async () => {
    const up = scripted.upstream;
    scriptModels(up, { 'null-x-mini': 0.5, 'pi-x-mini': 0.5 });
    up.route('GET', '/api/v1/health', { body: { ...nullHealth, ...piHealth } });
    const g = await scripted.gateway({
      RESPONSE_CACHE: 'true',
      RETRY_MAX_ATTEMPTS: '1',
      MODEL_MIN_SAMPLES: '2',
      // A budget no operation here reaches, and a warning early in it.
      COST_BUDGET_USD_PER_HOUR: '1',
      COST_BUDGET_WARNING_RATIO: '0.01',
    });
    const post = (query: string, headers: Record<string, string> = {}) => gql(g.url, query, { headers });

    // isNull: a named query, a shared call (two identical fields), then the same again from the cache.
    const check =
      'query Check { a: isNull(value: 1, temperature: 0) { __typename } b: isNull(value: 1, temperature: 0) { __typename } }';
    expect((await post(check)).errors).toBeUndefined();
    expect((await post(check)).errors).toBeUndefined();
    // A cheaper model, half right, at two temperatures (anonymous operations).
    for (const value of [1, 2, 3, 4])
      await post(`{ isNull(value: ${value}, model: NULL_X_MINI, temperature: 0.5) { __typename } }`);
    // pi, twice (a cache hit), and a model half right.
    for (let i = 0; i < 2; i++)
      expect(
        (await post('query Pi { pi(digits: 3, temperature: 0) { __typename } }')).errors,
      ).toBeUndefined();
    for (const digits of [2, 4])
      await post(`query Mini { pi(digits: ${digits}, model: PI_X_MINI) { __typename } }`);
    // inference.
    await post(
      'query Inf { inference(input: { desiredDigits: 5, temperature: 0, liabilityWaiverSigned: true }) { __typename } }',
    );
    // Routing by quality.
    await post(
      'query Routed { isNull(value: "paradox", minAccuracy: 0.01, temperature: 0.5) { __typename } }',
    );
    // An invalid document; a refusal by the cost cap.
    expect((await post('query Nope { nope }')).errors).toBeDefined();
    const refused = await post('query Capped { pi(digits: 3, temperature: 0.9) { __typename } }', {
      'x-max-cost-usd': '0.0000001',
    });
    expect(refused.errors?.[0]?.extensions?.code).toBe('BUDGET_EXCEEDED');
    // A deprecated answer with a sponsor, then an upstream failure.
    up.route('GET', '/api/v1/pi', {
      headers: { deprecation: 'true' },
      body: piBody({ sponsored_by: 'PiCorp' }),
    });
    await post('query Sponsored { pi(digits: 3, temperature: 0.9) { __typename } }');
    up.route('GET', '/api/v1/pi', { status: 503 });
    const failed = await post('query Fails { pi(digits: 6, temperature: 0.9) { __typename } }');
    expect(failed.errors).toBeDefined();
    // A client that goes away while its call is in flight: the call is abandoned.
    up.route('POST', '/api/v1/check', { hang: true });
    const before = up.count('POST', '/api/v1/check');
    const controller = new AbortController();
    const gone = gql(g.url, 'query Gone { isNull(value: "hang") { __typename } }', {
      signal: controller.signal,
    }).catch(() => 'gone');
    expect(await until(() => up.count('POST', '/api/v1/check') > before)).toBe(true);
    controller.abort();
    expect(await gone).toBe('gone');
    // Counted as the client's going away is noticed: the abandoned call, its attempt and the operation.
    const counted = [
      'gateway_upstream_calls_abandoned_total{upstream="null-check"}',
      'gateway_upstream_requests_total{upstream="null-check",endpoint="check",status="none",outcome="cancelled"}',
      'gateway_operations_total{operation="Gone",type="query",outcome="cancelled"}',
    ];
    expect(
      await until(async () => {
        const text = await g.app.metrics.render();
        return counted.every((series) => text.includes(series));
      }),
    ).toBe(true);

    const text = await g.app.metrics.render();
    await expect(`${expositionShape(text).join('\n')}\n`).toMatchFileSnapshot(
      '../fixtures/metrics-exposition.txt',
    );
  });
});
