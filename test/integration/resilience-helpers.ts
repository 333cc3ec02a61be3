/**
 * Shared by the resilience-* and hostile-* tests: the real gateway (createGateway, behind the same
 * request listener as src/main.ts) on a loopback port in front of given upstream URLs, a GraphQL client over real sockets, valid upstream
 * bodies for the scripted upstream, and a bounded polling helper.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadConfig } from '../../src/config.js';
import type { DigitEngine } from '../../src/digits/digit-engine.js';
import { createGatewayRequestListener } from '../../src/gateway/http/fast-path.js';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
  type UpstreamClientsOptions,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { createGateway } from '../../src/gateway/yoga.js';
import { createLogger, type Logger, REDACT_PATHS } from '../../src/shared/logger.js';

export interface TestGateway {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** `<origin>/graphql` */
  url: string;
  server: Server;
  clients: HttpUpstreamClients;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  nullBaseUrl: string;
  piBaseUrl: string;
  digits: DigitEngine;
  /** Upstream client options (timeouts, retries, breaker). */
  clientOptions?: Partial<UpstreamClientsOptions>;
  /** Extra environment for loadConfig (NODE_ENV is 'test' unless given). */
  env?: Record<string, string>;
  /** @default silent */
  logger?: Logger;
}

export async function startTestGateway(options: TestGatewayOptions): Promise<TestGateway> {
  const logger = options.logger ?? createLogger({ level: 'silent' });
  const clients = createUpstreamClients({
    nullBaseUrl: options.nullBaseUrl,
    piBaseUrl: options.piBaseUrl,
    logger,
    ...options.clientOptions,
  });
  const config = loadConfig({ NODE_ENV: 'test', ...options.env });
  const yoga = createGateway({ clients, digits: options.digits, config, logger });
  // The listener src/main.ts serves with: JSON POSTs on the fast path, everything else through Yoga.
  const server = createServer(
    createGatewayRequestListener(yoga, { maxBodyBytes: config.limits.maxRequestBodyBytes }),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    url: `${origin}/graphql`,
    server,
    clients,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await clients.close();
    },
  };
}

export interface GqlError {
  message: string;
  path?: Array<string | number>;
  extensions?: Record<string, unknown>;
}

export interface GqlResult {
  status: number;
  text: string;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary result shapes
  data?: Record<string, any> | null;
  errors?: GqlError[];
}

export interface GqlOptions {
  variables?: Record<string, unknown>;
  headers?: Record<string, string>;
  /** @default 'application/graphql-response+json' */
  accept?: string;
  signal?: AbortSignal;
}

/** POSTs one operation as application/json; parses the body when it is JSON. */
export async function gql(url: string, query: string, options: GqlOptions = {}): Promise<GqlResult> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: options.accept ?? 'application/graphql-response+json',
      ...options.headers,
    },
    body: JSON.stringify({ query, variables: options.variables }),
    signal: options.signal,
  });
  return parsed(response);
}

/** Reads a fetch Response into a GqlResult (body parsed when it is JSON). */
export async function parsed(response: Response): Promise<GqlResult> {
  const text = await response.text();
  let body: object = {};
  try {
    body = JSON.parse(text) as object;
  } catch {
    // not JSON: text and status are still there
  }
  return { status: response.status, text, headers: response.headers, ...body };
}

/** The codes of a result's errors, in order. */
export const codes = (result: { errors?: GqlError[] }): unknown[] =>
  (result.errors ?? []).map((e) => e.extensions?.code);

/**
 * Calls `probe` until it returns a truthy value, at most `tries` times, `intervalMs` apart. Returns
 * the last value (falsy when it never succeeded): the caller asserts on it.
 */
export async function poll<T>(
  probe: () => Promise<T>,
  { tries = 50, intervalMs = 100 }: { tries?: number; intervalMs?: number } = {},
): Promise<T> {
  let value = await probe();
  for (let i = 1; i < tries && !value; i++) {
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
    value = await probe();
  }
  return value;
}

/** Resolves with `promise`'s value, or with `fallback` after `ms` (a bounded wait, not a timing assertion). */
export function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<F>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A pino logger at `level` writing JSON lines into memory, with the project's redaction paths. */
export function memoryLogger(level = 'debug') {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(String(chunk));
      callback();
    },
  });
  const logger = pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, stream);
  return { logger, text: () => chunks.join(''), lines: () => chunks.length };
}

// --- valid upstream bodies (what the specs show) ------------------------------------------------

export const nullBody = (extra: Record<string, unknown> = {}) => ({
  is_null: true,
  confidence: 0.93,
  model: 'null-x-4o',
  inference_time_ms: 7,
  gpu_cost_usd: 0.0012,
  experts_consulted: 2,
  sponsored_by: null,
  disclaimer: 'May differ from strict equality.',
  ...extra,
});

export const piBody = (extra: Record<string, unknown> = {}) => ({
  digits: '3.141',
  precision: 3,
  confidence: 0.99,
  model: 'pi-x-4o',
  inference_time_ms: 20,
  gpu_cost_usd: 0.01,
  sponsored_by: null,
  disclaimer: 'Digits may differ from actual pi.',
  ...extra,
});

export const nullHealth = {
  status: 'ok',
  null_detectable: true,
  undefined_detectable: false,
  cluster_status: 'warm',
  philosophy_consultant: null,
  monthly_burn: '$1',
};

export const piHealth = { status: 'ok', pi_available: true, gpu_cluster: 'nominal', monthly_burn_rate: '$2' };
