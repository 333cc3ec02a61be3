/**
 * The true digits of pi and e for tests that check the gateway's verdicts: GNU bc's 2,000 places
 * (test/fixtures/README.md), independent of the digit engine the gateway and the services use.
 */
import { readFileSync } from 'node:fs';

export type Constant = 'pi' | 'e';

const BC: Record<Constant, string> = {
  pi: readFileSync(new URL('../fixtures/pi-2000.txt', import.meta.url), 'utf8').trim(),
  e: readFileSync(new URL('../fixtures/e-2000.txt', import.meta.url), 'utf8').trim(),
};

/** The most places these digits hold. */
export const TRUE_PLACES = 2000;

/** The constant truncated to `places` decimals, as the gateway writes it (`"3"` for 0 places). */
export function trueDigits(constant: Constant, places: number): string {
  if (places > TRUE_PLACES) throw new RangeError(`bc's fixtures hold ${TRUE_PLACES} places, not ${places}`);
  return places === 0 ? BC[constant].slice(0, 1) : BC[constant].slice(0, 2 + places);
}

/**
 * Leading decimal places of `digits` that agree with the true `constant` (0 when the integer part
 * differs), up to the fixtures' 2,000 (a longer answer is an error of the test).
 */
export function agreeingPlaces(digits: string, constant: Constant): number {
  const [integer, decimals = ''] = digits.split('.');
  const truth = trueDigits(constant, decimals.length);
  const [trueInteger, trueDecimals = ''] = truth.split('.');
  if (integer !== trueInteger) return 0;
  let i = 0;
  while (i < decimals.length && decimals[i] === trueDecimals[i]) i++;
  return i;
}

/** Which constant `digits` are, by their integer part: '3' pi, '2' e, anything else undefined. */
export function constantOf(digits: string): Constant | undefined {
  const integer = digits.split('.')[0];
  return integer === '3' ? 'pi' : integer === '2' ? 'e' : undefined;
}
