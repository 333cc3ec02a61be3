/**
 * Gateway benchmark: `npm run bench [-- --runs 3 --duration 10 --warmup 3 --connections 50 --memory-ops 100000 --memory-idle 60]`.
 *
 * What a gateway costs is what it adds on top of the upstream call, so every figure is put next to the
 * physical limit measured in the same run: one at a time on loopback, under the same load (autocannon,
 * 50 connections), in front of the same fixed-answer upstream (test/bench/fixed-upstream.ts, its own
 * process). One run is the whole row set:
 *   1. the upstream directly (REST);
 *   2. the raw one-hop proxy (test/bench/raw-proxy.ts): node:http + one undici Pool request each, no
 *      GraphQL: the floor cost of any one-call gateway here;
 *   3. the gateway (its own process, as `npm start` runs it, NODE_ENV=production), pi and isNull with
 *      the defaults (response cache off); the same with the fast path off (Yoga's handler only).
 *      Identical concurrent operations share one upstream call in the gateway (in-flight sharing, on
 *      whatever the cache setting), so these rows make far fewer upstream calls than the proxy: the
 *      `distinct isNull` row asks about a different value each request, one upstream call each, as the
 *      proxy does;
 *   4. the gateway with the response cache on (RESPONSE_CACHE=true; repeated identical operations: hits);
 *   5. the gateway under WORKERS=2 (node:cluster), cache off;
 *   6. the gateway with REDIS_URL set (a real redis-server started on a free loopback port for the
 *      variant's rows and stopped after them), cache off (pi, isNull, distinct isNull) and cache on (pi,
 *      isNull): the cost of sharing the state between replicas, as the difference with the in-memory
 *      row of the same run plus the redis-server's own CPU. Skipped with a notice when redis-server is
 *      not installed (REDIS_SERVER_BIN names another binary);
 *   7. the fleet rows (`fleet`, `fleet workers=N`): the gateway as a fleet runs it, on its own fresh
 *      redis-server with a budget large enough never to refuse (COST_BUDGETS={"default":{"1h":100000}}),
 *      cache off, distinct isNull (one upstream call per operation, as the proxy); once as one process
 *      and once under WORKERS=N. Besides the CPU of the gateway and of redis-server, what Redis does per
 *      operation: its commands and their µs (INFO commandstats, reset before the measured phase) and the
 *      round trips (top-level commands, counted with MONITOR during the warm-up: see
 *      test/bench/redis-commandstats.ts for both definitions); for the one-process row also the
 *      gateway's own count by purpose (gateway_redis_commands_total). Every Redis row reports the same
 *      Redis figures;
 *   8. the gateway exporting its traces (`gateway otlp`: OTEL_EXPORTER_OTLP_ENDPOINT set, http/protobuf,
 *      the default batch processor) to a receiver in this process that reads each export and discards
 *      it: what the export costs on the request path, as the difference with the `gateway` row of the
 *      same run (cache off; distinct isNull, pi, isNull);
 *   9. the gateway as a Federation 2 subgraph (`gateway federation`: FEDERATION=true), distinct isNull,
 *      against the `gateway` row of the same run;
 *  10. the router rows (contract §14): Hive Gateway (test/bench/hive-router.ts, its own process) in front
 *      of the raw proxy's /graphql (`router proxy`) and in front of the gateway with FEDERATION=true
 *      (`router gateway`), distinct isNull; a row's CPU is the router's and the subgraph's together,
 *      each part printed after the table: what the router costs, and what we cost behind it.
 * `--runs N` (default 3) repeats the whole set; each row is compared with the proxy of its own run, and
 * the median over the runs is printed per row with the per-run figures beside it. Then, once, the
 * memory row: a fresh gateway process (cache off) under `--memory-ops` distinct isNull operations at
 * `--connections`: its RSS at start, at its peak under the load (sampled every 250 ms), at the end
 * and `--memory-idle` seconds after (nothing forced: what a platform sees), then the V8 heap after a
 * forced full GC; against the bound of issue #47 (peak ≤ 250 MB, ≤ 200 MB after the idle minute).
 *
 * Per row: req/s, p50, p99, errors, non-2xx, the CPU time of the server process per answered request
 * (workers included) and, gateway ÷ proxy, its ratio to the proxy's CPU per request, throughput ×
 * proxy and p99 × proxy; for gateway rows also upstream calls per request and, for the Redis rows, the
 * redis-server's own CPU per request, the Redis errors the gateway counted (each one a fallback to
 * memory), Redis commands, µs and round trips per operation, and (gateway + redis-server CPU) ÷ the
 * proxy's. Writes everything as JSON to bench-results/ (git-ignored).
 *
 * Options: `--only name,name` runs the rows whose name contains one of the words (`--only proxy,fleet`:
 * the fleet rows and the proxy they are compared with); `--no-cluster`, `--no-redis` (the Redis and
 * fleet rows), `--no-fleet`, `--no-memory` skip those parts; `--no-build` reuses the last build; `--cpu-prof`
 * writes V8 CPU profiles of each gateway process to bench-results/profiles/; `--node-args "..."` gives
 * the gateway processes other node options than the image's (V8 settings to compare; `""` for none).
 */

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon, { type Result as AutocannonResult } from 'autocannon';
import { startIdentityProvider } from '../support/identity-provider.js';
import { deployedNodeArgs } from '../support/image-node-options.js';
import { freePort, redisServerAvailable, startRedisServer } from '../support/redis-server.js';
import {
  type ChildServer,
  cpuOf,
  findChildPid,
  installSignalCleanup,
  startChild,
  startFixedUpstream,
  track,
} from './bench-processes.js';
import {
  MEMORY_PROBE_ARGS,
  type MemoryProbe,
  mb,
  memoryGatewayEnv,
  probeMemory,
  watchRss,
} from './memory-sampling.js';
import { countRoundTrips, readCommandStats, resetCommandStats } from './redis-commandstats.js';

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

const RUNS = option('runs', 3);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error('--runs needs a whole number ≥ 1');
const DURATION_S = option('duration', 10);
const WARMUP_S = option('warmup', 3);
const CONNECTIONS = option('connections', 50);
const MEMORY_OPS = option('memory-ops', 100_000);
/** Seconds the memory row waits after its load before reading RSS again (issue #47: back under 200 MB within 60 s). */
const MEMORY_IDLE_S = option('memory-idle', 60);
const WORKERS = option('workers', 2);
/** `--cpu-prof`: each gateway process (and the proxy) writes a V8 CPU profile to bench-results/profiles/. */
const CPU_PROF = flag('cpu-prof');
const PROFILE_DIR = new URL('../../bench-results/profiles/', import.meta.url);
/**
 * `--node-args "a b"`: node options for the gateway processes, to compare V8 settings such as
 * `--max-semi-space-size`. By default the image's (the Dockerfile's NODE_OPTIONS, its share of memory
 * taken of the Deployment's memory limit: test/support/image-node-options.ts), so that every row
 * measures the gateway as it is deployed; `--node-args ""` runs it with node's defaults.
 */
const NODE_ARGS_INDEX = process.argv.indexOf('--node-args');
const GATEWAY_NODE_ARGS =
  NODE_ARGS_INDEX === -1
    ? deployedNodeArgs()
    : (process.argv[NODE_ARGS_INDEX + 1] ?? '').split(' ').filter((arg) => arg !== '');

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

const isPiAnswer = (text: string) => {
  const body = JSON.parse(text) as { data?: { pi?: { digits?: string } }; errors?: unknown };
  return body.errors === undefined && body.data?.pi?.digits === '3.1415926535';
};
const isNullVerdict = (expected: boolean) => (text: string) => {
  const body = JSON.parse(text) as { data?: { isNull?: { isNull?: boolean } }; errors?: unknown };
  return body.errors === undefined && body.data?.isNull?.isNull === expected;
};

const distinctIsNullBody = (n: number) =>
  JSON.stringify({ query: IS_NULL_QUERY, operationName: 'IsNull', variables: { value: `bench-${n}` } });
/** A distinct temperature each request (0.001..0.997, 10 digits as the proxy asks): a sampled call, never shared. */
const distinctPiBody = (n: number) =>
  JSON.stringify({
    query: PI_QUERY,
    operationName: 'Pi',
    variables: { digits: 10, temperature: (1 + (n % 997)) / 1000 },
  });
/**
 * The value as a literal in the document, a new document each request: the prepared-operation cache
 * misses every time, so each request pays parse, validation, the limits and the plan.
 */
const LITERAL_IS_NULL_QUERY = IS_NULL_QUERY.replace('$value: JSON, ', '').replace(
  'value: $value',
  'value: "VALUE"',
);
/**
 * The IsNull document by its id (docs/contract.md, Trusted documents and persisted queries), a distinct
 * value each request, against a gateway enforcing a manifest that holds it: what a production frontend
 * sends.
 */
const IS_NULL_ID = createHash('sha256').update(IS_NULL_QUERY).digest('hex');
const TRUSTED_MANIFEST = fileURLToPath(
  new URL('../../bench-results/trusted-documents.json', import.meta.url),
);
mkdirSync(new URL('../../bench-results/', import.meta.url), { recursive: true });
writeFileSync(TRUSTED_MANIFEST, JSON.stringify({ [`sha256:${IS_NULL_ID}`]: IS_NULL_QUERY }));
const distinctIsNullByIdBody = (n: number) =>
  JSON.stringify({
    documentId: `sha256:${IS_NULL_ID}`,
    operationName: 'IsNull',
    variables: { value: `bench-${n}` },
  });
const distinctLiteralIsNullBody = (n: number) =>
  JSON.stringify({ query: LITERAL_IS_NULL_QUERY.replace('VALUE', `bench-${n}`), operationName: 'IsNull' });

/** What one gateway row sends, what a correct answer is, and the proxy row it is compared with. */
interface Workload {
  /** Appended to the variant's label: the row's name. */
  suffix: string;
  body: string;
  /** When set, the body of the n-th request (the benchmark counts them across rows and runs). */
  bodyFor?: (n: number) => string;
  expect: (text: string) => boolean;
  baseline: string;
}

type WorkloadName =
  | 'pi'
  | 'isNull'
  | 'distinct isNull'
  | 'distinct pi'
  | 'distinct literal isNull'
  | 'distinct isNull by id';
const WORKLOADS: Record<WorkloadName, Workload> = {
  pi: { suffix: 'pi', body: BODIES.pi, expect: isPiAnswer, baseline: 'proxy pi' },
  isNull: { suffix: 'isNull', body: BODIES.isNull, expect: isNullVerdict(true), baseline: 'proxy check' },
  /**
   * isNull of a different string each request: every operation makes its own upstream call (no
   * in-flight sharing, no cache hit), as the proxy does. Identical concurrent operations (the two rows
   * above) share one upstream call per burst in the gateway, which the proxy never does.
   */
  'distinct isNull': {
    suffix: 'distinct isNull',
    body: distinctIsNullBody(0),
    bodyFor: distinctIsNullBody,
    expect: isNullVerdict(false),
    baseline: 'proxy check',
  },
  'distinct pi': {
    suffix: 'distinct pi',
    body: distinctPiBody(0),
    bodyFor: distinctPiBody,
    expect: (text) => {
      const body = JSON.parse(text) as { data?: { pi?: { digits?: string } }; errors?: unknown };
      return body.errors === undefined && typeof body.data?.pi?.digits === 'string';
    },
    baseline: 'proxy pi',
  },
  'distinct isNull by id': {
    suffix: 'distinct isNull by id',
    body: distinctIsNullByIdBody(0),
    bodyFor: distinctIsNullByIdBody,
    expect: isNullVerdict(false),
    baseline: 'proxy check',
  },
  'distinct literal isNull': {
    suffix: 'distinct literal isNull',
    body: distinctLiteralIsNullBody(0),
    bodyFor: distinctLiteralIsNullBody,
    expect: isNullVerdict(false),
    baseline: 'proxy check',
  },
};

// --- measuring -----------------------------------------------------------------------------------

interface Row {
  /** 1-based run number. */
  run: number;
  name: string;
  /** The proxy row of the same run this row is compared with. */
  baseline: string | null;
  /** For a Redis row: the in-memory row of the same run it is compared with. */
  twin: string | null;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
  total: number;
  /** CPU time of the server under test per answered request, in µs (null for the bare upstream). */
  cpuUsPerRequest: number | null;
  /** CPU time of the redis-server per answered request, in µs (Redis rows only). */
  redisCpuUsPerRequest: number | null;
  /** Upstream HTTP requests the gateway made per answered request (from its /metrics; one process). */
  upstreamCallsPerRequest: number | null;
  /** Failed Redis commands during the row (each answered from memory instead). */
  redisErrors: number | null;
  /** Where the gateway's shared state was after the row: redis, or fallback (memory). */
  redisState: string | null;
  /** Redis commands per answered request, scripts' inner commands included (INFO commandstats). */
  redisCommandsPerOp: number | null;
  /** Redis `usec` per answered request, summed over those commands (INFO commandstats). */
  redisUsecPerOp: number | null;
  /** Top-level Redis commands (round trips) per request, counted with MONITOR during the warm-up. */
  redisRoundTripsPerOp: number | null;
  /** Commandstats calls per command over the measured phase. */
  redisCommands: Record<string, number> | null;
  /** The gateway's own count (gateway_redis_commands_total) per request, by purpose (one process only). */
  gatewayRoundTripsPerOp: Record<string, number> | null;
  /** This row's CPU per request ÷ the proxy's (gateway ÷ proxy: lower is better, 1 = the proxy). */
  cpuRatio: number | null;
  /** (This row's CPU + redis-server's) per request ÷ the proxy's CPU per request (Redis rows). */
  cpuWithRedisRatio: number | null;
  /** req/s × proxy (higher is better). */
  ratio: number | null;
  /** p99 × proxy (lower is better). */
  p99Ratio: number | null;
}

interface Target {
  url: string;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  bodyFor?: (n: number) => string;
}

/** What a gateway row observes besides the load: its metrics and, for a Redis row, the redis-server. */
interface Observer {
  /** Scrapes the gateway's /metrics (a single process only: under WORKERS a scrape sees one worker). */
  metrics?: () => Promise<Map<string, number>>;
  redisPid?: number;
  /** The redis-server's URL: its commandstats and a MONITOR count of the warm-up. */
  redisUrl?: string;
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

/** Requests sent with a varying body so far (each one gets the next number: no value repeats). */
let varied = 0;

async function drive(target: Target, seconds: number): Promise<AutocannonResult> {
  const { bodyFor } = target;
  return autocannon({
    url: target.url,
    method: target.method,
    headers: target.headers,
    body: target.body,
    ...(bodyFor && { requests: [{ setupRequest: (request) => ({ ...request, body: bodyFor(++varied) }) }] }),
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 10,
  });
}

/** Prometheus text → sum of every sample per metric name (labels summed over). */
async function scrapeMetrics(port: number): Promise<Map<string, number>> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  const text = await response.text();
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([A-Za-z_:][\w:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!match?.[1]) continue;
    sums.set(match[1], (sums.get(match[1]) ?? 0) + Number(match[3]));
    // Each labelled series too, under its full name (`name{label="value"}`).
    if (match[2] !== undefined) sums.set(`${match[1]}${match[2]}`, Number(match[3]));
  }
  return sums;
}

const notices: string[] = [];
function notice(text: string): void {
  notices.push(text);
  process.stderr.write(`  NOTICE: ${text}\n`);
}

/** The rows of each run, in order. */
const runs: Row[][] = [];
const currentRun = (): Row[] => runs[runs.length - 1] ?? [];
const selected = (name: string) => only === undefined || only.some((word) => name.includes(word));

interface MeasureOptions {
  baseline: string | null;
  twin?: string | null;
  server?: ChildServer;
  observer?: Observer;
}

async function measure(name: string, target: Target, options: MeasureOptions): Promise<void> {
  if (!selected(name)) return;
  const { server, observer } = options;
  const redisUrl = observer?.redisUrl;
  let redisRoundTripsPerOp: number | null = null;
  if (WARMUP_S > 0 && redisUrl !== undefined) {
    const warm = await countRoundTrips(redisUrl, () => drive(target, WARMUP_S));
    // Per request sent, not answered: the requests still in flight when the warm-up stops (up to one
    // per connection) have made their Redis calls too.
    const sent = warm.result.requests.sent;
    if (sent > 0) redisRoundTripsPerOp = Math.round((warm.roundTrips / sent) * 100) / 100;
    process.stderr.write(
      `  ${name}: warm-up round trips (MONITOR) ${JSON.stringify(warm.byCommand)} over ${sent} requests sent\n`,
    );
  } else if (WARMUP_S > 0) await drive(target, WARMUP_S);
  if (redisUrl !== undefined) await resetCommandStats(redisUrl);
  const metricsBefore = await observer?.metrics?.();
  const redisCpuBefore = observer?.redisPid === undefined ? 0 : await cpuOf(observer.redisPid);
  const cpuBefore = server ? await server.cpuMs() : 0;
  const result = await drive(target, DURATION_S);
  const cpuAfter = server ? await server.cpuMs() : 0;
  const redisCpuAfter = observer?.redisPid === undefined ? 0 : await cpuOf(observer.redisPid);
  const stats = redisUrl === undefined ? undefined : await readCommandStats(redisUrl);
  const metricsAfter = await observer?.metrics?.();
  const total = result.requests.total;
  const perRequest = (ms: number) => (total > 0 ? Math.round((ms * 1000) / total) : null);
  const delta = (metric: string) =>
    metricsBefore && metricsAfter ? (metricsAfter.get(metric) ?? 0) - (metricsBefore.get(metric) ?? 0) : null;
  const upstreamCalls = delta('gateway_upstream_requests_total');
  const redis = observer?.redisPid !== undefined;
  const redisUp = metricsAfter?.get('gateway_redis_up');
  const perOp = (n: number) => (total > 0 ? Math.round((n / total) * 100) / 100 : null);
  let gatewayRoundTripsPerOp: Record<string, number> | null = null;
  if (redis && metricsAfter !== undefined) {
    gatewayRoundTripsPerOp = {};
    for (const purpose of ['budget', 'flight', 'cache', 'documents', 'scores', 'health']) {
      const sent = delta(`gateway_redis_commands_total{purpose="${purpose}"}`);
      if (sent !== null && sent > 0) gatewayRoundTripsPerOp[purpose] = perOp(sent) ?? 0;
    }
    const all = delta('gateway_redis_commands_total');
    if (all !== null) gatewayRoundTripsPerOp.all = perOp(all) ?? 0;
  }
  const row: Row = {
    run: runs.length,
    name,
    baseline: options.baseline,
    twin: options.twin ?? null,
    requestsPerSecond: Math.round(result.requests.average),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    total,
    cpuUsPerRequest: server ? perRequest(cpuAfter - cpuBefore) : null,
    redisCpuUsPerRequest: redis ? perRequest(redisCpuAfter - redisCpuBefore) : null,
    upstreamCallsPerRequest:
      upstreamCalls === null || total === 0 ? null : Math.round((upstreamCalls / total) * 1000) / 1000,
    redisErrors: redis ? delta('gateway_redis_errors_total') : null,
    redisState: redis && redisUp !== undefined ? (redisUp === 1 ? 'redis' : 'fallback') : null,
    redisCommandsPerOp: stats === undefined ? null : perOp(stats.calls),
    redisUsecPerOp: stats === undefined ? null : perOp(stats.usec),
    redisRoundTripsPerOp,
    redisCommands: stats?.byCommand ?? null,
    gatewayRoundTripsPerOp,
    cpuRatio: null,
    cpuWithRedisRatio: null,
    ratio: null,
    p99Ratio: null,
  };
  currentRun().push(row);
  process.stderr.write(
    `  ${name.padEnd(34)} ${String(row.requestsPerSecond).padStart(7)} req/s  p50 ${row.p50Ms} ms  p99 ${row.p99Ms} ms  cpu ${row.cpuUsPerRequest ?? '-'} µs/req` +
      `${row.upstreamCallsPerRequest === null ? '' : `  upstream calls/req ${row.upstreamCallsPerRequest}`}` +
      `${redis ? `  redis-server ${row.redisCpuUsPerRequest ?? '-'} µs/req, redis errors ${row.redisErrors ?? '?'}` : ''}` +
      `${stats === undefined ? '' : `  redis cmds/op ${row.redisCommandsPerOp ?? '-'}, redis µs/op ${row.redisUsecPerOp ?? '-'}, round trips/op ${row.redisRoundTripsPerOp ?? '-'}`}` +
      `${gatewayRoundTripsPerOp === null ? '' : `  gateway's count/op ${JSON.stringify(gatewayRoundTripsPerOp)}`}\n`,
  );
  if (row.errors > 0 || row.non2xx > 0)
    notice(`run ${row.run}, ${name}: ${row.errors} errors/timeouts, ${row.non2xx} non-2xx answers`);
  // Under WORKERS no scrape sees every worker: the errors and the state are unknown, not reported.
  if (redis && metricsAfter !== undefined && (row.redisErrors !== 0 || row.redisState !== 'redis'))
    notice(
      `run ${row.run}, ${name}: ${row.redisErrors ?? '?'} Redis command errors, state ${row.redisState ?? '?'} after the row ` +
        '(each error was answered from memory: the row measured Redis only in part)',
    );
}

const gatewayTarget = (
  server: ChildServer,
  workload: Workload,
  headers: Record<string, string> = {},
): Target => ({
  url: `http://127.0.0.1:${server.port}/graphql`,
  method: 'POST',
  headers: { ...GRAPHQL_HEADERS, ...headers },
  body: workload.body,
  bodyFor: workload.bodyFor,
});

const slug = (text: string) => text.replace(/[^a-z0-9]+/gi, '-').toLowerCase();

interface GatewayVariant {
  label: string;
  env: Record<string, string>;
  /** The rows of this variant, all measured on one gateway process. */
  workloads: WorkloadName[];
  /** For a Redis variant: the label of the in-memory variant it is compared with. */
  twin?: string;
  /** Header fields every request of the variant sends (a key, a token). */
  headers?: Record<string, string>;
}

/**
 * The gateway runs compiled, as `npm start` runs it: under tsx every closure created per request pays
 * for esbuild's `__name` helper, which production never does. Built into bench-results/dist (not
 * dist/, which other processes may be using) unless `--no-build`.
 */
const GATEWAY_SCRIPT = 'bench-results/dist/main.js';

function buildGateway(): void {
  if (flag('no-build') && existsSync(new URL(`../../${GATEWAY_SCRIPT}`, import.meta.url))) return;
  process.stderr.write('building the gateway (scripts/build-dist.mjs bench-results/dist)...\n');
  const root = new URL('../../', import.meta.url);
  const result = spawnSync(process.execPath, ['scripts/build-dist.mjs', 'bench-results/dist'], {
    cwd: root,
    encoding: 'utf8',
  });
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
    nodeArgs: [
      ...GATEWAY_NODE_ARGS,
      ...(CPU_PROF
        ? ['--cpu-prof', '--cpu-prof-dir', new URL(`${slug(variant.label)}/`, PROFILE_DIR).pathname]
        : []),
    ],
    env: {
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      NULL_BASE_URL: upstreamUrl,
      PI_BASE_URL: upstreamUrl,
      LOG_LEVEL: 'info',
      // No trace export but the variant's, whatever the benchmark's own environment holds.
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
      ...variant.env,
    },
  });
}

/** Waits until the gateway's /ready says its shared state is in Redis (connected and answering). */
async function waitForRedisState(gateway: ChildServer, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    const response = await fetch(`http://127.0.0.1:${gateway.port}/ready`);
    last = await response.text();
    if ((JSON.parse(last) as { redis?: string }).redis === 'redis') return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${gateway.name}: shared state not in Redis after ${timeoutMs} ms: ${last}`);
}

const variantSelected = (variant: GatewayVariant) =>
  variant.workloads.some((name) => selected(`${variant.label} ${WORKLOADS[name].suffix}`));

async function gatewayRows(
  upstreamUrl: string,
  variant: GatewayVariant,
  redis?: { url: string; pid: number },
): Promise<void> {
  if (!variantSelected(variant)) return;
  const env = redis ? { ...variant.env, REDIS_URL: redis.url } : variant.env;
  const gateway = await startGateway(upstreamUrl, { ...variant, env });
  try {
    if (redis) await waitForRedisState(gateway);
    const observer: Observer = {
      metrics: env.WORKERS === undefined ? () => scrapeMetrics(gateway.port) : undefined,
      redisPid: redis?.pid,
      redisUrl: redis?.url,
    };
    for (const workload of variant.workloads.map((name) => WORKLOADS[name])) {
      const name = `${variant.label} ${workload.suffix}`;
      if (!selected(name)) continue;
      await check(name, gatewayTarget(gateway, workload, variant.headers), workload.expect);
      await measure(name, gatewayTarget(gateway, workload, variant.headers), {
        baseline: workload.baseline,
        twin: variant.twin === undefined ? null : `${variant.twin} ${workload.suffix}`,
        server: gateway,
        observer,
      });
    }
  } finally {
    await gateway.stop();
  }
}

/** A Redis variant: a fresh redis-server (loopback, free port, in memory only) for its row pair. */
async function redisGatewayRows(upstreamUrl: string, variant: GatewayVariant): Promise<void> {
  if (!variantSelected(variant)) return;
  const redis = await startRedisServer();
  const untrack = track(() => redis.stop());
  try {
    const pid = await findChildPid(new RegExp(`redis-server.*(:|--port )${redis.port}\\b`));
    if (pid === undefined) throw new Error(`cannot find the pid of the redis-server on port ${redis.port}`);
    await gatewayRows(upstreamUrl, variant, { url: redis.url, pid });
  } finally {
    await redis.stop();
    untrack();
  }
}

interface MemoryPoint {
  /** Operations sent so far (the warm-up included). */
  operations: number;
  /** RSS as found, before any forced collection (MB). */
  rssMb: number;
  /** RSS and V8 heap used right after a forced full GC (MB): what is really held. */
  rssAfterGcMb: number;
  heapUsedAfterGcMb: number;
  /**
   * V8's heap as committed (heapTotal) and its young generation (`new_space`) after that GC (MB): V8
   * grows the young generation under a high allocation rate, up to its maximum (node's
   * `--max-semi-space-size`, else derived from the memory node finds available), and keeps it; that
   * is RSS without anything being held.
   */
  heapTotalAfterGcMb: number;
  youngGenerationMb: number;
}

interface MemoryResult {
  operations: number;
  connections: number;
  /** The gateway's node options (the image's unless `--node-args`). */
  nodeArgs: string[];
  rssStartMb: number;
  rssAfterWarmupMb: number;
  /** The highest RSS sampled (every 250 ms) while the operations ran. */
  rssPeakMb: number;
  /** RSS when the last operation was answered. */
  rssAfterMb: number;
  /** RSS `idleSeconds` after the load ended, nothing forced. */
  rssIdleMb: number;
  idleSeconds: number;
  /** Start, after the warm-up, after the idle wait: each read, then a full GC and the heap. */
  points: MemoryPoint[];
  failures: number;
}

/** Issue #47's bound on the memory row: RSS at the peak of the load, and after the idle minute (MB). */
const MEMORY_BOUND = { peakMb: 250, idleMb: 200 };

async function memoryRow(upstreamUrl: string): Promise<MemoryResult | undefined> {
  if (flag('no-memory') || MEMORY_OPS === 0 || (only !== undefined && !selected('memory'))) return undefined;
  const gateway = await startChild({
    name: 'memory',
    script: GATEWAY_SCRIPT,
    port: await freePort(),
    readyPath: '/health',
    nodeArgs: [...GATEWAY_NODE_ARGS, ...MEMORY_PROBE_ARGS],
    env: memoryGatewayEnv(upstreamUrl),
  });
  const points: MemoryPoint[] = [];
  const point = async (operations: number, rss: number) => {
    const probe: MemoryProbe = await probeMemory(gateway, points.length + 1);
    const p: MemoryPoint = {
      operations,
      rssMb: mb(rss),
      rssAfterGcMb: mb(probe.rss),
      heapUsedAfterGcMb: mb(probe.heapUsed),
      heapTotalAfterGcMb: mb(probe.heapTotal),
      youngGenerationMb: mb(probe.young),
    };
    points.push(p);
    process.stderr.write(
      `  memory after ${String(operations).padStart(6)} operations: RSS ${p.rssMb} MB; after a full GC: RSS ${p.rssAfterGcMb} MB, heap used ${p.heapUsedAfterGcMb} MB, committed ${p.heapTotalAfterGcMb} MB (young generation ${p.youngGenerationMb} MB)\n`,
    );
  };
  try {
    // Distinct operations, as the bound of issue #47 is stated: one upstream call each, nothing shared.
    const { bodyFor } = WORKLOADS['distinct isNull'];
    const target = gatewayTarget(gateway, WORKLOADS['distinct isNull']);
    const send = (amount: number) =>
      autocannon({
        url: target.url,
        method: target.method,
        headers: target.headers,
        body: target.body,
        ...(bodyFor && {
          requests: [{ setupRequest: (request) => ({ ...request, body: bodyFor(++varied) }) }],
        }),
        connections: CONNECTIONS,
        amount,
        timeout: 10,
      });
    const warmup = 2000;
    const rssStart = await gateway.rss();
    await point(0, rssStart);
    const results = [await send(warmup)];
    const rssAfterWarmup = await gateway.rss();
    await point(warmup, rssAfterWarmup);
    // From here until the idle wait is over nothing is forced: RSS as a platform would see it.
    const watch = watchRss(gateway);
    results.push(await send(MEMORY_OPS));
    const rssAfter = await gateway.rss();
    await watch.stop();
    process.stderr.write(
      `  memory: peak RSS ${mb(Math.max(watch.peak(), rssAfter))} MB under the load, ${mb(rssAfter)} MB at its end; waiting ${MEMORY_IDLE_S} s...\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, MEMORY_IDLE_S * 1000));
    const rssIdle = await gateway.rss();
    await point(warmup + MEMORY_OPS, rssIdle);
    const failures = results.reduce((sum, r) => sum + r.non2xx + r.errors + r.timeouts, 0);
    if (failures > 0) notice(`memory row: ${failures} failed requests (non-2xx, errors, timeouts)`);
    return {
      operations: MEMORY_OPS,
      connections: CONNECTIONS,
      nodeArgs: GATEWAY_NODE_ARGS,
      rssStartMb: mb(rssStart),
      rssAfterWarmupMb: mb(rssAfterWarmup),
      rssPeakMb: mb(Math.max(watch.peak(), rssAfter)),
      rssAfterMb: mb(rssAfter),
      rssIdleMb: mb(rssIdle),
      idleSeconds: MEMORY_IDLE_S,
      points,
      failures,
    };
  } finally {
    await gateway.stop();
  }
}

// --- through Hive Gateway (contract §14) --------------------------------------------------------------

/**
 * The router rows: Hive Gateway (its own process, test/bench/hive-router.ts) in front of the raw proxy's
 * /graphql, and in front of the gateway with FEDERATION=true, on distinct isNull. A row's CPU is both
 * processes' (router + subgraph), compared with the proxy alone; each part is noted too.
 */
const ROUTER_ROWS = [
  { label: 'router proxy', behind: 'proxy' },
  { label: 'router gateway', behind: 'gateway' },
] as const;

interface RouterSplit {
  run: number;
  name: string;
  routerCpuUsPerRequest: number;
  subgraphCpuUsPerRequest: number;
}
const routerSplits: RouterSplit[] = [];

/** The router and its subgraph as one server under test: their CPU summed, each reading kept. */
function routerAndSubgraph(
  router: ChildServer,
  subgraph: ChildServer,
  readings: Array<[number, number]>,
): ChildServer {
  return {
    ...router,
    cpuMs: async () => {
      const reading: [number, number] = [await router.cpuMs(), await subgraph.cpuMs()];
      readings.push(reading);
      return reading[0] + reading[1];
    },
  };
}

async function routerRows(upstreamUrl: string): Promise<void> {
  const workload = WORKLOADS['distinct isNull'];
  for (const { label, behind } of ROUTER_ROWS) {
    const name = `${label} ${workload.suffix}`;
    if (!selected(name)) continue;
    const subgraph =
      behind === 'proxy'
        ? await startChild({
            name: 'proxy',
            script: 'test/bench/raw-proxy.ts',
            port: await freePort(),
            readyPath: '/health',
            env: { UPSTREAM_URL: upstreamUrl },
          })
        : await startGateway(upstreamUrl, {
            label: 'gateway federation',
            env: { RESPONSE_CACHE: 'false', FEDERATION: 'true' },
            workloads: [],
          });
    try {
      const router = await startChild({
        name: label,
        script: 'test/bench/hive-router.ts',
        port: await freePort(),
        readyPath: '/healthcheck',
        env: { NODE_ENV: 'production', SUBGRAPH_URL: `http://127.0.0.1:${subgraph.port}/graphql` },
      });
      try {
        const target = gatewayTarget(router, workload);
        await check(name, target, workload.expect);
        const readings: Array<[number, number]> = [];
        const server = routerAndSubgraph(router, subgraph, readings);
        await measure(name, target, { baseline: workload.baseline, server });
        const row = currentRun().at(-1);
        const [before, after] = readings;
        if (row?.name === name && row.total > 0 && before !== undefined && after !== undefined)
          routerSplits.push({
            run: row.run,
            name,
            routerCpuUsPerRequest: Math.round(((after[0] - before[0]) * 1000) / row.total),
            subgraphCpuUsPerRequest: Math.round(((after[1] - before[1]) * 1000) / row.total),
          });
      } finally {
        await router.stop();
      }
    } finally {
      await subgraph.stop();
    }
  }
}

function printRouterSplits(): void {
  if (routerSplits.length === 0) return;
  console.log('\nthrough Hive Gateway, CPU µs per request of each process (median; per run):');
  for (const name of [...new Set(routerSplits.map((s) => s.name))]) {
    const of = routerSplits.filter((s) => s.name === name);
    const router = of.map((s) => s.routerCpuUsPerRequest);
    const subgraph = of.map((s) => s.subgraphCpuUsPerRequest);
    console.log(
      `  ${name.padEnd(30)} router ${plain(median(router))} (${router.join(' / ')}), ` +
        `subgraph ${plain(median(subgraph))} (${subgraph.join(' / ')})`,
    );
  }
}

// --- figures -------------------------------------------------------------------------------------

const round2 = (n: number) => Math.round(n * 100) / 100;

/** Ratios of each row to the proxy row of its own run. */
function compareWithProxy(rows: Row[]): void {
  const byName = new Map(rows.map((r) => [r.name, r]));
  for (const row of rows) {
    const base = row.baseline === null ? undefined : byName.get(row.baseline);
    row.ratio =
      base && base.requestsPerSecond > 0 ? round2(row.requestsPerSecond / base.requestsPerSecond) : null;
    row.p99Ratio = base && base.p99Ms > 0 ? round2(row.p99Ms / base.p99Ms) : null;
    row.cpuRatio =
      base?.cpuUsPerRequest && row.cpuUsPerRequest !== null
        ? round2(row.cpuUsPerRequest / base.cpuUsPerRequest)
        : null;
    row.cpuWithRedisRatio =
      base?.cpuUsPerRequest && row.cpuUsPerRequest !== null && row.redisCpuUsPerRequest !== null
        ? round2((row.cpuUsPerRequest + row.redisCpuUsPerRequest) / base.cpuUsPerRequest)
        : null;
  }
}

function median(values: Array<number | null>): number | null {
  const sorted = values.filter((v): v is number => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

interface MedianRow {
  name: string;
  runs: number;
  requestsPerSecond: number | null;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Summed over the runs. */
  errors: number;
  non2xx: number;
  cpuUsPerRequest: number | null;
  cpuRatio: number | null;
  ratio: number | null;
  p99Ratio: number | null;
  upstreamCallsPerRequest: number | null;
  redisCpuUsPerRequest: number | null;
  redisErrors: number | null;
  redisCommandsPerOp: number | null;
  redisUsecPerOp: number | null;
  redisRoundTripsPerOp: number | null;
  cpuWithRedisRatio: number | null;
  /** The figures of each run, in run order. */
  perRun: {
    requestsPerSecond: number[];
    cpuUsPerRequest: Array<number | null>;
    cpuRatio: Array<number | null>;
    ratio: Array<number | null>;
    p99Ratio: Array<number | null>;
  };
}

/** Per row (in the order of first appearance): the median of each figure over the runs. */
function medians(): MedianRow[] {
  const names: string[] = [];
  for (const rows of runs) for (const row of rows) if (!names.includes(row.name)) names.push(row.name);
  return names.map((name) => {
    const rows = runs.flatMap((rowsOfRun) => rowsOfRun.filter((r) => r.name === name));
    const of = (pick: (r: Row) => number | null) => median(rows.map(pick));
    const round = (n: number | null) => (n === null ? null : Math.round(n));
    const redisErrors = rows.map((r) => r.redisErrors).filter((n): n is number => n !== null);
    return {
      name,
      runs: rows.length,
      requestsPerSecond: round(of((r) => r.requestsPerSecond)),
      p50Ms: of((r) => r.p50Ms),
      p99Ms: of((r) => r.p99Ms),
      errors: rows.reduce((sum, r) => sum + r.errors, 0),
      non2xx: rows.reduce((sum, r) => sum + r.non2xx, 0),
      cpuUsPerRequest: round(of((r) => r.cpuUsPerRequest)),
      cpuRatio: of((r) => r.cpuRatio),
      ratio: of((r) => r.ratio),
      p99Ratio: of((r) => r.p99Ratio),
      upstreamCallsPerRequest: of((r) => r.upstreamCallsPerRequest),
      redisCpuUsPerRequest: round(of((r) => r.redisCpuUsPerRequest)),
      redisErrors: redisErrors.length === 0 ? null : redisErrors.reduce((a, b) => a + b, 0),
      redisCommandsPerOp: of((r) => r.redisCommandsPerOp),
      redisUsecPerOp: of((r) => r.redisUsecPerOp),
      redisRoundTripsPerOp: of((r) => r.redisRoundTripsPerOp),
      cpuWithRedisRatio: of((r) => r.cpuWithRedisRatio),
      perRun: {
        requestsPerSecond: rows.map((r) => r.requestsPerSecond),
        cpuUsPerRequest: rows.map((r) => r.cpuUsPerRequest),
        cpuRatio: rows.map((r) => r.cpuRatio),
        ratio: rows.map((r) => r.ratio),
        p99Ratio: rows.map((r) => r.p99Ratio),
      },
    };
  });
}

interface RedisCost {
  row: string;
  twin: string;
  /** Median over the runs of (Redis row − in-memory row) gateway CPU per request, µs. */
  gatewayCpuDeltaUs: number | null;
  perRunDeltaUs: Array<number | null>;
  /** Median redis-server CPU per request, µs. */
  redisServerCpuUs: number | null;
}

function redisCosts(): RedisCost[] {
  const pairs = new Map<string, string>();
  for (const rows of runs) for (const row of rows) if (row.twin !== null) pairs.set(row.name, row.twin);
  return [...pairs].map(([name, twin]) => {
    const perRunDeltaUs = runs.map((rows) => {
      const row = rows.find((r) => r.name === name);
      const base = rows.find((r) => r.name === twin);
      return row?.cpuUsPerRequest != null && base?.cpuUsPerRequest != null
        ? row.cpuUsPerRequest - base.cpuUsPerRequest
        : null;
    });
    return {
      row: name,
      twin,
      gatewayCpuDeltaUs: median(perRunDeltaUs),
      perRunDeltaUs,
      redisServerCpuUs: median(
        runs.map((rows) => rows.find((r) => r.name === name)?.redisCpuUsPerRequest ?? null),
      ),
    };
  });
}

interface TargetCheck {
  row: string;
  target: string;
  value: number | null;
  met: boolean | null;
}

/** The project's targets, on the medians. */
function targetChecks(table: MedianRow[]): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const add = (row: string, target: string, value: number | null | undefined, ok: (v: number) => boolean) =>
    checks.push({ row, target, value: value ?? null, met: value == null ? null : ok(value) });
  const row = (name: string) => table.find((r) => r.name === name);
  // One upstream call per request: the workload that matters (issue #20's targets).
  for (const name of ['gateway distinct isNull', 'gateway distinct pi']) {
    const r = row(name);
    if (r === undefined) continue;
    add(name, 'CPU/req ≤ 2.5× proxy', r.cpuRatio, (v) => v <= 2.5);
    add(name, 'goal: CPU/req ≤ 2.0× proxy', r.cpuRatio, (v) => v <= 2);
    add(name, 'throughput ≥ 0.45× proxy', r.ratio, (v) => v >= 0.45);
    add(name, 'p99 ≤ 2× proxy', r.p99Ratio, (v) => v <= 2);
  }
  const byId = row('gateway trusted distinct isNull by id');
  const byText = row('gateway distinct isNull');
  if (byId !== undefined && byText !== undefined)
    add(
      byId.name,
      'CPU/req ≤ the same operation sent as text',
      byId.cpuUsPerRequest !== null && byText.cpuUsPerRequest
        ? byId.cpuUsPerRequest / byText.cpuUsPerRequest
        : null,
      (v) => v <= 1,
    );
  const literal = row('gateway distinct literal isNull');
  if (literal !== undefined) add(literal.name, 'CPU/req ≤ 3× proxy', literal.cpuRatio, (v) => v <= 3);
  for (const name of ['gateway cache pi', 'gateway cache isNull']) {
    const r = row(name);
    if (r === undefined) continue;
    add(name, 'CPU/req ≤ 1.2× proxy', r.cpuRatio, (v) => v <= 1.2);
    add(name, 'throughput ≥ 1.0× proxy', r.ratio, (v) => v >= 1);
  }
  // A fleet's operation under a budget (issue 40's targets): what one Redis and the gateway spend on it.
  for (const r of table.filter((row) => row.name.startsWith('fleet '))) {
    add(r.name, 'redis µs/op ≤ 30', r.redisUsecPerOp, (v) => v <= 30);
    add(r.name, 'round trips/op ≤ 1.5', r.redisRoundTripsPerOp, (v) => v <= 1.5);
    add(r.name, 'gateway + redis CPU/req ≤ 2.5× proxy', r.cpuWithRedisRatio, (v) => v <= 2.5);
    add(r.name, 'p99 ≤ 2.5× proxy', r.p99Ratio, (v) => v <= 2.5);
  }
  // In-flight sharing (identical operations): kept from the last round.
  for (const name of ['gateway pi', 'gateway isNull']) {
    const r = row(name);
    if (r !== undefined) add(`${name} (shared in flight)`, 'CPU/req ≤ 2× proxy', r.cpuRatio, (v) => v <= 2);
  }
  return checks;
}

// --- printing ------------------------------------------------------------------------------------

function printTable(header: string[], lines: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] ?? '').length)));
  const format = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  console.log(format(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const line of lines) console.log(format(line));
}

const times = (n: number | null) => (n === null ? '' : `${n.toFixed(2)}×`);
const plain = (n: number | null) => (n === null ? '' : String(n));
const list = (values: Array<number | null>, show: (n: number | null) => string) =>
  values.every((v) => v === null) ? '' : values.map((v) => show(v) || '-').join(' / ');

function printRun(rows: Row[], run: number): void {
  if (rows.length === 0) return;
  console.log(`\nrun ${run} of ${RUNS}`);
  printTable(
    [
      '',
      'req/s',
      'p50 ms',
      'p99 ms',
      'errors',
      'non-2xx',
      'cpu µs/req',
      'cpu ÷ proxy',
      '× proxy',
      'p99 × proxy',
      'upstream/req',
      'redis µs/req',
      'redis err',
      'redis cmds/op',
      'redis µs/op',
      'round trips/op',
      '+redis ÷ proxy',
    ],
    rows.map((r) => [
      r.name,
      String(r.requestsPerSecond),
      String(r.p50Ms),
      String(r.p99Ms),
      String(r.errors),
      String(r.non2xx),
      plain(r.cpuUsPerRequest),
      times(r.cpuRatio),
      times(r.ratio),
      times(r.p99Ratio),
      plain(r.upstreamCallsPerRequest),
      plain(r.redisCpuUsPerRequest),
      plain(r.redisErrors),
      plain(r.redisCommandsPerOp),
      plain(r.redisUsecPerOp),
      plain(r.redisRoundTripsPerOp),
      times(r.cpuWithRedisRatio),
    ]),
  );
}

function printSummary(
  table: MedianRow[],
  costs: RedisCost[],
  checks: TargetCheck[],
  memory: MemoryResult | undefined,
): void {
  if (table.length > 0) printMedians(table);
  printFindings(costs, checks, memory);
}

function printMedians(table: MedianRow[]): void {
  console.log(
    `\nmedian of ${RUNS} run(s) per row (each ratio is the median of the per-run ratios to that run's proxy; ` +
      'cpu ÷ proxy = gateway CPU per request ÷ proxy CPU per request; errors and non-2xx summed over the runs)',
  );
  printTable(
    [
      '',
      'req/s',
      'p99 ms',
      'errors',
      'non-2xx',
      'cpu µs/req',
      'cpu ÷ proxy',
      '× proxy',
      'p99 × proxy',
      'upstream/req',
      'redis µs/req',
      'redis cmds/op',
      'redis µs/op',
      'round trips/op',
      '+redis ÷ proxy',
      'cpu µs/req per run',
      'cpu ÷ proxy per run',
      '× proxy per run',
    ],
    table.map((r) => [
      r.name,
      plain(r.requestsPerSecond),
      plain(r.p99Ms),
      String(r.errors),
      String(r.non2xx),
      plain(r.cpuUsPerRequest),
      times(r.cpuRatio),
      times(r.ratio),
      times(r.p99Ratio),
      plain(r.upstreamCallsPerRequest),
      plain(r.redisCpuUsPerRequest),
      plain(r.redisCommandsPerOp),
      plain(r.redisUsecPerOp),
      plain(r.redisRoundTripsPerOp),
      times(r.cpuWithRedisRatio),
      list(r.perRun.cpuUsPerRequest, plain),
      list(r.perRun.cpuRatio, (n) => (n === null ? '' : n.toFixed(2))),
      list(r.perRun.ratio, (n) => (n === null ? '' : n.toFixed(2))),
    ]),
  );
}

function printFindings(costs: RedisCost[], checks: TargetCheck[], memory: MemoryResult | undefined): void {
  if (costs.length > 0) {
    console.log(
      '\nwhat Redis, the trace export or FEDERATION adds per request (gateway CPU, the row − its twin without it in the same run; median):',
    );
    for (const c of costs) {
      console.log(
        `  ${c.row.padEnd(28)} vs ${c.twin.padEnd(22)} ${plain(c.gatewayCpuDeltaUs).padStart(5)} µs in the gateway ` +
          `(per run: ${list(c.perRunDeltaUs, plain)})` +
          (c.redisServerCpuUs === null ? '' : `, plus ${plain(c.redisServerCpuUs)} µs in redis-server`),
      );
    }
  }
  if (checks.length > 0) {
    console.log('\ntargets (on the medians):');
    for (const c of checks) {
      const verdict = c.met === null ? 'not measured' : c.met ? 'met' : 'MISSED';
      // A ratio's target says so (×); µs and round trips are plain numbers.
      const value = c.target.includes('×') ? times(c.value) : plain(c.value);
      console.log(`  ${c.row.padEnd(22)} ${c.target.padEnd(36)} ${value.padStart(7)}  ${verdict}`);
    }
  }
  if (memory) {
    const verdict = (value: number, bound: number) =>
      value <= bound ? `≤ ${bound}: met` : `> ${bound}: MISSED`;
    console.log(
      `\nmemory (one gateway process, cache off, ${memory.operations} distinct isNull at ${memory.connections} connections; ` +
        `node ${memory.nodeArgs.length > 0 ? memory.nodeArgs.join(' ') : "with node's defaults"}):\n` +
        `  RSS ${memory.rssStartMb} MB at start, ${memory.rssAfterWarmupMb} MB after the warm-up, ` +
        `${memory.rssPeakMb} MB at its peak under the load (${verdict(memory.rssPeakMb, MEMORY_BOUND.peakMb)}), ` +
        `${memory.rssAfterMb} MB at its end, ${memory.rssIdleMb} MB ${memory.idleSeconds} s after ` +
        `(${verdict(memory.rssIdleMb, MEMORY_BOUND.idleMb)}); ${memory.failures} failed requests`,
    );
    console.log(
      `  after a forced full GC at start / after the warm-up / after the idle wait: RSS ${memory.points.map((p) => p.rssAfterGcMb).join(' / ')} MB, ` +
        `V8 heap used ${memory.points.map((p) => p.heapUsedAfterGcMb).join(' / ')} MB, ` +
        `committed ${memory.points.map((p) => p.heapTotalAfterGcMb).join(' / ')} MB ` +
        `(young generation ${memory.points.map((p) => p.youngGenerationMb).join(' / ')} MB)`,
    );
  }
  if (notices.length > 0) {
    console.log('\nnotices:');
    for (const n of notices) console.log(`  ${n}`);
  }
}

// --- the run -------------------------------------------------------------------------------------

/**
 * The `gateway otlp` rows' collector: an OTLP/HTTP endpoint in this process that reads each export to
 * the end and answers an empty success (what a healthy collector does), so the gateway pays for its
 * spans, their encoding and their sending, and nothing else. unref'd: it never keeps the benchmark alive.
 */
async function startDiscardingCollector(): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  server.unref();
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
const OTLP_SINK = await startDiscardingCollector();

/**
 * The token rows (docs/contract.md, Authentication): a real OpenID provider in this process (the
 * tests' oidc-provider), one client-credentials token of a pro user sent with every request, beside
 * the same workload with an API key: what verifying a token costs per request, remembered
 * (AUTH_TOKEN_CACHE, the default) and verified every time (AUTH_TOKEN_CACHE=0).
 */
const TOKEN_AUDIENCE = 'https://bench.test/graphql';
const IDP =
  selected('gateway token distinct isNull') || selected('gateway token unremembered distinct isNull')
    ? await startIdentityProvider({ accessTokenTtlS: 7200 })
    : undefined;
const TOKEN = IDP === undefined ? '' : await IDP.token('web-pro', TOKEN_AUDIENCE);
const TOKEN_ENV = {
  AUTH_ISSUER: IDP?.issuer ?? '',
  AUTH_AUDIENCE: TOKEN_AUDIENCE,
  UPSTREAM_KEYS: 'pro:bench-upstream-pro',
};

const GATEWAY_VARIANTS: GatewayVariant[] = [
  {
    label: 'gateway',
    env: {},
    workloads: ['distinct isNull', 'distinct pi', 'distinct literal isNull', 'pi', 'isNull'],
  },
  // FEDERATION=true (contract §14): the subgraph schema, on the same workload as the `gateway` row.
  {
    label: 'gateway federation',
    env: { FEDERATION: 'true' },
    workloads: ['distinct isNull'],
    twin: 'gateway',
  },
  {
    label: 'gateway trusted',
    env: { TRUSTED_DOCUMENTS: TRUSTED_MANIFEST, TRUSTED_DOCUMENTS_MODE: 'enforce' },
    workloads: ['distinct isNull by id'],
  },
  {
    label: 'gateway key',
    env: {},
    workloads: ['distinct isNull'],
    headers: { authorization: 'Bearer bench-api-key' },
  },
  {
    label: 'gateway token',
    env: TOKEN_ENV,
    workloads: ['distinct isNull'],
    headers: { authorization: `Bearer ${TOKEN}` },
  },
  {
    label: 'gateway token unremembered',
    env: { ...TOKEN_ENV, AUTH_TOKEN_CACHE: '0' },
    workloads: ['distinct isNull'],
    headers: { authorization: `Bearer ${TOKEN}` },
  },
  { label: 'gateway yoga-only', env: { HTTP_FAST_PATH: 'false' }, workloads: ['pi', 'isNull'] },
  { label: 'gateway cache', env: { RESPONSE_CACHE: 'true' }, workloads: ['pi', 'isNull'] },
  {
    label: 'gateway otlp',
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: OTLP_SINK },
    workloads: ['distinct isNull', 'pi', 'isNull'],
    twin: 'gateway',
  },
];
const CLUSTER_VARIANT: GatewayVariant = {
  label: `gateway workers=${WORKERS}`,
  env: { WORKERS: String(WORKERS) },
  workloads: ['pi', 'isNull'],
};
const REDIS_VARIANTS: GatewayVariant[] = [
  { label: 'gateway redis', env: {}, workloads: ['pi', 'isNull', 'distinct isNull'], twin: 'gateway' },
  {
    label: 'gateway redis cache',
    env: { RESPONSE_CACHE: 'true' },
    workloads: ['pi', 'isNull'],
    twin: 'gateway cache',
  },
];

/**
 * The fleet rows: a budget every operation passes through (Redis-backed, never refusing), the cache
 * off, a value per operation; as one process and under WORKERS.
 */
const FLEET_BUDGETS = JSON.stringify({ default: { '1h': 100_000 } });
const FLEET_VARIANTS: GatewayVariant[] = [
  { label: 'fleet', env: { COST_BUDGETS: FLEET_BUDGETS }, workloads: ['distinct isNull'] },
  {
    label: `fleet workers=${WORKERS}`,
    env: { COST_BUDGETS: FLEET_BUDGETS, WORKERS: String(WORKERS) },
    workloads: ['distinct isNull'],
  },
];

/**
 * What verifying a token costs per request: each token row's CPU minus the API-key row's, per run
 * (the same minutes), the median over the runs.
 */
function printTokenCost(): void {
  const delta = (name: string) =>
    median(
      runs.map((rows) => {
        const row = rows.find((r) => r.name === name)?.cpuUsPerRequest;
        const key = rows.find((r) => r.name === 'gateway key distinct isNull')?.cpuUsPerRequest;
        return row == null || key == null ? null : row - key;
      }),
    );
  const remembered = delta('gateway token distinct isNull');
  const every = delta('gateway token unremembered distinct isNull');
  if (remembered === null && every === null) return;
  const us = (n: number | null) => (n === null ? '–' : `${n >= 0 ? '+' : ''}${n.toFixed(1)} µs`);
  console.log(
    `\ntoken verification, CPU per request over the API-key row (median of per-run differences): remembered ${us(remembered)}, verified every request ${us(every)}`,
  );
}

async function runOnce(upstreamUrl: string, redisUsable: boolean): Promise<void> {
  await measure(
    'upstream pi (REST)',
    { url: `${upstreamUrl}/api/v1/pi?digits=10`, method: 'GET' },
    { baseline: null },
  );
  await measure(
    'upstream check (REST)',
    {
      url: `${upstreamUrl}/api/v1/check`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"value":null}',
    },
    { baseline: null },
  );

  if (selected('proxy pi') || selected('proxy check')) {
    const proxy = await startChild({
      name: 'proxy',
      script: 'test/bench/raw-proxy.ts',
      port: await freePort(),
      readyPath: '/health',
      nodeArgs: CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', new URL('proxy/', PROFILE_DIR).pathname] : [],
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
      await check('proxy check', target('/check', 'isNull'), (t) => t.includes('"is_null":true'));
      await measure('proxy pi', target('/pi', 'pi'), { baseline: null, server: proxy });
      await measure('proxy check', target('/check', 'isNull'), { baseline: null, server: proxy });
    } finally {
      await proxy.stop();
    }
  }

  // Explicit RESPONSE_CACHE=false where the variant does not set it: the rows measure what they say
  // whatever the environment of the benchmark holds.
  for (const variant of GATEWAY_VARIANTS) {
    await gatewayRows(upstreamUrl, { ...variant, env: { RESPONSE_CACHE: 'false', ...variant.env } });
  }
  await routerRows(upstreamUrl);
  if (!flag('no-cluster')) {
    await gatewayRows(upstreamUrl, {
      ...CLUSTER_VARIANT,
      env: { RESPONSE_CACHE: 'false', ...CLUSTER_VARIANT.env },
    });
  }
  if (redisUsable) {
    for (const variant of REDIS_VARIANTS) {
      await redisGatewayRows(upstreamUrl, { ...variant, env: { RESPONSE_CACHE: 'false', ...variant.env } });
    }
    if (!flag('no-fleet')) {
      for (const variant of FLEET_VARIANTS) {
        await redisGatewayRows(upstreamUrl, {
          ...variant,
          env: { RESPONSE_CACHE: 'false', ...variant.env },
        });
      }
    }
  }
}

async function main(): Promise<void> {
  installSignalCleanup();
  console.log(
    `gateway benchmark: ${RUNS} run(s), ${CONNECTIONS} connections, ${DURATION_S} s per row after ${WARMUP_S} s warm-up; ` +
      `node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`,
  );
  const wantsRedis =
    !flag('no-redis') &&
    (REDIS_VARIANTS.some(variantSelected) || (!flag('no-fleet') && FLEET_VARIANTS.some(variantSelected)));
  const redisUsable = wantsRedis && redisServerAvailable();
  if (wantsRedis && !redisUsable) {
    notice(
      'the gateway redis and fleet rows are SKIPPED: redis-server not found (install it with: apt-get install -y redis-server, ' +
        'or point REDIS_SERVER_BIN at it)',
    );
  }
  buildGateway();
  const { upstream } = await startFixedUpstream();
  const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
  let memory: MemoryResult | undefined;
  try {
    for (let run = 1; run <= RUNS; run++) {
      process.stderr.write(`run ${run} of ${RUNS}\n`);
      runs.push([]);
      await runOnce(upstreamUrl, redisUsable);
      compareWithProxy(currentRun());
      printRun(currentRun(), run);
    }
    memory = await memoryRow(upstreamUrl);
  } finally {
    await upstream.stop();
    await IDP?.stop();
  }

  const table = medians();
  const costs = redisCosts();
  const checks = targetChecks(table);
  printSummary(table, costs, checks, memory);
  printTokenCost();
  printRouterSplits();
  const results = {
    date: new Date().toISOString(),
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    loadAverageAtEnd: os.loadavg(),
    connections: CONNECTIONS,
    durationSeconds: DURATION_S,
    warmupSeconds: WARMUP_S,
    runs: RUNS,
    median: table,
    redisCost: costs,
    targets: checks,
    perRun: runs,
    memory,
    routerSplits,
    notices,
  };
  const dir = new URL('../../bench-results/', import.meta.url);
  await mkdir(dir, { recursive: true });
  const stamp = results.date.replace(/[:.]/g, '-');
  await writeFile(new URL(`gateway-bench-${stamp}.json`, dir), `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(new URL('gateway-bench-latest.json', dir), `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\nwritten: bench-results/gateway-bench-${stamp}.json`);
}

await main();
