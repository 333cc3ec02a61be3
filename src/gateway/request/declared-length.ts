/**
 * A request body's length as its Content-Length declares it, read the same way by every lane that
 * reads a whole body into one Buffer (the fast path's /graphql, the MCP lane's /mcp).
 */
import type { IncomingHttpHeaders } from 'node:http';

/**
 * The declared length when the body can be read whole: a Content-Length of plain digits, no
 * Transfer-Encoding, and at most `limit` bytes; undefined otherwise (the lane hands the request on
 * as a stream, which answers 413 or 400 itself).
 */
export function declaredLength(headers: IncomingHttpHeaders, limit: number): number | undefined {
  const declared = headers['content-length'];
  if (declared === undefined || headers['transfer-encoding'] !== undefined || !/^\d{1,15}$/.test(declared))
    return undefined;
  const length = Number(declared);
  return length <= limit ? length : undefined;
}
