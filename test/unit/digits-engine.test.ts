import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { computeE } from '../../src/digits/compute-e.js';
import { computePi } from '../../src/digits/compute-pi.js';
import {
  type ComputeEvent,
  type Constant,
  createDigitEngine,
  type DigitEngine,
  type DigitEngineOptions,
  DigitWorkerError,
  sharedDigitEngine,
} from '../../src/digits/digit-engine.js';
import { CRASH_WITH_ERROR, CRASH_WITH_EXIT } from '../fixtures/crashing-digit-worker.js';
import { oracleE, oraclePi } from '../support/digit-oracle.js';

const oracle: Record<Constant, string> = {
  pi: readFileSync(new URL('../fixtures/pi-2000.txt', import.meta.url), 'utf8').trim(),
  e: readFileSync(new URL('../fixtures/e-2000.txt', import.meta.url), 'utf8').trim(),
};
const expected = (constant: Constant, decimals: number) =>
  decimals === 0 ? oracle[constant].slice(0, 1) : oracle[constant].slice(0, 2 + decimals);

const engines: DigitEngine[] = [];
afterAll(async () => {
  await Promise.all(engines.map((engine) => engine.close()));
});

/** An engine whose computations are recorded. */
function recordedEngine(options: DigitEngineOptions = {}) {
  const computations: ComputeEvent[] = [];
  const engine = createDigitEngine({ ...options, onCompute: (event) => computations.push(event) });
  engines.push(engine);
  return { engine, computations };
}

describe('digits (inline)', () => {
  it('answers the documented examples', async () => {
    const { engine } = recordedEngine({ useWorker: false });
    expect(await engine.digits('pi', 0)).toBe(oracle.pi.slice(0, 1));
    expect(await engine.digits('e', 0)).toBe(oracle.e.slice(0, 1));
    expect(await engine.digits('pi', 2)).toBe(oracle.pi.slice(0, 4));
    expect(await engine.digits('e', 3)).toBe(oracle.e.slice(0, 5));
  });

  it.each([0, 1, 2, 3, 10, 999, 2000])(
    'matches the bc oracle at %i decimals, fresh and sliced',
    async (n) => {
      for (const constant of ['pi', 'e'] as const) {
        const fresh = recordedEngine({ useWorker: false }).engine;
        expect(await fresh.digits(constant, n)).toBe(expected(constant, n));
        const warm = recordedEngine({ useWorker: false }).engine;
        await warm.digits(constant, 2000);
        expect(await warm.digits(constant, n)).toBe(expected(constant, n));
      }
    },
  );

  it('serves shorter requests from the longest prefix, without computing again', async () => {
    const { engine, computations } = recordedEngine({ useWorker: false });
    const long = await engine.digits('pi', 3000);
    expect(computations).toHaveLength(1);
    for (const n of [0, 1, 5, 100, 2999, 3000]) {
      expect(await engine.digits('pi', n)).toBe(computePi(n));
    }
    expect(long).toBe(computePi(3000));
    expect(computations).toHaveLength(1);
  });

  it('computes a little ahead, so creeping requests do not each compute', async () => {
    const { engine, computations } = recordedEngine({ useWorker: false });
    for (let n = 1000; n < 1100; n++) await engine.digits('e', n);
    expect(computations.length).toBeLessThanOrEqual(2);
    expect(await engine.digits('e', 1099)).toBe(computeE(1099));
  });

  it('keeps pi and e apart', async () => {
    const { engine } = recordedEngine({ useWorker: false });
    await engine.digits('pi', 1500);
    expect(engine.peek('e', 10)).toBeUndefined();
    expect(await engine.digits('e', 1500)).toBe(expected('e', 1500));
    expect(await engine.digits('pi', 1500)).toBe(expected('pi', 1500));
  });
});

describe('peek', () => {
  it('answers only from the cache and never computes', async () => {
    const { engine, computations } = recordedEngine({ useWorker: false });
    expect(engine.peek('pi', 0)).toBeUndefined();
    expect(engine.peek('pi', 5)).toBeUndefined();
    expect(computations).toHaveLength(0);
    const answer = await engine.digits('pi', 50);
    expect(engine.peek('pi', 50)).toBe(answer);
    expect(engine.peek('pi', 10)).toBe(expected('pi', 10));
    expect(engine.peek('pi', 0)).toBe(expected('pi', 0));
    expect(engine.peek('pi', 1_000_000)).toBeUndefined();
    expect(engine.peek('e', 10)).toBeUndefined();
    expect(computations).toHaveLength(1);
  });

  it('returns undefined for invalid input instead of throwing', async () => {
    const { engine } = recordedEngine({ useWorker: false });
    await engine.digits('pi', 10);
    expect(engine.peek('pi', -1)).toBeUndefined();
    expect(engine.peek('pi', 1.5)).toBeUndefined();
    expect(engine.peek('pi', Number.NaN)).toBeUndefined();
    expect(engine.peek('tau' as Constant, 1)).toBeUndefined();
  });
});

describe('bad input', () => {
  const { engine, computations } = recordedEngine({ maxDigits: 10_000, useWorker: false });

  it.each([-1, Number.NaN, 1.5, 10_001, Number.POSITIVE_INFINITY, -0.5, 2 ** 60])(
    'rejects %s decimals with a RangeError',
    async (decimals) => {
      await expect(engine.digits('pi', decimals)).rejects.toBeInstanceOf(RangeError);
      await expect(engine.digits('e', decimals)).rejects.toMatchObject({
        code: 'DIGITS_OUT_OF_RANGE',
        statusCode: 400,
      });
    },
  );

  it('rejects a non-number and an unknown constant with a RangeError', async () => {
    await expect(engine.digits('pi', '5' as unknown as number)).rejects.toBeInstanceOf(RangeError);
    await expect(engine.digits('tau' as Constant, 5)).rejects.toBeInstanceOf(RangeError);
    await expect(engine.digits('__proto__' as Constant, 5)).rejects.toBeInstanceOf(RangeError);
  });

  it('computed nothing for bad input, and still serves the maximum itself', async () => {
    expect(computations).toHaveLength(0);
    expect(await engine.digits('pi', 10_000)).toBe(computePi(10_000));
  });

  it('rejects a bad maxDigits option', () => {
    expect(() => createDigitEngine({ maxDigits: -1 })).toThrow(RangeError);
  });
});

describe('worker', () => {
  it('computes big requests in the worker, with the same digits as inline', async () => {
    const { engine, computations } = recordedEngine({ inlineBelow: 5000 });
    const viaWorker = await engine.digits('pi', 100_000);
    expect(computations).toEqual([{ constant: 'pi', decimals: 100_000, where: 'worker' }]);
    expect(viaWorker).toBe(computePi(100_000));
    expect(viaWorker.startsWith(oracle.pi)).toBe(true);
    const e = await engine.digits('e', 20_000);
    expect(e).toBe(computeE(20_000));
    expect(computations.map((c) => c.where)).toEqual(['worker', 'worker']);
  });

  it('keeps small requests inline even while a big computation runs', async () => {
    const { engine, computations } = recordedEngine({ inlineBelow: 5000 });
    const big = engine.digits('pi', 30_000);
    const small = await engine.digits('pi', 50);
    expect(small).toBe(expected('pi', 50));
    expect(computations.map((c) => c.where)).toEqual(['worker', 'inline']);
    expect(await big).toBe(computePi(30_000));
    // The big answer superseded the small one in the cache.
    expect(engine.peek('pi', 30_000)).toBe(await big);
  });

  it('coalesces concurrent requests that one computation covers', async () => {
    const { engine, computations } = recordedEngine({ inlineBelow: 0 });
    const answers = await Promise.all([
      engine.digits('pi', 20_000),
      engine.digits('pi', 15_000),
      engine.digits('pi', 20_000),
      engine.digits('pi', 10),
    ]);
    expect(computations).toEqual([{ constant: 'pi', decimals: 20_000, where: 'worker' }]);
    const reference = computePi(20_000);
    expect(answers).toEqual([reference, reference.slice(0, 15_002), reference, reference.slice(0, 12)]);
    // And afterwards from the cache.
    expect(await engine.digits('pi', 19_999)).toBe(reference.slice(0, 20_001));
    expect(computations).toHaveLength(1);
  });

  it('a longer concurrent request starts a longer computation that supersedes the cache', async () => {
    const { engine, computations } = recordedEngine({ inlineBelow: 0 });
    const [short, long] = await Promise.all([engine.digits('e', 8000), engine.digits('e', 16_000)]);
    expect(computations.map((c) => c.decimals)).toEqual([8000, 16_000]);
    expect(long).toBe(computeE(16_000));
    expect(long.startsWith(short)).toBe(true);
    expect(engine.peek('e', 16_000)).toBe(long);
    // A shorter request after that never computes again.
    await engine.digits('e', 12_000);
    expect(computations).toHaveLength(2);
  });

  it('rejects pending calls when the engine is closed, and works again afterwards', async () => {
    const { engine } = recordedEngine({ inlineBelow: 0 });
    const pending = expect(engine.digits('pi', 200_000)).rejects.toBeInstanceOf(DigitWorkerError);
    await engine.close();
    await pending;
    expect(await engine.digits('pi', 100)).toBe(expected('pi', 100));
  });
});

/**
 * Beyond bc's 2,000 places, the digits are compared with a second computation that shares nothing with
 * src/digits (test/support/digit-oracle.ts: Machin's formula for pi, the series of 1/k! term by term
 * for e): comparing the engine with computePi/computeE would only show that it agrees with itself.
 * 200,000 places: about a second per constant on a busy 2-vCPU machine, oracle and engine together;
 * the oracles' cost grows with the square of the places, so 1,000,000 would take a minute (README,
 * "The digit engine", quotes this count).
 */
const INDEPENDENT_PLACES = 200_000;

describe('against an independent computation', () => {
  const oracles = { pi: oraclePi, e: oracleE } as const;

  it.each(['pi', 'e'] as const)('the %s oracle itself agrees with bc at up to 2,000 places', (constant) => {
    for (const n of [0, 1, 2, 3, 13, 14, 761, 762, 767, 768, 999, 1000, 1999, 2000]) {
      expect(oracles[constant](n), `${n} places`).toBe(expected(constant, n));
    }
  });

  it.each(['pi', 'e'] as const)(
    `%s: the engine’s ${INDEPENDENT_PLACES.toLocaleString('en')} places (in the worker) and shorter prefixes computed anew are the oracle’s`,
    async (constant) => {
      const truth = oracles[constant](INDEPENDENT_PLACES);
      const { engine, computations } = recordedEngine({ inlineBelow: 5000 });
      const answer = await engine.digits(constant, INDEPENDENT_PLACES);
      expect(computations).toEqual([{ constant, decimals: INDEPENDENT_PLACES, where: 'worker' }]);
      // Not toBe: a failure should name the first wrong place, not print 100,000 digits twice.
      expect(firstDifference(answer, truth)).toBe(-1);
      // Other lengths each end at other guard digits, inline and in the worker: computed, not sliced.
      const compute = constant === 'pi' ? computePi : computeE;
      for (const n of [4999, 5000, 12_345, 65_536, 99_999, INDEPENDENT_PLACES - 1]) {
        expect(firstDifference(compute(n), truth.slice(0, 2 + n)), `${n} places`).toBe(-1);
      }
    },
  );
});

/** The index of the first character where `a` and `b` differ (a length difference included), or -1. */
function firstDifference(a: string, b: string): number {
  if (a === b) return -1;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe('process lifetime', () => {
  it('an idle worker does not keep the process alive', () => {
    const engineUrl = new URL('../../src/digits/digit-engine.ts', import.meta.url).href;
    // No close(): the process must still exit by itself once the answer is in.
    const script = `const { createDigitEngine } = await import(${JSON.stringify(engineUrl)});
      const engine = createDigitEngine({ inlineBelow: 0 });
      process.stdout.write(String((await engine.digits('pi', 6000)).length));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(child.error).toBeUndefined();
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    expect(child.stdout).toBe('6002');
  });
});

describe('worker crashes', () => {
  const workerUrl = new URL('../fixtures/crashing-digit-worker.ts', import.meta.url);

  it.each([
    ['an uncaught error', CRASH_WITH_ERROR],
    ['an exit', CRASH_WITH_EXIT],
  ])('rejects the pending calls on %s, and a new worker serves the next call', async (_, crash) => {
    const { engine } = recordedEngine({ inlineBelow: 0, workerUrl });
    const crashing = engine.digits('pi', crash);
    // Queued behind the crashing one in the same worker: it must fail too, not hang.
    const queued = engine.digits('e', crash + 1);
    await expect(crashing).rejects.toBeInstanceOf(DigitWorkerError);
    await expect(queued).rejects.toMatchObject({ code: 'DIGIT_WORKER_FAILED' });
    expect(await engine.digits('pi', 6000)).toBe(computePi(6000));
    expect(await engine.digits('e', 2000)).toBe(expected('e', 2000));
  });
});

describe('sharedDigitEngine', () => {
  it('is one engine per process', async () => {
    const engine = sharedDigitEngine();
    engines.push(engine);
    expect(sharedDigitEngine()).toBe(engine);
    expect(await engine.digits('e', 3)).toBe(expected('e', 3));
    expect(sharedDigitEngine().peek('e', 3)).toBe(expected('e', 3));
  });
});
