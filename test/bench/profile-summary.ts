/**
 * Summarizes a V8 `.cpuprofile` (from `node --cpu-prof`, e.g. `npm run bench -- --cpu-prof`): where
 * the process spent its samples, by package/source file and by function (self time), so the cost of
 * one request can be split into its parts.
 *
 *   npx tsx test/bench/profile-summary.ts bench-results/profiles/<file>.cpuprofile [--top 40] [--skip-ms 3000]
 *     [--layers <CPU µs per request of the row>]
 *
 * `--layers` splits the row's CPU per request (the bench's figure) by layer of the request path, in
 * µs: the per-layer measurements of docs/benchmarks/ (2026-11-25.md, The morning run).
 */
import { readFile } from 'node:fs/promises';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A readable owner of a script URL: a package, a project file, or node's internals. */
export function ownerOf(url: string): string {
  if (url === '') return '(native/vm)';
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`;
  const modules = url.lastIndexOf('/node_modules/');
  if (modules !== -1) {
    const rest = url.slice(modules + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  const src = url.indexOf('/src/');
  if (src !== -1) return url.slice(src + 1);
  const test = url.indexOf('/test/');
  if (test !== -1) return url.slice(test + 1);
  return url;
}

/**
 * Inclusive time of the frames whose function name (or `name owner`) matches one of `names`: the
 * samples with such a frame anywhere on their stack, counted once per sample (recursion-safe).
 */
export function inclusive(profile: Profile, names: string[], skipMs = 0): Map<string, number> {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const matches = (node: ProfileNode, name: string) => {
    const { functionName, url } = node.callFrame;
    return name.includes(' ')
      ? `${functionName} ${ownerOf(url)}`.startsWith(name)
      : functionName === name || ownerOf(url) === name;
  };
  const totals = new Map<string, number>(names.map((n) => [n, 0]));
  let elapsed = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = (profile.timeDeltas[i] ?? 0) / 1000;
    elapsed += delta;
    if (elapsed < skipMs) continue;
    const seen = new Set<string>();
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parent.get(id)) {
      const node = byId.get(id);
      if (node === undefined) break;
      for (const name of names) if (!seen.has(name) && matches(node, name)) seen.add(name);
    }
    for (const name of seen) totals.set(name, (totals.get(name) ?? 0) + delta);
  }
  return totals;
}

/** The layers of the request path, by where a function's code lives (first match wins). */
const LAYERS: Array<[string, (owner: string, functionName: string) => boolean]> = [
  [
    'socket and file writes (kernel)',
    (o, f) =>
      o === '(native/vm)' && /^(writeUtf8String|writeLatin1String|writev|writeBuffer|writeString)$/.test(f),
  ],
  ['garbage collection', (o) => o === '(gc)'],
  ['other native (JSON, V8, microtasks)', (o) => o === '(native/vm)'],
  ['node:http server and client streams', (o) => o.startsWith('node:')],
  ['undici (upstream HTTP client)', (o) => o === 'undici' || o.startsWith('wasm:')],
  [
    'GraphQL execution (graphql-js, graphql-jit, Yoga result)',
    (o) => /^(graphql|graphql-jit|graphql-yoga|@graphql-tools\/|@envelop\/)/.test(o),
  ],
  [
    'observability (log line, metrics, report)',
    (o) =>
      /^(pino|prom-client|quick-format-unescaped|tdigest|bintrees)$/.test(o) ||
      /\/(observability|shared\/log|shared\/logger)/.test(o),
  ],
  [
    'upstream chain (loaders, interceptors, transport, body checks)',
    (o) =>
      /^(dataloader|cockatiel|zod|lru-cache)$/.test(o) ||
      /\/(upstream|loaders\.js|shared-state)\//.test(o) ||
      /\/loaders\.js$/.test(o),
  ],
  ['schema resolvers', (o) => /\/schema\//.test(o)],
  ['fast path, server, operation, cost', (o) => /\/gateway\//.test(o)],
  ['other', () => true],
];

/** The busy time by layer (self time of each function, assigned to the first matching layer). */
export function layers(profile: Profile, skipMs = 0): Array<{ layer: string; share: number }> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>(LAYERS.map(([name]) => [name, 0]));
  let elapsed = 0;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = (profile.timeDeltas[i] ?? 0) / 1000;
    elapsed += delta;
    if (elapsed < skipMs) continue;
    const node = byId.get(profile.samples[i] as number);
    if (node === undefined || node.callFrame.functionName === '(idle)') continue;
    const { functionName, url } = node.callFrame;
    const owner = functionName === '(garbage collector)' ? '(gc)' : ownerOf(url);
    const layer = LAYERS.find(([, test]) => test(owner, functionName))?.[0] ?? 'other';
    totals.set(layer, (totals.get(layer) ?? 0) + delta);
    total += delta;
  }
  return [...totals].map(([layer, ms]) => ({ layer, share: total === 0 ? 0 : ms / total }));
}

export interface ProfileSummary {
  totalMs: number;
  /** Share of samples per owner (self time), highest first. */
  owners: Array<{ owner: string; ms: number; share: number }>;
  functions: Array<{ name: string; owner: string; ms: number; share: number }>;
}

/** `skipMs`: samples of the first milliseconds (start-up: module loading, compilation) are left out. */
export function summarize(profile: Profile, top = 40, skipMs = 0): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfMs = new Map<number, number>();
  let elapsed = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i] as number;
    const delta = (profile.timeDeltas[i] ?? 0) / 1000;
    elapsed += delta;
    if (elapsed < skipMs) continue;
    selfMs.set(id, (selfMs.get(id) ?? 0) + delta);
  }
  let total = 0;
  const owners = new Map<string, number>();
  const functions = new Map<string, { owner: string; ms: number }>();
  for (const [id, ms] of selfMs) {
    const node = byId.get(id);
    if (node === undefined) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') continue;
    total += ms;
    const owner = functionName === '(garbage collector)' ? '(gc)' : ownerOf(url);
    owners.set(owner, (owners.get(owner) ?? 0) + ms);
    const key = `${functionName || '(anonymous)'} ${owner}:${lineNumber + 1}`;
    const entry = functions.get(key) ?? { owner, ms: 0 };
    entry.ms += ms;
    functions.set(key, entry);
  }
  const share = (ms: number) => Math.round((ms / total) * 1000) / 10;
  return {
    totalMs: Math.round(total),
    owners: [...owners]
      .sort((a, b) => b[1] - a[1])
      .map(([owner, ms]) => ({ owner, ms: Math.round(ms), share: share(ms) })),
    functions: [...functions]
      .sort((a, b) => b[1].ms - a[1].ms)
      .slice(0, top)
      .map(([name, { owner, ms }]) => ({ name, owner, ms: Math.round(ms), share: share(ms) })),
  };
}

async function main(): Promise<void> {
  const file = process.argv[2];
  if (!file) throw new Error('usage: profile-summary.ts <file.cpuprofile> [--top n]');
  const topIndex = process.argv.indexOf('--top');
  const top = topIndex === -1 ? 40 : Number(process.argv[topIndex + 1]);
  const skipIndex = process.argv.indexOf('--skip-ms');
  const skipMs = skipIndex === -1 ? 0 : Number(process.argv[skipIndex + 1]);
  const summary = summarize(JSON.parse(await readFile(file, 'utf8')) as Profile, top, skipMs);
  console.log(`busy (non-idle) samples: ${summary.totalMs} ms\n\nby owner (self time):`);
  for (const o of summary.owners.slice(0, 30))
    console.log(`  ${String(o.share).padStart(5)}%  ${String(o.ms).padStart(7)} ms  ${o.owner}`);
  console.log('\nby function (self time):');
  for (const f of summary.functions)
    console.log(`  ${String(f.share).padStart(5)}%  ${String(f.ms).padStart(7)} ms  ${f.name}`);
  const layersIndex = process.argv.indexOf('--layers');
  if (layersIndex !== -1) {
    const cpuUs = Number(process.argv[layersIndex + 1]);
    console.log(`\nby layer (of ${cpuUs} µs CPU per request):`);
    for (const { layer, share } of layers(JSON.parse(await readFile(file, 'utf8')) as Profile, skipMs))
      console.log(
        `  ${(share * cpuUs).toFixed(0).padStart(5)} µs  ${(share * 100).toFixed(1).padStart(5)}%  ${layer}`,
      );
  }
  const inclusiveIndex = process.argv.indexOf('--inclusive');
  if (inclusiveIndex !== -1) {
    const names = (process.argv[inclusiveIndex + 1] ?? '').split(',').filter(Boolean);
    const totals = inclusive(JSON.parse(await readFile(file, 'utf8')) as Profile, names, skipMs);
    console.log('\ninclusive (samples with the frame on the stack):');
    for (const [name, ms] of totals) {
      const share = Math.round((ms / summary.totalMs) * 1000) / 10;
      console.log(`  ${String(share).padStart(5)}%  ${String(Math.round(ms)).padStart(7)} ms  ${name}`);
    }
  }
}

if (process.argv[1]?.endsWith('profile-summary.ts')) await main();
