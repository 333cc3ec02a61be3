/**
 * The MCP lane's own counter, `gateway_mcp_requests_total{method,outcome}`, on the gateway's registry.
 * A tool call is also an operation (the operation metrics count it under its operation name, through
 * the request pipeline); this counts what only the lane sees: JSON-RPC messages and the HTTP requests
 * refused before any message was read.
 *
 * Both labels take values from fixed sets: a client chooses its JSON-RPC method names, and /metrics
 * must not grow with them.
 */
import { Counter, type Registry } from 'prom-client';

/**
 * How a message (or a refused request) ended.
 * - `ok`: a result; `tool_error`: a tools/call result with `isError` (a GraphQL error, bad arguments);
 * - `rpc_error`: a JSON-RPC error (unknown tool, unknown method, bad params);
 * - `refused`: the HTTP request was refused before any message ran (Origin, key, method, size, body).
 */
export type McpOutcome = 'ok' | 'tool_error' | 'rpc_error' | 'refused';

/** The method label of a refused request, whose messages (if any) were never read. */
export const NO_METHOD = '(none)';
/** The method label of a method this server does not know. */
export const OTHER_METHOD = '(other)';

const KNOWN_METHODS = new Set([
  'initialize',
  'ping',
  'tools/list',
  'tools/call',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'resources/list',
  'resources/templates/list',
  'prompts/list',
  'completion/complete',
  'logging/setLevel',
]);

export interface McpMetrics {
  record(method: string, outcome: McpOutcome): void;
}

export function createMcpMetrics(registry: Registry): McpMetrics {
  const requests = new Counter({
    name: 'gateway_mcp_requests_total',
    help: 'MCP messages on POST /mcp by JSON-RPC method and outcome (ok, tool_error: a tool result with isError, rpc_error: a JSON-RPC error, refused: the HTTP request refused before any message ran, method "(none)").',
    labelNames: ['method', 'outcome'] as const,
    registers: [registry],
  });
  return {
    record(method, outcome) {
      requests.inc({
        method: method === NO_METHOD || KNOWN_METHODS.has(method) ? method : OTHER_METHOD,
        outcome,
      });
    },
  };
}
