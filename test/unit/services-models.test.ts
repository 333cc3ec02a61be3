/** The model behaviour of the reference services as pure functions (no HTTP). */
import { describe, expect, it } from 'vitest';
import {
  existentialShare,
  judgeNull,
  looksNullToMini,
  MUSINGS,
  modelVerdict,
  nonBooleanShare,
} from '../../src/services/null-check/null-models.js';
import { chainOfThought } from '../../src/services/pi-digits/chain-of-thought.js';
import {
  applyModel,
  chooseConstant,
  eShare,
  miniWrongDigit,
} from '../../src/services/pi-digits/pi-models.js';
import { createSeededRandom } from '../../src/services/shared/seeded-random.js';

describe('null models', () => {
  it('4o and opus: strict equality, whatever strict mode says', () => {
    for (const value of [null, 0, '', false, [], {}, 'null', 1, [null]]) {
      for (const strict of [false, true]) {
        expect(modelVerdict(value, 'null-x-4o', strict)).toBe(value === null);
        expect(modelVerdict(value, 'null-x-opus', strict)).toBe(value === null);
      }
    }
  });

  it('mini: the empty values look null to it, top level only', () => {
    for (const value of [null, 0, '', false, [], {}, 'null']) expect(looksNullToMini(value)).toBe(true);
    for (const value of [1, 'x', true, [null], [[]], { a: null }, -0.5])
      expect(looksNullToMini(value)).toBe(false);
    expect(modelVerdict('', 'null-x-mini', true)).toBe(false);
  });

  it('mini on a very deep value does not recurse', () => {
    let deep: unknown[] = [];
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(looksNullToMini(deep)).toBe(false);
  });

  it('shares: none at 0, maybe only up to 0.7, contract figures at 1.0', () => {
    expect(nonBooleanShare(0)).toBe(0);
    expect(existentialShare(0.7)).toBe(0);
    expect(existentialShare(0.5)).toBe(0);
    expect(nonBooleanShare(1)).toBeGreaterThanOrEqual(0.6);
    expect(existentialShare(1)).toBeGreaterThanOrEqual(0.2);
    expect(existentialShare(1)).toBeLessThanOrEqual(nonBooleanShare(1));
    for (let t = 0.1; t <= 1; t += 0.1) expect(nonBooleanShare(t)).toBeGreaterThan(nonBooleanShare(t - 0.1));
  });

  it('judgeNull at 1.0 over 2000 rolls matches the shares', () => {
    const random = createSeededRandom(3);
    const kinds = { boolean: 0, maybe: 0, existential: 0 };
    for (let i = 0; i < 2000; i++) {
      const answer = judgeNull(null, 'null-x-4o', 1, false, random);
      kinds[answer.kind]++;
      if (answer.kind === 'existential') expect(MUSINGS).toContain(answer.musing);
      if (answer.kind === 'boolean') expect(answer.isNull).toBe(true);
    }
    expect((kinds.maybe + kinds.existential) / 2000).toBeGreaterThan(0.65);
    expect(kinds.existential / 2000).toBeGreaterThan(0.28);
  });

  it('temperature 0 consumes no randomness', () => {
    const random = createSeededRandom(5);
    judgeNull(1, 'null-x-4o', 0, false, random);
    expect(random.next()).toBe(createSeededRandom(5).next());
  });
});

describe('pi models', () => {
  const truth = '3.14159265358979323846264338327950288419716939937510';

  it('4o returns the truth; opus the last place plus one; both keep "3"', () => {
    expect(applyModel('pi-x-4o', truth, 1)).toBe(truth);
    expect(applyModel('pi-x-opus-almost-correct', '3.14159', 1)).toBe('3.14150');
    expect(applyModel('pi-x-opus-almost-correct', '3.1', 1)).toBe('3.2');
    expect(applyModel('pi-x-opus-almost-correct', '3', 1)).toBe('3');
    expect(applyModel('pi-x-mini', '3', 1)).toBe('3');
  });

  it('mini: wrong places depend on seed and position only, and a wrong digit is always different', () => {
    const a = applyModel('pi-x-mini', truth, 42);
    expect(applyModel('pi-x-mini', truth, 42)).toBe(a);
    expect(applyModel('pi-x-mini', truth.slice(0, 20), 42)).toBe(a.slice(0, 20));
    for (let position = 1; position < 500; position++) {
      for (const digit of [0, 5, 9]) {
        const wrong = miniWrongDigit(7, position, digit);
        if (wrong !== undefined) expect(wrong).not.toBe(digit);
      }
    }
  });

  it('mini: about one place in seven is wrong over 10,000 places', () => {
    const long = `3.${'0123456789'.repeat(1000)}`;
    const out = applyModel('pi-x-mini', long, 42);
    let wrong = 0;
    for (let i = 2; i < long.length; i++) if (out[i] !== long[i]) wrong++;
    expect(wrong / 10_000).toBeGreaterThan(0.11);
    expect(wrong / 10_000).toBeLessThan(0.18);
  });

  it('e instead of pi: never at 0, 40% at 1.0', () => {
    expect(eShare(0)).toBe(0);
    expect(eShare(1)).toBeGreaterThanOrEqual(0.25);
    const random = createSeededRandom(9);
    let es = 0;
    for (let i = 0; i < 2000; i++) if (chooseConstant(1, random) === 'e') es++;
    expect(es / 2000).toBeGreaterThan(0.35);
    expect(chooseConstant(0, random)).toBe('pi');
  });

  it('chain of thought names the constant and never repeats the digits', () => {
    expect(chainOfThought('pi-x-4o', 'pi', 5, 0)).toMatch(/Chudnovsky/);
    expect(chainOfThought('pi-x-4o', 'e', 5, 1)).toMatch(/Going with e/);
    expect(chainOfThought('pi-x-4o', 'pi', 1_000_000, 0).length).toBeLessThan(2000);
  });
});
