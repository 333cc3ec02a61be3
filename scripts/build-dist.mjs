/**
 * `node scripts/build-dist.mjs [outDir]`: the gateway and services compiled into `outDir` (default
 * dist), with the files tsc does not emit copied beside the JavaScript that reads them: the Lua
 * scripts of src/ (every `.lua` file: src/gateway/shared-state's, read by lua-scripts.ts). `npm run build`, the
 * benchmarks' builds and a build for `npm run bench:ab` all go through it, so none lacks a script.
 *
 * Plain JavaScript on Node's built-ins: it runs before anything is compiled.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const outDir = process.argv[2] ?? 'dist';
const tsc = join(root, 'node_modules/typescript/bin/tsc');
const run = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', outDir], {
  cwd: root,
  stdio: 'inherit',
});
// tsc emits despite type errors elsewhere; its status is passed on after the copy.
for (const file of readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' })) {
  if (!file.endsWith('.lua')) continue;
  const to = join(root, outDir, file);
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(join(root, 'src', file), to);
}
process.exit(run.status ?? 1);
