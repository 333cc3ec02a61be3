import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql 16 has no "exports" map: Node loads its CommonJS main for every importer, while Vite
    // would give the project's own files its "module" build. Two copies of graphql-js break its
    // `instanceof` checks, so tests resolve it as Node does in production: one copy.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/bench/**', 'node_modules/**'],
    // Real servers on loopback: forks keep each file's sockets and workers isolated.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // These machines are shared and noisy: no timing assertions, but bounded waits everywhere.
    // In CI a JSON report too, from which .ci/run prints the plain 'N passed, N failed' closing line.
    reporters: process.env.CI ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-results/vitest.json' },
  },
});
