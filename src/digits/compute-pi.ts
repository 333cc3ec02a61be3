/**
 * Pi to any number of decimals, exactly, with the Chudnovsky series evaluated by binary splitting
 * on BigInt:
 *
 *   1/pi = 12 * sum_k (-1)^k (6k)! (13591409 + 545140134k) / ((3k)! (k!)^3 640320^(3k+3/2))
 *
 * which gives pi = 426880 * sqrt(10005) * Q / T with P, Q, T from the split. Each term adds about
 * 14.18 digits. The square root and the division are Newton iterations in binary fixed point (V8
 * multiplies big BigInts far faster than it divides them), the decimal conversion a scaled remainder
 * tree (see `fractionDigits`). A few guard digits are computed and checked (see `truncateWithGuard`) so every returned digit is right.
 */
import {
  bitLength,
  bitsForDigits,
  fractionDigits,
  invSqrtFixed,
  reciprocalFixed,
  truncatedConstant,
} from './bigint-math.js';

const DIGITS_PER_TERM = Math.log10(640320 ** 3 / (24 * 6 * 2 * 6));
const C3_OVER_24 = 640320n ** 3n / 24n;
const A = 13591409n;
const B = 545140134n;

/** P, Q, T of the terms [a, b). `needP` is false at the root, whose P nobody uses (a whole multiply). */
function split(a: number, b: number, needP: boolean): [bigint, bigint, bigint] {
  if (b - a === 1) {
    if (a === 0) return [1n, 1n, A];
    const k = BigInt(a);
    const p = (6n * k - 5n) * (2n * k - 1n) * (6n * k - 1n);
    const q = k * k * k * C3_OVER_24;
    const t = p * (A + B * k);
    return [p, q, a & 1 ? -t : t];
  }
  const m = (a + b) >>> 1;
  const [p1, q1, t1] = split(a, m, true);
  const [p2, q2, t2] = split(m, b, needP);
  return [needP ? p1 * p2 : 0n, q1 * q2, t1 * q2 + p1 * t2];
}

/** floor(pi * 10^scale) as a decimal string, possibly off by a unit or two in the last place. */
function scaledPi(scale: number): string {
  const terms = Math.ceil((scale + 4) / DIGITS_PER_TERM) + 1;
  const [, q, t] = split(0, terms, false);
  // Binary fixed point: `p` bits hold the decimals plus 64 spare bits, `w` adds working guard bits.
  const p = bitsForDigits(scale) + 64;
  const w = p + 32;
  // Q/T to w bits: Q and T have about twice that many, but only their leading bits matter.
  const m = bitLength(t);
  const inverseT = reciprocalFixed(t, w); // 2^(w + m) / T
  const qShift = Math.max(0, bitLength(q) - w);
  const product = (q >> BigInt(qShift)) * inverseT;
  const ratio = m >= qShift ? product >> BigInt(m - qShift) : product << BigInt(qShift - m); // Q/T * 2^w
  // pi = 426880 * sqrt(10005) * Q/T, with sqrt(10005) = 10005 / sqrt(10005).
  const y = invSqrtFixed(10005, w); // 2^w / sqrt(10005)
  const piFixed = (426880n * 10005n * ratio * y) >> BigInt(2 * w - p); // pi * 2^p
  return (piFixed >> BigInt(p)).toString() + fractionDigits(BigInt.asUintN(p, piFixed), p, scale);
}

/** Pi truncated (not rounded) to `decimals` decimal places: computePi(2) === '3.14'. */
export function computePi(decimals: number): string {
  return truncatedConstant(decimals, scaledPi);
}
