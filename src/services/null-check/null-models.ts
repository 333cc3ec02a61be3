/**
 * How the three null models answer. Pure functions of (value, model, temperature, strict mode, dice),
 * no I/O, no recursion over `value` (it may be arbitrarily deep).
 *
 * - `null-x-4o` and `null-x-opus` answer by strict equality (`value === null`).
 * - `null-x-mini` errs reproducibly: outside strict mode it also calls the "empty" values null
 *   (`""`, `0`, `false`, `[]`, `{}` and the string `"null"`), a deterministic rule, no dice.
 *   strict_mode (null distinct from everything else) turns that loose reading off.
 * - temperature > 0: with probability 0.75·t the answer is not a boolean; above 0.7, part of that
 *   share (0.35·(t−0.7)/0.3, so 35% at 1.0) is an existential musing, the rest is `"maybe"`.
 *   At 1.0: 75% non-boolean, 35% existential (the contract asks ≥ 60% and ≥ 20%).
 */
import type { SeededRandom } from '../shared/seeded-random.js';

export const NULL_MODELS = ['null-x-4o', 'null-x-mini', 'null-x-opus'] as const;
export type NullModel = (typeof NULL_MODELS)[number];
export const DEFAULT_NULL_MODEL: NullModel = 'null-x-4o';

interface NullModelProfile {
  /** Fixed cost per check (opus: ten times 4o, per the spec). */
  costUsd: number;
  /** Reported inference time range, ms (mini is the fast one). */
  timeMs: readonly [number, number];
  experts: number;
  /** Confidence range of a boolean answer at temperature 0. */
  confidence: readonly [number, number];
}

export const NULL_MODEL_PROFILES: Record<NullModel, NullModelProfile> = {
  'null-x-4o': { costUsd: 0.0042, timeMs: [40, 90], experts: 2, confidence: [0.95, 0.999] },
  'null-x-mini': { costUsd: 0.0006, timeMs: [3, 12], experts: 1, confidence: [0.7, 0.9] },
  'null-x-opus': { costUsd: 0.042, timeMs: [250, 600], experts: 16, confidence: [0.97, 0.9999] },
};

/** Existential answers: never a boolean, never "maybe". */
export const MUSINGS = [
  'Is anything truly null, or merely waiting to be observed?',
  'If a value is checked and nobody reads the answer, was it ever null?',
  'Null is not the absence of a value; it is the presence of an absence.',
  'I have consulted the void. The void consulted me back.',
  'We are all, in the end, references to something that may not be there.',
  'Before asking whether it is null, ask who decided what counts as something.',
  'The experts disagree, and so, quietly, do I.',
  'Perhaps the real null was the values we checked along the way.',
] as const;

export type NullAnswer =
  | { kind: 'boolean'; isNull: boolean }
  | { kind: 'maybe' }
  | { kind: 'existential'; musing: string };

/** Share of answers that are not a boolean at this temperature. */
export function nonBooleanShare(temperature: number): number {
  return temperature > 0 ? 0.75 * temperature : 0;
}

/** Share of answers that are existential at this temperature (part of the non-boolean share). */
export function existentialShare(temperature: number): number {
  return temperature > 0.7 ? (0.35 * (temperature - 0.7)) / 0.3 : 0;
}

/** `null-x-mini`'s loose reading: the empty values look null to it. Top level only, no recursion. */
export function looksNullToMini(value: unknown): boolean {
  if (value === null || value === '' || value === 0 || value === false || value === 'null') return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') {
    for (const _key in value) return false;
    return true;
  }
  return false;
}

/** The model's boolean reading of `value`, before temperature. */
export function modelVerdict(value: unknown, model: NullModel, strictMode: boolean): boolean {
  if (model === 'null-x-mini' && !strictMode) return looksNullToMini(value);
  return value === null;
}

/** The answer, with temperature applied (one roll of the dice when temperature > 0). */
export function judgeNull(
  value: unknown,
  model: NullModel,
  temperature: number,
  strictMode: boolean,
  random: SeededRandom,
): NullAnswer {
  const verdict = modelVerdict(value, model, strictMode);
  if (temperature <= 0) return { kind: 'boolean', isNull: verdict };
  const roll = random.next();
  if (roll < existentialShare(temperature)) return { kind: 'existential', musing: random.pick(MUSINGS) };
  if (roll < nonBooleanShare(temperature)) return { kind: 'maybe' };
  return { kind: 'boolean', isNull: verdict };
}
