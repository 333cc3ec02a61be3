/**
 * `npm run bench:path`: the gateway's own CPU per request on the fast path, in one process, without
 * the client side's sockets: requests are handed to the fast path as in-memory node requests (the
 * shape node:http gives it), the upstream call goes over loopback to the fixed upstream
 * (fixed-upstream.ts, its own process) through the gateway's real clients. What it measures is the
 * part of a request the gateway's code decides (its JS, undici, the upstream socket), with far less
 * of the noise the end-to-end benchmark takes from the kernel and the load generator on a shared
 * machine: use it to compare two versions of the request path, run one after the other.
 *
 * It runs the compiled gateway (bench-results/dist, built by `npm run bench` or `--build`), as in
 * production: `npx tsx test/bench/request-path.ts [--build] [--requests n] [--rounds n]
 * [--concurrency n] [--warmup n] [--dist dir] [--log-level level] [--federation] [--workload distinct|literal|pi|trusted|cache|proxy|mcp|tool|mcp-overhead]`. Log lines go to /dev/null, as in the
 * benchmark. Prints the median CPU µs per request over the rounds, and each round's.
 *
 * `mcp`: a tools/call of `is_null` with distinct values on POST /mcp (the MCP lane, through the SDK's
 * transport); `tool`: the same operation (the is_null tool's document) over POST /graphql, its
 * baseline. The two rows are fed alike: each request a Readable (as node's IncomingMessage is, with
 * `rawHeaders`) handed to the gateway's HTTP server's request listener (its URL check and lanes, as
 * node:http calls it), so that neither is charged for work the other is spared. The other workloads
 * keep the lighter request handed straight to the fast path, comparable with their recorded figures.
 *
 * `mcp-overhead`: the MCP lane's own overhead, its measure (docs/agents.md, "What the lane costs"): in
 * one process and one run, the `tool` row, the `mcp` row and the MCP SDK's floor (mcp-sdk-floor.ts:
 * the SDK alone per tools/call, as the lane uses it), each round measuring all three in turn (the
 * order rotating); prints each row's median and the overhead row, mcp − tool − floor (the medians'
 * and each round's), against its bound of 15 µs.
 *
 * `--profile file.cpuprofile`: V8's CPU profile of the measured rounds only (node:inspector, sampled
 * every `--profile-us` µs, 250 by default), for a breakdown of where a request's CPU goes. The
 * profiler costs CPU of its own: take the µs per request from runs without it.
 *
 * `--stalls [--stall-ms 2] [--cpu-profile [--stall-detail module]]`: also traces the event loop's stalls over the measured
 * rounds and what filled them (loop-stalls.ts: GC, timers, log writes, CPU samples, the p99 tail). The
 * trace costs CPU of its own: take CPU and allocation figures from runs without it.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { openSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { installSignalCleanup, startFixedUpstream } from './bench-processes.js';
import { prepareStallTrace, type StallTrace } from './loop-stalls.js';
import { driveSdkFloor } from './mcp-sdk-floor.js';
import { type MeasuredRound, measuredRound } from './measured-round.js';

const argument = (name: string, fallback: string) => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : (process.argv[index + 1] as string);
};
const REQUESTS = Number(argument('requests', '20000'));
const ROUNDS = Number(argument('rounds', '7'));
const CONCURRENCY = Number(argument('concurrency', '50'));
const WARMUP = Number(argument('warmup', '30000'));
/** `--log-level warn`: without the per-operation log line (what it costs). */
const LOG_LEVEL = argument('log-level', 'info');
const WORKLOAD = argument('workload', 'distinct');
const STALLS = process.argv.includes('--stalls');
const PROFILE = argument('profile', '');
/** mcp and tool: node's kind of request, through the server's request listener (see above). */
const OVERHEAD = WORKLOAD === 'mcp-overhead';
const AS_NODE = WORKLOAD === 'mcp' || WORKLOAD === 'tool' || OVERHEAD;
/** The MCP lane's bound: a tools/call ≤ the same operation over /graphql + the SDK's floor + this, in µs. */
const MCP_OVERHEAD_BOUND_US = 15;
const ROOT = new URL('../../', import.meta.url);
/** `--dist dir`: another build of the gateway (an A/B comparison of two versions). */
const DIST = new URL(`${argument('dist', 'bench-results/dist').replace(/\/$/, '')}/`, ROOT);

/** The parts of IncomingMessage the fast path reads. */
class FakeRequest extends EventEmitter {
  readonly method = 'POST';
  readonly url = '/graphql';
  readonly httpVersionMajor = 1;
  /** identity.ts counts anonymous callers by address. */
  readonly socket = { remoteAddress: '127.0.0.1' };
  constructor(
    readonly headers: Record<string, string>,
    private readonly body: Buffer,
  ) {
    super();
  }
  /** Delivers the body as node would, one chunk then 'end', on a later tick. */
  send(): void {
    setImmediate(() => {
      this.emit('data', this.body);
      this.emit('end');
    });
  }
}

/**
 * An in-memory request as node:http makes one: a Readable whose body is pushed, with `rawHeaders`
 * (the MCP lane copies the transport's fields from them).
 */
class FakeStreamRequest extends Readable {
  readonly method = 'POST';
  readonly httpVersionMajor = 1;
  readonly httpVersion = '1.1';
  readonly socket = { remoteAddress: '127.0.0.1', encrypted: false };
  readonly rawHeaders: string[];
  complete = false;
  constructor(
    readonly url: string,
    readonly headers: Record<string, string>,
    private readonly body: Buffer,
  ) {
    super();
    this.rawHeaders = Object.entries(headers).flat();
  }
  override _read(): void {}
  send(): void {
    setImmediate(() => {
      this.push(this.body);
      this.push(null);
      this.complete = true;
    });
  }
}

/** The parts of ServerResponse the fast path writes; `done` is told the status and body. */
class FakeResponse extends EventEmitter {
  destroyed = false;
  writableEnded = false;
  writableFinished = false;
  headersSent = false;
  status = 0;
  constructor(private readonly done: (status: number, body: string) => void) {
    super();
  }
  readonly writable = true;
  private readonly fields = new Map<string, unknown>();
  writeHead(status: number): this {
    this.status = status;
    this.headersSent = true;
    return this;
  }
  get statusCode(): number {
    return this.status;
  }
  /** What the MCP lane and the SDK's transport also call. */
  setHeader(name: string, value: unknown): this {
    this.fields.set(name.toLowerCase(), value);
    return this;
  }
  hasHeader(name: string): boolean {
    return this.fields.has(name.toLowerCase());
  }
  getHeader(name: string): unknown {
    return this.fields.get(name.toLowerCase());
  }
  flushHeaders(): void {}
  private chunks: string[] = [];
  /** Yoga's answers (handed-over requests) are written in chunks. */
  write(chunk: string | Uint8Array): boolean {
    this.chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString());
    return true;
  }
  end(body?: string | Buffer): this {
    this.writableEnded = true;
    this.writableFinished = true;
    this.emit('close');
    this.done(this.status, this.chunks.join('') + String(body ?? ''));
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    this.emit('close');
    this.done(0, '');
    return this;
  }
}

async function main(): Promise<void> {
  installSignalCleanup();
  // As `npm start` in production: graphql-js reads it once, when it loads (its development checks).
  process.env.NODE_ENV = 'production';
  if (process.argv.includes('--build')) {
    spawnSync(process.execPath, ['scripts/build-dist.mjs', 'bench-results/dist'], {
      cwd: fileURLToPath(ROOT),
      stdio: 'inherit',
    });
  }
  // Before the gateway exists: the timers it schedules from its start are timed too.
  const stallTrace = STALLS
    ? prepareStallTrace({
        thresholdMs: Number(argument('stall-ms', '2')),
        profile: process.argv.includes('--cpu-profile'),
        detail: argument('stall-detail', '') || undefined,
      })
    : undefined;
  const { upstream, port: upstreamPort } = await startFixedUpstream();
  const operations = new URL('test/operations/', ROOT);
  const isNullQuery = await readFile(new URL('is-null.graphql', operations), 'utf8');
  const piQuery = await readFile(new URL('pi.graphql', operations), 'utf8');
  const literalQuery = isNullQuery.replace('$value: JSON, ', '').replace('value: $value', 'value: "VALUE"');
  const isNullId = `sha256:${createHash('sha256').update(isNullQuery).digest('hex')}`;
  const manifest = fileURLToPath(new URL('bench-results/path-manifest.json', ROOT));
  await writeFile(manifest, JSON.stringify({ [isNullId]: isNullQuery }));
  const bodies: Record<string, (n: number) => unknown> = {
    distinct: (n) => ({ query: isNullQuery, operationName: 'IsNull', variables: { value: `path-${n}` } }),
    literal: (n) => ({ query: literalQuery.replace('VALUE', `path-${n}`), operationName: 'IsNull' }),
    pi: (n) => ({
      query: piQuery,
      operationName: 'Pi',
      variables: { digits: 10, temperature: (1 + (n % 997)) / 1000 },
    }),
    trusted: (n) => ({ documentId: isNullId, operationName: 'IsNull', variables: { value: `path-${n}` } }),
    // RESPONSE_CACHE=true and one of 100 values: after the first round of each, every request a cache hit.
    cache: (n) => ({ query: isNullQuery, operationName: 'IsNull', variables: { value: `path-${n % 100}` } }),
    // The raw proxy's work (raw-proxy.ts) in the same harness: the floor the gateway is compared with.
    proxy: (n) => ({ query: isNullQuery, operationName: 'IsNull', variables: { value: `path-${n}` } }),
    // MCP: the is_null tool (its own document, every field of the answer), and the same over /graphql.
    mcp: (n) => ({
      jsonrpc: '2.0',
      id: n,
      method: 'tools/call',
      params: { name: 'is_null', arguments: { value: `path-${n}` } },
    }),
    tool: (n) => ({ query: toolQuery, operationName: 'IsNull', variables: { value: `path-${n}` } }),
  };
  let toolQuery = '';
  /** The rows a request is made for: the workload's, or both MCP rows for the overhead. */
  const kinds = OVERHEAD ? ['tool', 'mcp'] : [WORKLOAD];
  if (kinds.some((kind) => bodies[kind] === undefined))
    throw new Error(`--workload is one of ${[...Object.keys(bodies), 'mcp-overhead'].join(', ')}`);

  let handle: (req: FakeRequest | FakeStreamRequest, res: FakeResponse) => boolean;
  let served = () => '';
  let close: () => Promise<unknown>;
  if (WORKLOAD === 'proxy') {
    // One undici Pool.request per request, as the raw proxy makes: body read, upstream body as text.
    const pool = new Pool(`http://127.0.0.1:${upstreamPort}`, {
      connections: 64,
      pipelining: 1,
      keepAliveTimeout: 4000,
    });
    const checkBody = JSON.stringify({ value: null });
    handle = (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        pool
          .request({
            method: 'POST',
            path: '/api/v1/check',
            headers: { 'content-type': 'application/json' },
            body: checkBody,
          })
          .then(async (response) => {
            const text = await response.body.text();
            res.writeHead(response.statusCode);
            res.end(text);
          })
          .catch(() => res.destroy());
      });
      return true;
    };
    close = () => pool.close();
  } else {
    const { loadConfig } = (await import(pathToFileURL(fileURLToPath(new URL('config.js', DIST))).href)) as {
      loadConfig: (env: Record<string, string>) => unknown;
    };
    const { createApp } = (await import(
      pathToFileURL(fileURLToPath(new URL('gateway/app.js', DIST))).href
    )) as {
      createApp: (
        config: unknown,
        options: unknown,
      ) => Promise<{
        fastPath: {
          handle(req: unknown, res: unknown): boolean;
          served: { fast: number; handedOver: number };
        };
        server: { emit(event: 'request', req: unknown, res: unknown): boolean };
        clients: { ready(): Promise<void> };
        close(): Promise<unknown>;
      }>;
    };
    const { createLogger } = (await import(
      pathToFileURL(fileURLToPath(new URL('shared/logger.js', DIST))).href
    )) as {
      createLogger: (options: unknown) => unknown;
    };
    const base = `http://127.0.0.1:${upstreamPort}`;
    const config = loadConfig({
      NODE_ENV: 'production',
      NULL_BASE_URL: base,
      PI_BASE_URL: base,
      LOG_LEVEL,
      ...(WORKLOAD === 'trusted' ? { TRUSTED_DOCUMENTS: manifest, TRUSTED_DOCUMENTS_MODE: 'enforce' } : {}),
      ...(WORKLOAD === 'cache' ? { RESPONSE_CACHE: 'true' } : {}),
      // `--federation`: the same workload on the Federation 2 subgraph schema (docs/federation.md).
      ...(process.argv.includes('--federation') ? { FEDERATION: 'true' } : {}),
    });
    // The production sink (a file descriptor), pointed at /dev/null as the benchmark's stdout is.
    const logger = createLogger({ level: LOG_LEVEL, destination: openSync('/dev/null', 'w') });
    const app = await createApp(config, { logger, defaultMetrics: true });
    await app.clients.ready();
    if (AS_NODE) {
      const { builtInTools } = (await import(
        pathToFileURL(fileURLToPath(new URL('gateway/mcp/built-in-tools.js', DIST))).href
      )) as { builtInTools: (schema: unknown) => Array<{ name: string; source: string }> };
      const { schema } = (await import(
        pathToFileURL(fileURLToPath(new URL('gateway/schema/index.js', DIST))).href
      )) as { schema: unknown };
      toolQuery = builtInTools(schema).find((tool) => tool.name === 'is_null')?.source ?? '';
    }
    // mcp and tool go through the server's request listener, as node:http calls it (see above).
    handle = AS_NODE
      ? (req, res) => app.server.emit('request', req, res)
      : (req, res) => app.fastPath.handle(req, res);
    served = () => `; fast path ${app.fastPath.served.fast}, handed over ${app.fastPath.served.handedOver}`;
    close = () => app.close();
  }

  let sent = 0;
  const headersOf = (kind: string): Record<string, string> => ({
    host: '127.0.0.1',
    'content-type': 'application/json',
    accept: kind === 'mcp' ? 'application/json, text/event-stream' : 'application/graphql-response+json',
    ...(kind === 'mcp' ? { 'mcp-protocol-version': '2025-06-18' } : {}),
  });
  const headers = Object.fromEntries(kinds.map((kind) => [kind, headersOf(kind)]));
  let trace: StallTrace | undefined;
  const one = (kind: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const started = trace === undefined ? 0 : performance.now();
      const body = Buffer.from(JSON.stringify((bodies[kind] as (n: number) => unknown)(sent++)));
      const fields = { ...headers[kind], 'content-length': String(body.length) };
      const req = AS_NODE
        ? new FakeStreamRequest(kind === 'mcp' ? '/mcp' : '/graphql', fields, body)
        : new FakeRequest(fields, body);
      const res = new FakeResponse((status, text) => {
        const expected = kind === 'proxy' ? '"is_null"' : kind === 'pi' ? '"pi"' : '"isNull"';
        if (status !== 200 || !text.includes(expected) || text.includes('"isError":true'))
          reject(new Error(`unexpected answer ${status}: ${text.slice(0, 300)}`));
        else {
          trace?.request(started, performance.now());
          resolve();
        }
      });
      if (!handle(req, res)) reject(new Error('the request was not taken'));
      req.send();
    });
  const drive = async (count: number, kind = WORKLOAD) => {
    let left = count;
    const lane = async () => {
      while (left > 0) {
        left--;
        await one(kind);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  };

  if (OVERHEAD) {
    await measureOverhead(drive, () => close());
    await upstream.stop();
    return;
  }
  // The first request of an Accept value goes to Yoga (it teaches the fast path the media type).
  await drive(WARMUP);
  const perRound: number[] = [];
  /** The kernel's part (system time: socket writes and reads, wake-ups). */
  const systemPerRound: number[] = [];
  const allocated: number[] = [];
  const gcPauses: number[] = [];
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  await stallTrace?.begin();
  trace = stallTrace;
  const cpuProfiler = PROFILE === '' ? undefined : new Session();
  if (cpuProfiler !== undefined) {
    cpuProfiler.connect();
    await cpuProfiler.post('Profiler.enable');
    await cpuProfiler.post('Profiler.setSamplingInterval', {
      interval: Number(argument('profile-us', '250')),
    });
    await cpuProfiler.post('Profiler.start');
  }
  for (let round = 0; round < ROUNDS; round++) {
    const measured = await measuredRound(() => drive(REQUESTS));
    perRound.push(measured.cpuUs / REQUESTS);
    systemPerRound.push(measured.systemUs / REQUESTS);
    allocated.push(measured.bytes / REQUESTS);
    gcPauses.push(measured.collections === 0 ? 0 : measured.pauseUs / measured.collections / 1000);
  }
  loopDelay.disable();
  if (cpuProfiler !== undefined) {
    const { profile } = await cpuProfiler.post('Profiler.stop');
    cpuProfiler.disconnect();
    await writeFile(PROFILE, JSON.stringify(profile));
  }
  const stallReport = await trace?.stop();
  const sorted = [...perRound].sort((a, b) => a - b);
  process.stdout.write(
    `${WORKLOAD}: ${median(perRound).toFixed(1)} µs CPU per request, least ${(sorted[0] as number).toFixed(1)} (median of ${ROUNDS} rounds of ${REQUESTS}, ${CONCURRENCY} at once; rounds: ${perRound.map((v) => v.toFixed(1)).join(' ')}; system ${median(systemPerRound).toFixed(1)})${served()}\n` +
      `  allocated per request ${(median(allocated) / 1024).toFixed(1)} KB (rounds: ${allocated.map((v) => (v / 1024).toFixed(1)).join(' ')}); ` +
      `mean GC pause ${median(gcPauses).toFixed(2)} ms; event-loop delay p50 ${(loopDelay.percentile(50) / 1e6).toFixed(2)} ms, p99 ${(loopDelay.percentile(99) / 1e6).toFixed(2)} ms, max ${(loopDelay.max / 1e6).toFixed(2)} ms\n`,
  );
  if (stallReport !== undefined) process.stdout.write(stallReport);
  await close();
  await upstream.stop();
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/**
 * `--workload mcp-overhead`: the tool row, the mcp row and the SDK's floor, warmed up alike, then
 * measured in turn each round (the order rotating, so a load drifting within a round falls on each
 * row alike); prints the three medians and the overhead row.
 */
async function measureOverhead(
  drive: (count: number, kind: string) => Promise<void>,
  close: () => Promise<unknown>,
): Promise<void> {
  const rows = {
    tool: (count: number) => drive(count, 'tool'),
    mcp: (count: number) => drive(count, 'mcp'),
    floor: (count: number) => driveSdkFloor(count, CONCURRENCY),
  };
  const names = Object.keys(rows) as Array<keyof typeof rows>;
  for (const name of names) await rows[name](WARMUP);
  const measured: Record<keyof typeof rows, MeasuredRound[]> = { tool: [], mcp: [], floor: [] };
  for (let round = 0; round < ROUNDS; round++)
    for (let i = 0; i < names.length; i++) {
      const name = names[(round + i) % names.length] as keyof typeof rows;
      measured[name].push(await measuredRound(() => rows[name](REQUESTS)));
    }
  const cpu = (name: keyof typeof rows) => measured[name].map((m) => m.cpuUs / REQUESTS);
  const kb = (name: keyof typeof rows) => median(measured[name].map((m) => m.bytes / REQUESTS / 1024));
  const perRound = cpu('mcp').map((mcp, i) => mcp - (cpu('tool')[i] as number) - (cpu('floor')[i] as number));
  const [tool, mcp, floor] = [median(cpu('tool')), median(cpu('mcp')), median(cpu('floor'))];
  const overhead = mcp - tool - floor;
  const line = (name: keyof typeof rows, label: string) =>
    `  ${label.padEnd(10)} ${median(cpu(name)).toFixed(1)} µs CPU, ${kb(name).toFixed(1)} KB per request (rounds: ${cpu(
      name,
    )
      .map((v) => v.toFixed(1))
      .join(' ')})\n`;
  process.stdout.write(
    `mcp-overhead: medians of ${ROUNDS} rounds of ${REQUESTS} each, ${CONCURRENCY} at once, the three rows in turn in one process\n` +
      line('tool', 'tool') +
      line('mcp', 'mcp') +
      line('floor', 'SDK floor') +
      `  mcp overhead (mcp − tool − SDK floor): ${overhead.toFixed(1)} µs per tools/call (rounds: ${perRound.map((v) => v.toFixed(1)).join(' ')}); ` +
      `bound +${MCP_OVERHEAD_BOUND_US} µs: ${overhead <= MCP_OVERHEAD_BOUND_US ? 'met' : 'MISSED'}\n`,
  );
  await close();
}

await main();
