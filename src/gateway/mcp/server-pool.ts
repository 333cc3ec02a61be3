/**
 * The SDK `Server`s of the MCP lane, reused from one HTTP request to the next (docs/agents.md, "What
 * the lane costs"). A stateless Streamable HTTP transport answers one request only, so each request
 * gets a fresh transport; the `Server` on top of it need not be fresh: `Protocol.connect` accepts a new
 * transport once `close()` has detached the previous one (the SDK's own handlers guard the request ids
 * a new connection reuses). Making one per request cost its constructor, its handlers' registration
 * (each parses its request schema's shape) and their closures, about a tenth of the lane's CPU.
 *
 * A server serves one transport at a time: taken from the idle ones (or made), connected, and given
 * back only after `close()` detached it, so that nothing of one request can reach the next; detached
 * a turn of the event loop after the answer, once the SDK let go of the request (its abort controller). A server
 * whose request did not end normally (the client went away) is not given back. What a handler needs of
 * its request travels with the request (`handleRequest`'s `authInfo`, the handler's `extra.authInfo`),
 * never in a closure over the server.
 *
 * Warmed at start (`warm`, before the gateway listens, so before /ready): servers made ahead, and one
 * run through the messages an agent starts with, in memory, so that a replica's first /mcp request
 * does not pay for the SDK's first run (its code compiled, its schemas' first parse, a server made):
 * measured with test/bench/mcp-first-request.ts (docs/agents.md). What the warm-up sends reaches no
 * handler of the gateway's but tools/list and a tools/call of a name that is no tool: nothing runs,
 * nothing is counted or logged.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { type JSONRPCMessage, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

export interface ServerPoolOptions {
  /** Makes a server with its handlers, not yet connected. */
  create: () => Server;
  /**
   * Idle servers kept for later requests; more are closed and dropped. About the requests the lane
   * answers at once.
   * @default 64
   */
  maxIdle?: number;
}

export interface ServerPool {
  /** A server connected to `transport`, for one request. */
  connect(transport: WebStandardStreamableHTTPServerTransport): Promise<Server>;
  /** Detaches `server` from its transport (closing it) and keeps it for another request. */
  release(server: Server): Promise<void>;
  /** Makes `count` servers ahead, the first run through WARM_MESSAGES (at start; see the header). */
  warm(count: number): Promise<void>;
}

/**
 * What an agent sends first (the SDK's client: initialize, its notification, tools/list, tools/call),
 * the call to a name that is no tool, so that no operation runs.
 */
const WARM_MESSAGES: readonly JSONRPCMessage[] = [
  {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: {
      protocolVersion: LATEST_PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'warm-up', version: '0' },
    },
  },
  { jsonrpc: '2.0', method: 'notifications/initialized' },
  { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
  { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: '', arguments: {} } },
];

export function createServerPool(options: ServerPoolOptions): ServerPool {
  const { create, maxIdle = 64 } = options;
  const idle: Server[] = [];
  const pool: ServerPool = {
    async connect(transport) {
      const server = idle.pop() ?? create();
      await server.connect(transport);
      return server;
    },
    async warm(count) {
      for (const message of WARM_MESSAGES) {
        const transport = new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        const server = await pool.connect(transport);
        const request = new Request('http://localhost/mcp', {
          method: 'POST',
          headers: {
            accept: 'application/json, text/event-stream',
            'content-type': 'application/json',
            'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
          },
        });
        await (await transport.handleRequest(request, { parsedBody: message })).text();
        await pool.release(server);
      }
      while (idle.length < Math.min(count, maxIdle)) idle.push(create());
    },
    async release(server) {
      // The SDK lets go of a request (deletes its handler's AbortController) some microtask turns after
      // the answer is resolved; how many is its own affair. Detached before that, close() aborts the
      // live controllers: an abort event and a DOMException per call for nothing (about 2 µs of a call,
      // seen in the CPU profile). A turn of the event loop is after all of them, whatever their count.
      await new Promise<void>((resolve) => setImmediate(resolve));
      // close() closes the transport (idempotent) and detaches it: the next connect() may attach another.
      // Detaching makes an McpError ("Connection closed") for the server's pending outgoing requests,
      // which it never has: a stack captured for nobody cost more than the server it saves. The error
      // is made synchronously in close(), before its first await: only it goes without a stack.
      const stackTraceLimit = Error.stackTraceLimit;
      Error.stackTraceLimit = 0;
      let closed: Promise<void>;
      try {
        closed = server.close();
      } finally {
        Error.stackTraceLimit = stackTraceLimit;
      }
      await closed;
      if (idle.length < maxIdle) idle.push(server);
    },
  };
  return pool;
}
