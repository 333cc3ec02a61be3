/**
 * Watching a gateway process's memory, for the memory row of `npm run bench` and for `npm run
 * bench:soak`: its RSS as a platform sees it (from /proc, sampled through a load, never disturbing
 * it), and on request what is really held (a full GC in the process, then its heap).
 */
import type { ChildServer } from './bench-processes.js';

/**
 * Preloaded into the gateway (with --expose-gc): on SIGUSR2, a full garbage collection, then one JSON
 * line on stderr with the process's memory. The same as test/bench/load-memory-probe.ts (which
 * test:load preloads under tsx), as plain JavaScript for the compiled gateway, on stderr because the
 * benchmarks do not read the gateway's stdout (its log lines).
 */
export const MEMORY_PROBE = `data:text/javascript,${encodeURIComponent(
  'import { getHeapSpaceStatistics } from "node:v8"; ' +
    'let n = 0; process.on("SIGUSR2", () => { globalThis.gc?.(); const m = process.memoryUsage(); ' +
    'const young = getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0; ' +
    'process.stderr.write(JSON.stringify({ memoryProbe: { n: ++n, rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, young } }) + "\\n"); });',
)}`;

/**
 * The environment of a gateway whose memory is measured: production, cache off (its answers would be
 * memory the gateway chose to keep), the fixed upstream at `upstreamUrl` for both services.
 */
export const memoryGatewayEnv = (upstreamUrl: string): Record<string, string> => ({
  NODE_ENV: 'production',
  HOST: '127.0.0.1',
  NULL_BASE_URL: upstreamUrl,
  PI_BASE_URL: upstreamUrl,
  LOG_LEVEL: 'info',
  RESPONSE_CACHE: 'false',
});

/** The node arguments that load MEMORY_PROBE. */
export const MEMORY_PROBE_ARGS = ['--expose-gc', '--import', MEMORY_PROBE];

/** What MEMORY_PROBE reports, in bytes, right after its full GC. */
export interface MemoryProbe {
  n: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** V8's young generation (`new_space`) as committed. */
  young: number;
}

export const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

/** Full GC in the gateway (MEMORY_PROBE), then its memory: the `count`-th probe of that process. */
export async function probeMemory(gateway: ChildServer, count: number): Promise<MemoryProbe> {
  gateway.child.kill('SIGUSR2');
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const lines = gateway.stderr().split('\n');
    for (const line of lines) {
      if (!line.startsWith('{"memoryProbe"')) continue;
      const probe = (JSON.parse(line) as { memoryProbe: MemoryProbe }).memoryProbe;
      if (probe.n === count) return probe;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the gateway did not answer memory probe ${count}: ${gateway.stderr()}`);
}

export interface RssWatch {
  /** The highest RSS seen since the watch began (bytes). */
  peak(): number;
  /** Every sample, as [ms since the watch began, bytes]. */
  samples(): Array<[number, number]>;
  stop(): Promise<void>;
}

/**
 * Samples the process's RSS every `everyMs` (from /proc: nothing runs in the process), so that a
 * peak between two figures is seen.
 */
export function watchRss(gateway: ChildServer, everyMs = 250): RssWatch {
  const began = Date.now();
  const samples: Array<[number, number]> = [];
  let max = 0;
  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = gateway
      .rss()
      .then((rss) => {
        if (!Number.isFinite(rss)) return;
        samples.push([Date.now() - began, rss]);
        if (rss > max) max = rss;
      })
      .catch(() => {});
  }, everyMs);
  return {
    peak: () => max,
    samples: () => samples,
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
