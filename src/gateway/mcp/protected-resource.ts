/**
 * `/mcp` as an OAuth 2.1 protected resource (contract §13; the MCP authorization specification,
 * which takes RFC 9728): with AUTH_ISSUER set, `GET /.well-known/oauth-protected-resource` names the
 * identity provider as the resource's authorization server, and every 401 of /mcp points at that
 * document (`WWW-Authenticate: Bearer resource_metadata="…"`), so that an agent's MCP client can find
 * where to get a token without being told.
 *
 * The document is also served at RFC 9728 §3.1's path for a resource with a path
 * (`/.well-known/oauth-protected-resource/mcp`), which MCP clients try first.
 *
 * URLs are absolute: PUBLIC_URL when set (the gateway behind a proxy or TLS terminator), else the
 * request's own origin (`X-Forwarded-Proto` when http or https, else http; its Host).
 */
import type { IncomingMessage } from 'node:http';

/** The well-known path of the metadata, and RFC 9728's path for the /mcp resource. */
export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';
const PROTECTED_RESOURCE_PATHS = new Set([PROTECTED_RESOURCE_PATH, `${PROTECTED_RESOURCE_PATH}/mcp`]);

/** Whether a request path is the metadata's. */
export function isProtectedResourcePath(path: string): boolean {
  return PROTECTED_RESOURCE_PATHS.has(path);
}

export interface ProtectedResourceOptions {
  /** AUTH_ISSUER: the authorization server the document names. */
  issuer: string;
  /** PUBLIC_URL: the gateway's external base URL. @default the request's origin */
  publicUrl?: string | undefined;
}

const HOST = /^[A-Za-z0-9.\-:[\]]{1,255}$/;

/** The gateway's base URL as the client reached it. */
export function baseUrlOf(req: IncomingMessage, publicUrl: string | undefined): string {
  if (publicUrl !== undefined) return publicUrl;
  const forwarded = String(req.headers['x-forwarded-proto'] ?? '')
    .split(',')[0]
    ?.trim()
    .toLowerCase();
  const scheme = forwarded === 'https' || forwarded === 'http' ? forwarded : 'http';
  const host = req.headers.host;
  // A Host that is not a host name is not echoed into a URL a client follows.
  return `${scheme}://${host !== undefined && HOST.test(host) ? host : 'localhost'}`;
}

/** RFC 9728 §2: the resource's metadata. */
export function protectedResourceMetadata(base: string, issuer: string): Record<string, unknown> {
  return {
    resource: `${base}/mcp`,
    authorization_servers: [issuer],
    bearer_methods_supported: ['header'],
    resource_name: 'null-pi GraphQL gateway (MCP)',
  };
}

/**
 * The `WWW-Authenticate` of a 401 from /mcp: the challenge identity.ts made (`Bearer` or
 * `Bearer error="invalid_token"`) with the metadata's URL (RFC 9728 §5.1).
 */
export function challengeWithMetadata(challenge: string, base: string): string {
  const metadata = `resource_metadata="${base}${PROTECTED_RESOURCE_PATH}"`;
  return challenge === 'Bearer' ? `Bearer ${metadata}` : `${challenge}, ${metadata}`;
}
