/**
 * The MCP SDK's own client against a gateway's POST /mcp: `Client` over
 * `StreamableHTTPClientTransport`, as an agent connects (docs/agents.md), with the headers a caller
 * sends (its key, X-Max-Cost-Usd, X-Budget-Fallback) and, for tests that spread one client over
 * several gateways, its own fetch.
 */
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

export interface McpClientOptions {
  headers?: Record<string, string>;
  /** How the client gets its token when /mcp asks for one (the SDK's OAuth providers). */
  authProvider?: OAuthClientProvider;
  /** Replaces the transport's fetch (to send each request to another gateway). */
  fetch?: typeof fetch;
  /** The SDK's bound on `initialize` (its -32001 "Request timed out" after it), in ms. @default 60000, the SDK's */
  timeoutMs?: number;
}

/** A connected client (initialize done) for `<origin>/mcp`; close it after. */
export async function connectMcp(origin: string, options: McpClientOptions = {}): Promise<Client> {
  const client = new Client({ name: 'gateway-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${origin}/mcp`), {
    requestInit: { headers: options.headers ?? {} },
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.authProvider === undefined ? {} : { authProvider: options.authProvider }),
  });
  await client.connect(
    transport,
    options.timeoutMs === undefined ? undefined : { timeout: options.timeoutMs },
  );
  return client;
}

/** What a tool result's `_meta` holds (contract §13). */
export interface ToolMeta {
  requestId?: string;
  cost?: {
    gpuCostUsd: number;
    upstreamCalls: number;
    cacheHits: number;
    estimatedCostUsd?: number;
    fallbacks?: Array<{ path: string; requestedModel: string; usedModel: string }>;
    routing?: Array<Record<string, unknown>>;
  };
  sponsoredBy?: string[];
  routing?: Array<Record<string, unknown>>;
  errors?: Array<{ message: string; path?: Array<string | number>; extensions?: Record<string, unknown> }>;
}

export type ToolResult = CallToolResult & { _meta?: ToolMeta };

/** Calls a tool and types its result. */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args })) as ToolResult;
}

/** The §2 codes of a tool result's errors, in order. */
export const toolCodes = (result: ToolResult): unknown[] =>
  (result._meta?.errors ?? []).map((error) => error.extensions?.code);

/** The texts of a result's content items. */
export const texts = (result: ToolResult): string[] =>
  result.content.flatMap((item) => (item.type === 'text' ? [item.text] : []));

/** A JSON-RPC POST to /mcp as any HTTP client sends it (for what the SDK's client never sends). */
export function postMcp(
  origin: string,
  body: string,
  headers: Record<string, string> = {},
  method = 'POST',
): Promise<Response> {
  return fetch(`${origin}/mcp`, {
    method,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    ...(method === 'GET' || method === 'HEAD' ? {} : { body }),
  });
}

/** A tools/call message. */
export const toolsCall = (name: string, args: Record<string, unknown> = {}, id = 1) =>
  JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
