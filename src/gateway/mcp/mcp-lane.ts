/**
 * The MCP lane: `POST /mcp`, the Model Context Protocol over Streamable HTTP (contract §13;
 * docs/agents.md), a third lane of the request pipeline beside the fast path and Yoga's. Like them it
 * decides only how bytes travel: JSON-RPC in, tool results out. Each tool call is an operation of
 * the request pipeline (tool-call.ts); identity is read by the same `requestFactsOf` as on the
 * GraphQL lanes.
 *
 * The official SDK does the protocol: its low-level `Server` with the gateway's handlers for
 * tools/list and tools/call (its `McpServer` answers an unknown tool with a result and bad arguments
 * without a code), and its Streamable HTTP transport, stateless (no session id) with JSON answers: a
 * fresh transport per HTTP request, as the SDK requires of a stateless transport, on a server reused
 * from an earlier request (server-pool.ts); any replica answers any request. The transport is the SDK's web-standard one, which its node class wraps; the lane hands it
 * the request's body read and parsed (fetch-exchange.ts). The transport answers what it defines
 * itself: a body that is not JSON or not JSON-RPC (400 with a JSON-RPC error), over
 * MAX_REQUEST_BODY_BYTES (413), a wrong Accept (406) or Content-Type (415).
 *
 * Before the transport sees a request, in this order, nothing having run:
 * - an `Origin` that is neither loopback (localhost, 127.0.0.1, [::1], any port) nor in
 *   MCP_ALLOWED_ORIGINS: 403 (DNS-rebinding protection); no Origin passes; an allowed origin's CORS
 *   preflight is answered (origins.ts);
 * - any method but POST: 405 with `Allow: POST` (no standalone stream without sessions; the SDK
 *   would open one on GET and answer DELETE with 200);
 * - who the caller is, decided once for the request by identity.ts (every tool call of it runs as that
 *   caller): a malformed Authorization header, a token that fails verification, or (AUTH_MODE=tokens)
 *   no token at all: 401 with `WWW-Authenticate: Bearer` and, with AUTH_ISSUER, `resource_metadata`
 *   pointing at `/.well-known/oauth-protected-resource` (protected-resource.ts, served by this lane);
 *   the identity provider unreachable for a token: 503 with Retry-After.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  type JSONRPCMessage,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { YogaLogger } from 'graphql-yoga';
import { isPromise } from '../../shared/is-promise.js';
import type { Identity } from '../identity.js';
import { requestFactsOf } from '../request/facts.js';
import { MASKED_MESSAGE, type RequestPipeline } from '../request/pipeline.js';
import { fetchRequestOf, sendFetchResponse } from './fetch-exchange.js';
import { type McpMetrics, type McpOutcome, NO_METHOD, OTHER_METHOD } from './mcp-metrics.js';
import { corsFields, originAllowed, preflightFields } from './origins.js';
import {
  baseUrlOf,
  challengeWithMetadata,
  isProtectedResourcePath,
  type ProtectedResourceOptions,
  protectedResourceMetadata,
} from './protected-resource.js';
import { createServerPool } from './server-pool.js';
import { createToolCaller, type ToolCalls } from './tool-call.js';
import type { Toolset } from './toolset.js';

export const MCP_ENDPOINT = '/mcp';

export interface McpLaneOptions {
  pipeline: RequestPipeline;
  toolset: Toolset;
  metrics: McpMetrics;
  /** MAX_REQUEST_BODY_BYTES: a larger body is 413, as on /graphql. */
  maxBodyBytes: number;
  /** MCP_ALLOWED_ORIGINS, as origins (`https://host[:port]`), besides loopback ones. */
  allowedOrigins: readonly string[];
  /** Where unexpected errors are logged (the answer says only "Unexpected error."). */
  logger: YogaLogger;
  /** Who the caller is (identity.ts), decided once per request. */
  identity: Identity;
  /** With AUTH_ISSUER: /mcp is an OAuth protected resource (protected-resource.ts). */
  authorization?: ProtectedResourceOptions | undefined;
}

export interface McpLane {
  /** Serves `req` when it is for /mcp and returns true; false leaves it to the other lanes. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Warms the lane before the first request (server-pool.ts): at start, before listening. */
  warm(): Promise<void>;
}

/** What the gateway says of itself in `initialize`. */
const SERVER_INFO = { name: 'null-pi-gateway', title: 'null-pi GraphQL gateway', version: '0.1.0' };
const INSTRUCTIONS =
  'Each tool is a GraphQL query of the gateway. Results carry the data as structuredContent and, in _meta, what the call cost (cost), the sponsor messages the services require shown (sponsoredBy), the request id and, with minAccuracy, which model was chosen (routing). A result with isError lists each error with its code in _meta.errors: BUDGET_EXCEEDED (with retryAfterSeconds) means the key or X-Max-Cost-Usd does not allow the call.';
/** Longest tool name echoed back in an error. */
const MAX_ECHOED = 64;
/** Servers made at start (server-pool.ts' warm): about the requests a replica answers at once at first. */
const WARM_SERVERS = 8;

/** A refusal before any message ran: a JSON-RPC error without an id, as the transport words its own. */
function refuse(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** The tool calls of the request a message came with (`handleRequest`'s `authInfo`; server-pool.ts). */
const callsOf = (authInfo: AuthInfo | undefined): ToolCalls | undefined =>
  authInfo?.extra?.calls as ToolCalls | undefined;

export function createMcpLane(options: McpLaneOptions): McpLane {
  const { pipeline, toolset, metrics, maxBodyBytes, allowedOrigins, logger, identity, authorization } =
    options;
  const callTool = createToolCaller(pipeline);
  // One validator for every Server (the SDK would make an Ajv instance per Server).
  const jsonSchemaValidator = new AjvJsonSchemaValidator();
  // tools/list answers the same list every time: one answer object, which the SDK only reads.
  const toolList = { tools: [...toolset.list] };

  /** An SDK server with the gateway's handlers; a request's own data comes in `extra.authInfo`. */
  const createServer = (): Server => {
    const server = new Server(SERVER_INFO, {
      capabilities: { tools: { listChanged: false } },
      instructions: INSTRUCTIONS,
      jsonSchemaValidator,
    });
    server.setRequestHandler(ListToolsRequestSchema, () => toolList);
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: args } = request.params;
      const tool = toolset.get(name);
      if (tool === undefined)
        throw new McpError(
          ErrorCode.InvalidParams,
          `Unknown tool: ${name.length > MAX_ECHOED ? `${name.slice(0, MAX_ECHOED)}…` : name}. tools/list names the tools.`,
        );
      const calls = callsOf(extra.authInfo);
      try {
        if (calls === undefined) throw new Error('tools/call without the request it came with');
        return await callTool(calls, tool, args ?? {});
      } catch (error) {
        logger.error(error);
        throw new McpError(ErrorCode.InternalError, MASKED_MESSAGE);
      }
    });
    return server;
  };
  const servers = createServerPool({ create: createServer });

  /**
   * Counts each message by method and outcome (mcp-metrics.ts), through the transport's public hooks,
   * and keeps the responses sent: with one, the lane writes it (fetch-exchange.ts, sendFetchResponse).
   */
  const observe = (
    transport: WebStandardStreamableHTTPServerTransport,
  ): { seen: () => boolean; only: () => JSONRPCMessage | undefined } => {
    const methods = new Map<string | number, string>();
    let seen = false;
    let responses = 0;
    let last: JSONRPCMessage | undefined;
    const receive = transport.onmessage;
    transport.onmessage = (message, extra) => {
      seen = true;
      if ('method' in message) {
        if ('id' in message) methods.set(message.id, message.method);
        else metrics.record(message.method, 'ok');
      }
      receive?.(message, extra);
    };
    const send = transport.send.bind(transport);
    transport.send = (message: JSONRPCMessage, sendOptions) => {
      if ('id' in message && !('method' in message)) {
        const outcome: McpOutcome =
          'error' in message
            ? 'rpc_error'
            : (message.result as { isError?: unknown }).isError === true
              ? 'tool_error'
              : 'ok';
        metrics.record(methods.get(message.id as string | number) ?? OTHER_METHOD, outcome);
        responses++;
        last = message;
      }
      return send(message, sendOptions);
    };
    return { seen: () => seen, only: () => (responses === 1 ? last : undefined) };
  };

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const headers = req.headers;
    const facts = requestFactsOf((name) => headers[name] as string | undefined, req.socket.remoteAddress);
    // On every answer, refusals included, as on the other routes.
    res.setHeader('x-request-id', facts.requestId);
    const origin = headers.origin;
    if (origin !== undefined && !originAllowed(origin, allowedOrigins)) {
      metrics.record(NO_METHOD, 'refused');
      return refuse(
        res,
        403,
        'Forbidden: this Origin may not use /mcp (loopback origins and MCP_ALLOWED_ORIGINS only).',
      );
    }
    if (origin !== undefined) {
      // An allowed page may read every answer, refusals included (origins.ts).
      if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
        res.writeHead(204, { ...preflightFields(origin), 'content-length': 0 });
        res.end();
        return;
      }
      for (const [name, value] of Object.entries(corsFields(origin))) res.setHeader(name, value);
    }
    if (req.method !== 'POST') {
      metrics.record(NO_METHOD, 'refused');
      return refuse(
        res,
        405,
        'Method not allowed: this server is stateless and offers no standalone stream; send JSON-RPC messages with POST.',
        { allow: 'POST' },
      );
    }
    const pending = identity.identify(headers.authorization, headers['x-api-key'] as string | undefined);
    const identified = isPromise(pending) ? await pending : pending;
    if (identified instanceof Error || (identity.tokensOnly && identified.kind !== 'user')) {
      metrics.record(NO_METHOD, 'refused');
      const http = (identified instanceof Error ? identified.extensions.http : undefined) as
        | { status: number; headers: Record<string, string> }
        | undefined;
      const status = http?.status ?? 401;
      const fields = { ...http?.headers };
      // A challenge on a 401 only (a 503 for an unreachable issuer has none), with §13's
      // resource_metadata when /mcp is a protected resource.
      if (status === 401) {
        const challenge = fields['www-authenticate'] ?? 'Bearer';
        fields['www-authenticate'] =
          authorization === undefined
            ? challenge
            : challengeWithMetadata(challenge, baseUrlOf(req, authorization.publicUrl));
      } else delete fields['www-authenticate'];
      const message =
        identified instanceof Error
          ? identified.message
          : 'This MCP server takes tokens of its identity provider (AUTH_MODE=tokens): authorize with it (resource_metadata) and send "Authorization: Bearer <token>".';
      return refuse(res, status, message, fields);
    }
    const calls: ToolCalls = { facts, identified, states: new Set() };
    // The key stays in `facts`: the SDK's auth info carries no token.
    const authInfo: AuthInfo = { token: '', clientId: '', scopes: [], extra: { calls } };
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize: maxBodyBytes,
    });
    res.once('close', () => {
      if (res.writableFinished) return;
      // The client left before its answer: its tool calls stop spending (§8), the SDK's handlers are
      // aborted (closing the request's own transport detaches its server, which is not reused).
      for (const state of calls.states) pipeline.cancel(state, new Error('client went away'));
      void transport.close();
    });
    const server = await servers.connect(transport);
    const observed = observe(transport);
    const { request, parsedBody } = await fetchRequestOf(req, maxBodyBytes);
    const response = await transport.handleRequest(
      request,
      parsedBody === undefined ? { authInfo } : { parsedBody, authInfo },
    );
    if (!observed.seen() && response.status >= 400) metrics.record(NO_METHOD, 'refused');
    // A caller with a budget sees it on the answer, as on /graphql (RateLimit header fields).
    // Awaited only when they are promises: each await is a turn of the microtask queue.
    const status = calls.ran === undefined ? undefined : pipeline.answerHeaders(calls.ran);
    const added = isPromise(status) ? await status : status;
    // A request of one message (not a batch) has one response: the body is that response as JSON.
    const sent = parsedBody !== undefined && !Array.isArray(parsedBody) ? observed.only() : undefined;
    const written = sendFetchResponse(response, res, added, sent);
    if (written !== undefined) await written;
    // Every message of the request is answered (JSON answers): the server may serve another request.
    // Released once the answer is written, when the SDK has let go of the requests' abort controllers
    // (detaching earlier aborts them: an abort event and a DOMException per call for nothing).
    await servers.release(server);
  };

  const fail = (error: unknown, res: ServerResponse) => {
    logger.error(error);
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    const body = JSON.stringify({
      jsonrpc: '2.0',
      error: { code: ErrorCode.InternalError, message: MASKED_MESSAGE },
      id: null,
    });
    res.writeHead(500, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };

  /** RFC 9728's metadata document (GET, HEAD; CORS open: it is public and read by browsers' agents). */
  const metadata = (req: IncomingMessage, res: ServerResponse, issuer: string, publicUrl?: string) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-length': 0 });
      res.end();
      return;
    }
    const body = JSON.stringify(protectedResourceMetadata(baseUrlOf(req, publicUrl), issuer));
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'access-control-allow-origin': '*',
      'cache-control': 'public, max-age=300',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  };

  return {
    warm: () => servers.warm(WARM_SERVERS),
    handle(req, res) {
      const url = req.url ?? '';
      const query = url.indexOf('?');
      const path = query === -1 ? url : url.slice(0, query);
      if (authorization !== undefined && isProtectedResourcePath(path)) {
        metadata(req, res, authorization.issuer, authorization.publicUrl);
        return true;
      }
      if (path !== MCP_ENDPOINT) return false;
      serve(req, res).catch((error: unknown) => fail(error, res));
      return true;
    },
  };
}
