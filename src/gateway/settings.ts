/**
 * The gateway's settings, one group per component; `createApp` hands each component its own group.
 * The gateway reads only these (and the process, log and Redis groups): none of the reference
 * services', which it reaches over HTTP like any other upstream.
 */
import { z } from 'zod';
import { DEFAULT_MAX_DIGITS } from '../digits/digit-engine.js';
import { logSettings, processSettings, redisSettings, redisUrlSchema } from '../shared/process-settings.js';
import {
  bool,
  httpUrl,
  int,
  parsedBy,
  ratio,
  type SettingsValues,
  setting,
  settingsGroup,
} from '../shared/settings.js';
import { parseBudgets } from './budget-settings.js';
import { parseApiKeys, parseUpstreamKeys } from './identity.js';

/** MCP_ALLOWED_ORIGINS: each entry an origin (scheme://host[:port]), as browsers send it in `Origin`. */
function parseOrigins(text: string): string[] {
  const origins: string[] = [];
  text.split(',').forEach((raw, index) => {
    const entry = raw.trim();
    if (entry === '') return;
    let url: URL | undefined;
    try {
      url = new URL(entry);
    } catch {
      url = undefined;
    }
    if (
      url === undefined ||
      url.origin === 'null' ||
      url.pathname !== '/' ||
      url.search !== '' ||
      url.hash !== ''
    )
      throw new Error(`entry #${index + 1} is not an origin such as https://agent.example.com`);
    const origin = url.origin;
    origins.push(origin);
  });
  return origins;
}

export const serverSettings = settingsGroup('gateway', {
  port: setting('PORT', int(0, 65535).default(4000), 'Port the gateway listens on.'),
  graphiql: setting(
    'GRAPHIQL',
    bool().default(true),
    'Serve GraphiQL (self-hosted, no CDN) on a browser GET of /graphql. When off, a browser gets a short page saying so.',
  ),
  introspection: setting(
    'INTROSPECTION',
    bool().default(true),
    'Answer schema introspection (__schema, __type). GraphiQL and tools that read the schema from the endpoint need it (not Apollo Client possibleTypes: codegen writes them, generated/client/possible-types.ts).',
  ),
  corsOrigins: setting(
    'CORS_ORIGINS',
    z.string().optional(),
    'Comma-separated list of browser origins allowed by CORS, or * for any origin (credentials are never allowed with *). Such a page may send the keys, X-Max-Cost-Usd, X-Budget-Fallback and traceparent, and read x-request-id, RateLimit, RateLimit-Policy and Retry-After.',
    '(none: same-origin only)',
  ),
  workers: setting(
    'WORKERS',
    int(1, 256).default(1),
    'Gateway processes (node:cluster) sharing the port. Embedded reference services run once, in the primary.',
  ),
  httpFastPath: setting(
    'HTTP_FAST_PATH',
    bool().default(true),
    "Serve plain JSON POSTs of known operations on the gateway's fast path (same answers, less CPU); false sends every request through Yoga's own handler.",
  ),
  trustedDocuments: setting(
    'TRUSTED_DOCUMENTS',
    z.string().optional(),
    'A trusted-documents manifest: JSON { "<sha256 hex of the document>": "<document>" }, the GraphQL Code Generator client preset\'s persisted-documents.json. Every entry is checked at start (hash, parse, validation); a bad one stops the start.',
    '(none)',
  ),
  trustedDocumentsMode: setting(
    'TRUSTED_DOCUMENTS_MODE',
    z.enum(['off', 'log', 'enforce']).optional(),
    'off: any operation runs. log: any operation runs; those not in the manifest are counted (gateway_untrusted_operations_total) and logged once per document. enforce: only manifest documents run (by documentId or identical text), anything else is PERSISTED_QUERY_NOT_IN_LIST and calls nothing; needs TRUSTED_DOCUMENTS.',
    'log with a manifest, off without',
  ),
  apq: setting(
    'APQ',
    bool().default(true),
    'Automatic persisted queries: a hash sent with its text registers the document once it has parsed and passed validation (off and log modes). false: nothing registers; a hash alone is PERSISTED_QUERY_NOT_FOUND.',
  ),
  apqMaxDocumentBytes: setting(
    'APQ_MAX_DOCUMENT_BYTES',
    int(0, 100 * 1024 * 1024).default(65_536),
    'Largest APQ document registered, in bytes: a larger one still runs when sent with its text, but is not stored (its hash alone stays PERSISTED_QUERY_NOT_FOUND).',
  ),
  apqMaxDocumentsPerClient: setting(
    'APQ_MAX_DOCUMENTS_PER_CLIENT',
    int(1, 10_000_000).default(1000),
    'Most new APQ documents one client may register in 24 hours (across replicas with Redis); later ones still run but are not stored. A client is its API key (by its sha256), or its address for a caller without a key or with the key free.',
  ),
  apiKeys: setting(
    'API_KEYS',
    z
      .string()
      .optional()
      .transform((value, context) => {
        if (value === undefined) return undefined;
        try {
          return parseApiKeys(value);
        } catch {
          // The reference services' wording: under `npm start` both read this variable, one line says it.
          context.addIssue({
            code: 'custom',
            message: 'must be key:tier,key:tier with tiers free|pro|enterprise',
          });
          return z.NEVER;
        }
      }),
    'API keys and their tiers, as key:tier pairs (tiers free|pro|enterprise): a listed key gets the COST_BUDGETS scope of its tier. The gateway forwards every key and lets the upstreams accept or refuse it; "free" and no key are the anonymous caller. The embedded reference services read the same variable.',
    '(unset: no tiers; with the embedded services, theirs: demo-pro:pro,demo-enterprise:enterprise)',
  ),
  compressionMinBytes: setting(
    'COMPRESSION_MIN_BYTES',
    int(0, 1_073_741_824).default(1024),
    'Answers of at least this many bytes are compressed when the client accepts it (Accept-Encoding: zstd, br or gzip), with Vary: Accept-Encoding; smaller ones are sent as they are.',
  ),
  mcp: setting(
    'MCP',
    bool().default(true),
    'Serve the Model Context Protocol on POST /mcp (Streamable HTTP, stateless): every GraphQL query operation of the gateway (or of TRUSTED_DOCUMENTS) as a tool, under the same API keys, budgets, costs and error codes as POST /graphql. false: /mcp is 404.',
  ),
  mcpAllowedOrigins: setting(
    'MCP_ALLOWED_ORIGINS',
    parsedBy(parseOrigins),
    'Comma-separated browser origins (scheme://host[:port]) whose requests /mcp accepts besides loopback ones (localhost, 127.0.0.1, [::1], any port); a request with any other Origin is refused with 403 (DNS-rebinding protection). Requests without Origin are not affected.',
    '(none: loopback origins only)',
  ),
});

/** AUTH_ISSUER: an http(s) URL kept exactly as written (a token's `iss` must equal it, trailing slash included). */
const issuerUrl = () =>
  z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), 'must be an http:// or https:// URL')
    .refine((u) => !u.includes('?') && !u.includes('#'), 'must be an issuer URL without query or fragment');

/** A comma-separated list of non-empty values. */
const list = () =>
  z
    .string()
    .transform((text) =>
      text
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry !== ''),
    )
    .refine((entries) => entries.length > 0, 'must name at least one value');

export const authSettings = settingsGroup('identity provider', {
  issuer: setting(
    'AUTH_ISSUER',
    issuerUrl().optional(),
    "OpenID Connect issuer whose tokens identify callers (frontends, agents over OAuth), exactly as its tokens' iss says. Its discovery document and JWKS are fetched and cached, keys rotated as the JWKS changes. A bearer credential that is a JWT is verified (asymmetric signature by a key of the JWKS, iss, aud, exp, nbf); a verified token is a caller of its own, with its own budget, and the gateway calls the upstreams with UPSTREAM_KEYS' key of its tier.",
    '(unset: API keys only)',
  ),
  audience: setting(
    'AUTH_AUDIENCE',
    list().optional(),
    'Comma-separated audiences a token must name one of (its aud): the API identifier the provider issues tokens for, and the /mcp URL for agents that ask for tokens with resource=<that URL>. Required with AUTH_ISSUER.',
    '(none; required with AUTH_ISSUER)',
  ),
  tierClaim: setting(
    'AUTH_TIER_CLAIM',
    z.string().min(1).max(256).default('tier'),
    "The token claim that names the caller's tier: pro or enterprise (or a list holding one: the highest counts); any other value, or none, is the free tier.",
  ),
  clockToleranceS: setting(
    'AUTH_CLOCK_TOLERANCE_S',
    int(0, 600).default(30),
    "Seconds of clock skew allowed when checking a token's exp and nbf.",
  ),
  mode: setting(
    'AUTH_MODE',
    z.enum(['both', 'tokens']).default('both'),
    'With AUTH_ISSUER: both, a bearer JWT is verified and any other credential is an API key; tokens, API keys are refused with 401 (callers without a credential stay the free tier on /graphql; /mcp asks for a token).',
  ),
  jwksMaxAgeS: setting(
    'AUTH_JWKS_MAX_AGE_S',
    int(1, 86_400).default(600),
    "How long the issuer's JWKS is used before it is fetched again: a key the issuer dropped stops verifying at most this long after.",
  ),
  jwksCooldownS: setting(
    'AUTH_JWKS_COOLDOWN_S',
    int(0, 3600).default(30),
    'After a JWKS fetch, how long a token signed by an unknown key (kid) waits before it may cause another (a rotated key is fetched; a flood of made-up kids is not passed on to the provider).',
  ),
  issuerTimeoutMs: setting(
    'AUTH_ISSUER_TIMEOUT_MS',
    int(1, 60_000).default(3000),
    'Longest wait for the discovery document or the JWKS; past it a token caller is answered 503 (UPSTREAM_UNAVAILABLE), API-key callers never wait.',
  ),
  tokenCache: setting(
    'AUTH_TOKEN_CACHE',
    int(0, 1_000_000).default(10_000),
    'Verified tokens remembered by their text (at most 8 MiB of them), so a token is verified once, not on every request: never past its exp, and no longer once the JWKS was fetched again. 0 verifies every request.',
  ),
  upstreamKeys: setting(
    'UPSTREAM_KEYS',
    parsedBy(parseUpstreamKeys),
    "The upstream API keys the gateway holds for callers identified by a token, as tier:key pairs (pro:<key>,enterprise:<key>), or @<file> holding them (a mounted secret). A verified caller's upstream calls carry its tier's key; free: none unless listed. Never logged.",
    '(unset: none; with the embedded services, their demo keys: pro:demo-pro,enterprise:demo-enterprise)',
  ),
  publicUrl: setting(
    'PUBLIC_URL',
    httpUrl().optional(),
    "The gateway's external base URL (https://api.example.com), as clients reach it through proxies: the resource that /.well-known/oauth-protected-resource names for /mcp.",
    '(unset: from the request: X-Forwarded-Proto or http, and its Host)',
  ),
});

export const upstreamSettings = settingsGroup('upstreams', {
  nullBaseUrl: setting(
    'NULL_BASE_URL',
    httpUrl().optional(),
    'Base URL of the null-check service, without /api/v1. Unset: the reference service is started in-process on a free loopback port.',
    '(unset: embedded reference service)',
  ),
  piBaseUrl: setting(
    'PI_BASE_URL',
    httpUrl().optional(),
    'Base URL of the pi-digits service, without /api/v1. Unset: the reference service is started in-process on a free loopback port.',
    '(unset: embedded reference service)',
  ),
  authHeader: setting(
    'UPSTREAM_AUTH_HEADER',
    z
      .string()
      .regex(/^[A-Za-z0-9-]+$/, 'must be an HTTP header name')
      .default('authorization'),
    'Header that carries the caller API key to the upstreams. "authorization" sends "Bearer <key>"; any other header sends the bare key.',
  ),
  timeoutMs: setting(
    'UPSTREAM_TIMEOUT_MS',
    int(1, 600_000).default(5000),
    'How long the gateway waits for one upstream answer (headers and body) before the field fails with UPSTREAM_TIMEOUT.',
  ),
  connections: setting(
    'UPSTREAM_CONNECTIONS',
    int(1, 10_000).default(64),
    'Keep-alive connections per upstream.',
  ),
  healthTimeoutMs: setting(
    'HEALTH_TIMEOUT_MS',
    int(1, 60_000).default(1000),
    'Timeout of each upstream health call made by the health query and /ready.',
  ),
  nullApiVersion: setting(
    'NULL_API_VERSION',
    z.enum(['auto', 'v1', 'v2']).default('auto'),
    'API of the null-check service: v1 (POST /api/v1/check), v2 (POST /api/v2/null-or-not, with a philosophical analysis), or auto: v2 when the service lists it in its /openapi.json, and a switch at run time when an endpoint answers 404 or 410, with no client-visible error.',
  ),
  piApiVersion: setting(
    'PI_API_VERSION',
    z.enum(['auto', 'v1', 'v2']).default('auto'),
    'API of the pi-digits service for the pi query: v1 (GET /api/v1/pi), v2 (POST /api/v1/inference, needs PI_WAIVER_ACCEPTED), or auto: v1 while it is served, v2 once it answers 404 or 410.',
  ),
  piWaiverAccepted: setting(
    'PI_WAIVER_ACCEPTED',
    bool().default(false),
    "The operator accepts the pi-digits service's liability waiver on behalf of pi callers, so that pi can be served by the v2 inference endpoint (correctDigits keeps every answer honest). Without it, pi over v2 fails with WAIVER_REQUIRED and no upstream call.",
  ),
});

export const resilienceSettings = settingsGroup('resilience', {
  breakerThreshold: setting(
    'BREAKER_THRESHOLD',
    int(0, 10_000).default(5),
    "Consecutive upstream failures (5xx, timeouts, refused connections; not 4xx) that open an upstream's circuit. 0 turns the breaker off.",
  ),
  breakerHalfOpenAfterMs: setting(
    'BREAKER_HALF_OPEN_AFTER_MS',
    int(1, 3_600_000).default(5000),
    'How long an open circuit stays open before a health probe of the upstream may close it.',
  ),
  retryMaxAttempts: setting(
    'RETRY_MAX_ATTEMPTS',
    int(1, 10).default(3),
    'Attempts per idempotent upstream call (1 = no retry). Retries only on 503, 429, connection errors; 500 at most once more.',
  ),
  operationDeadlineMs: setting(
    'OPERATION_DEADLINE_MS',
    int(1, 600_000).default(15_000),
    'Overall deadline of one GraphQL operation, retries and backoff included.',
  ),
});

export const limitSettings = settingsGroup('limits', {
  maxRequestBodyBytes: setting(
    'MAX_REQUEST_BODY_BYTES',
    int(1024, 100 * 1024 * 1024).default(1024 * 1024),
    'Largest accepted request body in bytes; larger gets HTTP 413.',
  ),
  maxUpstreamCalls: setting(
    'MAX_UPSTREAM_CALLS',
    int(1, 1000).default(20),
    'Most distinct upstream calls one operation (or one batch, all its operations together) may make; an operation over it is refused with BAD_USER_INPUT before any upstream call.',
  ),
  batchLimit: setting(
    'BATCH_LIMIT',
    int(0, 1000).default(0),
    'Batching: 0 refuses a JSON array of operations in one POST (400 BAD_REQUEST), as Yoga and Apollo Server do by default; n > 0 accepts arrays of at most n operations (more: 413 BAD_REQUEST), answered with an array. Each operation is checked and billed as if it came alone; X-Max-Cost-Usd and MAX_UPSTREAM_CALLS count the batch as a whole.',
    { note: 'off' },
  ),
  maxDepth: setting('MAX_DEPTH', int(1, 100).default(10), 'Deepest selection set nesting accepted.'),
  maxAliases: setting('MAX_ALIASES', int(1, 1000).default(30), 'Most aliases in one operation.'),
  maxTokens: setting('MAX_TOKENS', int(10, 100_000).default(2000), 'Most tokens in one GraphQL document.'),
  maxDirectives: setting('MAX_DIRECTIVES', int(1, 1000).default(20), 'Most directives in one operation.'),
  maxJsonDepth: setting(
    'MAX_JSON_DEPTH',
    int(1, 1000).default(64),
    'Deepest nesting of the JSON value given to isNull.',
  ),
  maxJsonBytes: setting(
    'MAX_JSON_BYTES',
    int(2, 10 * 1024 * 1024).default(64 * 1024),
    'Largest JSON value given to isNull, in bytes as JSON text.',
  ),
  maxDigits: setting(
    'MAX_DIGITS',
    int(0, 10_000_000).default(DEFAULT_MAX_DIGITS),
    'Most digits pi or inference may ask for; above it the field fails with BAD_USER_INPUT without calling the upstream.',
  ),
});

export const cacheSettings = settingsGroup('cache', {
  responseCache: setting(
    'RESPONSE_CACHE',
    bool().default(false),
    'Reuse deterministic answers (temperature 0 of null-x-4o, null-x-opus and pi-x-4o) per API key within the TTL. Off by default: the gateway cannot know that a real upstream model is deterministic. Identical calls in flight at the same moment share one upstream call either way.',
  ),
  responseCacheTtlMs: setting(
    'RESPONSE_CACHE_TTL_MS',
    int(0, 86_400_000).default(60_000),
    'How long a cached answer is reused, in milliseconds.',
  ),
  responseCacheMaxEntries: setting(
    'RESPONSE_CACHE_MAX_ENTRIES',
    int(1, 10_000_000).default(10_000),
    'Answers the response cache keeps in memory (least recently used first out).',
  ),
  redisCacheUrl: setting(
    'REDIS_CACHE_URL',
    redisUrlSchema.optional(),
    'Redis of the response cache, APQ documents and in-flight call sharing, when they should not share REDIS_URL with the cost budgets: it may evict (allkeys-lru), while the budgets’ Redis must not.',
    '(unset: REDIS_URL)',
  ),
});

export const costSettings = settingsGroup('cost', {
  costBudgetUsdPerHour: setting(
    'COST_BUDGET_USD_PER_HOUR',
    z.coerce.number().positive().finite().max(1_000_000).optional(),
    'Most US dollars one API key (or callers without a key, together) may spend through the gateway in any sliding hour: the shorthand for COST_BUDGETS={"default":{"1h":x}}. Each operation reserves its estimate before calling anything and settles to what the upstreams report; one whose estimate does not fit in what is left fails with BUDGET_EXCEEDED and retryAfterSeconds. Shared by every replica with REDIS_URL.',
    '(unset: no budget)',
  ),
  costBudgets: setting(
    'COST_BUDGETS',
    parsedBy(parseBudgets),
    'Budgets per scope over several sliding windows, JSON or @<file>: {"default":{"1h":0.05,"24h":0.5},"anonymous":{"1h":0.01},"tier:pro":{"1h":1},"key:<sha256 hex of the key>":{"30d":100}}. Windows <n>m, <n>h or <n>d. A user of the identity provider has "user:<sub>" scopes. The most specific scope applies (the key or user of its own, its tier from API_KEYS or a token claim, anonymous for callers without a key, default); an operation must fit every window of it. Checked at start; keys are never printed.',
    '(unset: COST_BUDGET_USD_PER_HOUR alone)',
  ),
  costBudgetFallback: setting(
    'COST_BUDGET_FALLBACK',
    z.enum(['none', 'cheaper-model']).default('none'),
    'What an operation that does not fit its cap or budget gets when the request does not say (X-Budget-Fallback): none, BUDGET_EXCEEDED; cheaper-model, its fields answered by the next cheaper model of their service that fits (opus, then 4o, then mini), listed in extensions.cost.fallbacks.',
  ),
  costBudgetWarningRatio: setting(
    'COST_BUDGET_WARNING_RATIO',
    ratio().default(0.8),
    'When a key’s spend and reservations in a budget window reach this share of its limit: one warning line per key and window (at most once per window length) and gateway_budget_warnings_total. 0 turns it off.',
  ),
  budgetLeaseMarginMs: setting(
    'BUDGET_LEASE_MARGIN_MS',
    int(0, 30_000).default(30_000),
    'A reservation its replica never settles (killed, crashed, cut off) lapses this long after its operation’s deadline (OPERATION_DEADLINE_MS from its start) and then counts as spent at its estimate (gateway_budget_lapsed_reservations_total).',
  ),
  redisBudgetTimeoutMs: setting(
    'REDIS_BUDGET_TIMEOUT_MS',
    int(1, 10_000).default(1500),
    'Longest wait for one budget script in Redis (REDIS_TIMEOUT_MS stays the cache’s and single flight’s): a slow Redis is waited for, not taken for an outage. The budgets use this replica’s own figures only in an outage: the connection lost, or 3 commands failed in a row with nothing answered for this long.',
  ),
  expectedReplicas: setting(
    'EXPECTED_REPLICAS',
    int(1, 1000).default(1),
    'How many replicas may spend a budget (the Deployment’s replica count): while Redis is away a replica spends only its part of what was left, the remainder ÷ the replicas it counts, and until it has read the replica registry (two beats, 2 s apart, after it reaches Redis) it counts at least this many. With REDIS_URL and budgets only.',
  ),
  modelMinSamples: setting(
    'MODEL_MIN_SAMPLES',
    int(1, 1_000_000).default(30),
    'Answers a model needs at a temperature band before routing by minAccuracy trusts its accuracy lower bound (the `models` scoreboard); with fewer it is chosen only when no model qualifies.',
  ),
  modelExploration: setting(
    'MODEL_EXPLORATION',
    z.coerce.number().min(0).max(0.2).default(0),
    'Share of fields routed by minAccuracy (0 to 0.2) sent instead to a cheaper model that still has fewer than MODEL_MIN_SAMPLES answers at the band, to measure it; marked explored: true in extensions.cost.routing. 0 (the default): routing never trades a caller’s accuracy for a measurement.',
  ),
});

export const observabilitySettings = settingsGroup('observability', {
  sponsorLogIntervalMs: setting(
    'SPONSOR_LOG_INTERVAL_MS',
    int(0, 86_400_000).default(60_000),
    'Each distinct sponsor message of the upstreams is logged at most once per interval, in milliseconds; 0 logs every one.',
  ),
  tracing: setting(
    'OTEL_TRACING',
    bool().default(false),
    'OpenTelemetry spans for each operation and upstream call (needs an SDK registered by the host, e.g. via --import).',
  ),
});

export const federationSettings = settingsGroup('federation', {
  // Only the two words: this switch changes the schema served, so a typo must not pick one silently.
  enabled: setting(
    'FEDERATION',
    z
      .enum(['true', 'false'], { message: 'must be true or false' })
      .default('false')
      .transform((value) => value === 'true'),
    'true: POST /graphql serves a Federation 2 subgraph (subgraph.graphql: _service, _entities, the Model entity keyed by name, @cost weights from the price table) for a router to compose; false: the public schema (schema.graphql) alone. Exactly true or false: any other value stops the start.',
  ),
});

/** Every group of the gateway (besides the process, log and Redis groups). */
export const gatewaySettings = {
  server: serverSettings,
  auth: authSettings,
  upstreams: upstreamSettings,
  resilience: resilienceSettings,
  limits: limitSettings,
  cache: cacheSettings,
  cost: costSettings,
  observability: observabilitySettings,
  federation: federationSettings,
};

/** Every group `createApp` reads: the gateway's, and the process, Redis and log groups. */
export const gatewayAppSettings = {
  process: processSettings,
  ...gatewaySettings,
  redis: redisSettings,
  logs: logSettings,
};

/** The validated configuration of a gateway (`createApp`). */
export type GatewayConfig = SettingsValues<typeof gatewayAppSettings>;
