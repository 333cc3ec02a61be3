/**
 * Child processes of the gateway benchmark: each server under test runs in its own Node process (so it
 * never shares an event loop with the load generator or the upstream), on loopback only.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

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
  stop(): Promise<void>;
}

/** A free loopback port (the tiny race until the child binds it is acceptable for a benchmark). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return match?.[1] ? Number(match[1]) * 1024 : Number.NaN;
}

const CLOCK_TICKS_PER_SECOND = 100;

/** utime + stime of one process from /proc/<pid>/stat, in ms. */
async function cpuOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name (2nd field) is in parentheses and may hold spaces: count fields after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

async function childPids(pid: number): Promise<number[]> {
  try {
    const text = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8');
    return text.trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
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

/** Starts `node [--import tsx] <script>` with `env` added, waits until it serves `readyPath`. */
export async function startChild(options: StartOptions): Promise<ChildServer> {
  const loader = options.script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...loader, options.script], {
    cwd: ROOT,
    env: { ...process.env, ...options.env, PORT: String(options.port) },
    // stdout (log lines) goes nowhere but is still written: the cost of logging stays measured.
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  try {
    await waitReady(`http://127.0.0.1:${options.port}${options.readyPath}`, child, () => stderr);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const pid = child.pid as number;
  return {
    name: options.name,
    port: options.port,
    child,
    rss: () => rssOf(pid),
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
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
