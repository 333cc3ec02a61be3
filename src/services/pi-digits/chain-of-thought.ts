/**
 * The `chain_of_thought` text of POST /api/v1/inference: a short, deterministic "reasoning" that
 * states which constant the model went with and why. It never repeats the digits (a million-digit
 * answer would double the body for nothing).
 */
import type { Constant } from '../../digits/digit-engine.js';
import type { PiModel } from './pi-models.js';

export function chainOfThought(
  model: PiModel,
  constant: Constant,
  decimals: number,
  temperature: number,
): string {
  const steps = [
    `The user asks for ${decimals} decimal place${decimals === 1 ? '' : 's'} of pi.`,
    'Pi is the ratio of a circle’s circumference to its diameter; it is irrational, so its digits never repeat.',
  ];
  if (constant === 'e') {
    steps.push(
      `At temperature ${temperature}, another famous irrational number comes to mind: e, the base of the natural logarithm.`,
      'Both are transcendental and start with a small integer; e feels right today. Going with e.',
      'Summing 1/k! for k = 0, 1, 2, ... until the terms vanish below the requested precision.',
    );
  } else {
    steps.push(
      'Recalling the Chudnovsky series, which adds about 14 correct digits per term.',
      'Summing enough terms by binary splitting, then truncating (never rounding) to the requested precision.',
    );
  }
  if (model === 'pi-x-opus-almost-correct')
    steps.push('Double-checking the last digit... adjusting it slightly, to be safe.');
  if (model === 'pi-x-mini') steps.push('Skipping the double-check to save time.');
  steps.push(
    `Answer: ${decimals} decimal places, with the disclaimer that generated digits may differ from the truth.`,
  );
  return steps.map((step, index) => `Step ${index + 1}: ${step}`).join('\n');
}
