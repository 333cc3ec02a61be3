/**
 * What the gateway knows better than the models: whether digits are pi or e, and how many of them
 * are right.
 *
 * The member (pi or e) needs only the integer part: a constant whose integer part differs scores
 * below any constant whose integer part matches, so "compare with both, the larger wins" reduces to
 * "3 → pi, 2 → e, anything else → pi (the tie rule)". The true digits (the digit engine, which
 * caches) are needed only for `correctDigits`, which is resolved only when selected.
 */
import type { DigitEngine } from '../../digits/digit-engine.js';

export type Constant = 'pi' | 'e';

const INTEGER_PART: Record<Constant, string> = { pi: '3', e: '2' };

/** `"3.14"` → `{ integer: "3", decimals: "14" }`; no point → no decimals. */
export function splitDigits(digits: string): { integer: string; decimals: string } {
  const text = digits.trim();
  const point = text.indexOf('.');
  return point < 0
    ? { integer: text, decimals: '' }
    : { integer: text.slice(0, point), decimals: text.slice(point + 1) };
}

/**
 * The constant the digits are: the upstream's explicit marker when it sent one, else the constant
 * whose integer part matches (ties, including no match at all, go to pi).
 */
export function classifyDigits(digits: string, marker: Constant | null): Constant {
  if (marker) return marker;
  return splitDigits(digits).integer === INTEGER_PART.e ? 'e' : 'pi';
}

/**
 * How many leading decimal places of `digits` agree with the true `constant` (0 when the integer
 * part differs). At most `maxPlaces` places are compared, so a hallucinated 10-million-digit answer
 * cannot make the gateway compute 10 million digits.
 */
export async function correctDigits(
  engine: DigitEngine,
  digits: string,
  constant: Constant,
  maxPlaces: number,
): Promise<number> {
  const { integer, decimals } = splitDigits(digits);
  if (integer !== INTEGER_PART[constant]) return 0;
  const places = Math.min(decimals.length, maxPlaces);
  if (places === 0) return 0;
  const truth = engine.peek(constant, places) ?? (await engine.digits(constant, places));
  const trueDecimals = splitDigits(truth).decimals;
  return agreeingPrefix(decimals, trueDecimals, places);
}

/** Length of the common prefix of `a` and `b`, up to `limit` characters. */
export function agreeingPrefix(a: string, b: string, limit: number): number {
  const n = Math.min(a.length, b.length, limit);
  // Fast path for the common honest answer: one native comparison instead of a JS loop.
  if (a.length >= n && b.length >= n && a.slice(0, n) === b.slice(0, n)) return n;
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}
