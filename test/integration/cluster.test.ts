/**
 * WORKERS=2 (node:cluster) as `npm start` runs it (the CLI, `node --import tsx src/main.ts`): the
 * primary starts the embedded reference services once, both workers (each a complete `createApp`
 * gateway) serve the same port and use them, and SIGTERM stops every process with exit code 0.
 *
 * PORT=0: in a cluster every worker that listens on port 0 gets the same port from the primary, so
 * the test needs no port of its own; the workers log the URL.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliExit, PRODUCTION_CLI_ENV, spawnCli } from '../support/gateway-process.js';
import { gql } from '../support/graphql-client.js';
import { LATE, until, within } from '../support/waits.js';

let child: ChildProcess;
let exited: Promise<CliExit>;
let output: () => string = () => '';

interface Line {
  msg?: string;
  pid?: number;
  url?: string;
  requestId?: string;
  operation?: string;
}

const lines = (): Line[] =>
  output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Line];
      } catch {
        return []; // a line still being written
      }
    });
const listening = () => lines().filter((l) => l.msg?.startsWith('gateway listening on'));

let url = '';

beforeAll(async () => {
  // Its own process group: if the test fails half-way, afterAll can end the workers too.
  ({ child, exited, output } = spawnCli(
    'src/main.ts',
    // A budget for pro keys only: the workers must know the embedded services' tiers (their demo keys).
    { ...PRODUCTION_CLI_ENV, WORKERS: '2', COST_BUDGETS: '{"tier:pro":{"1h":5}}' },
    { detached: true },
  ));
  const up = await until(
    () =>
      child.exitCode !== null || lines().some((l) => l.msg?.startsWith('gateway listening with 2 workers')),
    400,
    100,
  );
  if (!up || child.exitCode !== null) throw new Error(`the cluster did not start:\n${output()}`);
  url = listening()[0]?.url ?? '';
});

afterAll(async () => {
  if (child?.exitCode === null && child.signalCode === null && child.pid !== undefined) {
    // Only this test's own process group (the primary and its workers), by id.
    process.kill(-child.pid, 'SIGKILL');
    await within(exited, 5000);
  }
});

// Three processes start and stop here: the bounds of those waits, not a timing expectation, set this limit.
describe('WORKERS=2', { timeout: 60_000 }, () => {
  it('starts the embedded services once and two listening workers on one port', () => {
    const all = lines();
    expect(all.filter((l) => l.msg?.startsWith('embedded reference services started')).length).toBe(1);
    const workers = listening();
    expect(workers).toHaveLength(2);
    expect(new Set(workers.map((l) => l.pid)).size).toBe(2);
    expect(workers.map((l) => l.pid)).not.toContain(child.pid);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/graphql$/);
    expect(new Set(workers.map((l) => l.url))).toEqual(new Set([url]));
  });

  it('answers GraphQL on the shared port with the embedded services, from both workers', async () => {
    for (let i = 0; i < 6; i++) {
      const result = await gql(
        url,
        `query Cluster${i} { pi(digits: ${i % 4}) { ... on PiDigits { digits } } }`,
        {
          headers: { connection: 'close', 'x-request-id': `cluster-${i}` },
        },
      );
      expect(result.status).toBe(200);
      expect(result.errors).toBeUndefined();
      expect(result.data?.pi?.digits?.startsWith('3')).toBe(true);
      expect(result.headers.get('x-request-id')).toBe(`cluster-${i}`);
      expect(result.extensions?.cost).toMatchObject({ upstreamCalls: 1, cacheHits: 0 });
    }
    // Each operation was logged by the worker that served it; new connections go round the workers.
    expect(await until(() => lines().filter((l) => l.requestId?.startsWith('cluster-')).length === 6)).toBe(
      true,
    );
    const servedBy = new Set(
      lines()
        .filter((l) => l.requestId?.startsWith('cluster-'))
        .map((l) => l.pid),
    );
    expect(servedBy).toEqual(new Set(listening().map((l) => l.pid)));
  });

  it('each worker gives the embedded services’ keys the tiers they have there (one API_KEYS, unset: the demo keys)', async () => {
    const scopes = new Set<unknown>();
    const pids = new Set<unknown>();
    for (let i = 0; i < 4; i++) {
      const result = await gql(url, '{ budget { scope } }', {
        headers: { connection: 'close', authorization: 'Bearer demo-pro', 'x-request-id': `tiers-${i}` },
      });
      scopes.add(result.data?.budget?.scope);
    }
    expect(scopes).toEqual(new Set(['tier:pro']));
    expect(await until(() => lines().filter((l) => l.requestId?.startsWith('tiers-')).length === 4)).toBe(
      true,
    );
    for (const line of lines()) if (line.requestId?.startsWith('tiers-')) pids.add(line.pid);
    expect(pids).toEqual(new Set(listening().map((l) => l.pid)));
  });

  it('stops every process on SIGTERM with exit code 0', async () => {
    child.kill('SIGTERM');
    const exit = await within(exited, 30_000);
    expect(exit).not.toBe(LATE);
    expect(exit).toEqual({ code: 0, signal: null });
    // The primary and both workers.
    expect(lines().filter((l) => l.msg === 'shutdown complete').length).toBe(3);
  });
});
