/**
 * `npm start` and `npm run services`: compile with tsc only when a source changed since the last
 * build, then run the compiled CLI in this same process (so signals, exit codes and the process
 * group are the CLI's own, with no wrapper in between).
 *
 *   node scripts/start.mjs gateway  [args]   the gateway (dist/main.js)
 *   node scripts/start.mjs services [args]   the reference services (dist/services/main.js)
 *   node scripts/start.mjs build             build if needed, run nothing
 *
 * Freshness is cheap: the build records when it started (dist/.build-stamp); the build is out of date
 * when any file or directory under src/ (a directory's time changes when a file is added, removed or
 * renamed) or a tsconfig is newer. When it is out of date, `--help` is answered from the sources
 * (tsx) without building, and the settings are checked from the sources before the build, so neither
 * waits for the compiler. One line on stderr says whether it built, and why.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const STAMP = join(root, 'dist', '.build-stamp');
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'tsconfig.browser.json'];
/** The build: the server (Node), then the browser code (the `*.browser.ts` files: GraphiQL's boot script). */
const PROJECTS = ['tsconfig.build.json', 'tsconfig.browser.json'];
const TARGETS = {
  gateway: { dist: 'dist/main.js', src: 'src/main.ts' },
  services: { dist: 'dist/services/main.js', src: 'src/services/main.ts' },
};

/** One line on stderr: standard output stays the CLI's (`--help`, JSON logs). */
const report = (text) => process.stderr.write(`start: ${text}\n`);

/** The newest modification time under `path` (files and directories), and where it was. */
function newest(path) {
  const stat = statSync(path);
  let best = { time: stat.mtimeMs, path };
  if (stat.isDirectory()) {
    for (const entry of readdirSync(path)) {
      const inner = newest(join(path, entry));
      if (inner.time > best.time) best = inner;
    }
  }
  return best;
}

/** Why a build is needed, or null when dist/ is up to date for `distEntry`. */
function staleReason(distEntry) {
  if (!existsSync(join(root, distEntry))) return `${distEntry} does not exist`;
  let builtAt;
  try {
    builtAt = JSON.parse(readFileSync(STAMP, 'utf8')).startedAt;
  } catch {
    return 'no record of the last build';
  }
  if (typeof builtAt !== 'number') return 'no record of the last build';
  for (const input of INPUTS) {
    const path = join(root, input);
    if (!existsSync(path)) continue;
    const found = newest(path);
    if (found.time > builtAt) return `${relative(root, found.path)} changed since the last build`;
  }
  return null;
}

function resolveDev(specifier, why) {
  try {
    return createRequire(import.meta.url).resolve(specifier);
  } catch {
    report(
      `${why} needs ${specifier.split('/')[0]}, a development dependency: run npm ci (without --omit=dev)`,
    );
    process.exit(1);
  }
}

/** Runs node with `args` in the repository, output shared; returns its exit status. */
function node(args) {
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

function build(reason) {
  report(`building dist/ with tsc (${reason})`);
  // The start, not the end: a source saved during the build is newer, and rebuilt next time.
  const startedAt = Date.now();
  const tsc = resolveDev('typescript/bin/tsc', 'building');
  for (const project of PROJECTS) {
    const status = node([tsc, '-p', project]);
    if (status !== 0) {
      report(`the build failed (${project})`);
      process.exit(status);
    }
  }
  writeFileSync(STAMP, `${JSON.stringify({ startedAt })}\n`);
  report(`built in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
}

const [what, ...args] = process.argv.slice(2);
if (what === 'build') {
  const reason = staleReason(TARGETS.gateway.dist);
  if (reason === null) report('dist/ is up to date: not building');
  else build(reason);
  process.exit(0);
}
const target = TARGETS[what];
if (target === undefined) {
  report(`usage: node scripts/start.mjs gateway|services|build [args] (got ${String(what)})`);
  process.exit(2);
}

const reason = staleReason(target.dist);
if (reason === null) {
  report('dist/ is up to date: not building');
} else if (args.includes('--help') || args.includes('-h')) {
  report(`dist/ is out of date (${reason}): answering --help from the sources, not building`);
  process.exit(node(['--import', 'tsx', target.src, ...args]));
} else {
  // A bad setting answers now, not after the compiler (and a failed start builds nothing).
  resolveDev('tsx', 'checking the settings before a build');
  const status = node(['--import', 'tsx', 'scripts/check-settings.ts', what]);
  if (status !== 0) process.exit(status);
  build(reason);
}

// The compiled CLI, in this process, seeing the arguments it would see when run directly.
const entry = join(root, target.dist);
process.argv = [process.argv[0], entry, ...args];
await import(pathToFileURL(entry).href);
