/**
 * SIGTERM ends the process even when whoever read its standard output and error has gone (contract §6):
 * the real CLIs (`npm start`'s src/main.ts with the embedded services, `npm run services`'
 * src/services/main.ts) run with piped stdout/stderr, the test closes its reading ends, sends SIGTERM
 * and waits, bounded, for the exit. Before the fix the gateway never exited: pino's exit-time flush
 * retried its write to the broken pipe (EPIPE) forever.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { within as bounded, LATE } from '../support/waits.js';

/** `promise`'s value, or `fallback` when it took more than `ms` (a bound for hangs, not a timing check). */
async function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  const outcome = await bounded(promise, ms);
  return outcome === LATE ? fallback : outcome;
}

const root = fileURLToPath(new URL('../..', import.meta.url));
const children: ChildProcess[] = [];
/** Well beyond SHUTDOWN_TIMEOUT_MS (2 s) plus the promised few seconds, so only a hang fails. */
const EXIT_WITHIN_MS = 30_000;
/** Start (up to 25 s on a busy machine) plus the bounded wait for the exit. */
const TEST_TIMEOUT_MS = 60_000;

afterEach(() => {
  // Only the children this file started, by pid; normally they have exited already.
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Starts `entry` with piped output and resolves once it logged `listening` `listeningLines` times. */
async function start(entry: string, listeningLines: number, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
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
    },
  });
  children.push(child);
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  let output = '';
  const listening = new Promise<boolean>((resolve) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if ((output.match(/listening on http/g) ?? []).length >= listeningLines) resolve(true);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then(() => resolve(false));
  });
  expect(await within(listening, 25_000, false), `not listening in time:\n${output}`).toBe(true);
  const url = /listening on (http:\/\/[^\s"]+)/.exec(output)?.[1] ?? '';
  return { child, exited, url };
}

/** Closes the reading ends of the child's stdout and stderr: its next write gets EPIPE. */
function closePipes(child: ChildProcess) {
  child.stdout?.destroy();
  child.stderr?.destroy();
}

describe('SIGTERM with standard output and error closed', () => {
  it(
    'npm start (src/main.ts, embedded services): exits 0 by itself',
    async () => {
      const { child, exited } = await start('src/main.ts', 1);
      closePipes(child);
      child.kill('SIGTERM');
      const exit = await within(exited, EXIT_WITHIN_MS, { code: -1, signal: null });
      expect(exit).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'npm start with a request in flight longer than SHUTDOWN_TIMEOUT_MS: ends by itself',
    async () => {
      // The embedded null-check service answers after a minute: the drain cannot finish in time.
      const { child, exited, url } = await start('src/main.ts', 1, {
        NULL_FAULT_LATENCY_MS: '60000',
        UPSTREAM_TIMEOUT_MS: '120000',
        OPERATION_DEADLINE_MS: '120000',
      });
      const slow = fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ isNull(value: 1) { __typename } }' }),
      }).then(
        (response) => response.status,
        () => 'failed',
      );
      // A later request answered on a new connection: the slow one has been read by now.
      expect((await fetch(new URL('/health', url))).status).toBe(200);
      closePipes(child);
      child.kill('SIGTERM');
      const exit = await within(exited, EXIT_WITHIN_MS, { code: -1, signal: null });
      // 0: the drain gave up at SHUTDOWN_TIMEOUT_MS and the rest closed; 1: the process's own deadline.
      // A hang is the sentinel -1, a kill a signal.
      expect(exit.signal).toBeNull();
      expect([0, 1]).toContain(exit.code);
      await slow;
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'npm run services (src/services/main.ts): exits by itself',
    async () => {
      const { child, exited } = await start('src/services/main.ts', 2);
      closePipes(child);
      child.kill('SIGTERM');
      const exit = await within(exited, EXIT_WITHIN_MS, { code: -1, signal: null });
      expect(exit).toEqual({ code: 0, signal: null });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'npm run services with a request in flight longer than SHUTDOWN_TIMEOUT_MS: ends by itself',
    async () => {
      const { child, exited, url } = await start('src/services/main.ts', 2, {
        NULL_FAULT_LATENCY_MS: '60000',
      });
      const slow = fetch(new URL('/api/v1/check', url), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ value: 1 }),
      }).then(
        (response) => response.status,
        () => 'failed',
      );
      // The latency applies to every answer, so wait for the request to be read another way: a moment.
      await new Promise((resolve) => setTimeout(resolve, 500));
      closePipes(child);
      child.kill('SIGTERM');
      const exit = await within(exited, EXIT_WITHIN_MS, { code: -1, signal: null });
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
      const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/blocked-after-signal.ts'], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      const exited = once(child, 'exit').then(([code, signal]) => ({ code, signal }));
      const ready = new Promise<boolean>((resolve) => {
        child.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve(true));
        void exited.then(() => resolve(false));
      });
      expect(await within(ready, 25_000, false)).toBe(true);
      closePipes(child);
      child.kill('SIGTERM');
      // A timer on the blocked thread could never fire: only the worker's SIGKILL ends it.
      expect(await within(exited, EXIT_WITHIN_MS, { code: -1, signal: null })).toEqual({
        code: null,
        signal: 'SIGKILL',
      });
    },
    TEST_TIMEOUT_MS,
  );
});
