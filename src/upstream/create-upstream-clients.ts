/**
 * The factory the gateway uses: one HTTP client (with its own undici Pool, retry policy and
 * circuit breaker) per upstream.
 */
import type { Logger } from 'pino';
import { NullCheckHttpClient } from './null-check-http-client.js';
import { PiDigitsHttpClient } from './pi-digits-http-client.js';
import type { UpstreamClients } from './types.js';
import type { UpstreamCallEvent } from './upstream-caller.js';

export type { UpstreamCallEvent } from './upstream-caller.js';

export interface UpstreamClientsOptions {
  /** Base URL of the null-check service, without /api/v1. */
  nullBaseUrl: string;
  /** Base URL of the pi-digits service, without /api/v1. */
  piBaseUrl: string;
  /** @default 'authorization' — 'authorization' sends `Bearer <key>`, other header names the bare key */
  authHeader?: string;
  /** @default 5000 — headers+body timeout per attempt (UPSTREAM_TIMEOUT) */
  timeoutMs?: number;
  /** @default 64 — per-upstream undici Pool */
  connections?: number;
  /** @default 1000 */
  healthTimeoutMs?: number;
  /** @default 5; 0 disables */
  breakerThreshold?: number;
  /** @default 5000 */
  breakerHalfOpenAfterMs?: number;
  /** @default 3 — attempts in total per idempotent call */
  retryMaxAttempts?: number;
  /** @default 50 — first backoff step (full jitter) */
  backoffBaseMs?: number;
  /** @default 1000 — longest backoff step */
  backoffCapMs?: number;
  /** @default 16777216 — larger upstream bodies are UPSTREAM_BAD_RESPONSE */
  maxResponseBytes?: number;
  /** Upstream failures are logged with the raw body, never the key. */
  logger?: Logger;
  /** Called once per finished upstream HTTP call (every attempt, health probes included). */
  onCall?: (event: UpstreamCallEvent) => void;
}

export interface HttpUpstreamClients extends UpstreamClients {
  nullCheck: NullCheckHttpClient;
  piDigits: PiDigitsHttpClient;
  /** Closes both pools. */
  close(): Promise<void>;
}

export function createUpstreamClients(options: UpstreamClientsOptions): HttpUpstreamClients {
  const { nullBaseUrl, piBaseUrl, ...shared } = options;
  const nullCheck = new NullCheckHttpClient({ ...shared, baseUrl: nullBaseUrl });
  const piDigits = new PiDigitsHttpClient({ ...shared, baseUrl: piBaseUrl });
  return {
    nullCheck,
    piDigits,
    async close() {
      await Promise.all([nullCheck.close(), piDigits.close()]);
    },
  };
}
