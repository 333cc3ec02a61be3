/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) against a real
 * gateway's POST /mcp: its whole "active" server suite, with the scenarios that do not apply to a
 * stateless server of tools only listed, each with its reason, in
 * test/fixtures/mcp-conformance-baseline.yml. The suite exits non-zero when any other scenario fails
 * or when a listed one passes; and the scenarios the gateway must pass are checked one by one.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const BASELINE = join(ROOT, 'test/fixtures/mcp-conformance-baseline.yml');
/** The scenarios that apply, at least these (docs/agents.md, Conformance). */
const MUST_PASS = ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection'];

let gateway: TestGateway;
let output: string;
beforeAll(async () => {
  gateway = await startTestGateway({ env: { FREE_RATE_LIMIT: '0' } });
  output = mkdtempSync(join(tmpdir(), 'mcp-conformance-'));
});
afterAll(async () => {
  await gateway?.close();
  rmSync(output, { recursive: true, force: true });
});

it('passes the active server suite but for the scenarios that do not apply', async () => {
  const args = ['server', '--url', `${gateway.origin}/mcp`, '--expected-failures', BASELINE, '-o', output];
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => (text += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  expect(code, text).toBe(0);
  expect(text).toMatch(/Baseline check passed/);

  for (const scenario of MUST_PASS) {
    const dir = readdirSync(output).find((name) => name.startsWith(`server-${scenario}-`));
    expect(dir, `${scenario} ran`).toBeDefined();
    const checks = JSON.parse(readFileSync(join(output, dir as string, 'checks.json'), 'utf8')) as Array<{
      id: string;
      status: string;
    }>;
    expect(checks.length, scenario).toBeGreaterThan(0);
    expect(
      checks.filter((check) => check.status !== 'SUCCESS' && check.status !== 'INFO'),
      scenario,
    ).toEqual([]);
  }
});
