import { defineConfig } from 'vitest/config';

export default defineConfig({
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
