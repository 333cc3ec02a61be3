import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bitLength, invSqrtFixed, pow10, truncateWithGuard } from '../../src/digits/bigint-math.js';
import { computeE } from '../../src/digits/compute-e.js';
import { computePi } from '../../src/digits/compute-pi.js';

/** Oracles from GNU bc (see test/fixtures/README.md), not from the project's algorithms. */
const oracle = {
  pi: readFileSync(new URL('../fixtures/pi-2000.txt', import.meta.url), 'utf8').trim(),
  e: readFileSync(new URL('../fixtures/e-2000.txt', import.meta.url), 'utf8').trim(),
};

/** The oracle truncated to `decimals` places, in the engine's format ('3' for 0 places). */
function expected(constant: 'pi' | 'e', decimals: number): string {
  const full = oracle[constant];
  return decimals === 0 ? full.slice(0, 1) : full.slice(0, 2 + decimals);
}

const lengths = [0, 1, 2, 3, 4, 10, 13, 14, 15, 28, 29, 100, 761, 762, 767, 768, 999, 1000, 1001, 1999, 2000];

describe('oracle fixtures', () => {
  it('hold 2,000 decimals each', () => {
    expect(oracle.pi).toMatch(/^3\.\d{2000}$/);
    expect(oracle.e).toMatch(/^2\.\d{2000}$/);
  });
});

describe('computePi', () => {
  it.each(lengths)('matches the bc oracle at %i decimals', (decimals) => {
    expect(computePi(decimals)).toBe(expected('pi', decimals));
  });

  it('matches the oracle at many other lengths', () => {
    for (let decimals = 0; decimals <= 2000; decimals += 37) {
      expect(computePi(decimals)).toBe(expected('pi', decimals));
    }
  });

  it('truncates rather than rounds', () => {
    // pi = 3.14159...: truncated to 4 places that is 3.1415, while rounding would give 3.1416.
    expect(computePi(4)).toBe(expected('pi', 4));
    expect(computePi(4)).not.toBe((Math.round(Math.PI * 1e4) / 1e4).toString());
  });

  it('rejects negative and fractional counts', () => {
    expect(() => computePi(-1)).toThrow(RangeError);
    expect(() => computePi(1.5)).toThrow(RangeError);
    expect(() => computePi(Number.NaN)).toThrow(RangeError);
  });
});

describe('computeE', () => {
  it.each(lengths)('matches the bc oracle at %i decimals', (decimals) => {
    expect(computeE(decimals)).toBe(expected('e', decimals));
  });

  it('matches the oracle at many other lengths', () => {
    for (let decimals = 0; decimals <= 2000; decimals += 41) {
      expect(computeE(decimals)).toBe(expected('e', decimals));
    }
  });

  it('rejects negative and fractional counts', () => {
    expect(() => computeE(-1)).toThrow(RangeError);
    expect(() => computeE(0.5)).toThrow(RangeError);
  });
});

describe('longer prefixes', () => {
  it('a longer computation extends a shorter one without changing it', () => {
    const long = computePi(20_000);
    expect(long.startsWith(computePi(12_345))).toBe(true);
    expect(long.startsWith(oracle.pi)).toBe(true);
    const longE = computeE(20_000);
    expect(longE.startsWith(computeE(12_345))).toBe(true);
    expect(longE.startsWith(oracle.e)).toBe(true);
  });
});

describe('bigint-math', () => {
  it('bitLength counts bits', () => {
    expect(bitLength(0n)).toBe(0);
    expect(bitLength(1n)).toBe(1);
    expect(bitLength(255n)).toBe(8);
    expect(bitLength(256n)).toBe(9);
    expect(bitLength(1n << 1000n)).toBe(1001);
  });

  it('pow10 is 10^n', () => {
    for (const n of [0, 1, 2, 17, 300]) expect(pow10(n)).toBe(10n ** BigInt(n));
  });

  it('invSqrtFixed is floor(2^p / sqrt(a)) within a unit or two', () => {
    for (const [a, p] of [
      [10005, 20],
      [10005, 200],
      [10005, 5000],
      [2, 3001],
      [3, 777],
    ] as const) {
      const y = invSqrtFixed(a, p);
      // y ~ 2^p/sqrt(a)  <=>  a*y^2 ~ 2^(2p): compare with the neighbours, exactly.
      const target = 1n << BigInt(2 * p);
      const lo = y - 2n;
      const hi = y + 2n;
      expect(BigInt(a) * lo * lo <= target).toBe(true);
      expect(BigInt(a) * hi * hi >= target).toBe(true);
    }
  });

  it('truncateWithGuard refuses guard digits too close to a digit boundary', () => {
    // 3.14 with guard digits 000000000003: the true value might be just below 3.14.
    expect(truncateWithGuard('314000000000003', 2, 12, 16)).toBeUndefined();
    // ...999999999990: might be just above 3.15.
    expect(truncateWithGuard('314999999999990', 2, 12, 16)).toBeUndefined();
    expect(truncateWithGuard('314159265358979', 2, 12, 16)).toBe('3.14');
    expect(truncateWithGuard('314159265358979', 0, 14, 16)).toBe('3');
  });
});
