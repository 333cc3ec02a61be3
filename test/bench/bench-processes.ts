/**
 * Child processes of the gateway benchmark: each server under test runs in its own Node process (so it
 * never shares an event loop with the load generator or the upstream), on loopback only.
 *
 * Every process started here (and every other stoppable thing handed to `track`) is remembered until
 * it is stopped, so `installSignalCleanup` can stop whatever is still running when the benchmark is
 * interrupted (SIGINT, SIGTERM); the normal and the failing paths stop them in `finally` blocks.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../support/redis-server.js';

const ROOT = new URL('../../', import.meta.url);

export interface ChildServer {
  name: string;
  port: number;
  child: ChildProcess;
  /** Resident set size of the process (the primary, under WORKERS>1), in bytes. */
  rss(): Promise<number>;
  /** Summed RSS of the process and its direct children (cluster workers), in bytes. */
  totalRss(): Promise<number>;
  /**
   * CPU time (user + system) used so far by the process and its direct children (cluster workers),
   * in ms. On a shared, noisy machine, CPU time per request varies far less than requests per second.
   */
  cpuMs(): Promise<number>;
  /** The last few thousand characters the process wrote to stderr. */
  stderr(): string;
  stop(): Promise<void>;
}

async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return match?.[1] ? Number(match[1]) * 1024 : Number.NaN;
}

const CLOCK_TICKS_PER_SECOND = 100;

/** utime + stime of one process (all its threads) from /proc/<pid>/stat, in ms. */
export async function cpuOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name (2nd field) is in parentheses and may hold spaces: count fields after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** Direct children of `pid` (of any of its threads). */
async function childPids(pid: number): Promise<number[]> {
  let tasks: string[];
  try {
    tasks = await readdir(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const pids = new Set<number>();
  for (const task of tasks) {
    try {
      const text = await readFile(`/proc/${pid}/task/${task}/children`, 'utf8');
      for (const child of text.trim().split(/\s+/).filter(Boolean)) pids.add(Number(child));
    } catch {
      // the thread ended meanwhile
    }
  }
  return [...pids];
}

/**
 * The pid of a direct child of this process whose command line (arguments joined by spaces) matches
 * `pattern`, e.g. the redis-server started by test/support/redis-server.ts (which does not expose it).
 */
export async function findChildPid(pattern: RegExp): Promise<number | undefined> {
  for (const pid of await childPids(process.pid)) {
    try {
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ');
      if (pattern.test(cmdline)) return pid;
    } catch {
      // exited meanwhile
    }
  }
  return undefined;
}

// --- cleanup on interruption ------------------------------------------------------------------------

const live = new Set<() => Promise<void>>();
/**
 * Every child still running. A benchmark that throws (a bad option found after its upstream started)
 * exits without the stops above; on 'exit' only synchronous work runs, so each is sent SIGKILL there,
 * rather than being left behind holding a port.
 */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** Remembers `stop` until the returned function is called (once it has stopped). */
export function track(stop: () => Promise<void>): () => void {
  live.add(stop);
  return () => live.delete(stop);
}

/** On SIGINT/SIGTERM: stop everything still tracked (newest first), then exit 130/143. */
export function installSignalCleanup(): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`\n${signal}: stopping ${live.size} process(es) started by the benchmark...\n`);
    const stops = [...live].reverse();
    Promise.allSettled(stops.map((stop) => stop())).finally(() =>
      process.exit(signal === 'SIGINT' ? 130 : 143),
    );
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}

/** Polls `url` until it answers 2xx (or the child exits, or `timeoutMs` passes). */
async function waitReady(url: string, child: ChildProcess, stderr: () => string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`process exited (${child.exitCode}): ${stderr()}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await response.arrayBuffer();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`not ready after ${timeoutMs} ms: ${url}\n${stderr()}`);
}

export interface StartOptions {
  name: string;
  /** Script path relative to the repository root: `.ts` runs under tsx, `.js` runs as is. */
  script: string;
  env: Record<string, string>;
  /** Port the child listens on (passed as PORT). */
  port: number;
  /** Path polled until it answers 2xx. */
  readyPath: string;
  /** Extra node flags (e.g. `--cpu-prof`). */
  nodeArgs?: string[];
}

/** The fixed-answer upstream (fixed-upstream.ts) as its own process on a free loopback port. */
export async function startFixedUpstream(): Promise<{ upstream: ChildServer; port: number }> {
  const port = await freePort();
  const upstream = await startChild({
    name: 'upstream',
    script: 'test/bench/fixed-upstream.ts',
    env: {},
    port,
    readyPath: '/api/v1/health',
  });
  return { upstream, port };
}

/** Starts `node [--import tsx] <script>` with `env` added, waits until it serves `readyPath`. */
export async function startChild(options: StartOptions): Promise<ChildServer> {
  const loader = options.script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...loader, options.script], {
    cwd: ROOT,
    env: { ...process.env, ...options.env, PORT: String(options.port) },
    // stdout (log lines) goes nowhere but is still written: the cost of logging stays measured.
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-16_000);
  });
  try {
    await waitReady(`http://127.0.0.1:${options.port}${options.readyPath}`, child, () => stderr);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const pid = child.pid as number;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  const untrack = track(stop);
  return {
    name: options.name,
    port: options.port,
    child,
    rss: () => rssOf(pid),
    stderr: () => stderr,
    totalRss: async () => {
      let total = await rssOf(pid);
      for (const worker of await childPids(pid)) total += await rssOf(worker).catch(() => 0);
      return total;
    },
    cpuMs: async () => {
      let total = await cpuOf(pid);
      for (const worker of await childPids(pid)) total += await cpuOf(worker).catch(() => 0);
      return total;
    },
    stop: async () => {
      await stop();
      untrack();
    },
  };
}
