/**
 * Any replica answers any MCP request (contract §13: stateless, no session, no affinity): one SDK
 * client whose requests go to two gateway processes in turn (initialize to one, the next message to
 * the other, and so on) works as against one gateway, and each process ran, and logged, its share of
 * the tool calls. And, on the two processes fresh (issue 47: such a client once timed out after
 * `POST->A POST->B`), 20 such clients one after the other, each request within a bound of the SDK's
 * client far above a warm answer: a replica's first /mcp requests wait for nothing (the lane is warmed
 * at start, mcp/server-pool.ts; their times: test/bench/mcp-first-request.ts).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';
import { callTool, connectMcp, type ToolResult } from '../support/mcp-client.js';
import { routeSpecAnswers } from '../support/upstream-bodies.js';
import { until } from '../support/waits.js';

let upstream: ScriptedUpstream;
let replicas: GatewayProcess[] = [];
beforeAll(async () => {
  upstream = await startScriptedUpstream();
  routeSpecAnswers(upstream);
  const env = {
    NULL_BASE_URL: upstream.url,
    PI_BASE_URL: upstream.url,
    NULL_API_VERSION: 'v1',
    PI_API_VERSION: 'v1',
    FREE_RATE_LIMIT: '0',
    LOG_LEVEL: 'info',
  };
  replicas = await Promise.all([startGatewayProcess(env), startGatewayProcess(env)]);
}, 120_000);
afterAll(async () => {
  await Promise.all(replicas.map((replica) => replica.stop()));
  await upstream?.close();
});

/** Each request of the SDK's client: far above a warm answer (ms), so only one left waiting trips it. */
const REQUEST_TIMEOUT_MS = 10_000;
const RUNS = 20;

/** A fetch for the SDK's client that sends its requests to `origins` in turn, from `first` on. */
function alternating(origins: string[], first = 0): { fetch: typeof fetch; sent: () => number } {
  let sent = 0;
  return {
    fetch: (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const origin = origins[(first + sent++) % origins.length] as string;
      return fetch(new URL(`${url.pathname}${url.search}`, origin), init);
    },
    sent: () => sent,
  };
}

it('20 clients one after the other, each alternating between the two fresh replicas from its first POST: every request answered within the bound', async () => {
  const origins = replicas.map((replica) => new URL(replica.url).origin);
  const timeout = REQUEST_TIMEOUT_MS;
  let posts = 0;
  for (let run = 0; run < RUNS; run++) {
    // Initialize on one replica, the next request on the other: odd runs begin on the second.
    const route = alternating(origins, run % 2);
    const client = await connectMcp(origins[run % 2] as string, { fetch: route.fetch, timeoutMs: timeout });
    try {
      expect((await client.listTools(undefined, { timeout })).tools.length).toBe(6);
      const result = (await client.callTool({ name: 'is_null', arguments: { value: run } }, undefined, {
        timeout,
      })) as ToolResult;
      expect(result.isError, `run ${run}`).toBeUndefined();
      expect(result._meta?.cost?.upstreamCalls).toBe(1);
    } finally {
      await client.close();
    }
    posts += route.sent();
  }
  // initialize, its notification, tools/list, tools/call at least, each run.
  expect(posts).toBeGreaterThanOrEqual(4 * RUNS);
}, 120_000);

it('one client, its requests answered by two gateway processes in turn', async () => {
  const origins = replicas.map((replica) => new URL(replica.url).origin);
  const route = alternating(origins);
  const client = await connectMcp(origins[0] as string, { fetch: route.fetch });
  const requestIds: string[] = [];
  try {
    expect((await client.listTools()).tools.length).toBe(6);
    for (const [name, args] of [
      ['is_null', { value: 1 }],
      ['pi_digits', { digits: 3 }],
      ['is_null', { value: null }],
      ['pi_digits', { digits: 2 }],
    ] as const) {
      const result = await callTool(client, name, args);
      expect(result.isError, name).toBeUndefined();
      expect(result._meta?.cost?.upstreamCalls).toBe(1);
      requestIds.push(result._meta?.requestId as string);
    }
  } finally {
    await client.close();
  }
  expect(route.sent()).toBeGreaterThanOrEqual(6);
  // Each call was one operation, logged by exactly one of the processes (once its line is read); both took some.
  const logged = (id: string) =>
    replicas.some((replica) =>
      replica.lines.some((line) => line.msg === 'graphql operation' && line.requestId === id),
    );
  expect(await until(() => requestIds.every(logged), 200)).toBe(true);
  const served = replicas.map((replica) =>
    requestIds.filter((id) =>
      replica.lines.some((line) => line.msg === 'graphql operation' && line.requestId === id),
    ),
  );
  expect(served.flat().sort()).toEqual([...requestIds].sort());
  for (const share of served) expect(share.length).toBeGreaterThan(0);
});
