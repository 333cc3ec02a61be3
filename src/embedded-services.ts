/**
 * The embedded default (docs/contract.md, Running it), the process entry's job and not the gateway's:
 * when NULL_BASE_URL or PI_BASE_URL is not set, `npm start` starts the project's reference services in
 * its own process on free loopback ports and gives the gateway their URLs, which it reaches over HTTP
 * like any other upstream. The gateway (src/gateway/) imports nothing of the services, nor they of it;
 * this module, beside src/main.ts, is where the two meet: for one process (`startGateway`), for the
 * cluster primary (`runCluster`, the services started once for every worker) and for the tests'
 * fixture (test/support/gateway.ts).
 *
 * One API_KEYS for both: the embedded services accept the keys of the gateway's API_KEYS (parsed once,
 * by the gateway), and when it is unset the gateway is given the services' demo keys as its tiers, so
 * that a key has the same tier for its budget as for the services. With AUTH_ISSUER and no
 * UPSTREAM_KEYS, the gateway holds the first of those keys of each paying tier for its token callers.
 */
import type { AppConfig } from './config.js';
import type { DigitEngine } from './digits/digit-engine.js';
import { type App, type AppOptions, createApp } from './gateway/app.js';
import { runClusterPrimary } from './gateway/cluster.js';
import { servicesOptionsFromSettings } from './services/settings.js';
import { apiKeyMap } from './services/shared/api-keys.js';
import { startServices } from './services/start-services.js';
import type { Logger } from './shared/logger.js';

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

export interface EmbeddedServices {
  /**
   * The configuration the gateway runs with: the given one, with the upstream URLs in use and, with
   * the embedded services, API_KEYS's tiers as they read it (their demo keys when it is unset).
   */
  readonly config: AppConfig;
  readonly upstreams: UpstreamUrls;
  /** What a cluster worker's environment adds so that it fronts the same upstreams with the same tiers. */
  readonly workerEnv: Record<string, string>;
  close(): Promise<void>;
}

/** The upstreams in use, with the embedded services started when a URL is not configured. */
export async function startEmbeddedServices(
  config: AppConfig,
  options: EmbeddedServicesOptions,
): Promise<EmbeddedServices> {
  const { nullBaseUrl, piBaseUrl } = config.upstreams;
  if (nullBaseUrl !== undefined && piBaseUrl !== undefined)
    return {
      config,
      upstreams: { nullBaseUrl, piBaseUrl, embedded: false },
      workerEnv: {},
      close: async () => {},
    };
  // The services' reading of the one variable: the gateway's parsed keys, or their demo keys.
  const apiKeys = apiKeyMap(config.server.apiKeys);
  const services = await startServices({
    ...servicesOptionsFromSettings(config),
    apiKeys,
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
  const upstreams = {
    nullBaseUrl: nullBaseUrl ?? services.nullCheckUrl,
    piBaseUrl: piBaseUrl ?? services.piDigitsUrl,
    embedded: true,
  };
  const workerEnv: Record<string, string> = {
    NULL_BASE_URL: upstreams.nullBaseUrl,
    PI_BASE_URL: upstreams.piBaseUrl,
  };
  // Set, API_KEYS reaches the workers with the rest of the environment; unset, they need the demo keys.
  if (config.server.apiKeys === undefined)
    workerEnv.API_KEYS = [...apiKeys].map(([key, tier]) => `${key}:${tier}`).join(',');
  // Token callers of the embedded services are sent with a key those services accept for their tier.
  const upstreamKeys = config.auth.upstreamKeys ?? tierKeysOf(apiKeys);
  if (config.auth.upstreamKeys === undefined && config.auth.issuer !== undefined && upstreamKeys.size > 0)
    workerEnv.UPSTREAM_KEYS = [...upstreamKeys].map(([tier, key]) => `${tier}:${key}`).join(',');
  return {
    config: {
      ...config,
      server: { ...config.server, apiKeys },
      auth: { ...config.auth, upstreamKeys: config.auth.issuer === undefined ? undefined : upstreamKeys },
      upstreams: { ...config.upstreams, nullBaseUrl: upstreams.nullBaseUrl, piBaseUrl: upstreams.piBaseUrl },
    },
    upstreams,
    workerEnv,
    close: () => services.close(),
  };
}

/** The first key of each paying tier among the services' keys: what the gateway sends for a user of it. */
function tierKeysOf(apiKeys: ReadonlyMap<string, string>): Map<'pro' | 'enterprise', string> {
  const keys = new Map<'pro' | 'enterprise', string>();
  for (const [key, tier] of apiKeys)
    if ((tier === 'pro' || tier === 'enterprise') && !keys.has(tier)) keys.set(tier, key);
  return keys;
}

/** A gateway of `startGateway`: the app, and the upstreams it fronts. */
export interface EmbeddedApp extends App {
  /** The upstream base URLs in use (the embedded services' when they were started). */
  readonly upstreams: UpstreamUrls;
}

/**
 * `createApp` in front of the upstreams in use, the embedded services started first when a URL is not
 * set (with `options.digits` as their engine too); `close()` stops the gateway, then the services.
 */
export async function startGateway(config: AppConfig, options: AppOptions): Promise<EmbeddedApp> {
  const services = await startEmbeddedServices(config, { logger: options.logger, digits: options.digits });
  let app: App;
  try {
    app = await createApp(services.config, options);
  } catch (error) {
    await services.close();
    throw error;
  }
  let closing: ReturnType<App['close']> | undefined;
  return {
    ...app,
    upstreams: services.upstreams,
    close() {
      closing ??= app.close().then(async (drained) => {
        await services.close();
        return drained;
      });
      return closing;
    },
  };
}

/**
 * `npm start` with WORKERS > 1: the embedded services started once, here in the primary, and every
 * worker given their URLs; they stop once every worker has. Resolves with the process exit code.
 */
export async function runCluster(config: AppConfig, logger: Logger): Promise<number> {
  const services = await startEmbeddedServices(config, { logger });
  return runClusterPrimary(config, logger, { workerEnv: services.workerEnv, onStopped: services.close });
}
