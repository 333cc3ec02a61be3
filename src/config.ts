/**
 * Every setting of the gateway and of the reference services, read from the environment, validated
 * with zod, documented once here: the same table drives validation, defaults, `--help` and the
 * README's configuration table (`npm run config:table`).
 *
 * Why one table: a setting that is validated but not documented, or documented with a stale
 * default, is a support ticket. An empty variable counts as unset (contract §5).
 */
import { z } from 'zod';

/** A setting: its environment variable, zod schema (which carries the default) and help text. */
export interface SettingSpec<T extends z.ZodType = z.ZodType> {
  env: string;
  schema: T;
  /** Printed by `--help` and in the README table. */
  help: string;
  /** The default shown in `--help` (the schema holds the real one). */
  defaultText: string;
  group: 'gateway' | 'upstreams' | 'resilience' | 'limits' | 'observability' | 'services' | 'cache';
}

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const ratio = () => z.coerce.number().min(0).max(1);
const bool = () =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])
    .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on');
const httpUrl = () =>
  z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), 'must be an http:// or https:// URL')
    .transform((u) => u.replace(/\/+$/, ''));

function setting<T extends z.ZodType>(
  env: string,
  schema: T,
  defaultText: string,
  group: SettingSpec['group'],
  help: string,
): SettingSpec<T> {
  return { env, schema, defaultText, group, help };
}

/** The settings table. Add new settings here; `loadConfig` and `--help` pick them up. */
export const settings = {
  // --- gateway -------------------------------------------------------------------------------
  port: setting('PORT', int(0, 65535).default(4000), '4000', 'gateway', 'Port the gateway listens on.'),
  host: setting(
    'HOST',
    z.string().min(1).default('::'),
    ':: (all interfaces, IPv4 and IPv6)',
    'gateway',
    'Address the gateway binds to; 127.0.0.1 keeps it to this machine. Falls back to 0.0.0.0 where IPv6 is off.',
  ),
  nodeEnv: setting(
    'NODE_ENV',
    z.enum(['development', 'production', 'test']).default('development'),
    'development',
    'gateway',
    'production: JSON logs, field suggestions hidden, GraphiQL and introspection off unless enabled.',
  ),
  graphiql: setting(
    'GRAPHIQL',
    bool().optional(),
    'on (off in production)',
    'gateway',
    'Serve GraphiQL on a browser GET of /graphql.',
  ),
  introspection: setting(
    'INTROSPECTION',
    bool().optional(),
    'on (off in production)',
    'gateway',
    'Allow schema introspection queries.',
  ),
  corsOrigins: setting(
    'CORS_ORIGINS',
    z.string().optional(),
    '(none: same-origin only)',
    'gateway',
    'Comma-separated list of browser origins allowed by CORS, or * for any origin (credentials are never allowed with *).',
  ),
  shutdownTimeoutMs: setting(
    'SHUTDOWN_TIMEOUT_MS',
    int(0, 600_000).default(10_000),
    '10000',
    'gateway',
    'On SIGTERM/SIGINT, how long in-flight requests may take to finish before the process exits anyway.',
  ),

  // --- upstreams -----------------------------------------------------------------------------
  nullBaseUrl: setting(
    'NULL_BASE_URL',
    httpUrl().optional(),
    '(unset: embedded reference service)',
    'upstreams',
    'Base URL of the null-check service (without /api/v1). Unset: the reference service is started in-process on a free loopback port.',
  ),
  piBaseUrl: setting(
    'PI_BASE_URL',
    httpUrl().optional(),
    '(unset: embedded reference service)',
    'upstreams',
    'Base URL of the pi-digits service (without /api/v1). Unset: the reference service is started in-process on a free loopback port.',
  ),
  upstreamAuthHeader: setting(
    'UPSTREAM_AUTH_HEADER',
    z
      .string()
      .regex(/^[A-Za-z0-9-]+$/, 'must be an HTTP header name')
      .default('authorization'),
    'authorization',
    'upstreams',
    'Header that carries the caller API key to the upstreams. "authorization" sends "Bearer <key>"; any other header sends the bare key.',
  ),
  upstreamTimeoutMs: setting(
    'UPSTREAM_TIMEOUT_MS',
    int(1, 600_000).default(5000),
    '5000',
    'upstreams',
    'How long the gateway waits for an upstream answer (headers and body) before UPSTREAM_TIMEOUT.',
  ),
  upstreamConnections: setting(
    'UPSTREAM_CONNECTIONS',
    int(1, 10_000).default(64),
    '64',
    'upstreams',
    'Keep-alive connections per upstream in its undici Pool.',
  ),
  healthTimeoutMs: setting(
    'HEALTH_TIMEOUT_MS',
    int(1, 60_000).default(1000),
    '1000',
    'upstreams',
    'Timeout of each upstream health call made by the health query and /ready.',
  ),

  // --- resilience ----------------------------------------------------------------------------
  breakerThreshold: setting(
    'BREAKER_THRESHOLD',
    int(0, 10_000).default(5),
    '5',
    'resilience',
    "Consecutive upstream failures (5xx, timeouts, refused connections; not 4xx) that open an upstream's circuit. 0 turns the breaker off.",
  ),
  breakerHalfOpenAfterMs: setting(
    'BREAKER_HALF_OPEN_AFTER_MS',
    int(1, 3_600_000).default(5000),
    '5000',
    'resilience',
    'How long an open circuit stays open before a half-open probe of the upstream health endpoint.',
  ),
  retryMaxAttempts: setting(
    'RETRY_MAX_ATTEMPTS',
    int(1, 10).default(3),
    '3',
    'resilience',
    'Attempts per idempotent upstream call (1 = no retry). Retries only on 503, 429, connection errors; 500 at most once more.',
  ),
  operationDeadlineMs: setting(
    'OPERATION_DEADLINE_MS',
    int(1, 600_000).default(15_000),
    '15000',
    'resilience',
    'Overall deadline of one GraphQL operation, retries and backoff included.',
  ),

  // --- limits --------------------------------------------------------------------------------
  maxRequestBodyBytes: setting(
    'MAX_REQUEST_BODY_BYTES',
    int(1024, 100 * 1024 * 1024).default(1024 * 1024),
    '1048576',
    'limits',
    'Largest accepted request body; larger gets HTTP 413.',
  ),
  maxUpstreamCalls: setting(
    'MAX_UPSTREAM_CALLS',
    int(1, 1000).default(20),
    '20',
    'limits',
    'Most distinct upstream calls one operation may make; an operation over it is refused before any upstream call.',
  ),
  maxDepth: setting('MAX_DEPTH', int(1, 100).default(10), '10', 'limits', 'Maximum selection depth.'),
  maxAliases: setting(
    'MAX_ALIASES',
    int(1, 1000).default(30),
    '30',
    'limits',
    'Maximum aliases per operation.',
  ),
  maxTokens: setting(
    'MAX_TOKENS',
    int(10, 100_000).default(2000),
    '2000',
    'limits',
    'Maximum tokens per document.',
  ),
  maxDirectives: setting(
    'MAX_DIRECTIVES',
    int(1, 1000).default(20),
    '20',
    'limits',
    'Maximum directives per operation.',
  ),
  maxJsonDepth: setting(
    'MAX_JSON_DEPTH',
    int(1, 1000).default(64),
    '64',
    'limits',
    'Maximum nesting depth of a JSON scalar argument (isNull value).',
  ),
  maxJsonBytes: setting(
    'MAX_JSON_BYTES',
    int(2, 10 * 1024 * 1024).default(64 * 1024),
    '65536',
    'limits',
    'Maximum serialized size of a JSON scalar argument.',
  ),
  maxDigits: setting(
    'MAX_DIGITS',
    int(0, 10_000_000).default(1_000_000),
    '1000000',
    'limits',
    'Most digits the gateway asks for; above it the field fails with BAD_USER_INPUT without calling the upstream.',
  ),

  // --- cache ---------------------------------------------------------------------------------
  responseCache: setting(
    'RESPONSE_CACHE',
    bool().default(true),
    'true',
    'cache',
    'Deterministic-answer cache: temperature-0 answers of null-x-4o/null-x-opus and pi-x-4o are reused per tier within the TTL, and identical concurrent calls share one upstream call.',
  ),
  responseCacheTtlMs: setting(
    'RESPONSE_CACHE_TTL_MS',
    int(0, 86_400_000).default(60_000),
    '60000',
    'cache',
    'Time to live of a deterministic-answer cache entry.',
  ),
  responseCacheMaxEntries: setting(
    'RESPONSE_CACHE_MAX_ENTRIES',
    int(1, 10_000_000).default(10_000),
    '10000',
    'cache',
    'Entries kept by the deterministic-answer cache (least recently used first out).',
  ),
  workers: setting(
    'WORKERS',
    int(1, 256).default(1),
    '1',
    'gateway',
    'Gateway processes (node:cluster) sharing the port. Embedded reference services run once, in the primary.',
  ),
  httpFastPath: setting(
    'HTTP_FAST_PATH',
    bool().default(true),
    'true',
    'gateway',
    "Serve GraphQL POSTs with a JSON body on a lean node:http adapter that drives the same Yoga plugins and pipeline (docs/performance.md); false sends every request through Yoga's own HTTP handler.",
  ),

  // --- observability -------------------------------------------------------------------------
  logLevel: setting(
    'LOG_LEVEL',
    z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    'info',
    'observability',
    'pino log level.',
  ),
  logFormat: setting(
    'LOG_FORMAT',
    z.enum(['json', 'pretty']).optional(),
    'json in production, pretty otherwise',
    'observability',
    'Log line format.',
  ),
  sponsorLogIntervalMs: setting(
    'SPONSOR_LOG_INTERVAL_MS',
    int(0, 86_400_000).default(60_000),
    '60000',
    'observability',
    'Each distinct sponsor message is logged at most once per interval (the upstream terms require logging it).',
  ),
  tracing: setting(
    'OTEL_TRACING',
    bool().default(false),
    'false',
    'observability',
    'OpenTelemetry spans for each operation and upstream call (needs an SDK registered by the host, e.g. via --import).',
  ),

  // --- reference services --------------------------------------------------------------------
  nullPort: setting(
    'NULL_PORT',
    int(0, 65535).default(4001),
    '4001',
    'services',
    'Port of the null-check reference service under `npm run services`.',
  ),
  piPort: setting(
    'PI_PORT',
    int(0, 65535).default(4002),
    '4002',
    'services',
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
    '(unset: demo-pro:pro,demo-enterprise:enterprise)',
    'services',
    'API keys the reference services accept, key:tier pairs. "free" and no key are always the free tier; any other unknown key is 401.',
  ),
  seed: setting(
    'SEED',
    z.coerce.number().int().default(42),
    '42',
    'services',
    'Seed of the reference services’ random generator; the same seed reproduces a run.',
  ),
  piOverLimit: setting(
    'PI_OVER_LIMIT',
    z.enum(['reject', 'clamp']).default('reject'),
    'reject',
    'services',
    'Pi service, more digits than the tier allows: reject with 418 (the error table) or clamp politely (the spec example).',
  ),
  piEnterpriseMaxDigits: setting(
    'PI_ENTERPRISE_MAX_DIGITS',
    z.enum(['unlimited', '10']).default('unlimited'),
    'unlimited',
    'services',
    'Enterprise digit limit: "unlimited" (the limits table, up to PI_MAX_DIGITS) or "10" (the client-library comment).',
  ),
  piMaxDigits: setting(
    'PI_MAX_DIGITS',
    int(1, 10_000_000).default(1_000_000),
    '1000000',
    'services',
    'Hard maximum digits per request of the pi service (any tier); beyond it 400 DIGITS_OUT_OF_RANGE.',
  ),
  strictModePro: setting(
    'STRICT_MODE_PRO',
    bool().default(false),
    'false',
    'services',
    'Null-check strict_mode for the pro tier: false follows the error table/auth section (enterprise only), true the limits table.',
  ),
  proRateLimit: setting(
    'PRO_RATE_LIMIT',
    int(0, 1_000_000).default(600),
    '600',
    'services',
    'Null-check requests per minute per pro key (its spec leaves it open; the pi spec says pro is unlimited, and so is the pi service). 0 = unlimited.',
  ),
  enterpriseRateLimit: setting(
    'ENTERPRISE_RATE_LIMIT',
    int(0, 1_000_000).default(0),
    '0 (unlimited)',
    'services',
    'Requests per minute per key for the enterprise tier. 0 = unlimited.',
  ),
  freeRateLimit: setting(
    'FREE_RATE_LIMIT',
    int(0, 1_000_000).default(60),
    '60',
    'services',
    'Requests per minute per key for the free tier (the specs: 60). 0 = unlimited (for load tests only).',
  ),
  nullFaultLatencyMs: setting(
    'NULL_FAULT_LATENCY_MS',
    int(0, 600_000).default(0),
    '0',
    'services',
    'Fault injection: latency added to every null-check answer.',
  ),
  nullFault500Rate: setting(
    'NULL_FAULT_500_RATE',
    ratio().default(0),
    '0',
    'services',
    'Fault injection: share of null-check checks answered 500 (null paradox).',
  ),
  nullFault503Rate: setting(
    'NULL_FAULT_503_RATE',
    ratio().default(0),
    '0',
    'services',
    'Fault injection: share of null-check requests answered 503.',
  ),
  piFaultLatencyMs: setting(
    'PI_FAULT_LATENCY_MS',
    int(0, 600_000).default(0),
    '0',
    'services',
    'Fault injection: latency added to every pi-digits answer.',
  ),
  piFault500Rate: setting(
    'PI_FAULT_500_RATE',
    ratio().default(0),
    '0',
    'services',
    'Fault injection: share of pi-digits requests answered 500.',
  ),
  piFault503Rate: setting(
    'PI_FAULT_503_RATE',
    ratio().default(0),
    '0',
    'services',
    'Fault injection: share of pi-digits requests answered 503.',
  ),
} as const satisfies Record<string, SettingSpec>;

type Settings = typeof settings;
/** The validated configuration: one property per setting. */
export type Config = { [K in keyof Settings]: z.output<Settings[K]['schema']> };

/** A configuration error: one clear line naming the variable, never a stack trace. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Reads and validates every setting from `env`. Throws a {@link ConfigError} naming the first bad
 * variable (all of them, one per line, when several are bad).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, spec] of Object.entries(settings) as [string, SettingSpec][]) {
    const raw = env[spec.env];
    const value = raw === undefined || raw.trim() === '' ? undefined : raw.trim();
    const parsed = spec.schema.safeParse(value);
    if (parsed.success) {
      out[key] = parsed.data;
    } else {
      const issue = parsed.error.issues[0];
      // The value itself is echoed only when short and not secret-looking (API_KEYS carries keys).
      const shown = spec.env === 'API_KEYS' ? '(value hidden)' : JSON.stringify(value);
      problems.push(`${spec.env}=${shown}: ${issue?.message ?? 'invalid value'}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return out as Config;
}

/** The `--help` text: every setting with its default. */
export function helpText(): string {
  const lines = [
    'Usage: npm start [-- --help]',
    '',
    'GraphQL gateway in front of the null-check and pi-digits services.',
    'Every setting is an environment variable; an empty variable counts as unset.',
    '',
  ];
  let group = '';
  for (const spec of Object.values(settings) as SettingSpec[]) {
    if (spec.group !== group) {
      group = spec.group;
      lines.push(`${group.toUpperCase()}`);
    }
    lines.push(`  ${spec.env.padEnd(28)} default: ${spec.defaultText}`);
    lines.push(`  ${''.padEnd(28)} ${spec.help}`);
  }
  return lines.join('\n');
}

/** The README configuration table (Markdown), kept in sync by `npm run config:table`. */
export function markdownTable(): string {
  const rows = (Object.values(settings) as SettingSpec[]).map(
    (s) =>
      `| \`${s.env}\` | ${s.defaultText.replace(/\|/g, '\\|')} | ${s.group} | ${s.help.replace(/\|/g, '\\|')} |`,
  );
  return ['| variable | default | group | meaning |', '|---|---|---|---|', ...rows].join('\n');
}
