/**
 * SIGTERM ends the process even when whoever read its standard output and error has gone
 * (docs/contract.md, Operating it): the real CLIs (`npm start`'s src/main.ts with the embedded services,
 * `npm run services`' src/services/main.ts) run with piped stdout/stderr, the test closes its reading
 * ends, sends SIGTERM and waits, bounded, for the exit. Before the fix the gateway never exited: pino's
 * exit-time flush retried its write to the broken pipe (EPIPE) forever.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { type CliExit, type CliProcess, killLeftovers, spawnCli } from '../support/gateway-process.js';
import { routeSpecAnswers } from '../support/upstream-bodies.js';
import { until, withinOr } from '../support/waits.js';

const children: ChildProcess[] = [];
/** Well beyond SHUTDOWN_TIMEOUT_MS (2 s) plus the promised few seconds, so only a hang fails. */
const EXIT_WITHIN_MS = 30_000;
/** Start (up to 25 s on a busy machine) plus the bounded wait for the exit. */
const TEST_TIMEOUT_MS = 60_000;
/** What a wait for the exit gives when there was none in time. */
const NO_EXIT: CliExit = { code: -1, signal: null };

// Only the children this file started, by pid; normally they have exited already.
afterEach(() => killLeftovers(children));

/** Starts `entry` with piped output and resolves once it logged `listening` `listeningLines` times. */
async function start(entry: string, listeningLines: number, env: Record<string, string> = {}) {
  const cli = spawnCli(entry, {
    NODE_ENV: 'production',
    LOG_FORMAT: '',
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    PORT: '0',
    NULL_PORT: '0',
    PI_PORT: '0',
    NULL_BASE_URL: '',
    PI_BASE_URL: '',
    SHUTDOWN_TIMEOUT_MS: '2000',
    ...env,
  });
  children.push(cli.child);
  const listening = new Promise<boolean>((resolve) => {
    const onData = () => {
      if ((cli.output().match(/listening on http/g) ?? []).length >= listeningLines) resolve(true);
    };
    cli.child.stdout?.on('data', onData);
    cli.child.stderr?.on('data', onData);
    void cli.exited.then(() => resolve(false));
  });
  expect(await withinOr(listening, 25_000, false), `not listening in time:\n${cli.output()}`).toBe(true);
  const url = /listening on (http:\/\/[^\s"]+)/.exec(cli.output())?.[1] ?? '';
  return { ...cli, url };
}

/**
 * Closes the reading ends of the child's stdout and stderr (its next write gets EPIPE), sends
 * SIGTERM and waits, bounded, for the exit: NO_EXIT when there was none in time.
 */
function sigtermWithPipesClosed({ child, exited }: CliProcess): Promise<CliExit> {
  child.stdout?.destroy();
  child.stderr?.destroy();
  child.kill('SIGTERM');
  return withinOr(exited, EXIT_WITHIN_MS, NO_EXIT);
}

describe('SIGTERM with standard output and error closed', () => {
  it.each([
    ['npm start (src/main.ts, embedded services): exits 0 by itself', 'src/main.ts', 1],
    ['npm run services (src/services/main.ts): exits by itself', 'src/services/main.ts', 2],
  ])(
    '%s',
    async (_name, entry, listeningLines) => {
      const exit = await sigtermWithPipesClosed(await start(entry, listeningLines));
      expect(exit).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'npm start with a request in flight longer than SHUTDOWN_TIMEOUT_MS: ends by itself',
    async () => {
      // The null-check upstream never answers: the drain cannot finish in time.
      const up = await startScriptedUpstream();
      try {
        routeSpecAnswers(up, up, '/pi');
        up.route('POST', '/api/v1/check', { hang: true });
        const cli = await start('src/main.ts', 1, {
          NULL_BASE_URL: up.url,
          PI_BASE_URL: `${up.url}/pi`,
          NULL_API_VERSION: 'v1',
          UPSTREAM_TIMEOUT_MS: '120000',
          OPERATION_DEADLINE_MS: '120000',
        });
        const slow = fetch(cli.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ isNull(value: 1) { __typename } }' }),
        }).then(
          (response) => response.status,
          () => 'failed',
        );
        // The operation is in flight: its call reached the upstream.
        expect(await until(() => up.count('POST', '/api/v1/check') === 1, 400)).toBe(true);
        const exit = await sigtermWithPipesClosed(cli);
        // 0: the drain gave up at SHUTDOWN_TIMEOUT_MS and the rest closed; 1: the process's own
        // deadline. A hang is the sentinel -1, a kill a signal.
        expect(exit.signal).toBeNull();
        expect([0, 1]).toContain(exit.code);
        await slow;
      } finally {
        await up.close();
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'npm run services with a request in flight longer than SHUTDOWN_TIMEOUT_MS: ends by itself',
    async () => {
      // At debug the services log each request as it comes in: the test sees the slow one arrive.
      const cli = await start('src/services/main.ts', 2, {
        NULL_FAULT_LATENCY_MS: '60000',
        LOG_LEVEL: 'debug',
      });
      const slow = fetch(new URL('/api/v1/check', cli.url), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ value: 1 }),
      }).then(
        (response) => response.status,
        () => 'failed',
      );
      // The request has been read (the latency applies to every answer, so none can tell).
      const arrived = () => /"url":"\/api\/v1\/check".*"msg":"incoming request"/.test(cli.output());
      expect(await until(arrived, 400), `the request was not logged:\n${cli.output()}`).toBe(true);
      const exit = await sigtermWithPipesClosed(cli);
      expect(exit.signal).toBeNull();
      expect([0, 1]).toContain(exit.code);
      await slow;
    },
    TEST_TIMEOUT_MS,
  );
});

describe('the shutdown watchdog', () => {
  it(
    'ends a process whose main thread is blocked after the signal (SIGKILL from its worker)',
    async () => {
      const cli = spawnCli('test/fixtures/blocked-after-signal.ts');
      children.push(cli.child);
      const ready = new Promise<boolean>((resolve) => {
        cli.child.stdout?.on('data', (chunk: string) => chunk.includes('ready') && resolve(true));
        void cli.exited.then(() => resolve(false));
      });
      expect(await withinOr(ready, 25_000, false)).toBe(true);
      // A timer on the blocked thread could never fire: only the worker's SIGKILL ends it.
      expect(await sigtermWithPipesClosed(cli)).toEqual({
        code: null,
        signal: 'SIGKILL',
      });
    },
    TEST_TIMEOUT_MS,
  );
});
