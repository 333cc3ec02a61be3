/**
 * A trace of the event loop's stalls during a benchmark, and what filled each one: `npm run bench:path
 * -- --stalls [--stall-ms 2] [--cpu-profile]` (request-path.ts) starts it for the measured rounds.
 *
 * Why not only perf_hooks' `monitorEventLoopDelay`: its histogram says how long the loop stalls, not
 * why. Here a 1 ms interval ticker notes every gap between two of its ticks that exceeds its period by
 * `thresholdMs` (a stall: one turn of the loop that ran that long without reaching the timers), and
 * each stall is lined up with what ran inside it:
 * - garbage collections (PerformanceObserver 'gc' entries: kind, start, duration);
 * - timer and immediate callbacks (setTimeout, setInterval, setImmediate are wrapped while the trace
 *   runs: each callback's run time, named by the file that scheduled it: the deadline sweep, the log
 *   sink's flush, undici's timers, the harness);
 * - the log sink's writes (fs.write: how many, how many bytes);
 * - with `profile`, V8's sampling CPU profiler (node:inspector): every sample inside a stall is
 *   counted by the module that ran it (the innermost frame outside Node's internals), GC and V8's own
 *   work as V8 names them;
 * - with `request()`, the latency of every request: the slowest 1 % are lined up with the stalls they
 *   waited through (what share of the p99 tail each cause explains).
 *
 * Everything here is measurement: the wrapping of timers costs a little per callback (two clock reads
 * and an Error object for its name, formatted only for callbacks that ran long), so read CPU figures
 * from runs without it.
 */

import { Session } from 'node:inspector/promises';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import {
  type PerformanceEntry,
  PerformanceObserver,
  constants as perfConstants,
  performance,
} from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const fs = require('node:fs') as typeof import('node:fs');

export interface StallTraceOptions {
  /** A gap between two ticks longer than the tick period by this much is a stall, in ms. @default 2 */
  thresholdMs?: number;
  /** Sample the CPU (V8's profiler) to say what ran inside each stall. @default false */
  profile?: boolean;
  /** The profiler's sampling interval, in µs. @default 250 */
  sampleIntervalUs?: number;
  /** With `profile`: also list the functions that ran most in modules whose name contains this. */
  detail?: string;
}

interface Stall {
  start: number;
  end: number;
  /** Of its time, how much the main thread was not running (descheduled: the machine's other work), ms. */
  offCpu: number;
}

const OFF_CPU = 'main thread off CPU (descheduled)';

interface Span {
  start: number;
  duration: number;
  label: string;
}

interface Sample {
  time: number;
  label: string;
  /** The function that ran (the leaf frame). */
  leaf: string;
  /** Whether a logging frame (pino, the log sinks, the operation report's log line) is on the stack. */
  logging: boolean;
}

export interface StallTrace {
  /** Starts recording (the ticker, the GC observer, the profiler); the hooks were installed before. */
  begin(): Promise<void>;
  /** One request of the benchmark, from when it was handed over to when its answer was complete (performance.now ms). */
  request(start: number, end: number): void;
  /** Stops tracing and puts the timers back; the report as text. */
  stop(): Promise<string>;
}

const TICK_MS = 1;
const GC_KINDS: Record<number, string> = {
  [perfConstants.NODE_PERFORMANCE_GC_MINOR]: 'GC scavenge',
  [perfConstants.NODE_PERFORMANCE_GC_MAJOR]: 'GC mark-compact',
  [perfConstants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'GC incremental marking',
  [perfConstants.NODE_PERFORMANCE_GC_WEAKCB]: 'GC weak callbacks',
};

/**
 * The file of the first frame outside Node's internals and this file where a callback was scheduled:
 * V8's call sites, read directly (formatting a stack, through tsx's source maps, cost more than most
 * callbacks it would name).
 */
function scheduledAt(): string {
  const previous = { limit: Error.stackTraceLimit, prepare: Error.prepareStackTrace };
  Error.stackTraceLimit = 8;
  Error.prepareStackTrace = (_error, sites) => sites;
  const holder: { stack?: unknown } = {};
  Error.captureStackTrace(holder, scheduledAt);
  const sites = holder.stack as NodeJS.CallSite[];
  Error.stackTraceLimit = previous.limit;
  Error.prepareStackTrace = previous.prepare;
  for (const site of sites) {
    const file = site.getFileName() ?? '';
    if (file === '' || file.startsWith('node:') || file.includes('loop-stalls')) continue;
    return shortPath(file);
  }
  return 'node internals';
}

/** A module's name as the report shows it: the package, or the gateway's file under dist. */
function shortPath(url: string): string {
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('/node_modules/');
  if (modules !== -1) {
    const rest = path.slice(modules + '/node_modules/'.length).split('/');
    return (rest[0] as string).startsWith('@') ? `${rest[0]}/${rest[1]}` : (rest[0] as string);
  }
  const dist = /\/(?:dist|[a-z]+-dist|src)\/(.*)$/.exec(path);
  if (dist !== null) return `gateway ${dist[1]}`;
  const bench = /\/test\/bench\/(.*)$/.exec(path);
  if (bench !== null) return `harness ${bench[1]}`;
  return path;
}

const LOGGING = /node_modules\/pino\/|shared\/log-sinks|shared\/logger|observability\/operation-report/;

/**
 * Wraps the timers and fs.write at once, so that timers scheduled before the measured part (an
 * interval made during a warm-up, as the deadline sweep's) are timed too; `begin()` starts recording.
 */
export function prepareStallTrace(options: StallTraceOptions = {}): StallTrace {
  let recording = false;
  const threshold = options.thresholdMs ?? 2;
  const stalls: Stall[] = [];
  const gcs: Span[] = [];
  const callbacks: Span[] = [];
  const callbackTotals = new Map<string, { count: number; ms: number }>();
  const writes: Array<{ time: number; bytes: number; ms: number }> = [];
  const requests: Array<{ start: number; end: number }> = [];
  let began = 0;

  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries() as Array<PerformanceEntry & { detail?: { kind?: number } }>)
      gcs.push({
        start: entry.startTime,
        duration: entry.duration,
        label: GC_KINDS[entry.detail?.kind ?? 0] ?? 'GC other',
      });
  });

  // The main thread's own CPU time at each tick: time it did not spend running was the machine's. getrusage's
  // thread time lags by up to a scheduler tick (~4 ms), so one stall's figure is rough; sums are not.
  const threadCpuMs = () => {
    const { user, system } = process.threadCpuUsage();
    return (user + system) / 1000;
  };

  // Timer and immediate callbacks, timed (wall and main-thread CPU), named by where they were scheduled.
  const original = {
    setTimeout: globalThis.setTimeout,
    setInterval: globalThis.setInterval,
    setImmediate: globalThis.setImmediate,
    write: fs.write,
  };
  const timed = <A extends unknown[]>(kind: string, callback: (...args: A) => void) => {
    const label = labelOf(kind, callback);
    return function (this: unknown, ...args: A) {
      if (!recording) return callback.apply(this, args);
      const start = performance.now();
      try {
        callback.apply(this, args);
      } finally {
        const duration = performance.now() - start;
        const total = callbackTotals.get(label);
        if (total === undefined) callbackTotals.set(label, { count: 1, ms: duration });
        else {
          total.count++;
          total.ms += duration;
        }
        if (duration >= 0.05) callbacks.push({ start, duration, label });
      }
    };
  };
  // Found once per function, or per function text (a closure made anew for each call has the same).
  const labels = new WeakMap<object, string>();
  const labelsByText = new Map<string, string>();
  const labelOf = (kind: string, callback: object) => {
    let label = labels.get(callback);
    if (label !== undefined) return label;
    const text = `${kind} ${String(callback)}`;
    label = labelsByText.get(text);
    if (label === undefined) {
      label = `${kind} ${scheduledAt()}`;
      labelsByText.set(text, label);
    }
    labels.set(callback, label);
    return label;
  };
  type Callback = (...args: unknown[]) => void;
  const wrap = (kind: string, schedule: (callback: Callback, ...rest: unknown[]) => unknown) =>
    Object.assign(
      (callback: unknown, ...rest: unknown[]) =>
        typeof callback === 'function'
          ? schedule(timed(kind, callback as Callback), ...rest)
          : schedule(callback as Callback, ...rest),
      schedule,
    );
  globalThis.setTimeout = wrap('setTimeout', original.setTimeout as never) as unknown as typeof setTimeout;
  globalThis.setInterval = wrap(
    'setInterval',
    original.setInterval as never,
  ) as unknown as typeof setInterval;
  globalThis.setImmediate = wrap(
    'setImmediate',
    original.setImmediate as never,
  ) as unknown as typeof setImmediate;
  // The fd log sink writes with fs.write (its import binding follows the CommonJS module once synced).
  fs.write = ((fd: number, buffer: unknown, ...rest: unknown[]) => {
    const call = () => (original.write as (...args: unknown[]) => void)(fd, buffer, ...rest);
    if (!recording) return call();
    const time = performance.now();
    call();
    writes.push({
      time,
      bytes: (buffer as { length: number }).length,
      ms: performance.now() - time,
    });
  }) as typeof fs.write;
  syncBuiltinESMExports();

  let session: Session | undefined;
  let hrtimeOffsetMs = 0;
  let ticker: NodeJS.Timeout | undefined;

  return {
    async begin() {
      observer.observe({ entryTypes: ['gc'] });
      if (options.profile === true) {
        session = new Session();
        session.connect();
        await session.post('Profiler.enable');
        await session.post('Profiler.setSamplingInterval', { interval: options.sampleIntervalUs ?? 250 });
        await session.post('Profiler.start');
      }
      // The profiler's timestamps are µs of the monotonic clock, as process.hrtime; performance.now()
      // is ms since the process' time origin on the same clock.
      hrtimeOffsetMs = Number(process.hrtime.bigint()) / 1e6 - performance.now();
      let last = performance.now();
      let lastCpu = threadCpuMs();
      ticker = original.setInterval(() => {
        const now = performance.now();
        const cpu = threadCpuMs();
        if (now - last - TICK_MS >= threshold)
          stalls.push({ start: last, end: now, offCpu: Math.max(0, now - last - TICK_MS - (cpu - lastCpu)) });
        last = now;
        lastCpu = cpu;
      }, TICK_MS);
      began = performance.now();
      recording = true;
    },
    request(start, end) {
      requests.push({ start, end });
    },
    async stop() {
      recording = false;
      clearInterval(ticker);
      const ended = performance.now();
      let samples: Sample[] = [];
      if (session !== undefined) {
        const { profile } = (await session.post('Profiler.stop')) as { profile: Profile };
        session.disconnect();
        samples = samplesOf(profile, hrtimeOffsetMs);
      }
      observer.disconnect();
      globalThis.setTimeout = original.setTimeout;
      globalThis.setInterval = original.setInterval;
      globalThis.setImmediate = original.setImmediate;
      fs.write = original.write;
      syncBuiltinESMExports();
      return report({
        seconds: (ended - began) / 1000,
        threshold,
        stalls,
        gcs,
        callbacks,
        callbackTotals,
        writes,
        requests,
        samples,
        detail: options.detail,
      });
    },
  };
}

type Profile = {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }>;
  startTime: number;
  samples: number[];
  timeDeltas: number[];
};

/** Each sample's time (performance.now ms) and what it ran, named by module. */
function samplesOf(profile: Profile, hrtimeOffsetMs: number): Sample[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const labelOf = new Map<number, { label: string; logging: boolean; leaf: string }>();
  const classify = (id: number) => {
    let known = labelOf.get(id);
    if (known !== undefined) return known;
    const leaf = byId.get(id);
    const name = leaf?.callFrame.functionName ?? '';
    let label: string | undefined;
    if (name === '(garbage collector)') label = 'GC (profiler)';
    else if (name === '(idle)') label = 'idle';
    else if (name === '(program)') label = 'V8/native (program)';
    let logging = false;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const url = byId.get(at)?.callFrame.url ?? '';
      if (LOGGING.test(url)) logging = true;
      // This file's wrappers pass through: what they wrap is named.
      if (label === undefined && url !== '' && !url.startsWith('node:') && !url.includes('loop-stalls'))
        label = shortPath(url);
    }
    known = {
      label: label ?? `node internals (${name || 'anonymous'})`,
      logging,
      leaf: `${name || '(anonymous)'} ${shortPath(leaf?.callFrame.url ?? '')}:${(leaf?.callFrame.lineNumber ?? -1) + 1}`,
    };
    labelOf.set(id, known);
    return known;
  };
  const samples: Sample[] = [];
  let time = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    time += profile.timeDeltas[i] as number;
    samples.push({ time: time / 1000 - hrtimeOffsetMs, ...classify(profile.samples[i] as number) });
  }
  return samples;
}

interface Collected {
  seconds: number;
  threshold: number;
  stalls: Stall[];
  gcs: Span[];
  callbacks: Span[];
  callbackTotals: Map<string, { count: number; ms: number }>;
  writes: Array<{ time: number; bytes: number; ms: number }>;
  requests: Array<{ start: number; end: number }>;
  samples: Sample[];
  detail: string | undefined;
}

const overlap = (a: number, b: number, c: number, d: number) => Math.max(0, Math.min(b, d) - Math.max(a, c));
const quantile = (sorted: number[], q: number) =>
  sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number);
const ms = (n: number) => n.toFixed(2);

/** Time of each cause (GC kinds, callback sites) inside [start, end), in ms. */
function causesIn(start: number, end: number, data: Collected): Map<string, number> {
  const causes = new Map<string, number>();
  const add = (label: string, t: number) => {
    if (t > 0) causes.set(label, (causes.get(label) ?? 0) + t);
  };
  for (const gc of data.gcs) add(gc.label, overlap(start, end, gc.start, gc.start + gc.duration));
  for (const cb of data.callbacks) add(cb.label, overlap(start, end, cb.start, cb.start + cb.duration));
  for (const stall of data.stalls)
    add(OFF_CPU, (stall.offCpu * overlap(start, end, stall.start, stall.end)) / (stall.end - stall.start));
  return causes;
}

function report(data: Collected): string {
  const out: string[] = [];
  const { stalls, seconds } = data;
  const lengths = stalls.map((s) => s.end - s.start - TICK_MS).sort((a, b) => a - b);
  const stalledMs = lengths.reduce((a, b) => a + b, 0);
  const offCpuMs = stalls.reduce((a, s) => a + s.offCpu, 0);
  out.push(
    `stalls ≥ ${data.threshold} ms: ${stalls.length} in ${seconds.toFixed(1)} s (${(stalls.length / seconds).toFixed(1)}/s), ` +
      `${((stalledMs / 1000 / seconds) * 100).toFixed(1)} % of the time; length p50 ${ms(quantile(lengths, 0.5))} ms, ` +
      `p90 ${ms(quantile(lengths, 0.9))}, p99 ${ms(quantile(lengths, 0.99))}, max ${ms(lengths.at(-1) ?? 0)}; ` +
      `the main thread was off CPU for ${((offCpuMs / Math.max(stalledMs, 1e-9)) * 100).toFixed(0)} % of the stalled time`,
  );
  const buckets = [2, 3, 4, 6, 8, 12, 16, 24, Number.POSITIVE_INFINITY];
  const counts = buckets.map(() => 0);
  for (const length of lengths) counts[buckets.findIndex((b) => length < b)]!++;
  out.push(
    `  length histogram: ${buckets
      .slice(0, -1)
      .map((b, i) => `<${b} ms ${counts[i]}`)
      .join(', ')}, ≥${buckets.at(-2)} ms ${counts.at(-1)}`,
  );

  // GC and callbacks over the whole run, and inside stalls.
  const gcTotals = new Map<string, { count: number; ms: number; max: number; inStall: number }>();
  for (const gc of data.gcs) {
    const t = gcTotals.get(gc.label) ?? { count: 0, ms: 0, max: 0, inStall: 0 };
    t.count++;
    t.ms += gc.duration;
    t.max = Math.max(t.max, gc.duration);
    if (stalls.some((s) => overlap(s.start, s.end, gc.start, gc.start + gc.duration) > 0)) t.inStall++;
    gcTotals.set(gc.label, t);
  }
  out.push('garbage collections (main-thread pause):');
  for (const [label, t] of gcTotals)
    out.push(
      `  ${label}: ${t.count} (${(t.count / seconds).toFixed(1)}/s), mean ${ms(t.ms / t.count)} ms, max ${ms(t.max)}, ` +
        `${t.inStall} inside a stall`,
    );
  const bytes = data.writes.reduce((a, w) => a + w.bytes, 0);
  out.push(
    `log sink writes (fs.write): ${data.writes.length} (${(data.writes.length / seconds).toFixed(0)}/s), ` +
      `mean ${(bytes / Math.max(1, data.writes.length) / 1024).toFixed(1)} KB; the call itself (handing the write to the thread pool): ` +
      `mean ${((data.writes.reduce((a, w) => a + w.ms, 0) / Math.max(1, data.writes.length)) * 1000).toFixed(1)} µs wall`,
  );
  out.push('timer/immediate callbacks by site (count, total ms, mean µs, wall time), the 8 costliest:');
  // A collection that falls inside a callback is counted in its time: shown apart.
  const gcInside = new Map<string, number>();
  for (const cb of data.callbacks)
    for (const gc of data.gcs) {
      const o = overlap(cb.start, cb.start + cb.duration, gc.start, gc.start + gc.duration);
      if (o > 0) gcInside.set(cb.label, (gcInside.get(cb.label) ?? 0) + o);
    }
  for (const [label, t] of [...data.callbackTotals].sort((a, b) => b[1].ms - a[1].ms).slice(0, 8))
    out.push(
      `  ${label}: ${t.count}, ${ms(t.ms)} ms, ${((t.ms / t.count) * 1000).toFixed(1)} µs;` +
        `GC pauses inside ${ms(gcInside.get(label) ?? 0)} ms`,
    );

  // Each stall named by its largest known cause (≥ a third of it), else "request work".
  const byCause = new Map<string, { count: number; ms: number; explained: number }>();
  for (const stall of stalls) {
    const causes = causesIn(stall.start, stall.end, data);
    const length = stall.end - stall.start;
    let top = 'request work (I/O callbacks, promise jobs)';
    let topMs = 0;
    for (const [label, t] of causes)
      if (t > topMs && t >= length / 3) {
        top = label;
        topMs = t;
      }
    const entry = byCause.get(top) ?? { count: 0, ms: 0, explained: 0 };
    entry.count++;
    entry.ms += length;
    entry.explained += topMs;
    byCause.set(top, entry);
  }
  out.push('stalls by main cause (≥ 1/3 of the stall), per second, mean length, share of stalled time:');
  for (const [label, t] of [...byCause].sort((a, b) => b[1].ms - a[1].ms))
    out.push(
      `  ${label}: ${(t.count / seconds).toFixed(1)}/s, mean ${ms(t.ms / t.count)} ms, ${((t.ms / Math.max(stalledMs, 1e-9)) * 100).toFixed(0)} %`,
    );

  if (data.samples.length > 0) {
    const inStall = new Map<string, number>();
    const overall = new Map<string, number>();
    let stallSamples = 0;
    let loggingInStall = 0;
    let loggingAll = 0;
    let s = 0;
    const sortedStalls = [...stalls].sort((a, b) => a.start - b.start);
    for (const sample of data.samples) {
      overall.set(sample.label, (overall.get(sample.label) ?? 0) + 1);
      if (sample.logging) loggingAll++;
      while (s < sortedStalls.length && (sortedStalls[s] as Stall).end < sample.time) s++;
      const stall = sortedStalls[s];
      if (stall !== undefined && stall.start <= sample.time && sample.time <= stall.end) {
        stallSamples++;
        inStall.set(sample.label, (inStall.get(sample.label) ?? 0) + 1);
        if (sample.logging) loggingInStall++;
      }
    }
    out.push(
      `CPU samples: ${data.samples.length}, ${stallSamples} inside stalls; by module (innermost non-internal frame), inside stalls / overall:`,
    );
    const total = data.samples.length;
    for (const [label, n] of [...inStall].sort((a, b) => b[1] - a[1]).slice(0, 14))
      out.push(
        `  ${label}: ${((n / Math.max(stallSamples, 1)) * 100).toFixed(1)} % / ${(((overall.get(label) ?? 0) / total) * 100).toFixed(1)} %`,
      );
    if (data.detail !== undefined) {
      const detail = data.detail;
      const leaves = new Map<string, number>();
      for (const sample of data.samples)
        if (sample.label.includes(detail)) leaves.set(sample.leaf, (leaves.get(sample.leaf) ?? 0) + 1);
      out.push(`  functions run most in modules named *${detail}* (share of all samples):`);
      for (const [leaf, n] of [...leaves].sort((a, b) => b[1] - a[1]).slice(0, 12))
        out.push(`    ${leaf}: ${((n / total) * 100).toFixed(2)} %`);
    }
    out.push(
      `  logging on the stack (pino, the sinks, the operation report): ${((loggingInStall / Math.max(stallSamples, 1)) * 100).toFixed(1)} % / ${((loggingAll / total) * 100).toFixed(1)} %`,
    );
  }

  if (data.requests.length > 0) {
    const latencies = data.requests.map((r) => r.end - r.start).sort((a, b) => a - b);
    const p50 = quantile(latencies, 0.5);
    const p99 = quantile(latencies, 0.99);
    out.push(
      `requests: ${data.requests.length}, latency p50 ${ms(p50)} ms, p90 ${ms(quantile(latencies, 0.9))}, p99 ${ms(p99)}, max ${ms(latencies.at(-1) ?? 0)}`,
    );
    // The slowest 1 %: what their time beyond the median was spent waiting through.
    const tail = data.requests.filter((r) => r.end - r.start >= p99);
    const waited = new Map<string, number>();
    let excess = 0;
    let stalledWithin = 0;
    for (const r of tail) {
      excess += r.end - r.start - p50;
      for (const stall of stalls) {
        const o = overlap(r.start, r.end, stall.start, stall.end);
        if (o === 0) continue;
        stalledWithin += o;
      }
      for (const [label, t] of causesIn(r.start, r.end, data))
        waited.set(label, (waited.get(label) ?? 0) + t);
    }
    out.push(
      `the p99 tail (${tail.length} requests ≥ ${ms(p99)} ms): mean excess over p50 ${ms(excess / tail.length)} ms; ` +
        `mean time inside stalls ${ms(stalledWithin / tail.length)} ms; waited through, mean per tail request (share of the excess; causes overlap: a callback or a GC can be descheduled too):`,
    );
    for (const [label, t] of [...waited].sort((a, b) => b[1] - a[1]).slice(0, 8))
      out.push(
        `  ${label}: ${ms(t / tail.length)} ms (${((t / Math.max(excess, 1e-9)) * 100).toFixed(0)} %)`,
      );
  }
  return `${out.join('\n')}\n`;
}
