/**
 * `npx tsx test/bench/mcp-first-request.ts [--replicas 4]`: how long the first `/mcp` requests of a
 * fresh replica wait against the same requests once it is warm (issue 47: an SDK client alternating
 * between two fresh replicas timed out once). Each replica is a gateway process as `npm start` runs it
 * in production, in front of the fixed upstream (fixed-upstream.ts), started and ready (/ready 200)
 * before anything is sent. Then, as the second replica of an alternating client sees it, the first
 * messages it ever serves: `notifications/initialized`, `tools/list`, a `tools/call` of `is_null`;
 * then `initialize`; then ten more `tools/call`s (the warm figure). Wall ms per request, one at a time.
 * Prints each replica's figures and the medians. `--dist dir`: another build (an A/B of two).
 * `--graphql-first`: one POST /graphql of the same
 * operation before the MCP requests, so that what is left of the first tools/call's wait is the MCP
 * lane's own (the pipeline, the upstream connection and the operation's code warmed already).
 */
import { readFile } from 'node:fs/promises';
import { freePort } from '../support/redis-server.js';
import { installSignalCleanup, startChild, startFixedUpstream } from './bench-processes.js';

const argument = (name: string, fallback: string) => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : (process.argv[index + 1] as string);
};
const REPLICAS = Number(argument('replicas', '4'));
const GRAPHQL_FIRST = process.argv.includes('--graphql-first');
/** `--dist dir`: another build of the gateway (default bench-results/dist). */
const DIST = argument('dist', 'bench-results/dist').replace(/\/$/, '');
const IS_NULL = JSON.stringify({
  query: await readFile(new URL('../operations/is-null.graphql', import.meta.url), 'utf8'),
  operationName: 'IsNull',
  variables: { value: 'first' },
});
const HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
};

const message = (method: string, params: Record<string, unknown>, id?: number) =>
  JSON.stringify({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method, params });
const initialize = message(
  'initialize',
  { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'first-request', version: '1' } },
  1,
);

/** Wall ms of one POST /mcp, its status checked. */
async function timed(origin: string, body: string, expected: number): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${origin}/mcp`, { method: 'POST', headers: HEADERS, body });
  const text = await response.text();
  const ms = performance.now() - started;
  if (response.status !== expected || text.includes('"isError":true'))
    throw new Error(`unexpected answer ${response.status}: ${text.slice(0, 200)}`);
  return ms;
}

async function main(): Promise<void> {
  installSignalCleanup();
  const { upstream, port: upstreamPort } = await startFixedUpstream();
  const rows: Record<string, number[]> = {};
  const add = (name: string, ms: number) => {
    rows[name] ??= [];
    rows[name].push(ms);
  };
  try {
    for (let r = 0; r < REPLICAS; r++) {
      const port = await freePort();
      const upstreamUrl = `http://127.0.0.1:${upstreamPort}`;
      // The compiled gateway (bench-results/dist: `npm run bench` or request-path's `--build` makes it).
      const gateway = await startChild({
        name: `gateway ${r + 1}`,
        script: `${DIST}/main.js`,
        env: {
          NODE_ENV: 'production',
          HOST: '127.0.0.1',
          LOG_LEVEL: 'warn',
          NULL_BASE_URL: upstreamUrl,
          PI_BASE_URL: upstreamUrl,
          FREE_RATE_LIMIT: '0',
        },
        port,
        readyPath: '/ready',
      });
      const origin = `http://127.0.0.1:${port}`;
      try {
        if (GRAPHQL_FIRST) {
          const started = performance.now();
          const answer = await fetch(`${origin}/graphql`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: IS_NULL,
          });
          const text = await answer.text();
          if (answer.status !== 200 || !text.includes('"isNull"')) throw new Error(`/graphql: ${text}`);
          add('first: POST /graphql isNull', performance.now() - started);
        }
        let id = 2;
        const call = () => message('tools/call', { name: 'is_null', arguments: { value: `v${id}` } }, id++);
        const first = {
          'first: notifications/initialized': await timed(
            origin,
            message('notifications/initialized', {}),
            202,
          ),
          'first: tools/list': await timed(origin, message('tools/list', {}, id++), 200),
          'first: tools/call': await timed(origin, call(), 200),
          'first: initialize': await timed(origin, initialize, 200),
        };
        const warm: number[] = [];
        for (let i = 0; i < 10; i++) warm.push(await timed(origin, call(), 200));
        warm.sort((a, b) => a - b);
        const warmMedian = warm[5] as number;
        for (const [name, ms] of Object.entries(first)) add(name, ms);
        add('warm: tools/call (median of 10)', warmMedian);
        process.stdout.write(
          `replica ${r + 1}: ${Object.entries(first)
            .map(([name, ms]) => `${name.slice(7)} ${ms.toFixed(1)} ms`)
            .join(', ')}; warm tools/call ${warmMedian.toFixed(1)} ms\n`,
        );
      } finally {
        await gateway.stop();
      }
    }
  } finally {
    await upstream.stop();
  }
  const median = (values: number[]) =>
    [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
  process.stdout.write(`medians over ${REPLICAS} fresh replicas (wall ms, one request at a time):\n`);
  for (const [name, values] of Object.entries(rows))
    process.stdout.write(
      `  ${name.padEnd(34)} ${median(values).toFixed(1)} (${values.map((v) => v.toFixed(1)).join(' ')})\n`,
    );
}

await main();
