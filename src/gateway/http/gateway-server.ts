/**
 * The gateway's HTTP server, as `npm start` runs it: node:http with the fast-path listener in front
 * of the Yoga instance, and keep-alive timeouts suited to sitting behind a load balancer. Tests build
 * their servers with this too, so they exercise what production serves.
 */
import { createServer, type Server } from 'node:http';
import type { AppConfig } from '../../config.js';
import type { Logger } from '../../shared/logger.js';
import {
  createGatewayRequestListener,
  type GatewayRequestListener,
  type YogaNodeHandler,
} from './fast-path.js';

export interface GatewayServerOptions {
  /** The Yoga instance from `createGateway`. */
  yoga: YogaNodeHandler;
  config: Pick<AppConfig, 'limits' | 'server'>;
  logger: Pick<Logger, 'warn'>;
}

export interface GatewayServer extends Server {
  /** The request listener, with its `fastPath` flag and counters. */
  readonly gatewayListener: GatewayRequestListener;
}

/** A node:http server (not listening yet) serving the gateway. */
export function createGatewayServer(options: GatewayServerOptions): GatewayServer {
  const { config, logger } = options;
  const listener = createGatewayRequestListener(options.yoga, {
    maxBodyBytes: config.limits.maxRequestBodyBytes,
    enabled: config.server.httpFastPath,
    onDisabled: (reason) => logger.warn({ reason }, 'HTTP fast path off'),
  });
  const server = createServer(listener) as GatewayServer;
  Object.defineProperty(server, 'gatewayListener', { value: listener });
  // Keep-alive longer than typical load balancers' idle timeout, so they close first (no resets).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 60_000;
  return server;
}
