/**
 * Digits of pi and e computed here, for tests, by other formulas and other code than the project's
 * digit engine (src/digits/: Chudnovsky, binary splitting of sum 1/k!, Newton reciprocals, its own
 * decimal conversion). Nothing is imported from src/digits, so a mistake there cannot be repeated
 * here. Slow on purpose: plain BigInt fixed point, BigInt's own division and toString.
 *
 * - pi by Machin's formula, pi = 16 arctan(1/5) - 4 arctan(1/239), each arctangent series summed
 *   exactly as one fraction (binary splitting, which only keeps the sum a fraction) and divided once.
 * - e by its series sum 1/k!, evaluated term by term from the inside (Horner) in decimal fixed
 *   point: e = 1 + (1 + (1 + ...)/3)/2)/1, a few factors of k per division.
 *
 * Each is computed with GUARD extra places and a bound on its own error; when the truncation to the
 * places asked for is not certain within that bound, it throws instead of answering (it never has for
 * the counts the tests use).
 *
 * CPU time on a 2-vCPU shared machine (Node 24): pi 100,000 places ~0.3 s, 300,000 ~0.8 s; e 100,000
 * ~0.3 s, 300,000 ~2 s (e grows with the square of the places). The engine does 1,000,000 in ~2 s.
 */

const GUARD = 20;

/** `"3.14159…"`: the integer part, and `places` decimals truncated (no point when `places` is 0). */
export function oraclePi(places: number): string {
  return truncated(3, places, (scale, exponent) => {
    const pi = 16n * arctanOfInverse(5n, exponent, scale) - 4n * arctanOfInverse(239n, exponent, scale);
    // Each arctangent is off by less than two units (one floor, and the series' tail far below a
    // unit): 16 * 2 + 4 * 2 units at most.
    return { value: pi, error: 40n };
  });
}

/** `"2.71828…"`: the integer part, and `places` decimals truncated (no point when `places` is 0). */
export function oracleE(places: number): string {
  return truncated(2, places, (scale, exponent) => {
    const { value, divisions } = eHorner(scale, exponent);
    // Each division floors (at most one unit, shrinking through the divisions after it) and the
    // series is cut where its tail is below a unit: far below `divisions` units in all.
    return { value, error: BigInt(divisions) + 2n };
  });
}

/**
 * The constant times 10^(places + GUARD), within `error` units, from `compute`; truncated to `places`
 * decimals when that is certain.
 */
function truncated(
  integer: number,
  places: number,
  compute: (scale: bigint, exponent: number) => { value: bigint; error: bigint },
): string {
  if (!Number.isSafeInteger(places) || places < 0) throw new RangeError(`bad place count ${places}`);
  const exponent = places + GUARD;
  const { value, error } = compute(10n ** BigInt(exponent), exponent);
  const unit = 10n ** BigInt(GUARD);
  const low = (value - error) / unit;
  const high = (value + error) / unit;
  if (low !== high)
    throw new Error(`oracle: ${places} places not certain within ${error} units; raise GUARD`);
  const text = low.toString();
  if (text.length !== places + 1 || text[0] !== String(integer))
    throw new Error(`oracle: ${text.slice(0, 10)}… is not the constant asked for`);
  return places === 0 ? text : `${text[0]}.${text.slice(1)}`;
}

/**
 * floor(arctan(1/x) * scale), from arctan(1/x) = sum_k (-1)^k / ((2k+1) x^(2k+1)), the first
 * `terms` terms summed exactly: the rest is below 1/x^(2*terms+1), under one unit of `scale`.
 */
function arctanOfInverse(x: bigint, exponent: number, scale: bigint): bigint {
  const y = x * x;
  const terms = Math.ceil(exponent / Math.log10(Number(y))) + 2;
  const { b, q, t } = arctanTerms(0, terms, y);
  // sum = t / (b * q / y), and arctan(1/x) = sum / x.
  return (t * y * scale) / (b * q * x);
}

/**
 * The terms [from, to) of sum_k (-1)^k / ((2k+1) y^(k-from)) as t / (b * q / y), where b is the
 * product of the (2k+1) and q = y^(to-from). Halves are joined as
 * S = S1 + S2 / y^(m-from) = y (t1 b2 q2 + t2 b1) / (b1 b2 q1 q2).
 */
function arctanTerms(from: number, to: number, y: bigint): { b: bigint; q: bigint; t: bigint } {
  if (to - from === 1) return { b: BigInt(2 * from + 1), q: y, t: from % 2 === 1 ? -1n : 1n };
  const middle = Math.floor((from + to) / 2);
  const left = arctanTerms(from, middle, y);
  const right = arctanTerms(middle, to, y);
  return {
    b: left.b * right.b,
    q: left.q * right.q,
    t: left.t * right.b * right.q + right.t * left.b,
  };
}

/**
 * floor-ish(e * scale): e = 1 + (1 + (1 + (...)/3)/2)/1 from k = n down to 1, where n! is beyond
 * 10^(exponent + 1) so that starting the innermost bracket at 1 costs less than a unit. Consecutive
 * k are joined into one divisor below 2^62: acc = (scale * c + acc) / (j (j+1) ... k), where
 * c = sum over m of (j ... k) / (j ... m-1) is exact in integers.
 */
function eHorner(scale: bigint, exponent: number): { value: bigint; divisions: number } {
  let n = 1;
  for (let log = 0; log < exponent + 1; ) {
    n++;
    log += Math.log10(n);
  }
  let acc = scale;
  let divisions = 0;
  let k = n;
  const limit = 1n << 62n;
  while (k >= 1) {
    let j = k;
    let divisor = BigInt(k);
    while (j > 1 && divisor * BigInt(j - 1) < limit) {
      j--;
      divisor *= BigInt(j);
    }
    // c = divisor * (1 + 1/j + 1/(j(j+1)) + ... + 1/(j...(k-1)))
    let c = 0n;
    let partial = 1n;
    for (let m = j; m <= k; m++) {
      c += divisor / partial;
      partial *= BigInt(m);
    }
    acc = (scale * c + acc) / divisor;
    divisions++;
    k = j - 1;
  }
  return { value: acc, divisions };
}
