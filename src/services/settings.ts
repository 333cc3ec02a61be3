/**
 * The reference services' own settings (`npm run services`, and the embedded services of
 * `npm start`): where they listen, who may call them, how they read the specs' open points, which
 * API versions they serve, and fault injection. The gateway knows none of these. REDIS_URL and its
 * companions are process settings (src/shared/process-settings.ts), read here too.
 */
import { z } from 'zod';
import { DEFAULT_MAX_DIGITS } from '../digits/digit-engine.js';
import { logSettings, processSettings, redisSettings } from '../shared/process-settings.js';
import { bool, type GroupValues, helpText, int, ratio, setting, settingsGroup } from '../shared/settings.js';
import { DEFAULT_SUNSET_DAYS, ENDPOINT_STAGES } from './shared/retirement.js';
import type { ServicesOptions } from './start-services.js';

export const referenceServiceSettings = settingsGroup('reference services', {
  nullPort: setting(
    'NULL_PORT',
    int(0, 65535).default(4001),
    'Port of the null-check reference service under `npm run services`.',
  ),
  piPort: setting(
    'PI_PORT',
    int(0, 65535).default(4002),
    'Port of the pi-digits reference service under `npm run services`.',
  ),
  apiKeys: setting(
    'API_KEYS',
    z
      .string()
      .regex(
        /^\s*[^:,\s]+:(free|pro|enterprise)\s*(,\s*[^:,\s]+:(free|pro|enterprise)\s*)*$/,
        'must be key:tier,key:tier with tiers free|pro|enterprise',
      )
      .optional(),
    'API keys the reference services accept, as key:tier pairs. "free" and no key are always the free tier; any other unknown key is answered 401.',
    '(unset: demo-pro:pro,demo-enterprise:enterprise)',
  ),
  seed: setting(
    'SEED',
    z.coerce.number().int().default(42),
    'Seed of the reference services’ random generator; the same seed reproduces a run.',
  ),
  piOverLimit: setting(
    'PI_OVER_LIMIT',
    z.enum(['reject', 'clamp']).default('reject'),
    'What the pi service does when a caller asks for more digits than their tier allows: reject answers 418 TIER_FORBIDDEN; clamp answers with as many digits as the tier allows.',
  ),
  piEnterpriseMaxDigits: setting(
    'PI_ENTERPRISE_MAX_DIGITS',
    z.enum(['unlimited', '10']).default('unlimited'),
    'Digits per request on the enterprise tier: unlimited (up to PI_MAX_DIGITS) or 10.',
  ),
  piMaxDigits: setting(
    'PI_MAX_DIGITS',
    int(1, 10_000_000).default(DEFAULT_MAX_DIGITS),
    'Most digits the pi service computes for one request, on any tier; beyond it 400 DIGITS_OUT_OF_RANGE.',
  ),
  strictModePro: setting(
    'STRICT_MODE_PRO',
    bool().default(false),
    'Null-check strict_mode on the pro tier: false allows it on enterprise only (418 on pro), true on pro and enterprise.',
  ),
  freeRateLimit: setting(
    'FREE_RATE_LIMIT',
    int(0, 1_000_000).default(60),
    'Requests per minute per caller on the free tier, each service counted separately (its v1 and v2 endpoints together; across every replica when REDIS_URL is set). 0 = unlimited (load tests only).',
  ),
  proRateLimit: setting(
    'PRO_RATE_LIMIT',
    int(0, 1_000_000).default(600),
    'Null-check requests per minute per pro key (the pi service never limits pro keys). 0 = unlimited.',
  ),
  enterpriseRateLimit: setting(
    'ENTERPRISE_RATE_LIMIT',
    int(0, 1_000_000).default(0),
    'Requests per minute per enterprise key, each service counted separately. 0 = unlimited.',
    { note: 'unlimited' },
  ),
});

/** An ISO 8601 date (`2026-01-15`, midnight UTC) or date-time with its offset (`2026-01-15T12:00:00Z`). */
const isoDate = () =>
  z
    .string()
    .regex(
      /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/,
      'must be an ISO 8601 date such as 2026-01-15, or a date-time with its offset such as 2026-01-15T12:00:00Z',
    )
    .refine((text) => {
      // Date() rolls 2026-02-30 over to March: check that the calendar day exists.
      const [year, month, day] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
      const date = new Date(Date.UTC(year, month - 1, day));
      return date.getUTCMonth() === month - 1 && date.getUTCDate() === day && !Number.isNaN(Date.parse(text));
    }, 'must be a real date')
    .transform((text) => new Date(text));

export const apiVersionSettings = settingsGroup('api versions', {
  nullV1: setting(
    'NULL_V1',
    z.enum(ENDPOINT_STAGES).default('on'),
    'Null-check service, POST /api/v1/check: on serves it; deprecated serves it with Deprecation, Sunset and Link headers naming its successor POST /api/v2/null-or-not; off answers it 410 ENDPOINT_RETIRED and leaves it out of /openapi.json. The v2 endpoint is always served.',
  ),
  piV1Pi: setting(
    'PI_V1_PI',
    z.enum(ENDPOINT_STAGES).default('on'),
    'Pi-digits service, GET /api/v1/pi: on serves it; deprecated serves it with Deprecation, Sunset and Link headers naming its successor POST /api/v1/inference; off answers it 410 ENDPOINT_RETIRED and leaves it out of /openapi.json. POST /api/v1/inference is always served.',
  ),
  v1DeprecatedSince: setting(
    'V1_DEPRECATED_SINCE',
    isoDate().optional(),
    'Date a deprecated v1 endpoint announces in its Deprecation header: an ISO 8601 date (2026-01-15, midnight UTC) or date-time with its offset (2026-01-15T12:00:00Z). Set it so that every replica and every restart announce the same dates.',
    '(unset: the moment the service started)',
  ),
  v1SunsetDays: setting(
    'V1_SUNSET_DAYS',
    int(1, 3650).default(DEFAULT_SUNSET_DAYS),
    'Days from V1_DEPRECATED_SINCE to the date a deprecated v1 endpoint announces in its Sunset header, after which it may be switched off.',
  ),
});

/**
 * The fault injection of one reference service (`NULL_FAULT_*`, `PI_FAULT_*`): added latency, and the
 * shares of its requests answered 500 (`answered500` says which) and 503. Both services' groups share
 * the heading "fault injection".
 */
function faultInjectionSettings(env: 'NULL' | 'PI', service: string, answered500: string) {
  return settingsGroup('fault injection', {
    latencyMs: setting(
      `${env}_FAULT_LATENCY_MS`,
      int(0, 600_000).default(0),
      `Milliseconds added to every answer of the ${service} reference service.`,
    ),
    rate500: setting(`${env}_FAULT_500_RATE`, ratio().default(0), `Share (0 to 1) of ${answered500}.`),
    rate503: setting(
      `${env}_FAULT_503_RATE`,
      ratio().default(0),
      `Share (0 to 1) of ${service} requests answered 503.`,
    ),
  });
}

export const nullFaultSettings = faultInjectionSettings(
  'NULL',
  'null-check',
  'null-check checks answered 500 NULL_PARADOX',
);
export const piFaultSettings = faultInjectionSettings('PI', 'pi-digits', 'pi-digits requests answered 500');

/** Every group the reference services read (besides the process, log and Redis groups). */
export const servicesSettings = {
  services: referenceServiceSettings,
  apiVersions: apiVersionSettings,
  nullFaults: nullFaultSettings,
  piFaults: piFaultSettings,
};

/** Every group `npm run services` reads, in the order its `--help` lists them. */
export const servicesCliSettings = {
  process: processSettings,
  ...servicesSettings,
  redis: redisSettings,
  logs: logSettings,
};

/** The `--help` text of `npm run services`. */
export function servicesHelpText(): string {
  return helpText(servicesCliSettings, [
    'Usage: npm run services [-- --help]',
    '',
    'The reference null-check and pi-digits services.',
    '',
  ]);
}

export interface ServicesSettingsValues {
  services: GroupValues<typeof referenceServiceSettings>;
  apiVersions: GroupValues<typeof apiVersionSettings>;
  nullFaults: GroupValues<typeof nullFaultSettings>;
  piFaults: GroupValues<typeof piFaultSettings>;
  redis: GroupValues<typeof redisSettings>;
}

/**
 * The behaviour options from the validated settings. Host and ports are left out on purpose: the
 * embedded services always take free loopback ports, `npm run services` adds NULL_PORT / PI_PORT itself.
 */
export function servicesOptionsFromSettings(settings: ServicesSettingsValues): ServicesOptions {
  const { services, apiVersions, nullFaults, piFaults, redis } = settings;
  return {
    apiKeys: services.apiKeys,
    seed: services.seed,
    freeRateLimit: services.freeRateLimit,
    proRateLimit: services.proRateLimit,
    enterpriseRateLimit: services.enterpriseRateLimit,
    strictModePro: services.strictModePro,
    piOverLimit: services.piOverLimit,
    piEnterpriseMaxDigits: services.piEnterpriseMaxDigits,
    piMaxDigits: services.piMaxDigits,
    nullFaultLatencyMs: nullFaults.latencyMs,
    nullFault500Rate: nullFaults.rate500,
    nullFault503Rate: nullFaults.rate503,
    piFaultLatencyMs: piFaults.latencyMs,
    piFault500Rate: piFaults.rate500,
    piFault503Rate: piFaults.rate503,
    nullV1: apiVersions.nullV1,
    piV1Pi: apiVersions.piV1Pi,
    v1DeprecatedSince: apiVersions.v1DeprecatedSince,
    v1SunsetDays: apiVersions.v1SunsetDays,
    redisUrl: redis.redisUrl,
    redisKeyPrefix: redis.redisKeyPrefix,
    redisTimeoutMs: redis.redisTimeoutMs,
  };
}
