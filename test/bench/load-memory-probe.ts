/**
 * Preloaded into the gateway by test/bench/load.ts (`--expose-gc --import ./test/bench/load-memory-probe.ts`):
 * on SIGUSR2, a full garbage collection, then one JSON line on stdout with the process's memory.
 *
 * Why: without a forced collection, RSS between rounds mostly shows how lazily V8 collects, not
 * whether anything is retained; after one, growth across rounds means memory that is really held.
 */
process.on('SIGUSR2', () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const m = process.memoryUsage();
  const mb = (n: number) => Math.round((n / 1024 / 1024) * 10) / 10;
  process.stdout.write(
    `${JSON.stringify({ memoryProbe: { gc: gc !== undefined, rssMb: mb(m.rss), heapUsedMb: mb(m.heapUsed), externalMb: mb(m.external), arrayBuffersMb: mb(m.arrayBuffers) } })}\n`,
  );
});
