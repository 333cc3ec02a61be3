/** The model behaviour of the reference services as pure functions (no HTTP). */
import { describe, expect, it } from 'vitest';
import {
  existentialShare,
  judgeNull,
  looksNullToMini,
  MUSINGS,
  modelVerdict,
  type NullAnswer,
  type NullModel,
  nonBooleanShare,
} from '../../src/services/null-check/null-models.js';
import {
  analyse,
  MAX_DEPTH,
  MAX_REFERENCES,
  REFERENCES,
  SCHOOLS,
  VERDICT_STABILITIES,
} from '../../src/services/null-check/philosophical-analysis.js';
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

describe('philosophical analysis (v2)', () => {
  const MODELS: NullModel[] = ['null-x-mini', 'null-x-4o', 'null-x-opus'];
  const ANSWERS: NullAnswer[] = [
    { kind: 'boolean', isNull: true },
    { kind: 'boolean', isNull: false },
    { kind: 'maybe' },
    { kind: 'existential', musing: MUSINGS[0] },
  ];

  it('every field has its type and range, for every model, temperature and kind of answer', () => {
    const random = createSeededRandom(1);
    for (const model of MODELS) {
      for (const temperature of [0, 0.25, 0.7, 0.71, 1]) {
        for (const answer of ANSWERS) {
          const a = analyse(answer, model, temperature, random);
          expect(SCHOOLS).toContain(a.school);
          expect(a.certainty).toBeGreaterThanOrEqual(0);
          expect(a.certainty).toBeLessThanOrEqual(1);
          expect(a.argument).not.toContain('%');
          expect(a.references.length).toBeGreaterThanOrEqual(1);
          expect(a.references.length).toBeLessThanOrEqual(MAX_REFERENCES);
          expect(new Set(a.references).size).toBe(a.references.length);
          for (const reference of a.references) expect(REFERENCES).toContain(reference);
          expect(VERDICT_STABILITIES).toContain(a.verdict_stability);
          expect(Number.isInteger(a.depth)).toBe(true);
          expect(a.depth).toBeGreaterThanOrEqual(1);
          expect(a.depth).toBeLessThanOrEqual(MAX_DEPTH);
        }
      }
    }
  });

  it('is a function of its inputs and the dice: the same seed gives the same analyses', () => {
    const run = (seed: number) => {
      const random = createSeededRandom(seed);
      return ANSWERS.flatMap((answer) => MODELS.map((model) => analyse(answer, model, 0.8, random)));
    };
    expect(run(3)).toEqual(run(3));
    expect(run(4)).not.toEqual(run(3));
  });

  it('the school follows the answer: existential schools for existential answers only', () => {
    const random = createSeededRandom(8);
    const existential = ['existentialism', 'nihilism', 'absurdism'];
    for (let i = 0; i < 300; i++) {
      const answer = ANSWERS[i % ANSWERS.length] as NullAnswer;
      const a = analyse(answer, 'null-x-opus', 1, random);
      if (answer.kind === 'existential') {
        expect(existential).toContain(a.school);
        expect(a.verdict_stability).toBe('dissolved');
        expect(a.argument).toContain('cannot be said to be null or not null');
      } else {
        expect(existential).not.toContain(a.school);
        expect(a.verdict_stability).toBe('wavering');
      }
      if (answer.kind === 'maybe') expect(['phenomenology', 'pragmatism']).toContain(a.school);
    }
  });

  it('temperature above 0 lets boolean verdicts drift to phenomenology, about t/2 of the time', () => {
    const random = createSeededRandom(11);
    const drift = (t: number) => {
      let n = 0;
      for (let i = 0; i < 2000; i++)
        if (analyse(ANSWERS[0] as NullAnswer, 'null-x-4o', t, random).school === 'phenomenology') n++;
      return n / 2000;
    };
    expect(drift(0)).toBe(0);
    expect(drift(1)).toBeGreaterThan(0.4);
    expect(drift(1)).toBeLessThan(0.6);
  });

  it('depth and reference count are fixed by model and temperature', () => {
    const random = createSeededRandom(2);
    const answer = ANSWERS[1] as NullAnswer;
    expect(MODELS.map((m) => analyse(answer, m, 0, random).depth)).toEqual([1, 2, 4]);
    expect(MODELS.map((m) => analyse(answer, m, 1, random).depth)).toEqual([4, 5, 7]);
    expect(MODELS.map((m) => analyse(answer, m, 0.7, random).references.length)).toEqual([1, 2, 4]);
    expect(MODELS.map((m) => analyse(answer, m, 0.71, random).references.length)).toEqual([2, 3, 5]);
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
