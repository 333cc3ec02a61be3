/**
 * The embedded default (docs/contract.md, Running it): when NULL_BASE_URL or PI_BASE_URL is not set,
 * the project's own reference services start in this process on free loopback ports, and the gateway
 * reaches them over HTTP like any other upstream. One starter for the single process (app.ts) and the
 * cluster primary (cluster.ts), which starts them once for all its workers.
 */
import type { AppConfig } from '../config.js';
import type { DigitEngine } from '../digits/digit-engine.js';
import { servicesOptionsFromSettings } from '../services/settings.js';
import { startServices } from '../services/start-services.js';
import type { Logger } from '../shared/logger.js';

export interface UpstreamUrls {
  nullBaseUrl: string;
  piBaseUrl: string;
  /** Whether the embedded services were started for them. */
  embedded: boolean;
}

export interface EmbeddedServicesOptions {
  logger: Logger;
  /** The digit engine the pi service computes with. @default the services' shared engine */
  digits?: DigitEngine | undefined;
}

/** The upstream URLs in use, with the embedded services started when one is not configured. */
export async function startEmbeddedServices(
  config: AppConfig,
  options: EmbeddedServicesOptions,
): Promise<{ upstreams: UpstreamUrls; close(): Promise<void> }> {
  const { nullBaseUrl, piBaseUrl } = config.upstreams;
  if (nullBaseUrl !== undefined && piBaseUrl !== undefined)
    return { upstreams: { nullBaseUrl, piBaseUrl, embedded: false }, close: async () => {} };
  const services = await startServices({
    ...servicesOptionsFromSettings(config),
    host: '127.0.0.1',
    nullPort: 0,
    piPort: 0,
    ...(options.digits === undefined ? {} : { digitEngine: options.digits }),
    logger: options.logger,
  });
  options.logger.info(
    { nullCheck: nullBaseUrl ? 'external' : 'embedded', piDigits: piBaseUrl ? 'external' : 'embedded' },
    'embedded reference services started',
  );
  return {
    upstreams: {
      nullBaseUrl: nullBaseUrl ?? services.nullCheckUrl,
      piBaseUrl: piBaseUrl ?? services.piDigitsUrl,
      embedded: true,
    },
    close: () => services.close(),
  };
}
