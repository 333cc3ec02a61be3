/**
 * The factory the gateway uses: one HTTP client (with its own undici Pool, retry policy and
 * circuit breaker) per upstream.
 */
import { NullCheckHttpClient } from './null-check-http-client.js';
import { PiDigitsHttpClient } from './pi-digits-http-client.js';
import type { UpstreamClients } from './types.js';
import type { UpstreamTuningOptions } from './upstream-caller.js';

export type { UpstreamCallEvent, UpstreamTuningOptions } from './upstream-caller.js';

export interface UpstreamClientsOptions extends UpstreamTuningOptions {
  /** Base URL of the null-check service, without /api/v1. */
  nullBaseUrl: string;
  /** Base URL of the pi-digits service, without /api/v1. */
  piBaseUrl: string;
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
