/**
 * node:http to the SDK's web-standard transport and back, for the MCP lane. The SDK's node transport
 * (`StreamableHTTPServerTransport`) is this same web-standard transport behind @hono/node-server's
 * general adapter, which streams every body through web streams both ways and cost the lane about a
 * quarter of its CPU per call (docs/agents.md). A JSON-RPC body is small and whole: read here as the
 * fast path reads /graphql (Content-Length within MAX_REQUEST_BODY_BYTES, one Buffer) and handed to the
 * transport parsed, as its `parsedBody` option allows; the transport still checks that it is JSON-RPC.
 * Anything else (no Content-Length, a body over the limit, a body that is not JSON) goes to the
 * transport as a stream or as the bytes read, and the transport answers it as it defines (413, 400).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { declaredLength } from '../request/declared-length.js';

/** The request's body and what the transport is handed. */
export interface ReadRequest {
  request: Request;
  /** The body parsed as JSON, when it was read here and parses. */
  parsedBody?: unknown;
}

/** The whole body, when its Content-Length is declared and within `limit`; undefined otherwise. */
function readWhole(req: IncomingMessage, limit: number): Promise<Buffer> | undefined {
  if (declaredLength(req.headers, limit) === undefined) return undefined;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * The header fields the stateless transport reads on a POST (Accept, Content-Type, the protocol
 * version; Mcp-Session-Id and Last-Event-ID only with sessions, Host and Origin only with its own
 * DNS-rebinding check, which the lane does itself). The others are not copied: building a Fetch
 * `Headers` costs per field, and the handlers read the request's facts, never `extra.requestInfo`
 * (which thus holds no key either).
 */
const TRANSPORT_FIELDS = new Set(['accept', 'content-type', 'mcp-protocol-version']);

/** The Fetch request the transport reads: its headers, and its body unless it was read and parsed. */
export async function fetchRequestOf(req: IncomingMessage, limit: number): Promise<ReadRequest> {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    if (TRANSPORT_FIELDS.has(name.toLowerCase())) headers.append(name, raw[i + 1] as string);
  }
  // The transport reads only the path of the URL (requestInfo.url): the Host header is not trusted here.
  const url = `http://localhost${req.url ?? '/'}`;
  const whole = readWhole(req, limit);
  if (whole === undefined) {
    const body = Readable.toWeb(req) as ReadableStream<Uint8Array>;
    return { request: new Request(url, { method: 'POST', headers, body, duplex: 'half' } as RequestInit) };
  }
  const bytes = await whole;
  try {
    return {
      request: new Request(url, { method: 'POST', headers }),
      parsedBody: JSON.parse(bytes.toString('utf8')),
    };
  } catch {
    // Not JSON: the transport parses the bytes again and answers its parse error.
    return { request: new Request(url, { method: 'POST', headers, body: new Uint8Array(bytes) }) };
  }
}

/** The JSON answer's media type (an SSE answer, `text/event-stream`, is read back). */
const isJson = (type: string | null) => type?.startsWith('application/json') === true;

/**
 * Writes the transport's answer, unless the client went away meanwhile. `sent`: the one JSON-RPC
 * response the transport was given for a request of one message (the lane sees it in `send`). In JSON
 * response mode the answer's body is that message as JSON (Streamable HTTP: `application/json`, one
 * response object), which the transport made with `JSON.stringify` of the same object: the lane makes
 * the same string rather than reading it back out of the `Response`'s body stream (a web stream, a
 * reader, a decoder: about twice the stringify). Any other answer is read back as text.
 */
export function sendFetchResponse(
  response: Response,
  res: ServerResponse,
  added: Record<string, string> | undefined,
  sent?: unknown,
): void | Promise<void> {
  if (response.body === null) return write(response, res, added, undefined);
  if (sent !== undefined && response.status === 200 && isJson(response.headers.get('content-type')))
    return write(response, res, added, JSON.stringify(sent));
  // A JSON-RPC answer is a string the transport made: read back as one (cheaper than bytes).
  return response.text().then((body) => write(response, res, added, body));
}

function write(
  response: Response,
  res: ServerResponse,
  added: Record<string, string> | undefined,
  body: string | undefined,
): void {
  if (res.destroyed || res.writableEnded) return;
  const headers: Record<string, string | number> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  if (added !== undefined) Object.assign(headers, added);
  if (body !== undefined) headers['content-length'] = Buffer.byteLength(body);
  res.writeHead(response.status, headers);
  res.end(body);
}
