/**
 * Which browser origins may use /mcp, and the CORS fields that let their pages read the answers
 * (contract §13; docs/agents.md). DNS-rebinding protection, as the MCP specification requires: a
 * request whose `Origin` is neither a loopback origin (localhost, 127.0.0.1, [::1], any port) nor
 * listed in MCP_ALLOWED_ORIGINS is refused before anything runs. Requests without `Origin` (agents,
 * command-line clients, the MCP Inspector's proxy) are not browsers' and pass.
 *
 * An allowed origin's preflight (OPTIONS with Access-Control-Request-Method) is answered, and its
 * answers carry Access-Control-Allow-Origin, so a page on that origin (the MCP Inspector connecting
 * directly, a browser agent) can call the tools with a key. No credentials (cookies) are involved:
 * keys travel in headers.
 */

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** Whether an `Origin` is a loopback origin or one of `allowed` (origins as `URL.origin` writes them). */
export function originAllowed(origin: string, allowed: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  return LOOPBACK_HOSTS.has(url.hostname) || allowed.includes(url.origin);
}

/** The request headers a client of /mcp sends (the transport's, a key, the cost headers, tracing). */
const ALLOWED_HEADERS =
  'content-type, accept, authorization, x-api-key, mcp-protocol-version, mcp-session-id, last-event-id, x-max-cost-usd, x-budget-fallback, x-request-id, traceparent';
/** The answer's headers a page may read. */
const EXPOSED_HEADERS = 'x-request-id, mcp-session-id, ratelimit, ratelimit-policy, www-authenticate';

/** The CORS fields of every answer to an allowed origin. */
export function corsFields(origin: string): Record<string, string> {
  return {
    'access-control-allow-origin': origin,
    'access-control-expose-headers': EXPOSED_HEADERS,
    vary: 'Origin',
  };
}

/** The CORS fields of the answer to an allowed origin's preflight. */
export function preflightFields(origin: string): Record<string, string> {
  return {
    ...corsFields(origin),
    'access-control-allow-methods': 'POST',
    'access-control-allow-headers': ALLOWED_HEADERS,
    'access-control-max-age': '600',
  };
}
