/**
 * The scoreboard's arithmetic and the router's choice, without a network: the Wilson lower bound
 * against known values, the band of a temperature, and the model routing picks from given scores.
 */
import { describe, expect, it } from 'vitest';
import { createCostModel } from '../../src/gateway/cost/cost-model.js';
import { createModelRouter } from '../../src/gateway/models/router.js';
import { bandOf, createScoreboard } from '../../src/gateway/models/scoreboard.js';
import { wilsonLowerBound } from '../../src/gateway/models/wilson.js';
import { createScoreStore } from '../../src/gateway/shared-state/score-store.js';
import type { ObservedAnswer } from '../../src/gateway/upstream/dispatch.js';
import { checkPricing } from '../../src/gateway/upstream/null-check-client.js';
import { piPricing } from '../../src/gateway/upstream/pi-digits-client.js';
import { testDigitEngine } from '../support/gateway.js';

describe('wilsonLowerBound', () => {
  it('matches known values of the 95 % Wilson score interval', () => {
    // 81 of 263: the interval [0.2553, 0.3662] (the usual worked example of the Wilson interval).
    expect(wilsonLowerBound(81, 263)).toBeCloseTo(0.2553, 4);
    // Small samples stay honest: 3 of 3 is at least 0.4385, 10 of 10 at least 0.7225.
    expect(wilsonLowerBound(3, 3)).toBeCloseTo(0.4385, 5);
    expect(wilsonLowerBound(10, 10)).toBeCloseTo(0.72247, 5);
    expect(wilsonLowerBound(95, 100)).toBeCloseTo(0.88825, 5);
    expect(wilsonLowerBound(40, 50)).toBeCloseTo(0.66963, 5);
    expect(wilsonLowerBound(1, 2)).toBeCloseTo(0.09453, 5);
    expect(wilsonLowerBound(0, 10)).toBe(0);
    expect(wilsonLowerBound(0, 0)).toBe(0);
  });
});

describe('bandOf', () => {
  it('puts an omitted temperature and 0 in band 0, then (0, 0.7] and (0.7, 1]', () => {
    expect([undefined, 0, 0.01, 0.7, 0.71, 1].map(bandOf)).toEqual([
      '0',
      '0',
      '(0, 0.7]',
      '(0, 0.7]',
      '(0.7, 1]',
      '(0.7, 1]',
    ]);
  });
});

function board() {
  const store = createScoreStore({ link: undefined });
  const scoreboard = createScoreboard({ store, digits: testDigitEngine(), maxCompareDigits: 1000 });
  const check = (model: string, right: boolean, temperature?: number): ObservedAnswer => ({
    truth: { question: 'null', actuallyNull: true, temperature },
    call: checkPricing(model),
    value: { answer: { kind: 'boolean', isNull: right } },
    costUsd: 0.001,
    latencyMs: 10,
  });
  return { store, scoreboard, check };
}

describe('the scoreboard', () => {
  it('counts maybe and existential answers as answers, never as correct', () => {
    const { scoreboard, check } = board();
    scoreboard.record(check('null-x-4o', true));
    scoreboard.record({ ...check('null-x-4o', true), value: { answer: { kind: 'maybe' } } });
    scoreboard.record({
      ...check('null-x-4o', true),
      value: { answer: { kind: 'existential', musing: '?' } },
    });
    expect(scoreboard.rows()).toEqual([
      expect.objectContaining({ model: 'null-x-4o', answers: 3, correct: 1, maybe: 1, existential: 1 }),
    ]);
  });

  it('scores digits: pi with every requested place right; e is e-instead-of-pi; a wrong place is wrong', async () => {
    const { scoreboard } = board();
    const digits = (text: string, requested: number): ObservedAnswer => ({
      truth: { question: 'digits', requestedDigits: requested, temperature: 1 },
      call: piPricing('pi-x-mini', requested),
      value: { digits: text, constantMarker: null },
      costUsd: 0.0004,
      latencyMs: 5,
    });
    scoreboard.record(digits('3.14159', 5));
    scoreboard.record(digits('3.14158', 5));
    scoreboard.record(digits('3.141', 5)); // clamped: not every requested place
    scoreboard.record(digits('2.71828', 5));
    scoreboard.record(digits('3', 0));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(scoreboard.rows()).toEqual([
      expect.objectContaining({
        model: 'pi-x-mini',
        band: '(0.7, 1]',
        answers: 5,
        correct: 2,
        eInsteadOfPi: 1,
      }),
    ]);
  });
});

describe('the router', () => {
  it('chooses the cheapest qualifying model, else the best measured, else the default; explores only when asked', () => {
    const { scoreboard, check } = board();
    const costModel = createCostModel();
    const route = (minAccuracy: number, temperature?: number) => ({
      ...checkPricing(undefined),
      route: { minAccuracy, temperature },
    });
    const router = createModelRouter({ scoreboard, price: (c) => costModel.expected(c), minSamples: 30 });
    expect(router.choose(route(0.5))).toMatchObject({
      model: 'null-x-4o',
      answers: 0,
      accuracyLowerBound: null,
    });
    for (let i = 0; i < 50; i++) scoreboard.record(check('null-x-opus', true));
    for (let i = 0; i < 50; i++) scoreboard.record(check('null-x-4o', i % 10 !== 0)); // 45/50
    for (let i = 0; i < 20; i++) scoreboard.record(check('null-x-mini', true)); // 20/20 but under 30 answers
    expect(router.choose(route(0.9)).model).toBe('null-x-opus'); // 0.929 ≥ 0.9; 4o: 0.786
    expect(router.choose(route(0.7))).toMatchObject({ model: 'null-x-4o', answers: 50 });
    expect(router.choose(route(0.7)).savedUsd).toBe(0);
    expect(router.choose(route(0.99)).model).toBe('null-x-opus'); // none: the highest lower bound
    expect(router.choose(route(0.5, 1)).model).toBe('null-x-4o'); // nothing measured at (0.7, 1]

    const exploring = createModelRouter({
      scoreboard,
      price: (c) => costModel.expected(c),
      minSamples: 30,
      exploration: 0.1,
      random: () => 0.05,
    });
    expect(exploring.choose(route(0.7))).toMatchObject({ model: 'null-x-mini', explored: true });
    const notThisTime = createModelRouter({
      scoreboard,
      price: (c) => costModel.expected(c),
      minSamples: 30,
      exploration: 0.1,
      random: () => 0.5,
    });
    expect(notThisTime.choose(route(0.7))).toMatchObject({ model: 'null-x-4o', explored: false });
  });
});
