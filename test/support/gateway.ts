/**
 * The one way tests run the gateway: `createApp` (the composition root `npm start` uses) on a free
 * loopback port, in front of given upstream URLs or of the embedded reference services, which
 * `startGateway` (src/embedded-services.ts) starts first as `npm start` does.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { type AppConfig, loadConfig } from '../../src/config.js';
import { createDigitEngine, type DigitEngine } from '../../src/digits/digit-engine.js';
import { type EmbeddedApp, startGateway } from '../../src/embedded-services.js';
import type { AppOptions } from '../../src/gateway/app.js';
import {
  type RunningServices,
  type ServicesOptions,
  startServices,
} from '../../src/services/start-services.js';
import { createLogger } from '../../src/shared/logger.js';

/**
 * One digit engine per test file, without a worker thread: the digits tests need are computed
 * inline in a few ms, and a file's gateways and services share its cache.
 */
let engine: DigitEngine | undefined;
export function testDigitEngine(): DigitEngine {
  engine ??= createDigitEngine({ useWorker: false });
  return engine;
}

export interface TestGatewayOptions extends Partial<Omit<AppOptions, 'logger'>> {
  /** Settings as environment variables (NODE_ENV is 'test' unless given). */
  env?: Record<string, string>;
  /** Upstreams to front; each one left out is the embedded reference service. */
  nullBaseUrl?: string;
  piBaseUrl?: string;
  /** @default silent */
  logger?: Logger;
  /** The port to listen on (a test that must name its URL in the settings first). @default a free one */
  port?: number;
}

export interface TestGateway {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** `<origin>/graphql` */
  readonly url: string;
  /** The gateway, with the upstreams it fronts (`app.upstreams`: the embedded services' or the given ones). */
  readonly app: EmbeddedApp;
  readonly config: AppConfig;
  close(): Promise<void>;
}

export async function startTestGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const env: Record<string, string> = { NODE_ENV: 'test', ...options.env };
  if (options.nullBaseUrl !== undefined) env.NULL_BASE_URL = options.nullBaseUrl;
  if (options.piBaseUrl !== undefined) env.PI_BASE_URL = options.piBaseUrl;
  const config = loadConfig(env);
  const { env: _env, nullBaseUrl: _n, piBaseUrl: _p, logger, port, ...appOptions } = options;
  const app = await startGateway(config, {
    digits: testDigitEngine(),
    defaultMetrics: false,
    ...appOptions,
    logger: logger ?? createLogger({ level: 'silent' }),
  });
  const url = await app.listen(port ?? 0, '127.0.0.1');
  return {
    origin: new URL(url).origin,
    url,
    app,
    config,
    async close() {
      await app.close();
    },
  };
}

/** Both reference services on free loopback ports (with the file's digit engine). */
export function startTestServices(options: ServicesOptions = {}): Promise<RunningServices> {
  return startServices({
    host: '127.0.0.1',
    nullPort: 0,
    piPort: 0,
    digitEngine: testDigitEngine(),
    ...options,
  });
}

/** A loopback port free now (for a gateway whose settings must name its own URL before it listens). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
