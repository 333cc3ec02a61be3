/**
 * `npm run test:load`: a correctness-under-load test of the real CLI (not part of `npm test`).
 *
 * Starts the gateway as `npm start` runs it (`node --import tsx src/main.ts`, the embedded reference
 * services, FREE_RATE_LIMIT=0 and PRO_RATE_LIMIT=0 so the demo tiers never hit a rate limit), then
 * sends ROUNDS × PER_ROUND mixed operations over CONNECTIONS keep-alive connections (undici Pool):
 * isNull with varied values, models, temperatures and strict mode, pi with 0..10 digits, inference,
 * health, and multi-field operations, as the free, pro and enterprise tiers.
 *
 * It fails (exit code 1) on any transport error, any non-200 answer, any GraphQL error the operation
 * did not ask for (TIER_FORBIDDEN is expected only where a free caller asks for more than its tier,
 * UNDEFINED_VALUE only for an isNull without a value, WAIVER_REQUIRED only without the waiver), any
 * field that is null without an error, or resident memory (V8 heap used) growing by more than
 * RSS_GROWTH_LIMIT_MB (HEAP_GROWTH_LIMIT_MB) between the end of round 2 and the end of the last round,
 * each measured after a full GC forced in the gateway by test/bench/load-memory-probe.ts, so growth is
 * memory really held, not lazy collection. Finally it sends SIGTERM and expects the gateway to exit 0. Bounded: at most DEADLINE_MS in all.
 *
 * Env: LOAD_ROUNDS (5), LOAD_PER_ROUND (4400), LOAD_CONNECTIONS (50), LOAD_RSS_LIMIT_MB (30),
 * LOAD_HEAP_LIMIT_MB (8).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { PRODUCTION_CLI_ENV } from '../support/gateway-process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ROUNDS = Number(process.env.LOAD_ROUNDS ?? 5);
const PER_ROUND = Number(process.env.LOAD_PER_ROUND ?? 4400);
const CONNECTIONS = Number(process.env.LOAD_CONNECTIONS ?? 50);
const RSS_GROWTH_LIMIT_MB = Number(process.env.LOAD_RSS_LIMIT_MB ?? 30);
/** V8 heap used after a full GC: a leak of ~600 bytes per operation over rounds 3..5 exceeds it. */
const HEAP_GROWTH_LIMIT_MB = Number(process.env.LOAD_HEAP_LIMIT_MB ?? 8);
const DEADLINE_MS = 300_000;
const PAUSE_BETWEEN_ROUNDS_MS = 1000;

// --- the operations ------------------------------------------------------------------------------

type Tier = 'free' | 'pro' | 'enterprise';
const KEYS: Record<Tier, string | undefined> = {
  free: undefined,
  pro: 'demo-pro',
  enterprise: 'demo-enterprise',
};

interface Operation {
  kind: string;
  tier: Tier;
  query: string;
  variables?: Record<string, unknown>;
  /** Root fields and the error codes each may legitimately have (empty: must answer). */
  fields: Record<string, string[]>;
}

/** mulberry32: a reproducible mix without Math.random. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NULL_SELECTION =
  '__typename ... on NullCheck { confidence model actuallyNull correct } ... on NullVerdict { isNull } ... on ExistentialVerdict { musing }';
const PI_SELECTION =
  '__typename ... on ConstantDigits { digits precision requestedDigits correctDigits model }';
const INFERENCE_SELECTION =
  '__typename ... on Inference { digits precision correctDigits tokensUsed costUsd }';
const HEALTH_SELECTION = 'status nullCheck { reachable breaker status } pi { reachable breaker status }';

const NULL_MODELS = ['NULL_X_4O', 'NULL_X_MINI', 'NULL_X_OPUS', undefined];
const PI_MODELS = ['PI_X_4O', 'PI_X_MINI', 'PI_X_OPUS_ALMOST_CORRECT', undefined];
const TEMPERATURES = [0, 0, 0.2, 0.5, 0.9, 1, undefined];
const VALUES: unknown[] = [
  null,
  0,
  1,
  '',
  'null',
  'x',
  false,
  true,
  [],
  [null],
  {},
  { a: null },
  3.14,
  -7,
  'ø',
];

function pick<T>(random: () => number, list: readonly T[]): T {
  return list[Math.floor(random() * list.length)] as T;
}

function args(entries: Record<string, string | undefined>): string {
  const parts = Object.entries(entries).flatMap(([k, v]) => (v === undefined ? [] : [`${k}: ${v}`]));
  return parts.length > 0 ? `(${parts.join(', ')})` : '';
}

function makeOperation(random: () => number): Operation {
  const tier = pick(random, ['free', 'free', 'pro', 'enterprise', 'enterprise'] as const);
  const free = tier === 'free';
  const temperature = pick(random, TEMPERATURES);
  const t = temperature === undefined ? undefined : String(temperature);
  const roll = random();

  if (roll < 0.35) {
    // isNull, the value as a variable (one cached document per shape) or omitted (UNDEFINED_VALUE).
    const omitted = random() < 0.03;
    const strict = random() < 0.15;
    const fieldArgs = args({
      value: omitted ? undefined : '$v',
      model: pick(random, NULL_MODELS),
      temperature: t,
      strictMode: strict ? 'true' : undefined,
    });
    const expected = [
      ...(omitted ? ['UNDEFINED_VALUE'] : []),
      ...(strict && tier !== 'enterprise' ? ['TIER_FORBIDDEN'] : []),
    ];
    return {
      kind: 'isNull',
      tier,
      query: `query IsNull${omitted ? '' : '($v: JSON)'} { isNull${fieldArgs} { ${NULL_SELECTION} } }`,
      variables: omitted ? undefined : { v: pick(random, VALUES) },
      fields: { isNull: expected },
    };
  }
  if (roll < 0.6) {
    const digits = Math.floor(random() * 11);
    const fieldArgs = args({ digits: String(digits), model: pick(random, PI_MODELS), temperature: t });
    return {
      kind: 'pi',
      tier,
      query: `{ pi${fieldArgs} { ${PI_SELECTION} } }`,
      fields: { pi: free && digits > 3 ? ['TIER_FORBIDDEN'] : [] },
    };
  }
  if (roll < 0.72) {
    const desired = Math.floor(random() * 11);
    const waiver = random() < 0.95;
    const cot = random() < 0.5;
    return {
      kind: 'inference',
      tier,
      query: `query Inference($input: InferenceInput!) { inference(input: $input) { ${INFERENCE_SELECTION} } }`,
      variables: {
        input: { desiredDigits: desired, useChainOfThought: cot, liabilityWaiverSigned: waiver, temperature },
      },
      fields: {
        inference: [
          ...(waiver ? [] : ['WAIVER_REQUIRED']),
          ...(free && desired > 3 ? ['TIER_FORBIDDEN'] : []),
        ],
      },
    };
  }
  if (roll < 0.8) {
    return { kind: 'health', tier, query: `{ health { ${HEALTH_SELECTION} } }`, fields: { health: [] } };
  }
  // Several fields in one operation: distinct calls, a duplicate (deduplicated), and health.
  const digits = Math.floor(random() * 11);
  const value = JSON.stringify(
    pick(
      random,
      VALUES.filter((v) => typeof v !== 'object'),
    ),
  );
  return {
    kind: 'multi',
    tier,
    query: `{ a: isNull(value: ${value}${t === undefined ? '' : `, temperature: ${t}`}) { ${NULL_SELECTION} } b: isNull(value: ${value}${
      t === undefined ? '' : `, temperature: ${t}`
    }) { __typename } p: pi(digits: ${digits}) { ${PI_SELECTION} } h: health { status } }`,
    fields: { a: [], b: [], p: free && digits > 3 ? ['TIER_FORBIDDEN'] : [], h: [] },
  };
}

// --- checking answers ----------------------------------------------------------------------------

interface Tally {
  sent: number;
  ok: number;
  transportErrors: number;
  badStatus: number;
  unexpected: number;
  expectedErrors: Record<string, number>;
  byKind: Record<string, number>;
  latenciesMs: number[];
  samples: string[];
}

function newTally(): Tally {
  return {
    sent: 0,
    ok: 0,
    transportErrors: 0,
    badStatus: 0,
    unexpected: 0,
    expectedErrors: {},
    byKind: {},
    latenciesMs: [],
    samples: [],
  };
}

interface GqlBody {
  data?: Record<string, unknown> | null;
  errors?: Array<{ message?: string; path?: Array<string | number>; extensions?: { code?: string } }>;
}

/** Problems with one answer (empty: as expected). */
function check(op: Operation, body: GqlBody, tally: Tally): string[] {
  const problems: string[] = [];
  const data = body.data ?? {};
  const failed = new Map<string, string>();
  for (const error of body.errors ?? []) {
    const field = String(error.path?.[0] ?? '');
    const code = String(error.extensions?.code ?? 'NO_CODE');
    if (!op.fields[field]?.includes(code))
      problems.push(`${field || '(request)'}: ${code} ${error.message ?? ''}`);
    else tally.expectedErrors[code] = (tally.expectedErrors[code] ?? 0) + 1;
    failed.set(field, code);
  }
  for (const field of Object.keys(op.fields)) {
    if (failed.has(field)) continue;
    const value = data[field];
    if (value === null || value === undefined) problems.push(`${field}: null without an error`);
    else if (
      field === 'health' &&
      !['OK', 'DEGRADED', 'DOWN'].includes(String((value as { status?: unknown }).status))
    )
      problems.push(`health: status ${String((value as { status?: unknown }).status)}`);
  }
  return problems;
}

// --- the gateway process -------------------------------------------------------------------------

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? Number.NaN) / 1024;
}

interface MemoryProbe {
  gc: boolean;
  rssMb: number;
  heapUsedMb: number;
  externalMb: number;
  arrayBuffersMb: number;
}

interface RunningGateway {
  child: ChildProcess;
  url: string;
  log: () => string;
  /** Full GC in the gateway (load-memory-probe.ts), then its memory. */
  memory: () => Promise<MemoryProbe>;
}

async function startGateway(): Promise<RunningGateway> {
  const child = spawn(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', '--import', './test/bench/load-memory-probe.ts', 'src/main.ts'],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      // As in production: JSON lines at info, one per operation (the load generator drains the pipe).
      env: { ...process.env, ...PRODUCTION_CLI_ENV, PRO_RATE_LIMIT: '0' },
    },
  );
  let url: string | undefined;
  let tail = '';
  let probed: ((probe: MemoryProbe) => void) | undefined;
  let partial = '';
  const keep = (d: Buffer) => {
    const text = d.toString();
    tail = (tail + text).slice(-20_000);
    url ??= /"url":"(http:\/\/[^"]+)"/.exec(tail)?.[1];
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.startsWith('{"memoryProbe"'))
        probed?.((JSON.parse(line) as { memoryProbe: MemoryProbe }).memoryProbe);
    }
  };
  const memory = async (): Promise<MemoryProbe> => {
    const answer = new Promise<MemoryProbe>((resolve) => {
      probed = resolve;
    });
    child.kill('SIGUSR2');
    const probe = await Promise.race([answer, sleep(10_000).then(() => undefined)]);
    if (probe === undefined) throw new Error('the gateway did not answer the memory probe');
    return probe;
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const started = Date.now();
  while (Date.now() - started < 60_000 && child.exitCode === null) {
    if (url !== undefined) return { child, url, log: () => tail, memory };
    await sleep(50);
  }
  child.kill('SIGKILL');
  throw new Error(`the gateway did not start:\n${tail}`);
}

// --- main ----------------------------------------------------------------------------------------

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number);
}

async function runRound(pool: Pool, path: string, operations: Operation[], tally: Tally, deadline: number) {
  let next = 0;
  const worker = async () => {
    for (;;) {
      const index = next++;
      const op = operations[index];
      if (op === undefined || Date.now() > deadline) return;
      tally.sent++;
      tally.byKind[op.kind] = (tally.byKind[op.kind] ?? 0) + 1;
      const key = KEYS[op.tier];
      const started = performance.now();
      try {
        const response = await pool.request({
          path,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/graphql-response+json',
            ...(key ? { authorization: `Bearer ${key}` } : {}),
          },
          body: JSON.stringify({ query: op.query, variables: op.variables }),
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        });
        const text = await response.body.text();
        tally.latenciesMs.push(performance.now() - started);
        if (response.statusCode !== 200) {
          tally.badStatus++;
          if (tally.samples.length < 10)
            tally.samples.push(`${op.kind} HTTP ${response.statusCode}: ${text.slice(0, 200)}`);
          continue;
        }
        const problems = check(op, JSON.parse(text) as GqlBody, tally);
        if (problems.length > 0) {
          tally.unexpected++;
          if (tally.samples.length < 10)
            tally.samples.push(`${op.kind} (${op.tier}) ${op.query.slice(0, 80)}: ${problems.join('; ')}`);
        } else tally.ok++;
      } catch (error) {
        tally.transportErrors++;
        if (tally.samples.length < 10)
          tally.samples.push(`${op.kind} transport: ${(error as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
}

async function main(): Promise<number> {
  const deadline = Date.now() + DEADLINE_MS;
  const { child, url, log, memory } = await startGateway();
  const pid = child.pid as number;
  const { origin, pathname } = new URL(url);
  const pool = new Pool(origin, { connections: CONNECTIONS, pipelining: 1, keepAliveTimeout: 30_000 });
  const random = rng(20240601);
  const failures: string[] = [];
  const total = newTally();
  const rss: number[] = [];
  const heap: number[] = [];
  const atStart = await memory();
  console.log(
    `gateway pid ${pid} at ${url}; after start and a full GC: RSS ${atStart.rssMb} MB, heap used ${atStart.heapUsedMb} MB`,
  );
  console.log(`${ROUNDS} rounds × ${PER_ROUND} operations, ${CONNECTIONS} connections`);
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const operations = Array.from({ length: PER_ROUND }, () => makeOperation(random));
      const tally = newTally();
      const started = performance.now();
      await runRound(pool, pathname, operations, tally, deadline);
      const seconds = (performance.now() - started) / 1000;
      await sleep(PAUSE_BETWEEN_ROUNDS_MS);
      const rssBeforeGc = await rssMb(pid);
      const probe = await memory();
      rss.push(probe.rssMb);
      heap.push(probe.heapUsedMb);
      const sorted = tally.latenciesMs.sort((a, b) => a - b);
      console.log(
        `round ${round}: ${tally.sent} ops in ${seconds.toFixed(1)} s (${(tally.sent / seconds).toFixed(0)} ops/s), ` +
          `p50 ${percentile(sorted, 0.5).toFixed(1)} ms, p99 ${percentile(sorted, 0.99).toFixed(1)} ms, ` +
          `ok ${tally.ok}, transport errors ${tally.transportErrors}, non-200 ${tally.badStatus}, unexpected ${tally.unexpected}, ` +
          `RSS ${rssBeforeGc.toFixed(1)} MB, after a full GC ${probe.rssMb} MB (heap used ${probe.heapUsedMb} MB)`,
      );
      for (const key of ['sent', 'ok', 'transportErrors', 'badStatus', 'unexpected'] as const)
        total[key] += tally[key];
      for (const [code, n] of Object.entries(tally.expectedErrors))
        total.expectedErrors[code] = (total.expectedErrors[code] ?? 0) + n;
      for (const [kind, n] of Object.entries(tally.byKind))
        total.byKind[kind] = (total.byKind[kind] ?? 0) + n;
      total.samples.push(...tally.samples.slice(0, 10 - total.samples.length));
      if (tally.sent < PER_ROUND) {
        failures.push(`round ${round} ran out of time (deadline ${DEADLINE_MS} ms)`);
        break;
      }
    }
  } finally {
    await pool.close();
  }

  console.log(`total: ${total.sent} operations, by kind ${JSON.stringify(total.byKind)}`);
  console.log(`expected GraphQL errors (asked for): ${JSON.stringify(total.expectedErrors)}`);
  for (const sample of total.samples) console.log(`  problem: ${sample}`);
  if (total.sent < 20_000) failures.push(`only ${total.sent} operations sent (at least 20000)`);
  if (total.transportErrors > 0) failures.push(`${total.transportErrors} transport errors`);
  if (total.badStatus > 0) failures.push(`${total.badStatus} non-200 answers`);
  if (total.unexpected > 0) failures.push(`${total.unexpected} answers with unexpected errors or nulls`);
  if (rss.length >= 3) {
    const growth = (rss[rss.length - 1] as number) - (rss[1] as number);
    const heapGrowth = (heap[heap.length - 1] as number) - (heap[1] as number);
    console.log(
      `RSS after each round and a full GC (MB): ${rss.map((r) => r.toFixed(1)).join(', ')}; round 2 → ${rss.length}: ${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MB (limit +${RSS_GROWTH_LIMIT_MB} MB)`,
    );
    console.log(
      `heap used after a full GC (MB): ${heap.map((h) => h.toFixed(1)).join(', ')}; round 2 → ${heap.length}: ${heapGrowth >= 0 ? '+' : ''}${heapGrowth.toFixed(1)} MB (limit +${HEAP_GROWTH_LIMIT_MB} MB)`,
    );
    if (growth > RSS_GROWTH_LIMIT_MB)
      failures.push(`RSS grew ${growth.toFixed(1)} MB from round 2 to ${rss.length}`);
    if (heapGrowth > HEAP_GROWTH_LIMIT_MB)
      failures.push(`heap used grew ${heapGrowth.toFixed(1)} MB from round 2 to ${heap.length}`);
  }

  child.kill('SIGTERM');
  const [code] = (await Promise.race([once(child, 'exit'), sleep(20_000).then(() => [-1])])) as [
    number | null,
  ];
  console.log(`SIGTERM: gateway exited with code ${code}`);
  if (code !== 0) {
    failures.push(`the gateway exited with ${code} after SIGTERM`);
    if (code === -1) child.kill('SIGKILL');
    console.log(log().slice(-2000));
  }

  if (failures.length > 0) {
    console.error(`LOAD TEST FAILED:\n- ${failures.join('\n- ')}`);
    return 1;
  }
  console.log('LOAD TEST PASSED');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
