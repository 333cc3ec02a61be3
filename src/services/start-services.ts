/**
 * Starts both reference services on loopback ports: the embedded default of `npm start` and the body
 * of `npm run services` (src/services/main.ts).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { DigitEngine } from '../digits/digit-engine.js';
import { createNullCheckService } from './null-check/null-check-service.js';
import { createPiDigitsService } from './pi-digits/pi-digits-service.js';
import { createRateLimitRedis, type RateLimitRedis } from './shared/rate-limit-redis.js';
import type { EndpointStage } from './shared/retirement.js';
import type { ServiceAppOptions } from './shared/service-app.js';

/** How long a start waits for Redis, so that the first requests already count in the shared buckets. */
const REDIS_START_WAIT_MS = 2000;

/** The options both services take with the same value (documented on ServiceAppOptions). */
type SharedOptions = Pick<
  ServiceAppOptions,
  | 'apiKeys'
  | 'seed'
  | 'freeRateLimit'
  | 'enterpriseRateLimit'
  | 'rateLimitWindowMs'
  | 'bodyLimit'
  | 'logRequests'
  | 'trustProxy'
  | 'redisKeyPrefix'
>;

export interface ServicesOptions extends SharedOptions {
  /** Address both services bind to. @default '127.0.0.1' */
  host?: string;
  /** Port of the null-check service; 0 picks a free one. @default 0 */
  nullPort?: number;
  /** Port of the pi-digits service; 0 picks a free one. @default 0 */
  piPort?: number;
  /** Requests per window per pro key on the null-check service (pi-digits: unlimited, its table); 0 = unlimited. @default 600 */
  proRateLimit?: number;
  /** Null-check strict_mode for pro too (the limits table's reading). @default false */
  strictModePro?: boolean;
  /** Pi: over the tier's digit limit, 'reject' (418) or 'clamp'. @default 'reject' */
  piOverLimit?: 'reject' | 'clamp';
  /** Pi: the enterprise digit limit, 'unlimited' (up to piMaxDigits) or 10. @default 'unlimited' */
  piEnterpriseMaxDigits?: 'unlimited' | '10' | number;
  /** Pi: hard maximum decimals per request, any tier (400 DIGITS_OUT_OF_RANGE beyond). @default 1000000 */
  piMaxDigits?: number;
  /** Pi: the digit engine. @default sharedDigitEngine() */
  digitEngine?: DigitEngine;
  /** Fault injection, null-check: added latency in ms. @default 0 */
  nullFaultLatencyMs?: number;
  /** Fault injection, null-check: share of checks answered 500 NULL_PARADOX. @default 0 */
  nullFault500Rate?: number;
  /** Fault injection, null-check: share of checks answered 503. @default 0 */
  nullFault503Rate?: number;
  /** Fault injection, pi-digits: added latency in ms. @default 0 */
  piFaultLatencyMs?: number;
  /** Fault injection, pi-digits: share of requests answered 500 INTERNAL_ERROR. @default 0 */
  piFault500Rate?: number;
  /** Fault injection, pi-digits: share of requests answered 503. @default 0 */
  piFault503Rate?: number;
  /** A pino logger; each service logs through a child with `service` set. @default none (silent) */
  logger?: FastifyBaseLogger;
  /** Null-check POST /api/v1/check: 'on', 'deprecated' (with Deprecation/Sunset/Link headers) or 'off' (410). @default 'on' */
  nullV1?: EndpointStage;
  /** Pi-digits GET /api/v1/pi: 'on', 'deprecated' (with Deprecation/Sunset/Link headers) or 'off' (410). @default 'on' */
  piV1Pi?: EndpointStage;
  /** The `Deprecation` date of deprecated v1 endpoints. @default the moment the services are created */
  v1DeprecatedSince?: Date | undefined;
  /** Days from `v1DeprecatedSince` to the announced `Sunset`. @default 90 */
  v1SunsetDays?: number;
  /**
   * Redis for the rate limits (`redis://...`), shared by every replica; one connection for both
   * services, closed with them. @default none: limits in memory, per process
   */
  redisUrl?: string | undefined;
  /** Longest wait for one Redis command before a request is counted in memory instead. @default 25 */
  redisTimeoutMs?: number;
  /** Longest pause between two Redis reconnection attempts (tests shorten it). @default 2000 */
  redisMaxReconnectDelayMs?: number;
}

export interface RunningServices {
  /**
   * e.g. http://127.0.0.1:43121 (base URL without /api/v1), reachable from this machine: loopback when
   * the services are bound to every interface (`::`, `0.0.0.0`).
   */
  nullCheckUrl: string;
  /** e.g. http://127.0.0.1:43122 (base URL without /api/v1). */
  piDigitsUrl: string;
  close(): Promise<void>;
}

/** Both services, not listening yet. */
export interface CreatedServices {
  nullCheck: FastifyInstance;
  piDigits: FastifyInstance;
  /** The Redis connection both share (closed once both are closed), when `redisUrl` is set. */
  redis: RateLimitRedis | undefined;
}

/** Builds both services from the combined options (not listening). */
export function createServices(options: ServicesOptions = {}): CreatedServices {
  const redis =
    options.redisUrl === undefined
      ? undefined
      : createRateLimitRedis({
          url: options.redisUrl,
          timeoutMs: options.redisTimeoutMs,
          maxReconnectDelayMs: options.redisMaxReconnectDelayMs,
          logger: options.logger?.child({ component: 'rate-limit-redis' }),
        });
  const common = {
    apiKeys: options.apiKeys,
    seed: options.seed,
    freeRateLimit: options.freeRateLimit,
    proRateLimit: options.proRateLimit,
    enterpriseRateLimit: options.enterpriseRateLimit,
    rateLimitWindowMs: options.rateLimitWindowMs,
    bodyLimit: options.bodyLimit,
    logRequests: options.logRequests,
    trustProxy: options.trustProxy,
    redis,
    redisKeyPrefix: options.redisKeyPrefix,
    // One date for both services, so that they announce the same.
    deprecatedSince: options.v1DeprecatedSince ?? new Date(),
    sunsetDays: options.v1SunsetDays,
  };
  const enterpriseMax = options.piEnterpriseMaxDigits;
  const nullCheck = createNullCheckService({
    ...common,
    logger: options.logger?.child({ service: 'null-check' }),
    strictModePro: options.strictModePro,
    v1Check: options.nullV1,
    faultLatencyMs: options.nullFaultLatencyMs,
    fault500Rate: options.nullFault500Rate,
    fault503Rate: options.nullFault503Rate,
  });
  const piDigits = createPiDigitsService({
    ...common,
    // The pi spec's limits table says pro is unlimited; PRO_RATE_LIMIT fills the null spec's gap only.
    proRateLimit: 0,
    logger: options.logger?.child({ service: 'pi-digits' }),
    overLimit: options.piOverLimit,
    enterpriseMaxDigits:
      enterpriseMax === undefined || enterpriseMax === 'unlimited' ? 'unlimited' : Number(enterpriseMax),
    maxDigits: options.piMaxDigits,
    digitEngine: options.digitEngine,
    v1Pi: options.piV1Pi,
    faultLatencyMs: options.piFaultLatencyMs,
    fault500Rate: options.piFault500Rate,
    fault503Rate: options.piFault503Rate,
  });
  if (redis) {
    // The connection outlives whichever service closes first.
    let open = 2;
    const release = async () => {
      open -= 1;
      if (open === 0) await redis.close();
    };
    nullCheck.addHook('onClose', release);
    piDigits.addHook('onClose', release);
  }
  return { nullCheck, piDigits, redis };
}

/** A URL that reaches the service from this machine (loopback when bound to every interface). */
function baseUrl(app: FastifyInstance): string {
  const address = app.server.address() as AddressInfo;
  const unspecified = address.address === '::' || address.address === '0.0.0.0';
  const host = unspecified
    ? '127.0.0.1'
    : address.family === 'IPv6'
      ? `[${address.address}]`
      : address.address;
  return `http://${host}:${address.port}`;
}

/** Listens on `host`; `::` falls back to 0.0.0.0 where IPv6 is off (as the gateway does). */
async function listen(app: FastifyInstance, host: string, port: number): Promise<void> {
  try {
    await app.listen({ host, port });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (host !== '::' || (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL')) throw error;
    await app.listen({ host: '0.0.0.0', port });
  }
}

/** Starts both services; resolves once both listen. A failure closes whatever had started. */
export async function startServices(options: ServicesOptions = {}): Promise<RunningServices> {
  const host = options.host ?? '127.0.0.1';
  const { nullCheck, piDigits, redis } = createServices(options);
  try {
    // Never fails the start: Redis down only means memory until it is back.
    await redis?.whenReady(REDIS_START_WAIT_MS);
    await listen(nullCheck, host, options.nullPort ?? 0);
    await listen(piDigits, host, options.piPort ?? 0);
  } catch (error) {
    await Promise.allSettled([nullCheck.close(), piDigits.close()]);
    throw error;
  }
  return {
    nullCheckUrl: baseUrl(nullCheck),
    piDigitsUrl: baseUrl(piDigits),
    close: async () => {
      await Promise.all([nullCheck.close(), piDigits.close()]);
    },
  };
}
