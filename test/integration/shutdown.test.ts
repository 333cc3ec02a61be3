/**
 * Graceful shutdown. First the real CLI (`node --import tsx src/main.ts`): on SIGTERM or SIGINT, to
 * the process or to its whole process group, it stops accepting connections, answers every request
 * it had accepted completely, and exits 0, also when whoever read its output has gone. The drain
 * scenarios front a scripted upstream that holds its answers until the test releases them (after
 * the signal); the start scenarios run the embedded reference services. Then the drain itself, in
 * process (`app.close()`): accepted requests answered, a request that outlives SHUTDOWN_TIMEOUT_MS
 * cut off.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request as httpRequest } from 'node:http';
import { type AddressInfo, connect, createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { type CliExit, killLeftovers, PRODUCTION_CLI_ENV, spawnCli } from '../support/gateway-process.js';
import { gql } from '../support/graphql-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { gate, LATE, until, within, withinOr } from '../support/waits.js';

const children: ChildProcess[] = [];

interface RunningCli {
  child: ChildProcess;
  port: number;
  stdout: () => string;
  exited: Promise<CliExit>;
}

/** The gateway CLI (src/main.ts) as in production, and the URL it logs once it listens. */
function spawnGateway(detached: boolean, env: Record<string, string> = {}) {
  const cli = spawnCli(
    'src/main.ts',
    { ...PRODUCTION_CLI_ENV, SHUTDOWN_TIMEOUT_MS: '20000', ...env },
    { detached },
  );
  children.push(cli.child);
  const url = new Promise<string>((resolve, reject) => {
    cli.child.stdout?.on('data', () => {
      for (const line of cli.output().split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const entry = JSON.parse(line) as { url?: unknown };
          if (typeof entry.url === 'string') resolve(entry.url);
        } catch {
          // a partial line: wait for the rest
        }
      }
    });
    void cli.exited.then(() => reject(new Error(`the CLI exited before listening:\n${cli.output()}`)));
  });
  return { ...cli, url };
}

/** What `exited` resolves to when the process did not exit in time. */
const NO_EXIT = { code: -1, signal: null };
const exitWithin = (exited: RunningCli['exited'], ms: number) => withinOr(exited, ms, NO_EXIT);

async function startCli(detached: boolean, env: Record<string, string> = {}): Promise<RunningCli> {
  const { child, exited, url, output } = spawnGateway(detached, env);
  const listening = await within(url, 25_000);
  if (listening === LATE) throw new Error(`the CLI did not log its URL in time:\n${output()}`);
  return { child, port: Number(new URL(listening).port), stdout: output, exited };
}

// Only the children this file started, by pid (each is one process); normally they have exited already.
afterEach(() => killLeftovers(children));

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

/**
 * A scripted upstream whose null checks are held until `release()`: the test decides when the
 * accepted operations may finish (after the signal), so nothing depends on timing.
 */
async function heldUpstream() {
  const up = await startScriptedUpstream();
  const held = gate();
  routeSpecAnswers(up, up, '/pi');
  // Bounded all the same: up.close() in the finally ends a held answer's wait with its socket.
  up.route('POST', '/api/v1/check', { holdUntil: held.opened, body: nullBody() });
  const env = { NULL_BASE_URL: up.url, PI_BASE_URL: `${up.url}/pi`, UPSTREAM_TIMEOUT_MS: '30000' };
  return { up, release: held.open, env };
}

async function drainScenario(options: { requests: number; group: boolean; signal: NodeJS.Signals }) {
  const { up, release, env } = await heldUpstream();
  try {
    const cli = await startCli(options.group, env);
    const agent = new Agent({ keepAlive: true, maxSockets: options.requests });
    let signalled = false;
    const calls = Array.from({ length: options.requests }, (_, i) =>
      slowOperation(cli.port, agent, i, () => signalled),
    );
    await Promise.all(calls.map((c) => c.sent));
    // Every operation is accepted and waiting for its upstream answer.
    expect(await until(() => up.count('POST', '/api/v1/check') === options.requests, 400, 50)).toBe(true);
    expect((await fetch(`http://127.0.0.1:${cli.port}/health`)).status).toBe(200);

    signalled = true;
    const pid = cli.child.pid as number;
    if (options.group) process.kill(-pid, options.signal);
    else process.kill(pid, options.signal);

    // It stops accepting while the accepted operations are still running (their answers are held).
    let pending = options.requests;
    for (const call of calls) void call.outcome.then(() => pending--);
    expect(await until(() => refused(cli.port), 500, 20)).toBe(true);
    expect(pending).toBe(options.requests);
    release();

    const outcomes = await Promise.all(calls.map((c) => c.outcome));
    const exit = await exitWithin(cli.exited, 25_000);
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
  } finally {
    release();
    await up.close();
  }
}

// Each scenario starts the CLI (several seconds on a busy machine) and waits for it to exit: the
// bounds of those waits, not a timing expectation, set this limit.
describe('graceful shutdown of the CLI', { timeout: 90_000 }, () => {
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
      const { exited, url, output } = spawnGateway(false, {
        PORT: String((blocker.address() as AddressInfo).port),
      });
      url.catch(() => {}); // it never listens
      expect(await exitWithin(exited, 25_000)).toEqual({ code: 1, signal: null });
      expect(output()).toContain('EADDRINUSE');
      expect(output()).not.toMatch(/\bat .+:\d+:\d+/); // no stack trace
    } finally {
      blocker.close();
    }
  });

  it('SIGTERM while still starting: the start finishes, then a graceful exit 0', async () => {
    const { child, exited, output } = spawnGateway(false);
    const starting = new Promise<void>((resolve) => {
      const check = () => (output().includes('"msg":"starting"') ? resolve() : undefined);
      child.stdout?.on('data', check);
      check();
    });
    expect(await within(starting, 25_000)).not.toBe(LATE);
    // The gateway's modules and the embedded services are still loading at this point.
    expect(output()).not.toContain('gateway listening');
    child.kill('SIGTERM');
    expect(await exitWithin(exited, 30_000)).toEqual({ code: 0, signal: null });
    expect(output()).toContain('shutdown complete');
  });

  it('SIGINT (Ctrl-C reaches the whole group) when idle: exits 0 at once', async () => {
    const cli = await startCli(true);
    process.kill(-(cli.child.pid as number), 'SIGINT');
    expect(await exitWithin(cli.exited, 20_000)).toEqual({ code: 0, signal: null });
    expect(cli.stdout()).toContain('shutdown complete');
  });

  it('SIGTERM after whoever read its output went away: the accepted request is answered, the process exits by itself', async () => {
    const { up, release, env } = await heldUpstream();
    try {
      const cli = await startCli(false, { ...env, SHUTDOWN_TIMEOUT_MS: '5000' });
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      let signalled = false;
      const call = slowOperation(cli.port, agent, 1, () => signalled);
      await call.sent;
      expect(await until(() => up.count('POST', '/api/v1/check') === 1, 400, 50)).toBe(true);
      // The reader of stdout and stderr is gone (a closed terminal, a dead log shipper).
      cli.child.stdout?.destroy();
      cli.child.stderr?.destroy();
      signalled = true;
      cli.child.kill('SIGTERM');
      expect(await until(() => refused(cli.port), 500, 20)).toBe(true);
      release();
      const outcome = await call.outcome;
      agent.destroy();
      expect(outcome.early).toBe(false);
      expect(outcome.error ?? outcome.status).toBe(200);
      expect(JSON.parse(outcome.body)).toMatchObject({ data: { isNull: { __typename: 'NullVerdict' } } });
      // Within SHUTDOWN_TIMEOUT_MS (5 s) plus the exit margin (5 s): on its own, not killed by a signal.
      const exit = await exitWithin(cli.exited, 20_000);
      expect(exit).not.toEqual(NO_EXIT);
      expect(exit.signal).toBeNull();
    } finally {
      release();
      await up.close();
    }
  });
});

describe('the drain itself (app.close(), in process)', () => {
  // One scripted upstream for the describe; the gateways the tests close are closed again after it
  // (close() is idempotent), so a failed test leaves none running.
  const scripted = useScriptedGateways();
  beforeEach(() => {
    scripted.upstream.reset();
    routeSpecAnswers(scripted.upstream);
  });

  it('stops accepting, answers every accepted request, then closes; close() is idempotent', async () => {
    // The answers are held until the gateway has stopped accepting: all three are in flight then.
    const held = gate();
    const up = scripted.upstream;
    up.route('POST', '/api/v1/check', { holdUntil: held.opened, body: nullBody() });
    const gateway = await scripted.gateway();
    const port = Number(new URL(gateway.origin).port);
    const requests = Array.from({ length: 3 }, (_, i) =>
      gql(gateway.url, `{ isNull(value: ${i}) { __typename } }`, { headers: { connection: 'close' } }),
    );
    // All three reached the upstream: the gateway has accepted them.
    expect(await until(() => up.count('POST', '/api/v1/check') === 3)).toBe(true);
    const closing = gateway.app.close();
    expect(gateway.app.close()).toBe(closing);
    expect(await until(() => refused(port), 500, 20)).toBe(true);
    held.open();
    const answers = await Promise.all(requests);
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
    }
    expect(await closing).toEqual({ timedOut: false, inFlight: 3 });
    expect(gateway.app.server.listening).toBe(false);
  });

  it.each([
    ['on the fast path', true],
    ["on Yoga's lane (HTTP_FAST_PATH=false)", false],
  ])(
    'a request that outlives SHUTDOWN_TIMEOUT_MS is cut off, and close() says so (%s)',
    async (_name, fast) => {
      const up = scripted.upstream;
      up.route('POST', '/api/v1/check', { hang: true });
      const gateway = await scripted.gateway({
        SHUTDOWN_TIMEOUT_MS: '200',
        UPSTREAM_TIMEOUT_MS: '60000',
        RETRY_MAX_ATTEMPTS: '1',
        HTTP_FAST_PATH: String(fast),
      });
      const served = { ...gateway.app.fastPath.served };
      const stuck = gql(gateway.url, '{ isNull(value: 1) { __typename } }').then(
        (result) => result.status,
        (error: unknown) => (error instanceof Error ? 'cut off' : 'unknown'),
      );
      expect(await until(() => up.count('POST', '/api/v1/check') === 1)).toBe(true);
      expect(gateway.app.fastPath.served).toEqual(fast ? { ...served, fast: served.fast + 1 } : served);
      // The drain gives up after 200 ms; the upstream call is cancelled with the connection, so the
      // upstream pools close at once instead of waiting for it (UPSTREAM_TIMEOUT_MS is 60 s here).
      const closed = await within(gateway.app.close(), 10_000);
      expect(closed).toEqual({ timedOut: true, inFlight: 1 });
      expect(await within(stuck, 10_000)).toBe('cut off');
      const call = up.requests.find((r) => r.path === '/api/v1/check');
      expect(await within(call?.ended ?? Promise.resolve('none'), 10_000)).toBe('client-closed');
    },
  );
});
