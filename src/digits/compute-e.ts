/**
 * e to any number of decimals, exactly: e = sum_k 1/k!, evaluated by binary splitting on BigInt.
 * split(a, b) gives P/Q = sum_{k=a+1..b} 1/((a+1)(a+2)...k) with Q = (a+1)...b, so
 * e = 1 + P(0, n)/Q(0, n), with n chosen so that n! exceeds 10^(digits + guard). A few guard digits
 * are computed and checked so every returned digit is right.
 */
import {
  bitLength,
  bitsForDigits,
  fractionDigits,
  reciprocalFixed,
  truncatedConstant,
} from './bigint-math.js';

function split(a: number, b: number): [bigint, bigint] {
  if (b - a === 1) return [1n, BigInt(b)];
  const m = (a + b) >>> 1;
  const [p1, q1] = split(a, m);
  const [p2, q2] = split(m, b);
  return [p1 * q2 + p2, q1 * q2];
}

/** Smallest n with log10(n!) >= digits (the tail of the series is then below 10^-digits). */
function termsFor(digits: number): number {
  let n = 1;
  let log = 0;
  while (log < digits) {
    n++;
    log += Math.log10(n);
  }
  return n;
}

/** floor(e * 10^scale) as a decimal string, possibly off by a unit or two in the last place. */
function scaledE(scale: number): string {
  const [sum, q] = split(0, termsFor(scale + 4)); // sum/q = e - 1
  const p = bitsForDigits(scale) + 64;
  const w = p + 32;
  // The fractional part of e is (sum - q)/q; only the leading w bits of each matter.
  const m = bitLength(q);
  const inverseQ = reciprocalFixed(q, w); // 2^(w + m) / q
  const numerator = sum - q;
  const shift = Math.max(0, bitLength(numerator) - w);
  const product = (numerator >> BigInt(shift)) * inverseQ;
  const fraction = m >= shift ? product >> BigInt(m - shift) : product << BigInt(shift - m); // * 2^w
  return `2${fractionDigits(fraction >> BigInt(w - p), p, scale)}`;
}

/** e truncated (not rounded) to `decimals` decimal places: computeE(3) === '2.718'. */
export function computeE(decimals: number): string {
  return truncatedConstant(decimals, scaledE);
}
