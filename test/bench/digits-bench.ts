/**
 * Digit engine benchmark: `npm run bench:digits`.
 *
 * Prints, for pi and e: the cold time for 10k, 100k and 1M decimals (each in a fresh engine with a
 * fresh worker, so worker start-up is included) next to the pure computation time on this thread; the
 * warm (cached) slice time; and the latency of small concurrent requests while a cold 1M computation
 * runs in the worker. Options: `--quick` skips the 1M figures.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { computeE } from '../../src/digits/compute-e.js';
import { computePi } from '../../src/digits/compute-pi.js';
import { type Constant, createDigitEngine } from '../../src/digits/digit-engine.js';

const quick = process.argv.includes('--quick');
const sizes = quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000];
const compute: Record<Constant, (n: number) => string> = { pi: computePi, e: computeE };

const ms = (t: number) => `${t.toFixed(1)} ms`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

async function cold(): Promise<void> {
  console.log(
    '\ncold (fresh engine + fresh worker; "compute" = computeX() alone on this thread, wall and process CPU time)',
  );
  for (const constant of ['pi', 'e'] as const) {
    for (const n of sizes) {
      const engine = createDigitEngine();
      let started = performance.now();
      const viaEngine = await engine.digits(constant, n);
      const engineTime = performance.now() - started;
      await engine.close();
      started = performance.now();
      const cpuBefore = process.cpuUsage();
      const direct = compute[constant](n);
      const computeTime = performance.now() - started;
      const cpu = process.cpuUsage(cpuBefore);
      const cpuTime = (cpu.user + cpu.system) / 1000;
      if (direct !== viaEngine) throw new Error(`worker and inline results differ for ${constant} ${n}`);
      console.log(
        `  ${constant.padEnd(2)} ${String(n).padStart(9)} decimals: engine ${ms(engineTime).padStart(10)}   compute ${ms(computeTime).padStart(10)} (cpu ${ms(cpuTime)})   ...${viaEngine.slice(-8)}`,
      );
    }
  }
}

async function warm(): Promise<void> {
  const n = sizes.at(-1)!;
  const engine = createDigitEngine();
  await engine.digits('pi', n);
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const decimals = i % 2 === 0 ? n : Math.floor(n / 2) + i;
    const started = performance.now();
    const value = await engine.digits('pi', decimals);
    times.push(performance.now() - started);
    if (value.length !== decimals + 2) throw new Error('bad slice');
  }
  await engine.close();
  times.sort((a, b) => a - b);
  console.log(
    `\nwarm (cached ${n} decimals of pi, 200 slices of ${n / 2}..${n}): p50 ${ms(percentile(times, 50))}, p99 ${ms(percentile(times, 99))}, max ${ms(times.at(-1)!)}`,
  );
}

async function underLoad(): Promise<void> {
  const n = sizes.at(-1)!;
  const engine = createDigitEngine();
  const lag = monitorEventLoopDelay({ resolution: 5 });
  lag.enable();
  let done = false;
  const started = performance.now();
  const big = engine.digits('pi', n).then((value) => {
    done = true;
    return value;
  });
  const latencies: number[] = [];
  // Bounded: in waves of 20 concurrent requests until the big one finishes, at most 60 s or 60,000 requests.
  for (let wave = 0; !done && wave < 3000 && performance.now() - started < 60_000; wave++) {
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const constant: Constant = i % 2 === 0 ? 'pi' : 'e';
        const decimals = i === 0 ? 50 : (wave * 20 + i) % 2000;
        const t = performance.now();
        await engine.digits(constant, decimals);
        latencies.push(performance.now() - t);
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await big;
  const bigTime = performance.now() - started;
  lag.disable();
  await engine.close();
  latencies.sort((a, b) => a - b);
  console.log(
    `\nsmall requests (0..1999 decimals of pi and e, waves of 20) while ${n} decimals of pi compute cold in the worker (${ms(bigTime)}):`,
  );
  console.log(
    `  ${latencies.length} requests: p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}, max ${ms(latencies.at(-1)!)}; event-loop delay p99 ${ms(lag.percentile(99) / 1e6)}, max ${ms(lag.max / 1e6)}`,
  );
}

console.log(`digit engine benchmark (node ${process.version})`);
await cold();
await warm();
await underLoad();
