/**
 * The gateway's HTTP server: node:http, the lanes above this layer (the MCP lane: `Lane`) first, then
 * the fast path, Yoga's handler for everything else;
 * keep-alive timeouts suited to sitting behind a load balancer; and a graceful drain for shutdown
 * (stop accepting, answer what was accepted, then close whatever is left).
 */
import {
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { FastPath } from './fast-path/fast-path.js';
import type { GatewayYoga } from './yoga.js';

export interface GatewayServer {
  readonly server: Server;
  /**
   * Listens on `port` and `host`; resolves with the GraphQL URL. `::` (all addresses) falls back to
   * `0.0.0.0` on a host without IPv6.
   */
  listen(port: number, host: string): Promise<string>;
  /**
   * Stops accepting, lets accepted requests finish for at most `timeoutMs`, then closes every
   * connection. Resolves once the server is closed; `timedOut` says whether requests were cut.
   */
  drain(timeoutMs: number): Promise<{ timedOut: boolean; inFlight: number }>;
  /** Requests being answered right now. */
  readonly inFlight: number;
}

/** The longest request URI served (GraphQL-over-HTTP's 2026 draft: 414 above it; docs/contract.md, Errors). */
export const MAX_URI_BYTES = 8192;

/** A bare HTTP/1.1 answer written to a socket the parser gave up on (no request object exists). */
const bareAnswer = (status: number) =>
  `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`;

/**
 * What node's parser refused: headers over the limit are 431, unless the request line alone is over
 * MAX_URI_BYTES (its first packet starts with a method and has no line end within the limit): 414.
 * A request that timed out is 408, anything else 400, as node answers by default.
 */
function clientErrorStatus(error: NodeJS.ErrnoException & { rawPacket?: Buffer }): number {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (error.code !== 'HPE_HEADER_OVERFLOW') return 400;
  const packet = error.rawPacket;
  if (packet === undefined || !/^[A-Z]+ /.test(packet.toString('latin1', 0, 16))) return 431;
  const lineEnd = packet.indexOf('\r\n');
  return lineEnd === -1 || lineEnd > MAX_URI_BYTES + 16 ? 414 : 431;
}

/** A lane of a layer above this one (mcp/): takes the requests it serves and returns true for them. */
export interface Lane {
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

export function createGatewayServer(
  yoga: GatewayYoga,
  fastPath: FastPath,
  lanes: readonly Lane[] = [],
): GatewayServer {
  const server = createServer((req, res) => {
    if ((req.url?.length ?? 0) > MAX_URI_BYTES) {
      res.writeHead(414, { 'content-length': 0, connection: 'close' });
      res.end();
      return;
    }
    for (const lane of lanes) if (lane.handle(req, res)) return;
    if (!fastPath.handle(req, res)) yoga(req, res);
  });
  server.on('clientError', (error: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(bareAnswer(clientErrorStatus(error)));
  });
  // Keep-alive longer than typical load balancers' idle timeout, so they close first (no resets).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 60_000;

  const sockets = new Set<Socket>();
  const unanswered = new Set<ServerResponse>();
  let inFlight = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (_req, res) => {
    inFlight++;
    // While draining, every answer closes its connection (Node does not, after close()): the
    // client's next request then opens a new connection, which is refused, instead of keeping a
    // kept-alive socket, and so the drain, busy until the timeout.
    if (closing) res.setHeader('connection', 'close');
    else unanswered.add(res);
    res.once('close', () => {
      unanswered.delete(res);
      inFlight--;
      if (inFlight === 0) drained?.();
    });
  });

  const bind = (port: number, host: string) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });

  let draining: Promise<{ timedOut: boolean; inFlight: number }> | undefined;
  return {
    server,
    async listen(port, host) {
      try {
        await bind(port, host);
      } catch (error) {
        if (host !== '::' || (error as NodeJS.ErrnoException).code !== 'EAFNOSUPPORT') throw error;
        await bind(port, '0.0.0.0');
      }
      const address = server.address() as AddressInfo;
      const shown = host === '::' || host === '0.0.0.0' ? 'localhost' : host;
      return `http://${shown.includes(':') ? `[${shown}]` : shown}:${address.port}/graphql`;
    },
    get inFlight() {
      return inFlight;
    },
    drain(timeoutMs) {
      draining ??= (async () => {
        closing = true;
        const inFlightAtStart = inFlight;
        for (const res of unanswered) if (!res.headersSent) res.setHeader('connection', 'close');
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        // Sockets that become idle between requests are closed by the sweep.
        const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
        const allDone =
          inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => (drained = resolve));
        let timer: NodeJS.Timeout | undefined;
        const timedOut = await Promise.race([
          allDone.then(() => false),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(true), timeoutMs);
          }),
        ]);
        clearTimeout(timer);
        clearInterval(idleSweep);
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
        await closed;
        return { timedOut, inFlight: inFlightAtStart };
      })();
      return draining;
    },
  };
}
