/**
 * One raw HTTP exchange against a gateway on 127.0.0.1, for tests that compare two answers byte for
 * byte (the fast path against Yoga, QUERY against POST): node:http adds only Host and Connection
 * (and Content-Length for a body), so the request is exactly what the test wrote.
 */
import { once } from 'node:events';
import { createServer, request as httpRequest, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The header fields whose values clients and browsers act on, compared between two answers. */
export const HEADERS_CLIENTS_ACT_ON: readonly string[] = [
  'content-type',
  'content-encoding',
  'content-length',
  'x-request-id',
  'allow',
  'retry-after',
  'cache-control',
  'vary',
];

/** What one exchange answered. */
export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Compressed bytes as latin1 (every byte kept, so comparable byte for byte); text as UTF-8. */
  body: string;
}

/** What to send. */
export interface RawRequest {
  /** @default 'POST' */
  method?: string;
  /** @default '/graphql' */
  path?: string;
  headers?: Record<string, string>;
  body?: string;
}

/** Sends one request on a fresh connection (no agent) and reads the whole answer. */
export function sendRaw(port: number, options: RawRequest): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'POST',
        path: options.path ?? '/graphql',
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(res.headers['content-encoding'] ? 'latin1' : 'utf8'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A node:http server on 127.0.0.1 running only `handler` (a gateway's Yoga): the other side of a comparison. */
export interface HandlerServer {
  port: number;
  close(): Promise<void>;
}

export async function listenHandler(handler: RequestListener): Promise<HandlerServer> {
  const server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
