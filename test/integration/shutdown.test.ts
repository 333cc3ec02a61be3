/**
 * Graceful shutdown of the real CLI (`node --import tsx src/main.ts`, the embedded reference services
 * with 1 s of added latency): on SIGTERM or SIGINT, to the process or to its whole process group, it
 * stops accepting connections, answers every request it had accepted completely, and exits 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request as httpRequest } from 'node:http';
import { type AddressInfo, connect, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { poll, within } from './resilience-helpers.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const LATENCY_MS = 1000;
const children: ChildProcess[] = [];

interface RunningCli {
  child: ChildProcess;
  port: number;
  stdout: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnCli(detached: boolean, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    detached,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NODE_ENV: 'production',
      LOG_FORMAT: 'json',
      LOG_LEVEL: 'info',
      HOST: '127.0.0.1',
      PORT: '0',
      NULL_BASE_URL: '',
      PI_BASE_URL: '',
      NULL_FAULT_LATENCY_MS: String(LATENCY_MS),
      FREE_RATE_LIMIT: '0',
      SHUTDOWN_TIMEOUT_MS: '20000',
      ...env,
    },
  });
  children.push(child);
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  let out = '';
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const url = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const entry = JSON.parse(line) as { url?: unknown };
          if (typeof entry.url === 'string') resolve(entry.url);
        } catch {
          // a partial line: wait for the rest
        }
      }
    });
    void exited.then(() => reject(new Error(`the CLI exited before listening:\n${out}`)));
  });
  return { child, exited, url, output: () => out };
}

async function startCli(detached: boolean): Promise<RunningCli> {
  const { child, exited, url, output } = spawnCli(detached);
  const listening = await within(url, 25_000, undefined);
  if (listening === undefined) throw new Error(`the CLI did not log its URL in time:\n${output()}`);
  return { child, port: Number(new URL(listening).port), stdout: output, exited };
}

afterEach(() => {
  // Only the children this file started, by pid; normally they have exited already.
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

interface Outcome {
  status: number | null;
  body: string;
  /** Response complete, or why not. */
  error: string | null;
  /** Response headers arrived before the signal was sent. */
  early: boolean;
  /** The response's Connection header. */
  connection: string | undefined;
}

/** POSTs one slow operation on its own keep-alive connection; never rejects. */
function slowOperation(port: number, agent: Agent, i: number, signalled: () => boolean) {
  const body = JSON.stringify({ query: `{ isNull(value: ${i}) { __typename } }` });
  let written!: () => void;
  const sent = new Promise<void>((resolve) => {
    written = resolve;
  });
  const outcome = new Promise<Outcome>((resolve) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path: '/graphql',
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    req.on('finish', written);
    req.on('error', (error) =>
      resolve({ status: null, body: '', error: error.message, early: false, connection: undefined }),
    );
    req.on('response', (res) => {
      const early = !signalled();
      const connection = res.headers.connection;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      const status = res.statusCode ?? null;
      res.on('end', () => resolve({ status, body: text, error: null, early, connection }));
      res.on('error', (error) => resolve({ status, body: text, error: error.message, early, connection }));
    });
    req.end(body);
  });
  return { sent, outcome };
}

/** Whether a new TCP connection to the port is refused. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

async function drainScenario(options: { requests: number; group: boolean; signal: NodeJS.Signals }) {
  const cli = await startCli(options.group);
  const agent = new Agent({ keepAlive: true, maxSockets: options.requests });
  let signalled = false;
  const calls = Array.from({ length: options.requests }, (_, i) =>
    slowOperation(cli.port, agent, i, () => signalled),
  );
  await Promise.all(calls.map((c) => c.sent));
  // A later request on a new connection answered: the server has read the earlier ones by now.
  const health = await fetch(`http://127.0.0.1:${cli.port}/health`);
  expect(health.status).toBe(200);

  signalled = true;
  const pid = cli.child.pid as number;
  if (options.group) process.kill(-pid, options.signal);
  else process.kill(pid, options.signal);

  // It stops accepting while the accepted operations (1 s upstream latency) are still running.
  let pending = options.requests;
  for (const call of calls) void call.outcome.then(() => pending--);
  expect(await poll(() => refused(cli.port), { tries: 100, intervalMs: 20 })).toBe(true);
  expect(pending).toBeGreaterThan(0);

  const outcomes = await Promise.all(calls.map((c) => c.outcome));
  const exit = await within(cli.exited, 25_000, { code: -1, signal: null });
  agent.destroy();

  expect(outcomes.filter((o) => o.early)).toEqual([]);
  expect(outcomes.map((o) => o.error ?? o.status)).toEqual(Array(options.requests).fill(200));
  for (const outcome of outcomes) {
    expect(JSON.parse(outcome.body)).toMatchObject({ data: { isNull: { __typename: 'NullVerdict' } } });
    // Kept-alive connections are closed after their answer, not reused for more work.
    expect(outcome.connection).toBe('close');
  }
  expect(await refused(cli.port)).toBe(true);
  expect(exit).toEqual({ code: 0, signal: null });
  expect(cli.stdout()).toContain('shutdown complete');
}

describe('graceful shutdown of the CLI', () => {
  it('SIGTERM mid-load: stops accepting, answers all 40 accepted requests completely, exits 0', async () => {
    await drainScenario({ requests: 40, group: false, signal: 'SIGTERM' });
  });

  it('SIGTERM to the whole process group (as a service manager sends it): the same, exit 0', async () => {
    await drainScenario({ requests: 10, group: true, signal: 'SIGTERM' });
  });

  it('a port in use: one fatal line, exit code 1, nothing left running (the embedded services are closed)', async () => {
    const blocker = createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    try {
      const { exited, url, output } = spawnCli(false, {
        PORT: String((blocker.address() as AddressInfo).port),
      });
      url.catch(() => {}); // it never listens
      expect(await within(exited, 25_000, { code: -1, signal: null })).toEqual({ code: 1, signal: null });
      expect(output()).toContain('EADDRINUSE');
      expect(output()).not.toMatch(/\bat .+:\d+:\d+/); // no stack trace
    } finally {
      blocker.close();
    }
  });

  it('SIGTERM while still starting: the start finishes, then a graceful exit 0', async () => {
    const { child, exited, output } = spawnCli(false);
    const starting = new Promise<void>((resolve) => {
      const check = () => (output().includes('"msg":"starting"') ? resolve() : undefined);
      child.stdout?.on('data', check);
      check();
    });
    expect(
      await within(
        starting.then(() => true),
        25_000,
        false,
      ),
    ).toBe(true);
    // The gateway's modules and the embedded services are still loading at this point.
    expect(output()).not.toContain('gateway listening');
    child.kill('SIGTERM');
    expect(await within(exited, 30_000, { code: -1, signal: null })).toEqual({ code: 0, signal: null });
    expect(output()).toContain('shutdown complete');
  });

  it('SIGINT (Ctrl-C reaches the whole group) when idle: exits 0 at once', async () => {
    const cli = await startCli(true);
    process.kill(-(cli.child.pid as number), 'SIGINT');
    expect(await within(cli.exited, 20_000, { code: -1, signal: null })).toEqual({ code: 0, signal: null });
    expect(cli.stdout()).toContain('shutdown complete');
  });
});
