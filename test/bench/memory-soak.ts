/**
 * Where a gateway process's memory goes, and whether it stays put: `npm run bench:memory` and
 * `npm run bench:soak`.
 *
 * `npm run bench:memory [-- --configs image,defaults,arena2 --ops 100000 --connections 50 --idle 60]`
 * runs, for each named configuration, one fresh gateway (production, cache off, the fixed stub
 * upstream) under `--ops` distinct isNull operations at `--connections`, then `--idle` seconds of
 * nothing. Through it, every 500 ms: RSS and threads from /proc (nothing runs in the process for
 * that) and, from a preloaded sampler, `process.memoryUsage()` and V8's heap spaces. It prints RSS
 * at start, at its peak, at the end and 15 / 30 / 60 s after, what made up RSS at the peak (V8's
 * young and old generations, code, external and array buffers, the rest: malloc and thread stacks),
 * then the heap after a forced full GC. With `--snapshot`, a heap snapshot after the idle wait
 * (bench-results/memory/<config>.heapsnapshot) and its largest constructors by self size.
 *
 * `npm run bench:soak [-- --minutes 10 --rate 2000]`: one gateway, as the image runs it, under a
 * steady `--rate` distinct isNull per second for `--minutes`; RSS and the heap after a full GC at
 * start, every minute and at the end, and whether RSS grew past its plateau (the highest of the
 * first half) by more than 10 %. Bounded in time; stops by itself.
 *
 * Configurations (`--configs`): `image` (the Dockerfile's NODE_OPTIONS under the Deployment's limit,
 * test/support/image-node-options.ts, and its MALLOC_ARENA_MAX), `defaults` (node's defaults, no
 * environment), `arena2` (defaults plus MALLOC_ARENA_MAX=2), `semi16` (defaults plus
 * --max-semi-space-size=16, the 2026-11-25 trial), `semi4`, `old192` (defaults plus
 * --max-old-space-size=192), or `label:--flags NAME=value` given inline.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { deployedNodeArgs, imageEnvironment } from '../support/image-node-options.js';
import { freePort } from '../support/redis-server.js';
import { type ChildServer, installSignalCleanup, startChild, startFixedUpstream } from './bench-processes.js';
import { MEMORY_PROBE_ARGS, mb, memoryGatewayEnv, probeMemory } from './memory-sampling.js';

const argument = (name: string) => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? undefined : process.argv[index + 1];
};
const number = (name: string, fallback: number) => {
  const value = argument(name);
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0) throw new Error(`--${name} takes a number, not ${value}`);
  return parsed;
};
const SOAK = process.argv.includes('--soak');
const OPS = number('ops', 100_000);
const CONNECTIONS = number('connections', 50);
const IDLE_S = number('idle', 60);
const MINUTES = number('minutes', 10);
const RATE = number('rate', 2000);
const SNAPSHOT = process.argv.includes('--snapshot');
/** A signal nothing else in the gateway listens to (SIGUSR2 is MEMORY_PROBE's, SIGUSR1 the inspector's). */
const SNAPSHOT_SIGNAL = 'SIGTTIN';
const GATEWAY_SCRIPT = 'bench-results/dist/main.js';
/** Seconds after the load at which RSS is read again. */
const IDLE_MARKS = [15, 30, 60];
const OUT = new URL('../../bench-results/memory/', import.meta.url);

interface Config {
  nodeArgs: string[];
  env: Record<string, string>;
}
const CONFIGS: Record<string, () => Config> = {
  image: () => ({ nodeArgs: deployedNodeArgs(), env: imageEnvironment() }),
  defaults: () => ({ nodeArgs: [], env: {} }),
  arena2: () => ({ nodeArgs: [], env: { MALLOC_ARENA_MAX: '2' } }),
  semi16: () => ({ nodeArgs: ['--max-semi-space-size=16'], env: {} }),
  semi4: () => ({ nodeArgs: ['--max-semi-space-size=4'], env: {} }),
  old192: () => ({ nodeArgs: ['--max-old-space-size=192'], env: {} }),
};

/**
 * A configuration by name, or given inline as `label:--a-flag --b-flag NAME=value` (node options,
 * and environment variables where a word is NAME=value).
 */
function configOf(name: string): Config {
  const colon = name.indexOf(':');
  if (colon === -1) {
    const make = CONFIGS[name];
    if (make === undefined)
      throw new Error(
        `unknown configuration ${name} (known: ${Object.keys(CONFIGS).join(', ')}, or label:--flags)`,
      );
    return make();
  }
  const words = name
    .slice(colon + 1)
    .split(' ')
    .filter((word) => word !== '');
  return {
    nodeArgs: words.filter((word) => word.startsWith('--')),
    env: Object.fromEntries(
      words.filter((word) => !word.startsWith('--')).map((word) => word.split('=', 2) as [string, string]),
    ),
  };
}

/**
 * Preloaded beside MEMORY_PROBE: every 500 ms one line of `process.memoryUsage()` and the heap
 * spaces' committed sizes, appended to MEMORY_SAMPLES_FILE (a file, so that the gateway's stderr
 * buffer in the parent stays small). Its own cost: one line every half second.
 */
const SAMPLER = `data:text/javascript,${encodeURIComponent(
  'import { getHeapSpaceStatistics } from "node:v8"; import { appendFileSync } from "node:fs"; ' +
    'const file = process.env.MEMORY_SAMPLES_FILE; if (file) setInterval(() => { const m = process.memoryUsage(); ' +
    'const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, s.space_size])); ' +
    'appendFileSync(file, JSON.stringify({ t: Date.now(), ...m, spaces }) + "\\n"); }, 500).unref();',
)}`;

interface Sample {
  t: number;
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  spaces: Record<string, number>;
}

const IS_NULL_QUERY = readFileSync(new URL('../operations/is-null.graphql', import.meta.url), 'utf8');
let varied = 0;
const body = () =>
  JSON.stringify({
    query: IS_NULL_QUERY,
    operationName: 'IsNull',
    variables: { value: `memory-${++varied}` },
  });

/**
 * What the kernel counts in RSS (/proc/<pid>/smaps_rollup, MB): anonymous memory (heap, malloc,
 * stacks), file-backed pages (the node binary and its libraries as far as they were touched:
 * reclaimable, shared with every process of the image), and of the anonymous part what was given back
 * with MADV_FREE but not yet taken by the kernel (LazyFree: counted until there is memory pressure).
 */
async function rssParts(pid: number): Promise<string> {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const field = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? Number.NaN) * 1024;
  const rss = field('Rss');
  const anonymous = field('Anonymous');
  return `RSS ${mb(rss)}: anonymous ${mb(anonymous)} (of which lazily freed ${mb(field('LazyFree'))}), files ${mb(rss - anonymous)}`;
}

async function threadsOf(pid: number): Promise<number> {
  return (await readdir(`/proc/${pid}/task`)).length;
}

function load(gateway: ChildServer, options: { amount?: number; duration?: number; overallRate?: number }) {
  return autocannon({
    url: `http://127.0.0.1:${gateway.port}/graphql`,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: body(),
    requests: [{ setupRequest: (request) => ({ ...request, body: body() }) }],
    connections: CONNECTIONS,
    timeout: 10,
    ...options,
  });
}

async function startGateway(name: string, config: Config, upstreamUrl: string, samplesFile: string) {
  return startChild({
    name,
    script: GATEWAY_SCRIPT,
    port: await freePort(),
    readyPath: '/health',
    nodeArgs: [
      ...config.nodeArgs,
      ...MEMORY_PROBE_ARGS,
      '--import',
      SAMPLER,
      ...(SNAPSHOT
        ? [`--heapsnapshot-signal=${SNAPSHOT_SIGNAL}`, `--diagnostic-dir=${fileURLToPath(OUT)}`]
        : []),
    ],
    env: {
      ...config.env,
      ...memoryGatewayEnv(upstreamUrl),
      MEMORY_SAMPLES_FILE: samplesFile,
    },
  });
}

async function samplesOf(file: string): Promise<Sample[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Sample);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What RSS was made of at one sample (MB): V8's spaces, external memory, and the rest. */
function breakdown(sample: Sample): string {
  const young = sample.spaces.new_space ?? 0;
  const old = (sample.spaces.old_space ?? 0) + (sample.spaces.trusted_space ?? 0);
  const code = sample.spaces.code_space ?? 0;
  const large = (sample.spaces.large_object_space ?? 0) + (sample.spaces.new_large_object_space ?? 0);
  const rest = sample.rss - sample.heapTotal - sample.external;
  return (
    `RSS ${mb(sample.rss)} = V8 heap ${mb(sample.heapTotal)} (young ${mb(young)}, old ${mb(old)}, code ${mb(code)}, ` +
    `large ${mb(large)}) + external ${mb(sample.external)} (array buffers ${mb(sample.arrayBuffers)}) + the rest ${mb(rest)} ` +
    '(malloc arenas, thread stacks, the binary)'
  );
}

async function measure(name: string, upstreamUrl: string): Promise<void> {
  const config = configOf(name);
  const label = name.split(':')[0] as string;
  const samplesFile = fileURLToPath(new URL(`${label}.jsonl`, OUT));
  await rm(samplesFile, { force: true });
  const gateway = await startGateway(label, config, upstreamUrl, samplesFile);
  const pid = gateway.child.pid as number;
  try {
    await sleep(1000);
    const start = await gateway.rss();
    const partsAtStart = await rssParts(pid);
    const threadsAtStart = await threadsOf(pid);
    let peak = start;
    const watcher = setInterval(() => {
      void gateway.rss().then((rss) => {
        if (rss > peak) peak = rss;
      });
    }, 250);
    const began = Date.now();
    const result = await load(gateway, { amount: OPS });
    clearInterval(watcher);
    const end = await gateway.rss();
    const partsAtEnd = await rssParts(pid);
    const threadsUnderLoad = await threadsOf(pid);
    const loadSeconds = (Date.now() - began) / 1000;
    const idle: number[] = [];
    let waited = 0;
    for (const at of IDLE_MARKS.filter((s) => s <= IDLE_S)) {
      await sleep((at - waited) * 1000);
      waited = at;
      idle.push(await gateway.rss());
    }
    const partsIdle = await rssParts(pid);
    const samples = await samplesOf(samplesFile);
    const atPeak = samples.reduce((best, s) => (s.rss > best.rss ? s : best), samples[0] as Sample);
    const last = samples.at(-1) as Sample;
    const afterGc = await probeMemory(gateway, 1);

    const failures = result.errors + result.timeouts + result.non2xx;
    console.log(
      `\n${label}: node ${config.nodeArgs.join(' ') || "(node's defaults)"}${Object.entries(config.env)
        .map(([k, v]) => ` ${k}=${v}`)
        .join('')}`,
    );
    console.log(
      `  ${OPS} distinct isNull at ${CONNECTIONS} connections in ${loadSeconds.toFixed(1)} s (${Math.round(
        result.requests.average,
      )} req/s, p99 ${result.latency.p99} ms, ${failures} failed); threads ${threadsAtStart} at start, ${threadsUnderLoad} after`,
    );
    console.log(
      `  RSS ${mb(start)} MB at start, ${mb(Math.max(peak, end))} peak, ${mb(end)} at the end, ` +
        `${idle.map((rss, i) => `${mb(rss)} ${IDLE_MARKS[i]} s after`).join(', ')}`,
    );
    console.log(
      `  kernel's view: at start ${partsAtStart}; at the end ${partsAtEnd}; idle ${partsIdle}; after a full GC ${await rssParts(pid)}`,
    );
    if (samples[0]) console.log(`  first sample (start): ${breakdown(samples[0])}`);
    if (atPeak) console.log(`  at the peak sample: ${breakdown(atPeak)}`);
    if (last) console.log(`  idle, last sample: ${breakdown(last)}`);
    console.log(
      `  after a full GC: RSS ${mb(afterGc.rss)} MB, heap used ${mb(afterGc.heapUsed)}, committed ${mb(afterGc.heapTotal)} ` +
        `(young ${mb(afterGc.young)}), external ${mb(afterGc.external)}`,
    );
    if (SNAPSHOT) await snapshot(gateway, label);
  } finally {
    await gateway.stop();
  }
}

/**
 * A heap snapshot of the loaded process after the idle wait (node's `--heapsnapshot-signal`, given
 * at start with `--snapshot`), then what it holds: self size by V8 node type and the largest
 * constructors. Self sizes, not retained ones: a dominator tree is DevTools' job (open the file).
 */
async function snapshot(gateway: ChildServer, name: string): Promise<void> {
  const before = new Set(await readdir(OUT));
  gateway.child.kill(SNAPSHOT_SIGNAL);
  const deadline = Date.now() + 60_000;
  let file: string | undefined;
  while (Date.now() < deadline && file === undefined) {
    await sleep(500);
    const fresh = (await readdir(OUT)).filter((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    // Written in one go and renamed? No: written in place; wait until its size stops changing.
    if (fresh[0] !== undefined) {
      const path = fileURLToPath(new URL(fresh[0], OUT));
      let size = -1;
      while (Date.now() < deadline) {
        const now = (await stat(path)).size;
        if (now === size && now > 0) break;
        size = now;
        await sleep(1000);
      }
      file = path;
    }
  }
  if (file === undefined) throw new Error(`${name}: no heap snapshot within 60 s`);
  const target = fileURLToPath(new URL(`${name}.heapsnapshot`, OUT));
  await rename(file, target);
  const data = JSON.parse(await readFile(target, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = data.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = data.snapshot.meta.node_types[0];
  const byType = new Map<string, number>();
  const byName = new Map<string, number>();
  for (let i = 0; i < data.nodes.length; i += width) {
    const type = types[data.nodes[i + typeAt] as number] ?? '?';
    const size = data.nodes[i + sizeAt] as number;
    byType.set(type, (byType.get(type) ?? 0) + size);
    if (type === 'object' || type === 'closure' || type === 'native') {
      const label = `${type} ${data.strings[data.nodes[i + nameAt] as number] ?? '?'}`;
      byName.set(label, (byName.get(label) ?? 0) + size);
    }
  }
  const top = (map: Map<string, number>, n: number) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => `${k} ${mb(v)}`)
      .join(', ');
  const total = [...byType.values()].reduce((a, b) => a + b, 0);
  console.log(`  heap snapshot (${target}): ${mb(total)} MB of self sizes; by type: ${top(byType, 6)}`);
  console.log(`  largest constructors: ${top(byName, 8)}`);
}

async function soak(upstreamUrl: string): Promise<void> {
  const config = CONFIGS.image?.() as Config;
  const samplesFile = fileURLToPath(new URL('soak.jsonl', OUT));
  await rm(samplesFile, { force: true });
  const gateway = await startGateway('soak', config, upstreamUrl, samplesFile);
  try {
    console.log(
      `soak: one gateway (node ${config.nodeArgs.join(' ')}${Object.entries(config.env)
        .map(([k, v]) => ` ${k}=${v}`)
        .join('')}), ${RATE} distinct isNull/s at ${CONNECTIONS} connections for ${MINUTES} min`,
    );
    const points: Array<{ minute: number; rss: number; heap: number }> = [];
    let probes = 0;
    const point = async (minute: number) => {
      const rss = await gateway.rss();
      const probe = await probeMemory(gateway, ++probes);
      points.push({ minute, rss, heap: probe.heapUsed });
      console.log(
        `  ${String(minute).padStart(2)} min: RSS ${mb(rss)} MB (then a full GC: RSS ${mb(probe.rss)}, heap used ${mb(probe.heapUsed)})`,
      );
    };
    await point(0);
    let failures = 0;
    let answered = 0;
    for (let minute = 1; minute <= MINUTES; minute++) {
      const result = await load(gateway, { duration: 60, overallRate: RATE });
      failures += result.errors + result.timeouts + result.non2xx;
      answered += result.requests.total;
      await point(minute);
    }
    const half = points.filter((p) => p.minute > 0 && p.minute <= Math.ceil(MINUTES / 2));
    const plateau = Math.max(...half.map((p) => p.rss));
    const last = points.at(-1) as { rss: number; heap: number };
    const grew = last.rss > plateau * 1.1;
    console.log(
      `soak: ${answered} answered, ${failures} failed; plateau (highest of the first half) ${mb(plateau)} MB, ` +
        `last ${mb(last.rss)} MB: ${grew ? 'GREW past the plateau by more than 10 %' : 'no growth past the plateau'}; ` +
        `heap used after GC ${mb(points[0]?.heap ?? 0)} → ${mb(last.heap)} MB`,
    );
    if (grew || failures > 0) process.exitCode = 1;
  } finally {
    await gateway.stop();
  }
}

async function main(): Promise<void> {
  installSignalCleanup();
  mkdirSync(OUT, { recursive: true });
  console.log(`node ${process.version}, ${os.cpus().length} CPUs, ${mb(os.totalmem())} MB of memory`);
  // The compiled gateway, as the image runs it: built here when no benchmark has built it yet.
  if (!existsSync(fileURLToPath(new URL(`../../${GATEWAY_SCRIPT}`, import.meta.url)))) {
    const build = spawnSync(process.execPath, ['scripts/build-dist.mjs', 'bench-results/dist'], {
      stdio: 'inherit',
    });
    if (build.status !== 0) throw new Error('scripts/build-dist.mjs bench-results/dist failed');
  }
  const { upstream } = await startFixedUpstream();
  try {
    const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
    if (SOAK) await soak(upstreamUrl);
    else
      for (const name of (argument('configs') ?? 'image,defaults').split(','))
        await measure(name, upstreamUrl);
  } finally {
    await upstream.stop();
  }
}

await main();
