/**
 * The reference services' only source of randomness: a small seeded generator (mulberry32), so that
 * `SEED` reproduces a run. Why not Math.random: tests and demos must be able to replay a sequence of
 * "creative" answers exactly; a 32-bit state is plenty for picking sponsors and rolling dice.
 */

/** A deterministic stream of pseudo-random numbers. */
export interface SeededRandom {
  /** The next number in [0, 1). */
  next(): number;
  /** An integer in [min, max] (both inclusive). */
  int(min: number, max: number): number;
  /** A number in [min, max). */
  between(min: number, max: number): number;
  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T;
}

/** Creates a generator; the same `seed` always gives the same stream. */
export function createSeededRandom(seed: number): SeededRandom {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    between: (min, max) => min + next() * (max - min),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
  };
}

/**
 * A stateless 32-bit mix of (seed, n): the same pair always gives the same number, whatever else
 * happened before. Used where an answer must depend on the seed but not on the order of requests
 * (which digit positions `pi-x-mini` gets wrong).
 */
export function hash32(seed: number, n: number): number {
  let h = (seed ^ Math.imul(n, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
