/**
 * Fixed-point BigInt helpers shared by the pi and e computations.
 *
 * Why these exist: V8's BigInt multiplication is fast (FFT-based for big operands) but its division
 * and `toString` are several times slower, so everything here leans on multiplication and shifts.
 */

/** log2(10), for sizing binary fixed-point precision from a count of decimal digits. */
export const LOG2_10 = Math.log2(10);

/** Bits needed to hold `digits` decimal digits (rounded up). */
export function bitsForDigits(digits: number): number {
  return Math.ceil(digits * LOG2_10);
}

/** Number of bits of a non-negative BigInt (0 for 0n). */
export function bitLength(n: bigint): number {
  if (n === 0n) return 0;
  // toString(16) is linear-time in V8 (a power-of-two radix needs no division), unlike base 10.
  const hex = n.toString(16);
  return (hex.length - 1) * 4 + Math.floor(Math.log2(Number.parseInt(hex[0]!, 16))) + 1;
}

/** 10^n, computed as 5^n << n: the power of 5 has 30% fewer bits, so it is cheaper to raise. */
export function pow10(n: number): bigint {
  return (5n ** BigInt(n)) << BigInt(n);
}

/** A double's worth of bits: where the Newton iterations below start. */
const START_BITS = 48;

/** Precisions for a Newton iteration that doubles the correct bits each step, ending at `p`. */
function newtonSchedule(p: number): number[] {
  const schedule: number[] = [];
  for (let q = p; q > START_BITS; q = Math.ceil(q / 2) + 8) schedule.push(q);
  return schedule.reverse();
}

/**
 * 2^p / sqrt(a) within a few units in the last place, for a small positive integer `a`, by Newton's
 * iteration for the inverse square root, y' = y + y (1 - a y^2) / 2, doubling the precision at each
 * step. Every product is of the previous, half-size precision: no division and no full-size multiply.
 */
export function invSqrtFixed(a: number, p: number): bigint {
  const A = BigInt(a);
  let q0 = Math.min(p, START_BITS);
  let y = BigInt(Math.floor(2 ** q0 / Math.sqrt(a)));
  for (const q of newtonSchedule(p)) {
    // y ~ 2^q0/sqrt(a), so a*y^2 ~ 2^(2*q0); e is the residual, about q0 bits.
    const e = (1n << BigInt(2 * q0)) - A * y * y;
    // y' = y*2^(q-q0) + y*e / 2^(3*q0 + 1 - q)
    y = (y << BigInt(q - q0)) + ((y * e) >> BigInt(3 * q0 + 1 - q));
    q0 = q;
  }
  return y;
}

/**
 * 2^(p + bitLength(d)) / d within a few units in the last place, for d > 0: a p-bit reciprocal, by
 * Newton's iteration z' = z + z (1 - d z) on `d` truncated to the working precision. About two
 * full-size multiplications in all, against several for V8's BigInt division.
 */
export function reciprocalFixed(d: bigint, p: number): bigint {
  if (d <= 0n) throw new RangeError('reciprocalFixed needs d > 0');
  const m = bitLength(d);
  const g = 16; // guard bits of d beyond the working precision
  const top = (bits: number): bigint => (m >= bits ? d >> BigInt(m - bits) : d << BigInt(bits - m));
  // z = 2^k0 / (d / 2^m), from d's leading bits by a small BigInt division.
  let k0 = Math.min(p, START_BITS);
  let z = (1n << BigInt(k0 + START_BITS + g)) / top(START_BITS + g);
  for (const k of newtonSchedule(p)) {
    const dt = top(k + g); // d / 2^m to k + g bits
    // e / 2^(k0 + k + g) = 1 - z*d: about 2^-k0 relative, so keep only its top k - k0 (+8) bits.
    const e = ((1n << BigInt(k0 + k + g)) - z * dt) >> BigInt(k0 + g - 8);
    z = (z << BigInt(k - k0)) + ((z * e) >> BigInt(k0 + 8));
    k0 = k;
  }
  return z;
}

/** Extra bits carried through the decimal conversion; see `fractionDigits`. */
const CONVERSION_GUARD_BITS = 64;
/** Below this many digits, convert with V8's toString (quadratic, but fast for small numbers). */
const CONVERSION_LEAF = 256;

/**
 * floor(x / 2^p * 10^n) as exactly n decimal digits (zero-padded), for 0 <= x < 2^p: the first n
 * decimals of the binary fraction x / 2^p.
 *
 * Why not `(x * 10n ** n >> p).toString()`: V8's BigInt toString is a division-based divide and
 * conquer, several times slower than multiplication. This is the "scaled remainder tree": to split n
 * digits into h and n - h, multiply the fraction by 10^h; its integer part is the first h digits and
 * its fractional part is the fraction of the rest. Only multiplications and truncations, with the
 * precision halving at each level. Truncation errors are bounded (a few units of 2^-64 per digit
 * block); if any block lands within that bound of a digit boundary, we fall back to the exact
 * conversion, so the result is always exactly the floor above.
 */
export function fractionDigits(x: bigint, p: number, n: number): string {
  if (n === 0) return '';
  const powers = new Map<number, bigint>();
  const power = (k: number): bigint => {
    let value = powers.get(k);
    if (value === undefined) {
      const half = powers.get(k / 2);
      value = half !== undefined ? half * half : 10n ** BigInt(k);
      powers.set(k, value);
    }
    return value;
  };
  // The split sizes are CONVERSION_LEAF * 2^j, so each power is the square of the previous one.
  for (let k = CONVERSION_LEAF; k < n; k *= 2) power(k);

  const parts: string[] = [];
  let certain = true;
  const convert = (fraction: bigint, bits: number, digits: number): void => {
    const needed = bitsForDigits(digits) + CONVERSION_GUARD_BITS;
    if (bits > needed) {
      fraction >>= BigInt(bits - needed);
      bits = needed;
    }
    if (digits <= CONVERSION_LEAF) {
      const scaled = fraction * power(digits);
      const rest = BigInt.asUintN(bits, scaled);
      const margin = 1n << BigInt(Math.max(0, bits - CONVERSION_GUARD_BITS + 8));
      if (rest < margin || rest > (1n << BigInt(bits)) - margin) certain = false;
      parts.push((scaled >> BigInt(bits)).toString().padStart(digits, '0'));
      return;
    }
    let head = CONVERSION_LEAF;
    while (head * 2 < digits) head *= 2;
    convert(fraction, bits, head);
    convert(BigInt.asUintN(bits, fraction * power(head)), bits, digits - head);
  };
  convert(x, p, n);
  if (certain) return parts.join('');
  return ((x * pow10(n)) >> BigInt(p)).toString().padStart(n, '0');
}

/**
 * Formats floor(c * 10^(decimals + guard)) (given as its decimal string, one integer digit) as the
 * constant truncated to `decimals` places, or returns undefined when the guard digits are too close
 * to a digit boundary for the truncation to be certain (the caller then retries with more guard
 * digits). `slack` bounds the absolute error of the scaled integer, in units of its last place.
 */
export function truncateWithGuard(
  scaled: string,
  decimals: number,
  guard: number,
  slack: number,
): string | undefined {
  if (scaled.length !== 1 + decimals + guard) {
    throw new Error(`internal: expected ${1 + decimals + guard} digits, got ${scaled.length}`);
  }
  // BigInt: a retry may use more guard digits than a double holds exactly.
  const guardValue = BigInt(scaled.slice(1 + decimals));
  const margin = BigInt(slack);
  if (guardValue < margin || guardValue > 10n ** BigInt(guard) - 1n - margin) return undefined;
  return decimals === 0 ? scaled.slice(0, 1) : `${scaled[0]}.${scaled.slice(1, 1 + decimals)}`;
}

/**
 * A constant truncated (not rounded) to `decimals` decimal places, from `scaled(n)`: floor(c * 10^n)
 * as a decimal string, within 16 units of its last place. 12 guard digits first, 20 more each time
 * they are too close to a digit boundary (see `truncateWithGuard`).
 */
export function truncatedConstant(decimals: number, scaled: (digits: number) => string): string {
  if (!Number.isSafeInteger(decimals) || decimals < 0) {
    throw new RangeError(`decimals must be a non-negative integer, got ${decimals}`);
  }
  for (let guard = 12; ; guard += 20) {
    const result = truncateWithGuard(scaled(decimals + guard), decimals, guard, 16);
    if (result !== undefined) return result;
  }
}
