/**
 * Gateway benchmark: `npm run bench [-- --duration 10 --warmup 3 --connections 50 --memory-ops 100000]`.
 *
 * What a gateway costs is what it adds on top of the upstream call, so every figure is put next to the
 * physical limit measured in the same run: one at a time on loopback, under the same load (autocannon,
 * 50 connections), in front of the same fixed-answer upstream (test/bench/fixed-upstream.ts, its own
 * process):
 *   1. the upstream directly (REST);
 *   2. the raw one-hop proxy (test/bench/raw-proxy.ts): node:http + one undici Pool request each, no
 *      GraphQL: the floor cost of any one-call gateway here;
 *   3. the gateway (its own process, as `npm start` runs it, NODE_ENV=production), pi and isNull with
 *      the response cache off; the same with the fast path off (Yoga's handler only), for reference;
 *   4. the gateway with the deterministic-answer cache on (repeated identical operations);
 *   5. the gateway under WORKERS=2 (node:cluster), cache off.
 * Then the memory row: RSS of a fresh gateway process before and after `--memory-ops` operations.
 *
 * Prints one table (req/s, p50, p99, errors, non-2xx, ratio to the proxy of the same upstream call)
 * and writes it as JSON to bench-results/ (git-ignored). Options: `--only name,name` runs the rows
 * whose name contains one of the words; `--no-cluster`, `--no-memory` skip those parts.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import autocannon, { type Result as AutocannonResult } from 'autocannon';
import { type ChildServer, freePort, startChild } from './bench-processes.js';

// --- options -------------------------------------------------------------------------------------

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  if (index === -1) return fallback;
  const value = Number(process.argv[index + 1]);
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} needs a number`);
  return value;
}
const flag = (name: string) => process.argv.includes(`--${name}`);
const onlyIndex = process.argv.indexOf('--only');
const only = onlyIndex === -1 ? undefined : (process.argv[onlyIndex + 1] ?? '').split(',').filter(Boolean);

const DURATION_S = option('duration', 10);
const WARMUP_S = option('warmup', 3);
const CONNECTIONS = option('connections', 50);
const MEMORY_OPS = option('memory-ops', 100_000);
const WORKERS = option('workers', 2);
/** `--cpu-prof`: each gateway process writes a V8 CPU profile to bench-results/profiles/. */
const CPU_PROF = flag('cpu-prof');
const PROFILE_DIR = new URL('../../bench-results/profiles/', import.meta.url);

// --- the requests --------------------------------------------------------------------------------

const operations = new URL('../operations/', import.meta.url);
const PI_QUERY = await readFile(new URL('pi.graphql', operations), 'utf8');
const IS_NULL_QUERY = await readFile(new URL('is-null.graphql', operations), 'utf8');

type Operation = 'pi' | 'isNull';
const BODIES: Record<Operation, string> = {
  pi: JSON.stringify({ query: PI_QUERY, operationName: 'Pi', variables: { digits: 10 } }),
  isNull: JSON.stringify({ query: IS_NULL_QUERY, operationName: 'IsNull', variables: { value: null } }),
};
const GRAPHQL_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/graphql-response+json, application/json',
};

// --- measuring -----------------------------------------------------------------------------------

interface Row {
  name: string;
  /** The proxy row this row is compared with. */
  baseline: string | null;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
  total: number;
  /** CPU time of the server under test per answered request, in µs (null for the bare upstream). */
  cpuUsPerRequest: number | null;
  cpuRatio?: number | null;
  ratio?: number | null;
  p99Ratio?: number | null;
}

interface Target {
  url: string;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
}

/** One request first: a benchmark of error answers would be worthless. */
async function check(name: string, target: Target, expect: (body: string) => boolean): Promise<void> {
  const response = await fetch(target.url, {
    method: target.method,
    headers: target.headers,
    body: target.body,
  });
  const text = await response.text();
  if (!response.ok || !expect(text)) {
    throw new Error(`${name}: unexpected answer ${response.status}: ${text.slice(0, 500)}`);
  }
}

async function drive(target: Target, seconds: number): Promise<AutocannonResult> {
  return autocannon({
    url: target.url,
    method: target.method,
    headers: target.headers,
    body: target.body,
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 10,
  });
}

const rows: Row[] = [];
const selected = (name: string) => only === undefined || only.some((word) => name.includes(word));

async function measure(
  name: string,
  baseline: string | null,
  target: Target,
  server?: ChildServer,
): Promise<void> {
  if (!selected(name)) return;
  if (WARMUP_S > 0) await drive(target, WARMUP_S);
  const cpuBefore = server ? await server.cpuMs() : 0;
  const result = await drive(target, DURATION_S);
  const cpuAfter = server ? await server.cpuMs() : 0;
  const row: Row = {
    name,
    baseline,
    requestsPerSecond: Math.round(result.requests.average),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    total: result.requests.total,
    cpuUsPerRequest:
      server && result.requests.total > 0
        ? Math.round(((cpuAfter - cpuBefore) * 1000) / result.requests.total)
        : null,
  };
  rows.push(row);
  process.stderr.write(
    `  ${name.padEnd(34)} ${String(row.requestsPerSecond).padStart(7)} req/s  p50 ${row.p50Ms} ms  p99 ${row.p99Ms} ms  cpu ${row.cpuUsPerRequest ?? '-'} µs/req\n`,
  );
}

const gatewayTarget = (server: ChildServer, operation: Operation): Target => ({
  url: `http://127.0.0.1:${server.port}/graphql`,
  method: 'POST',
  headers: GRAPHQL_HEADERS,
  body: BODIES[operation],
});

const isPiAnswer = (text: string) => {
  const body = JSON.parse(text) as { data?: { pi?: { digits?: string } }; errors?: unknown };
  return body.errors === undefined && body.data?.pi?.digits === '3.1415926535';
};
const isNullAnswer = (text: string) => {
  const body = JSON.parse(text) as { data?: { isNull?: { isNull?: boolean } }; errors?: unknown };
  return body.errors === undefined && body.data?.isNull?.isNull === true;
};

const slug = (text: string) => text.replace(/[^a-z0-9]+/gi, '-').toLowerCase();

interface GatewayVariant {
  label: string;
  env: Record<string, string>;
}

/**
 * The gateway runs compiled, as `npm start` runs it: under tsx every closure created per request pays
 * for esbuild's `__name` helper, which production never does. Built into bench-results/dist (not
 * dist/, which other processes may be using) unless `--no-build`.
 */
const GATEWAY_SCRIPT = 'bench-results/dist/main.js';

function buildGateway(): void {
  if (flag('no-build') && existsSync(new URL(`../../${GATEWAY_SCRIPT}`, import.meta.url))) return;
  process.stderr.write('building the gateway (tsc -p tsconfig.build.json --outDir bench-results/dist)...\n');
  const root = new URL('../../', import.meta.url);
  const tsc = new URL('node_modules/typescript/bin/tsc', root).pathname;
  const result = spawnSync(
    process.execPath,
    [tsc, '-p', 'tsconfig.build.json', '--outDir', 'bench-results/dist'],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  // Type errors elsewhere in the tree do not stop tsc from emitting; only a missing output does.
  if (!existsSync(new URL(GATEWAY_SCRIPT, root))) {
    throw new Error(`build failed:\n${result.stdout}${result.stderr}`);
  }
  if (result.status !== 0)
    process.stderr.write(`tsc reported errors (output emitted anyway):\n${result.stdout.slice(0, 2000)}\n`);
}

async function startGateway(upstreamUrl: string, variant: GatewayVariant): Promise<ChildServer> {
  return startChild({
    name: variant.label,
    script: GATEWAY_SCRIPT,
    port: await freePort(),
    readyPath: '/health',
    nodeArgs: CPU_PROF
      ? ['--cpu-prof', '--cpu-prof-dir', new URL(`${slug(variant.label)}/`, PROFILE_DIR).pathname]
      : [],
    env: {
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      NULL_BASE_URL: upstreamUrl,
      PI_BASE_URL: upstreamUrl,
      LOG_LEVEL: 'info',
      ...variant.env,
    },
  });
}

async function gatewayRows(upstreamUrl: string, variant: GatewayVariant): Promise<void> {
  if (!selected(`${variant.label} pi`) && !selected(`${variant.label} isNull`)) return;
  const gateway = await startGateway(upstreamUrl, variant);
  try {
    await check(`${variant.label} pi`, gatewayTarget(gateway, 'pi'), isPiAnswer);
    await check(`${variant.label} isNull`, gatewayTarget(gateway, 'isNull'), isNullAnswer);
    await measure(`${variant.label} pi`, 'proxy pi', gatewayTarget(gateway, 'pi'), gateway);
    await measure(`${variant.label} isNull`, 'proxy check', gatewayTarget(gateway, 'isNull'), gateway);
  } finally {
    await gateway.stop();
  }
}

interface MemoryResult {
  operations: number;
  rssStartMb: number;
  rssAfterWarmupMb: number;
  rssAfterMb: number;
}

async function memoryRow(upstreamUrl: string): Promise<MemoryResult | undefined> {
  if (flag('no-memory') || MEMORY_OPS === 0 || (only !== undefined && !selected('memory'))) return undefined;
  const gateway = await startGateway(upstreamUrl, { label: 'memory', env: { RESPONSE_CACHE: 'false' } });
  const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
  try {
    const rssStart = await gateway.rss();
    const target = gatewayTarget(gateway, 'pi');
    await autocannon({ ...target, connections: CONNECTIONS, amount: 2000 });
    const rssAfterWarmup = await gateway.rss();
    const result = await autocannon({ ...target, connections: CONNECTIONS, amount: MEMORY_OPS, timeout: 10 });
    const rssAfter = await gateway.rss();
    if (result.non2xx + result.errors > 0)
      throw new Error(`memory run: ${result.non2xx + result.errors} failures`);
    return {
      operations: MEMORY_OPS,
      rssStartMb: mb(rssStart),
      rssAfterWarmupMb: mb(rssAfterWarmup),
      rssAfterMb: mb(rssAfter),
    };
  } finally {
    await gateway.stop();
  }
}

// --- the run -------------------------------------------------------------------------------------

function printTable(memory: MemoryResult | undefined): void {
  const byName = new Map(rows.map((r) => [r.name, r]));
  for (const row of rows) {
    const base = row.baseline === null ? undefined : byName.get(row.baseline);
    row.ratio = base ? Math.round((row.requestsPerSecond / base.requestsPerSecond) * 100) / 100 : null;
    row.p99Ratio = base && base.p99Ms > 0 ? Math.round((row.p99Ms / base.p99Ms) * 100) / 100 : null;
    // Proxy CPU per request ÷ this row's: the throughput ratio a CPU-bound run would show.
    row.cpuRatio =
      base?.cpuUsPerRequest && row.cpuUsPerRequest
        ? Math.round((base.cpuUsPerRequest / row.cpuUsPerRequest) * 100) / 100
        : null;
  }
  const header = [
    '',
    'req/s',
    'p50 ms',
    'p99 ms',
    'errors',
    'non-2xx',
    '× proxy',
    'p99 × proxy',
    'cpu µs/req',
    'cpu × proxy',
  ];
  const lines = rows.map((r) => [
    r.name,
    String(r.requestsPerSecond),
    String(r.p50Ms),
    String(r.p99Ms),
    String(r.errors),
    String(r.non2xx),
    r.ratio == null ? '' : `${r.ratio.toFixed(2)}×`,
    r.p99Ratio == null ? '' : `${r.p99Ratio.toFixed(2)}×`,
    r.cpuUsPerRequest == null ? '' : String(r.cpuUsPerRequest),
    r.cpuRatio == null ? '' : `${r.cpuRatio.toFixed(2)}×`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? '').length)));
  const format = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  console.log(`\n${format(header)}`);
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const line of lines) console.log(format(line));
  if (memory) {
    console.log(
      `\nmemory (gateway process RSS, cache off): ${memory.rssStartMb} MB at start, ${memory.rssAfterWarmupMb} MB after warm-up, ` +
        `${memory.rssAfterMb} MB after ${memory.operations} more operations`,
    );
  }
}

async function main(): Promise<void> {
  console.log(
    `gateway benchmark: ${CONNECTIONS} connections, ${DURATION_S} s per row after ${WARMUP_S} s warm-up; ` +
      `node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`,
  );
  buildGateway();
  const upstream = await startChild({
    name: 'upstream',
    script: 'test/bench/fixed-upstream.ts',
    port: await freePort(),
    readyPath: '/api/v1/health',
    env: {},
  });
  const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
  let memory: MemoryResult | undefined;
  try {
    await measure('upstream pi (REST)', null, {
      url: `${upstreamUrl}/api/v1/pi?digits=10`,
      method: 'GET',
    });
    await measure('upstream check (REST)', null, {
      url: `${upstreamUrl}/api/v1/check`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"value":null}',
    });

    if (selected('proxy')) {
      const proxy = await startChild({
        name: 'proxy',
        script: 'test/bench/raw-proxy.ts',
        port: await freePort(),
        readyPath: '/health',
        env: { UPSTREAM_URL: upstreamUrl },
      });
      try {
        const target = (path: string, operation: Operation): Target => ({
          url: `http://127.0.0.1:${proxy.port}${path}`,
          method: 'POST',
          headers: GRAPHQL_HEADERS,
          body: BODIES[operation],
        });
        await check('proxy pi', target('/pi', 'pi'), (t) => t.includes('3.1415926535'));
        await measure('proxy pi', null, target('/pi', 'pi'), proxy);
        await measure('proxy check', null, target('/check', 'isNull'), proxy);
      } finally {
        await proxy.stop();
      }
    }

    await gatewayRows(upstreamUrl, { label: 'gateway', env: { RESPONSE_CACHE: 'false' } });
    await gatewayRows(upstreamUrl, {
      label: 'gateway yoga-only',
      env: { RESPONSE_CACHE: 'false', HTTP_FAST_PATH: 'false' },
    });
    await gatewayRows(upstreamUrl, { label: 'gateway cache', env: { RESPONSE_CACHE: 'true' } });
    if (!flag('no-cluster')) {
      await gatewayRows(upstreamUrl, {
        label: `gateway workers=${WORKERS}`,
        env: { RESPONSE_CACHE: 'false', WORKERS: String(WORKERS) },
      });
    }
    memory = await memoryRow(upstreamUrl);
  } finally {
    await upstream.stop();
  }

  printTable(memory);
  const results = {
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    connections: CONNECTIONS,
    durationSeconds: DURATION_S,
    warmupSeconds: WARMUP_S,
    rows,
    memory,
  };
  const dir = new URL('../../bench-results/', import.meta.url);
  await mkdir(dir, { recursive: true });
  const stamp = results.date.replace(/[:.]/g, '-');
  await writeFile(new URL(`gateway-bench-${stamp}.json`, dir), `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(new URL('gateway-bench-latest.json', dir), `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\nwritten: bench-results/gateway-bench-${stamp}.json`);
}

await main();
