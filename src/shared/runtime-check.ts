/**
 * Imported first by both CLIs (src/main.ts, src/services/main.ts), so it runs before any other module:
 * the project runs on Node 24 LTS and supports 22.15+ (docs/operations.md, Runtime). `npm start` runs
 * on node_modules/.bin/node (24); `node dist/main.js` runs on whatever `node` is first on PATH, which
 * on many machines is an older system Node. On one past end of life, or older than the dependencies
 * support, the start stops here with one line saying what to run instead, not later with an obscure
 * error from a dependency.
 */

/** The oldest supported release: [major, minor]. */
export const OLDEST_SUPPORTED_NODE: readonly [number, number] = [22, 15];

/** Whether `version` (`process.versions.node`) is supported. */
export function supportedNode(version: string): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const [oldestMajor, oldestMinor] = OLDEST_SUPPORTED_NODE;
  return major > oldestMajor || (major === oldestMajor && minor >= oldestMinor);
}

if (!supportedNode(process.versions.node)) {
  process.stderr.write(
    `This runs on Node 24 LTS (22.15 or later supported), not Node ${process.versions.node}. ` +
      'Use `npm start`, or node_modules/.bin/node (installed by npm ci) instead of the system node.\n',
  );
  process.exit(1);
}
