/**
 * One measured round of a bench: the process's CPU (user and system) and the bytes allocated on the
 * V8 heap while `drive` runs, with the GC's pauses. Bytes: what each collection found in use minus
 * what the one before left (or the round's start), plus what the end holds beyond the last
 * collection. request-path.ts, upstream-layers.ts and mcp-sdk-floor.ts count alike through it.
 */
import { GCProfiler } from 'node:v8';

export interface MeasuredRound {
  /** CPU µs, user and system. */
  cpuUs: number;
  /** Of which system µs. */
  systemUs: number;
  /** Bytes allocated on the V8 heap. */
  bytes: number;
  /** Collections during the round, and their pauses in µs all told. */
  collections: number;
  pauseUs: number;
}

export async function measuredRound(drive: () => Promise<void>): Promise<MeasuredRound> {
  const profiler = new GCProfiler();
  profiler.start();
  const heapBefore = process.memoryUsage().heapUsed;
  const before = process.cpuUsage();
  await drive();
  const used = process.cpuUsage(before);
  const heapAfter = process.memoryUsage().heapUsed;
  const { statistics } = profiler.stop();
  let bytes = 0;
  let last = heapBefore;
  let pauseUs = 0;
  for (const gc of statistics) {
    bytes += gc.beforeGC.heapStatistics.usedHeapSize - last;
    last = gc.afterGC.heapStatistics.usedHeapSize;
    pauseUs += gc.cost;
  }
  bytes += heapAfter - last;
  return {
    cpuUs: used.user + used.system,
    systemUs: used.system,
    bytes,
    collections: statistics.length,
    pauseUs,
  };
}
