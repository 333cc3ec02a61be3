/**
 * How the three pi models answer, as pure functions of the true digits, the seed and the dice.
 *
 * - `pi-x-4o` returns the true digits.
 * - `pi-x-mini` errs reproducibly: about one decimal place in seven is wrong. Which places, and what
 *   they become, depend only on the seed and the position (a stateless hash), so the same seed always
 *   gives the same wrong digits, whatever the order of requests.
 * - `pi-x-opus-almost-correct` gets the last decimal place wrong by one ((d + 1) mod 10); with 0
 *   decimals there is no decimal place to get wrong and it answers "3".
 * - temperature > 0: e instead of pi with probability 0.4·t (40% at 1.0; the contract asks ≥ 25%).
 *   The model's own error applies to e as well.
 */
import type { Constant } from '../../digits/digit-engine.js';
import { hash32, type SeededRandom } from '../shared/seeded-random.js';

export const PI_MODELS = ['pi-x-4o', 'pi-x-mini', 'pi-x-opus-almost-correct'] as const;
export type PiModel = (typeof PI_MODELS)[number];
export const DEFAULT_PI_MODEL: PiModel = 'pi-x-4o';

interface PiModelProfile {
  /** gpu_cost_usd = base + perDigit · decimals. */
  costUsd: { base: number; perDigit: number };
  /** inference_time_ms = base + decimals / digitsPerMs + jitter. */
  timeMs: { base: number; digitsPerMs: number; jitter: number };
  /** Confidence range at temperature 0 (opus is confidently almost correct). */
  confidence: readonly [number, number];
  /** Price per token of the inference endpoint. */
  usdPerToken: number;
}

export const PI_MODEL_PROFILES: Record<PiModel, PiModelProfile> = {
  'pi-x-4o': {
    costUsd: { base: 0.0031, perDigit: 0.000002 },
    timeMs: { base: 35, digitsPerMs: 5000, jitter: 40 },
    confidence: [0.97, 0.999],
    usdPerToken: 0.00002,
  },
  'pi-x-mini': {
    costUsd: { base: 0.0004, perDigit: 0.0000003 },
    timeMs: { base: 6, digitsPerMs: 20000, jitter: 8 },
    confidence: [0.8, 0.95],
    usdPerToken: 0.000004,
  },
  'pi-x-opus-almost-correct': {
    costUsd: { base: 0.031, perDigit: 0.00002 },
    timeMs: { base: 300, digitsPerMs: 1000, jitter: 300 },
    confidence: [0.99, 0.9999],
    usdPerToken: 0.0002,
  },
};

/** Probability of answering e instead of pi at this temperature. */
export function eShare(temperature: number): number {
  return temperature > 0 ? 0.4 * temperature : 0;
}

/** Which constant the model "recalls": one roll of the dice, only when temperature > 0. */
export function chooseConstant(temperature: number, random: SeededRandom): Constant {
  if (temperature <= 0) return 'pi';
  return random.next() < eShare(temperature) ? 'e' : 'pi';
}

/** One decimal place in MINI_ERROR_PERIOD (on average) is wrong in `pi-x-mini` answers. */
export const MINI_ERROR_PERIOD = 7;

/** Whether `pi-x-mini` gets decimal place `position` (1-based) wrong under `seed`, and the wrong digit. */
export function miniWrongDigit(seed: number, position: number, trueDigit: number): number | undefined {
  const h = hash32(seed, position);
  if (h % MINI_ERROR_PERIOD !== 0) return undefined;
  // 1..9 added mod 10: always a different digit.
  return (trueDigit + 1 + ((h >>> 8) % 9)) % 10;
}

/** The model's rendering of the true digits `truth` ("3" or "3.14..."). */
export function applyModel(model: PiModel, truth: string, seed: number): string {
  if (truth.length <= 2 || model === 'pi-x-4o') return truth;
  if (model === 'pi-x-opus-almost-correct') {
    const last = truth.charCodeAt(truth.length - 1) - 48;
    return truth.slice(0, -1) + String((last + 1) % 10);
  }
  // Byte buffer: a million-digit answer is rewritten in place in a few milliseconds.
  const bytes = Buffer.from(truth, 'latin1');
  for (let i = 2; i < bytes.length; i++) {
    const wrong = miniWrongDigit(seed, i - 1, (bytes[i] as number) - 48);
    if (wrong !== undefined) bytes[i] = 48 + wrong;
  }
  return bytes.toString('latin1');
}
