/**
 * `npm run test:oldest [-- vitest arguments]`: the test suite on the oldest supported Node line
 * (22.15+), which CI runs after `npm test` (on Node 24). The typecheck, lint and codegen steps do not
 * depend on the runtime and are not repeated.
 *
 * The Node 22 binary comes from the npm registry, as Node 24 does (the official `node-<os>-<arch>`
 * packages), into node_modules/.cache/node-oldest, once; it is not a dependency of the project because
 * it would claim the same `node` bin as Node 24. Every process of the run (vitest's workers, the
 * gateway processes the tests spawn through `process.execPath`) then runs on it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The newest 22.x release in the registry: the oldest supported line, as users would run it. */
const VERSION = '22.23.3';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const platform = process.platform === 'win32' ? 'win' : process.platform;
const pkg = `node-${platform}-${process.arch}`;
const prefix = join(root, 'node_modules', '.cache', 'node-oldest');
const binary = join(prefix, 'node_modules', pkg, 'bin', process.platform === 'win32' ? 'node.exe' : 'node');

const version = () => spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout?.trim();
if (version() !== `v${VERSION}`) {
  process.stdout.write(`test:oldest: installing ${pkg}@${VERSION} from the npm registry\n`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const install = spawnSync(
    npm,
    [
      'install',
      '--prefix',
      prefix,
      '--no-save',
      '--no-package-lock',
      '--no-audit',
      '--no-fund',
      `${pkg}@${VERSION}`,
    ],
    { stdio: 'inherit', shell: process.platform === 'win32' },
  );
  if (install.status !== 0 || !existsSync(binary) || version() !== `v${VERSION}`) {
    process.stderr.write(
      `test:oldest: could not install ${pkg}@${VERSION} (is there one for this platform?)\n`,
    );
    process.exit(1);
  }
}

// The container test builds an image that runs on its base's Node 24 whatever runs vitest: on this
// line it would only build and run the same image again (minutes of CI for nothing new).
const EXCLUDED = 'test/container/**';
process.stdout.write(
  `test:oldest: the suite on Node ${version()}, without ${EXCLUDED} (the image runs its base's Node 24)\n`,
);
const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');
const run = spawnSync(binary, [vitest, 'run', '--exclude', EXCLUDED, ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
  // Anything that runs `node` by name finds this one first.
  env: {
    ...process.env,
    PATH: `${dirname(binary)}${process.platform === 'win32' ? ';' : ':'}${process.env.PATH}`,
  },
});
process.exit(run.status ?? 1);
