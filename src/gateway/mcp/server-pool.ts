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
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';

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
}

export function createServerPool(options: ServerPoolOptions): ServerPool {
  const { create, maxIdle = 64 } = options;
  const idle: Server[] = [];
  return {
    async connect(transport) {
      const server = idle.pop() ?? create();
      await server.connect(transport);
      return server;
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
}
