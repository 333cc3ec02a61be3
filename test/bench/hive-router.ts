/**
 * Hive Gateway in front of one subgraph, as its own process for the benchmark's router rows
 * (test/bench/gateway-bench.ts): the supergraph composed from subgraph.graphql (the gateway's subgraph
 * SDL) with SUBGRAPH_URL as the subgraph's address (the gateway with FEDERATION=true, or the raw
 * proxy's /graphql), served by test/support/supergraph.ts with the settings of docs/federation.md.
 *
 * `SUBGRAPH_URL=http://127.0.0.1:n/graphql PORT=0 node --import tsx test/bench/hive-router.ts`; ready when
 * GET /healthcheck answers.
 */
import { readFileSync } from 'node:fs';
import { composeSupergraph, startHiveRouter } from '../support/supergraph.js';

const url = process.env.SUBGRAPH_URL;
if (!url) throw new Error('SUBGRAPH_URL is required');
const sdl = readFileSync(new URL('../../subgraph.graphql', import.meta.url), 'utf8');
const router = await startHiveRouter({
  supergraph: composeSupergraph([{ name: 'gateway', url, sdl }]),
  port: Number(process.env.PORT ?? 0),
});
process.stdout.write(`${JSON.stringify({ port: router.port })}\n`);
const stop = () => router.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
