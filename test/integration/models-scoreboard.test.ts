/**
 * Models measured against the truth (docs/graphql.md, Models): a scripted upstream whose models are
 * right exactly as often as each test says (test/fixtures/scripted-models.ts), so the scoreboard's
 * counts, its Wilson bounds, the model routing chooses at each threshold and band, and what the
 * estimate, the cap, the budget and the fallback make of it are all exact.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ModelScore } from '../../src/gateway/models/scoreboard.js';
import { wilsonLowerBound } from '../../src/gateway/models/wilson.js';
import { scriptModels } from '../fixtures/scripted-models.js';
import type { TestGateway } from '../support/gateway.js';
import { codes, gql } from '../support/graphql-client.js';
import { metricValue } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { until } from '../support/waits.js';

const scripted = useScriptedGateways();
const WARM = { authorization: 'Bearer sk-warm-up' };

const MODELS = '{ models { service model band answers correct accuracy accuracyLowerBound meanCostUsd } }';

/** The fields MODELS asks for. */
type Row = Pick<
  ModelScore,
  'service' | 'model' | 'band' | 'answers' | 'correct' | 'accuracy' | 'accuracyLowerBound' | 'meanCostUsd'
>;

async function rows(g: TestGateway): Promise<Row[]> {
  const result = await gql(g.url, MODELS);
  expect(result.errors).toBeUndefined();
  return result.data?.models as Row[];
}

const rowOf = (all: Row[], model: string, band = '0') =>
  all.find((r) => r.model === model && r.band === band);

/** `n` null checks of distinct values (none null but every 5th) with this model at this temperature. */
async function checks(g: TestGateway, model: string, n: number, temperature = 0, from = 0): Promise<void> {
  for (let i = from; i < from + n; i++) {
    const value = i % 5 === 0 ? 'null' : String(i);
    const result = await gql(
      g.url,
      `{ isNull(value: ${value}, model: ${model}, temperature: ${temperature}) { __typename } }`,
      { headers: WARM },
    );
    expect(result.errors).toBeUndefined();
  }
}

const ROUTED = `query Routed($m: Float, $t: Float) {
  routed: isNull(value: 1, minAccuracy: $m, temperature: $t) { ... on NullCheck { modelName correct } }
}`;

describe('the scoreboard', () => {
  it('counts each answer against the truth, with the Wilson lower bound, in models and /metrics', async () => {
    scriptModels(scripted.upstream, { 'null-x-mini': 0.8, 'pi-x-mini': { '(0.7, 1]': 0.5 } });
    const g = await scripted.gateway();
    await checks(g, 'NULL_X_MINI', 50);
    await checks(g, 'NULL_X_4O', 30, 0, 100);
    for (let i = 1; i <= 10; i++) {
      const result = await gql(
        g.url,
        `{ a: pi(digits: ${i}, model: PI_X_MINI, temperature: 1) { __typename } b: inference(input: { desiredDigits: ${i}, model: PI_X_MINI, temperature: 1, liabilityWaiverSigned: true }) { __typename } }`,
        { headers: WARM },
      );
      expect(result.errors).toBeUndefined();
    }
    // Digits are judged with the digit engine, just after the answer went out.
    expect(await until(async () => rowOf(await rows(g), 'pi-x-mini', '(0.7, 1]')?.answers === 20)).toBe(true);

    const all = await rows(g);
    expect(rowOf(all, 'null-x-mini')).toEqual({
      service: 'null-check',
      model: 'null-x-mini',
      band: '0',
      answers: 50,
      correct: 40,
      accuracy: 0.8,
      accuracyLowerBound: wilsonLowerBound(40, 50),
      meanCostUsd: 0.0006,
    });
    expect(rowOf(all, 'null-x-mini')?.accuracyLowerBound).toBeCloseTo(0.66963, 5);
    expect(rowOf(all, 'null-x-4o')).toMatchObject({ answers: 30, correct: 30, meanCostUsd: 0.0042 });
    expect(rowOf(all, 'null-x-4o')?.accuracyLowerBound).toBeCloseTo(0.88649, 5);
    // pi and inference share the pi-digits service's scores: 20 answers, every second one right.
    expect(rowOf(all, 'pi-x-mini', '(0.7, 1]')).toMatchObject({
      service: 'pi-digits',
      answers: 20,
      correct: 10,
    });
    expect(all.map((r) => `${r.model} ${r.band}`)).toEqual([
      'null-x-4o 0',
      'null-x-mini 0',
      'pi-x-mini (0.7, 1]',
    ]);

    const registry = g.app.metrics.registry;
    const series = (model: string, band: string, outcome: string) =>
      metricValue(registry, 'gateway_model_answers_total', {
        upstream: model.startsWith('null') ? 'null-check' : 'pi-digits',
        model,
        band,
        outcome,
      });
    expect(await series('null-x-mini', '0', 'correct')).toBe(40);
    expect(await series('null-x-mini', '0', 'incorrect')).toBe(10);
    expect(await series('pi-x-mini', '(0.7, 1]', 'correct')).toBe(10);
    expect(await series('pi-x-mini', '(0.7, 1]', 'incorrect')).toBe(10);
  });

  it('scores a cached answer and calls shared within one operation once', async () => {
    scriptModels(scripted.upstream, {});
    const g = await scripted.gateway({ RESPONSE_CACHE: 'true' });
    const before = scripted.upstream.count('POST', '/api/v1/check');
    for (let i = 0; i < 3; i++) {
      const cached = await gql(g.url, '{ isNull(value: 7, model: NULL_X_4O) { __typename } }');
      expect(cached.errors).toBeUndefined();
    }
    const twice = await gql(
      g.url,
      '{ a: isNull(value: 8, model: NULL_X_4O) { __typename } b: isNull(value: 8, model: NULL_X_4O) { __typename } c: pi(digits: 4) { __typename } d: pi(digits: 4) { __typename } }',
    );
    expect(twice.errors).toBeUndefined();
    expect(scripted.upstream.count('POST', '/api/v1/check') - before).toBe(2);
    expect(await until(async () => rowOf(await rows(g), 'pi-x-4o')?.answers === 1)).toBe(true);
    const all = await rows(g);
    expect(rowOf(all, 'null-x-4o')).toMatchObject({ answers: 2, correct: 2 });
    expect(rowOf(all, 'pi-x-4o')).toMatchObject({ answers: 1, correct: 1 });
  });
});

describe('routing by minAccuracy', () => {
  it('picks the cheapest model good enough at the band, the best measured when none is, the default when nothing is', async () => {
    scriptModels(scripted.upstream, { 'null-x-mini': { '0': 0.8, '(0, 0.7]': 1 } });
    const g = await scripted.gateway();
    // Nothing measured: the default model, and routing says so.
    const cold = await gql(g.url, ROUTED, { variables: { m: 0.5 } });
    expect(cold.data?.routed.modelName).toBe('null-x-4o');
    expect((cold.extensions?.cost as { routing?: unknown } | undefined)?.routing).toEqual([
      { path: 'routed', minAccuracy: 0.5, model: 'null-x-4o', accuracyLowerBound: null, answers: 0 },
    ]);

    await checks(g, 'NULL_X_MINI', 50); // 40/50: lower bound 0.670
    await checks(g, 'NULL_X_4O', 49, 0, 100); // with the cold call, 50/50: lower bound 0.929
    await checks(g, 'NULL_X_MINI', 40, 0.5, 200); // 40/40 at (0, 0.7]: lower bound 0.912

    const chosen = async (m: number, t?: number) => {
      const result = await gql(g.url, ROUTED, { variables: { m, t } });
      expect(result.errors).toBeUndefined();
      return {
        model: result.data?.routed.modelName as string,
        routing: (result.extensions?.cost as { routing?: unknown[] } | undefined)?.routing,
      };
    };
    const half = await chosen(0.5);
    expect(half.model).toBe('null-x-mini');
    expect(half.routing).toEqual([
      {
        path: 'routed',
        minAccuracy: 0.5,
        model: 'null-x-mini',
        accuracyLowerBound: wilsonLowerBound(40, 50),
        answers: 50,
      },
    ]);
    // Each routed call is scored too: mini's row at band 0 moves on from here; 4o's as well.
    expect((await chosen(0.9)).model).toBe('null-x-4o');
    // None reaches 0.99: the highest lower bound among the measured.
    expect((await chosen(0.99)).model).toBe('null-x-4o');
    // Another band, other scores: mini is measured at 0.912 there.
    expect((await chosen(0.9, 0.5)).model).toBe('null-x-mini');
    // Nothing measured at (0.7, 1]: the default.
    expect((await chosen(0.1, 0.9)).model).toBe('null-x-4o');

    // What routing saved against the default (4o, 0.0042): mini twice (0.0036 each).
    const saved = await metricValue(g.app.metrics.registry, 'gateway_routing_saved_usd_total', {
      upstream: 'null-check',
    });
    expect(saved).toBeCloseTo(0.0072, 10);
  });

  it('respects MODEL_MIN_SAMPLES: a model with fewer answers does not qualify', async () => {
    scriptModels(scripted.upstream, {});
    const g = await scripted.gateway({ MODEL_MIN_SAMPLES: '60' });
    await checks(g, 'NULL_X_MINI', 50); // 50/50, lower bound 0.929, but under 60 answers
    await checks(g, 'NULL_X_4O', 60, 0, 100); // 60/60, lower bound 0.940
    const result = await gql(g.url, ROUTED, { variables: { m: 0.5 } });
    expect(result.data?.routed.modelName).toBe('null-x-4o');
  });

  it('refuses minAccuracy outside 0..1 and beside a model with BAD_USER_INPUT, calling nothing', async () => {
    scriptModels(scripted.upstream, {});
    const g = await scripted.gateway();
    const before = scripted.upstream.requests.length;
    for (const query of [
      '{ isNull(value: 1, minAccuracy: 1.5) { __typename } }',
      '{ isNull(value: 1, minAccuracy: -0.1) { __typename } }',
      '{ isNull(value: 1, model: NULL_X_MINI, minAccuracy: 0.5) { __typename } }',
      '{ pi(minAccuracy: 2) { __typename } }',
      '{ pi(model: PI_X_4O, minAccuracy: 0.5) { __typename } }',
      '{ inference(input: { desiredDigits: 3, minAccuracy: 1.01, liabilityWaiverSigned: true }) { __typename } }',
      '{ inference(input: { desiredDigits: 3, model: PI_X_MINI, minAccuracy: 0.2, liabilityWaiverSigned: true }) { __typename } }',
    ]) {
      const result = await gql(g.url, query);
      expect(codes(result), query).toEqual(['BAD_USER_INPUT']);
    }
    expect(scripted.upstream.requests.length).toBe(before);
  });

  it('routes pi and inference by the pi-digits scores they share', async () => {
    scriptModels(scripted.upstream, { 'pi-x-mini': 1 });
    const g = await scripted.gateway();
    for (let i = 0; i < 20; i++) {
      const result = await gql(
        g.url,
        `{ a: pi(digits: ${i + 1}, model: PI_X_MINI) { __typename } b: inference(input: { desiredDigits: ${i + 1}, model: PI_X_MINI, liabilityWaiverSigned: true }) { __typename } }`,
        { headers: WARM },
      );
      expect(result.errors).toBeUndefined();
    }
    expect(await until(async () => rowOf(await rows(g), 'pi-x-mini')?.answers === 40)).toBe(true);
    const result = await gql(
      g.url,
      'query R($input: InferenceInput!) { p: pi(digits: 5, minAccuracy: 0.9) { ... on ConstantDigits { modelName } } i: inference(input: $input) { ... on Inference { modelName } } }',
      { variables: { input: { desiredDigits: 5, minAccuracy: 0.9, liabilityWaiverSigned: true } } },
    );
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ p: { modelName: 'pi-x-mini' }, i: { modelName: 'pi-x-mini' } });
    const routing =
      (result.extensions?.cost as { routing?: Array<{ path: string; model: string }> } | undefined)
        ?.routing ?? [];
    expect(routing.map((r) => [r.path, r.model])).toEqual([
      ['p', 'pi-x-mini'],
      ['i', 'pi-x-mini'],
    ]);
  });
});

describe('routing under the cost rules', () => {
  /** 4o 50/50 (0.929), mini 40/50 (0.670) at band 0. */
  async function warmed(env: Record<string, string>): Promise<TestGateway> {
    scriptModels(scripted.upstream, { 'null-x-mini': 0.8 });
    const g = await scripted.gateway(env);
    await checks(g, 'NULL_X_MINI', 50);
    await checks(g, 'NULL_X_4O', 50, 0, 100);
    return g;
  }

  it('estimates and caps the model chosen; the fallback steps down from it', async () => {
    const g = await warmed({});
    const cap = { 'x-max-cost-usd': '0.001' };
    const dear = await gql(g.url, ROUTED, { variables: { m: 0.9 }, headers: cap });
    expect(codes(dear)).toEqual(['BUDGET_EXCEEDED']);
    expect(dear.errors?.[0]?.extensions).toMatchObject({ estimatedCostUsd: 0.0042, maxCostUsd: 0.001 });
    const cheap = await gql(g.url, ROUTED, { variables: { m: 0.5 }, headers: cap });
    expect(cheap.data?.routed.modelName).toBe('null-x-mini');
    expect(cheap.extensions?.cost).toMatchObject({ estimatedCostUsd: 0.0006, gpuCostUsd: 0.0006 });

    const fell = await gql(g.url, ROUTED, {
      variables: { m: 0.9 },
      headers: { ...cap, 'x-budget-fallback': 'cheaper-model' },
    });
    expect(fell.data?.routed.modelName).toBe('null-x-mini');
    expect(fell.extensions?.cost).toMatchObject({
      fallbacks: [{ path: 'routed', requestedModel: 'null-x-4o', usedModel: 'null-x-mini' }],
      routing: [{ path: 'routed', minAccuracy: 0.9, model: 'null-x-4o' }],
    });
  });

  it('reserves the chosen model’s estimate in the budget', async () => {
    // This key's own budget: the warm-up's key has none.
    const digest = createHash('sha256').update('sk-routed').digest('hex');
    const g = await warmed({ COST_BUDGETS: JSON.stringify({ [`key:${digest}`]: { '1h': 0.005 } }) });
    const key = { authorization: 'Bearer sk-routed' };
    const first = await gql(g.url, ROUTED, { variables: { m: 0.9 }, headers: key });
    expect(first.data?.routed.modelName).toBe('null-x-4o');
    // 0.0008 left: 4o no longer fits, mini does.
    const second = await gql(g.url, ROUTED, { variables: { m: 0.9 }, headers: key });
    expect(codes(second)).toEqual(['BUDGET_EXCEEDED']);
    expect(second.errors?.[0]?.extensions).toMatchObject({ estimatedCostUsd: 0.0042 });
    const third = await gql(g.url, ROUTED, { variables: { m: 0.5 }, headers: key });
    expect(third.data?.routed.modelName).toBe('null-x-mini');
  });
});
