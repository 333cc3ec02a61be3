/**
 * `npm run bench:ab -- --a dir --b dir`: an A/B comparison of two compiled builds of the gateway on
 * the request path (`bench:path`), in alternating rounds, so that whatever else the machine does at
 * a moment falls on both builds alike. Each round is one `request-path.ts` process (its warm-up, then
 * one measured round) of build A and one of build B, A first in odd pairs and B first in even ones,
 * `--pairs` times (default 5). Prints each pair and the medians of CPU µs per request and KB
 * allocated per request, and B's median ÷ A's.
 *
 * Options: `--a dir` (default bench-results/dist), `--b dir` (required), `--pairs n` (5), and
 * `--workload`, `--requests`, `--warmup`, `--concurrency`, `--log-level`, passed to each round;
 * `--a-node-args "..."` / `--b-node-args "..."`: node options for A's or B's rounds (V8's heap sizes,
 * say), so that one build under two sets of options is an A/B too (`--b` may then name A's dir).
 * Build a version with `node scripts/build-dist.mjs <dir>` (tsc, and the Lua scripts beside it).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const argument = (name: string, fallback?: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : process.argv[index + 1];
};
const A = argument('a', 'bench-results/dist') as string;
const B = argument('b');
const PAIRS = Number(argument('pairs', '5'));
if (B === undefined) {
  process.stderr.write(
    'usage: npm run bench:ab -- --a <dist dir> --b <dist dir> [--pairs n] [--workload w]\n',
  );
  process.exit(2);
}
const passed = ['workload', 'requests', 'warmup', 'concurrency', 'log-level'].flatMap((name) => {
  const value = argument(name);
  return value === undefined ? [] : [`--${name}`, value];
});
/** `--a-node-args "a b"`: node options of one side's rounds (none by default). */
const nodeArgs = (side: 'a' | 'b') =>
  (argument(`${side}-node-args`) ?? '').split(' ').filter((arg) => arg !== '');
const NODE_ARGS = { a: nodeArgs('a'), b: nodeArgs('b') };
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const script = fileURLToPath(new URL('request-path.ts', import.meta.url));

interface Round {
  cpuUs: number;
  allocatedKb: number;
}

function round(dist: string, side: 'a' | 'b'): Round {
  const run = spawnSync(
    process.execPath,
    [...NODE_ARGS[side], '--import', 'tsx', script, '--dist', dist, '--rounds', '1', ...passed],
    {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const cpu = /([\d.]+) µs CPU per request/.exec(run.stdout);
  const allocated = /allocated per request ([\d.-]+) KB/.exec(run.stdout);
  if (run.status !== 0 || cpu === null || allocated === null)
    throw new Error(`request-path.ts --dist ${dist} failed (${run.status}): ${run.stdout}`);
  return { cpuUs: Number(cpu[1]), allocatedKb: Number(allocated[1]) };
}

const median = (values: number[]) =>
  [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] as number;
const rounds: { a: Round[]; b: Round[] } = { a: [], b: [] };
for (let pair = 1; pair <= PAIRS; pair++) {
  // A first in odd pairs, B first in even ones (ABBA): on a shared machine whose load drifts within a
  // pair, always running A first favoured one build (seen: the same two builds 1.09 one way round,
  // 0.96 the other, 0.97 in ABBA order).
  const bFirst = pair % 2 === 0 ? round(B, 'b') : undefined;
  const a = round(A, 'a');
  const b = bFirst ?? round(B, 'b');
  rounds.a.push(a);
  rounds.b.push(b);
  process.stdout.write(
    `pair ${pair}: A ${a.cpuUs.toFixed(1)} µs ${a.allocatedKb.toFixed(1)} KB | B ${b.cpuUs.toFixed(1)} µs ${b.allocatedKb.toFixed(1)} KB\n`,
  );
}
const cpuA = median(rounds.a.map((r) => r.cpuUs));
const cpuB = median(rounds.b.map((r) => r.cpuUs));
const kbA = median(rounds.a.map((r) => r.allocatedKb));
const kbB = median(rounds.b.map((r) => r.allocatedKb));
process.stdout.write(
  `A ${A}: ${cpuA.toFixed(1)} µs CPU, ${kbA.toFixed(1)} KB per request (medians of ${PAIRS})\n` +
    `B ${B}${NODE_ARGS.b.length > 0 ? ` (${NODE_ARGS.b.join(' ')})` : ''}: ${cpuB.toFixed(1)} µs CPU, ${kbB.toFixed(1)} KB per request\n` +
    `B ÷ A: CPU ${(cpuB / cpuA).toFixed(3)}, allocated ${(kbB / kbA).toFixed(3)}\n`,
);
