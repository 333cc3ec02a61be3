/** The CLI as a user runs it: --help, and a bad setting stopping the start with one clear line. */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

function runCli(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], {
    cwd: root,
    env: { ...process.env, NODE_ENV: 'test', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
}

describe('npm start CLI', () => {
  it('--help lists every setting with its default and exits 0 without starting anything', () => {
    const result = runCli(['--help']);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/PORT\s+default: 4000/);
    expect(result.stdout).toMatch(/NULL_BASE_URL/);
    expect(result.stdout).toMatch(/UPSTREAM_TIMEOUT_MS\s+default: 5000/);
  });

  it.each([
    ['PORT', 'eighty'],
    ['NULL_BASE_URL', 'nope'],
    ['UPSTREAM_TIMEOUT_MS', '0'],
  ])('a bad %s stops the start with one line on stderr and exit code 1', (name, value) => {
    const result = runCli([], { [name]: value });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(name);
    expect(result.stderr).not.toMatch(/\bat .+:\d+:\d+/); // no stack frames
  });
});
