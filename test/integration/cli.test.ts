/**
 * The CLI as a user runs it: --help, a bad setting stopping the start with one clear line, and
 * `npm start` / `npm run services` building dist/ only when a source changed (scripts/start.mjs).
 * The build tests work on a copy of the project in a temporary folder: no test writes into the checkout.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bootScriptSource } from '../../src/gateway/plugins/graphiql-boot.js';

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
    expect(result.stdout).toMatch(/FEDERATION\s+default: false/);
  });

  it.each([
    ['PORT', 'eighty'],
    ['NULL_BASE_URL', 'nope'],
    ['UPSTREAM_TIMEOUT_MS', '0'],
    // A switch of the served schema takes only the two words (contract §14).
    ['FEDERATION', 'yes'],
  ])('a bad %s stops the start with one line on stderr and exit code 1', (name, value) => {
    const result = runCli([], { [name]: value });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(name);
    expect(result.stderr).not.toMatch(/\bat .+:\d+:\d+/); // no stack frames
  });
});

/**
 * What `npm start` needs of the project, copied into a temporary folder (its node_modules a link to
 * the checkout's): the sources, the scripts, package.json and the tsconfigs. No dist/ there yet.
 */
function copyProject(): string {
  const copy = mkdtempSync(join(tmpdir(), 'null-pi-cli-'));
  for (const entry of [
    'src',
    'scripts',
    'package.json',
    'tsconfig.json',
    'tsconfig.build.json',
    'tsconfig.browser.json',
  ])
    cpSync(join(root, entry), join(copy, entry), { recursive: true });
  symlinkSync(realpathSync(join(root, 'node_modules')), join(copy, 'node_modules'), 'dir');
  return copy;
}

/** What scripts/start.mjs reports on stderr when it runs tsc. */
const BUILDING = /^start: building dist\//m;

// These tests build dist/ (as `npm start` does) in a copy of the project; they run in this order.
describe('npm start builds only when a source changed', () => {
  let project = '';
  let stamp = '';
  beforeAll(() => {
    project = copyProject();
    stamp = join(project, 'dist', '.build-stamp');
  });
  afterAll(() => {
    if (project !== '') rmSync(project, { recursive: true, force: true });
  });

  /** `npm <args>` in the copy, npm's own banner and notices off. */
  function runNpm(args: string[], env: Record<string, string> = {}) {
    return spawnSync('npm', ['--silent', ...args], {
      cwd: project,
      env: { ...process.env, NODE_ENV: 'test', ...env },
      encoding: 'utf8',
      // A build on a busy machine takes tens of seconds.
      timeout: 120_000,
    });
  }

  it('with dist/ out of date, --help answers from the sources and builds nothing', () => {
    rmSync(stamp, { force: true }); // no record of a build: out of date, whatever dist/ holds
    const result = runNpm(['start', '--', '--help']);
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/PORT\s+default: 4000/);
    expect(result.stderr).toMatch(/^start: dist\/ is out of date .*answering --help from the sources/m);
    expect(result.stderr).not.toMatch(BUILDING);
    expect(existsSync(stamp)).toBe(false);
  });

  it('with dist/ out of date, a bad setting stops at once with one line, before any build', () => {
    rmSync(stamp, { force: true });
    const result = runNpm(['start'], { PORT: 'eighty' });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^invalid configuration: PORT="eighty"/m);
    expect(result.stderr).not.toMatch(BUILDING);
    expect(result.stderr).not.toMatch(/\bat .+:\d+:\d+/); // no stack frames
    expect(existsSync(stamp)).toBe(false);
  });

  it('builds when out of date; then `npm start -- --help` and `npm run services -- --help` run no tsc', async () => {
    rmSync(stamp, { force: true });
    const built = spawnSync(process.execPath, ['scripts/start.mjs', 'build'], {
      cwd: project,
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(built.status, built.stderr).toBe(0);
    expect(built.stderr).toMatch(BUILDING);
    expect(existsSync(stamp)).toBe(true);
    // The browser code is part of the build: GraphiQL's boot script, compiled beside its plugin, is
    // what the sources serve in development (there transpiled on the fly).
    const compiled = readFileSync(join(project, 'dist/gateway/plugins/graphiql-boot.browser.js'), 'utf8');
    expect(compiled).toBe(await bootScriptSource());

    const gateway = runNpm(['start', '--', '--help']);
    expect(gateway.status).toBe(0);
    expect(gateway.stdout).toMatch(/^Usage: npm start/m);
    expect(gateway.stderr).toMatch(/^start: dist\/ is up to date: not building$/m);
    expect(gateway.stderr).not.toMatch(BUILDING);

    const services = runNpm(['run', 'services', '--', '--help']);
    expect(services.status).toBe(0);
    expect(services.stdout).toMatch(/^Usage: npm run services/m);
    expect(services.stderr).toMatch(/^start: dist\/ is up to date: not building$/m);
    expect(services.stderr).not.toMatch(BUILDING);
  }, 180_000);
});
