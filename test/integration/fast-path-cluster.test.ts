/**
 * WORKERS=2 (node:cluster) as `npm start` runs it: the primary starts the embedded reference services
 * once, both workers serve the port (through the fast path) and use them, and SIGTERM stops
 * everything with exit code 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/redis-server.js';

const ROOT = new URL('../../', import.meta.url);
let child: ChildProcess;
let port = 0;
let output = '';
const lines = () =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string; pid?: number });

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    if (child.exitCode !== null) throw new Error(`gateway exited early (${child.exitCode}): ${output}`);
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}: ${output}`);
}

beforeAll(async () => {
  port = await freePort();
  child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      WORKERS: '2',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_FORMAT: 'json',
      NULL_BASE_URL: '',
      PI_BASE_URL: '',
      FREE_RATE_LIMIT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  await until(
    () => lines().some((l) => l.msg?.startsWith('gateway listening with 2 workers')),
    'the workers',
  );
});

afterAll(async () => {
  if (child.exitCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
});

describe('WORKERS=2', () => {
  it('starts the embedded services once and two listening workers', () => {
    const all = lines();
    expect(all.filter((l) => l.msg?.startsWith('embedded reference services started')).length).toBe(1);
    const listening = all.filter((l) => l.msg?.startsWith('gateway listening on'));
    expect(new Set(listening.map((l) => l.pid)).size).toBe(2);
  });

  it('answers GraphQL on the shared port with the embedded services', async () => {
    for (let i = 0; i < 6; i++) {
      const response = await fetch(`http://127.0.0.1:${port}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', connection: 'close' },
        body: JSON.stringify({ query: `{ pi(digits: ${i % 4}) { ... on PiDigits { digits } } }` }),
      });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { data?: { pi?: { digits?: string } } };
      expect(body.data?.pi?.digits?.startsWith('3')).toBe(true);
    }
  });

  it('stops every process on SIGTERM with exit code 0', async () => {
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(lines().filter((l) => l.msg === 'shutdown complete').length).toBe(3);
  });
});
