/**
 * `npx tsx test/bench/mcp-sdk-floor.ts`: what the MCP SDK alone costs per `tools/call`, the floor
 * under the MCP lane's row of `bench:path` (docs/agents.md, "What the lane costs"). As the lane uses
 * it: a reused `Server` with a `tools/call` handler, a fresh stateless transport per call (JSON
 * answers), the body handed parsed, one kept `Request`, the server detached a turn of the event loop
 * after the answer and its `close()` without a stack; the handler answers at once with a result of the
 * `is_null` tool's shape. 50 calls at once, as `bench:path`. Prints the CPU µs and KB allocated per
 * call for three rounds. `bench:path -- --workload mcp-overhead` drives the same floor (`driveSdkFloor`)
 * in its own process, in turn with the `mcp` and `tool` rows, for the lane's overhead (docs/agents.md).
 */
import { pathToFileURL } from 'node:url';

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { measuredRound } from './measured-round.js';

const CALLS = 100_000;
const CONCURRENCY = 50;
const data = {
  isNull: {
    __typename: 'NullVerdict',
    actuallyNull: false,
    confidence: 0.97,
    correct: true,
    disclaimer: 'Results may differ from strict equality.',
    expertsConsulted: 8,
    gpuCostUsd: 0.0002,
    inferenceTimeMs: 17,
    isNull: false,
    model: 'NULL_X_4O',
    modelName: 'null-x-4o',
    philosophicalAnalysis: null,
    sponsoredBy: 'This null check was brought to you by NullCorp',
  },
};
const meta = {
  cost: { gpuCostUsd: 0.0002, upstreamCalls: 1, cacheHits: 0, estimatedCostUsd: 0.0002 },
  sponsoredBy: ['This null check was brought to you by NullCorp'],
};

const jsonSchemaValidator = new AjvJsonSchemaValidator();
const create = () => {
  const server = new Server(
    { name: 'floor', version: '1' },
    { capabilities: { tools: { listChanged: false } }, jsonSchemaValidator },
  );
  server.setRequestHandler(CallToolRequestSchema, () => ({
    content: [{ type: 'text', text: JSON.stringify(data) }],
    structuredContent: { ...data },
    _meta: { requestId: crypto.randomUUID(), ...meta },
  }));
  return server;
};
const request = new Request('http://localhost/mcp', {
  method: 'POST',
  headers: [
    ['accept', 'application/json, text/event-stream'],
    ['content-type', 'application/json'],
    ['mcp-protocol-version', '2025-06-18'],
  ],
});
const idle: Server[] = [];

async function call(id: number): Promise<void> {
  const server = idle.pop() ?? create();
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  await server.connect(transport);
  const parsedBody = {
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: 'is_null', arguments: { value: `path-${id}` } },
  };
  const response = await transport.handleRequest(request, { parsedBody });
  if (response.status !== 200) throw new Error(`unexpected answer ${response.status}`);
  await new Promise<void>((resolve) => setImmediate(resolve));
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const closed = server.close();
  Error.stackTraceLimit = limit;
  await closed;
  idle.push(server);
}

/** `count` tools/calls through the SDK alone, `concurrency` at once. */
export async function driveSdkFloor(count: number, concurrency = CONCURRENCY): Promise<void> {
  let left = count;
  const lane = async () => {
    while (left > 0) await call(left--);
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await driveSdkFloor(30_000);
  for (let round = 0; round < 3; round++) {
    const { cpuUs, bytes } = await measuredRound(() => driveSdkFloor(CALLS));
    process.stdout.write(
      `SDK alone: ${(cpuUs / CALLS).toFixed(1)} µs CPU, ${(bytes / CALLS / 1024).toFixed(1)} KB allocated per tools/call\n`,
    );
  }
}
