/**
 * The skeleton both reference services share: fastify with the request validators, the OpenAPI 3.1
 * generator, auth, rate limits, fault injection, the error body everywhere and `/openapi.json`.
 * A service adds only its routes and its model behaviour.
 */
import fastifySwagger from '@fastify/swagger';
import { Ajv } from 'ajv';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifySchema,
  type FastifySchemaCompiler,
  LogController,
} from 'fastify';
import { type ApiKeysInput, type Caller, createCallerResolver } from './api-keys.js';
import { installErrorHandling, type ValidationMapper } from './error-handling.js';
import { createFaultInjector, type FaultInjector } from './fault-injection.js';
import { ERROR_BODY_SCHEMA, healthRouteSchema, SECURITY_SCHEMES } from './openapi.js';
import { registerRateLimit } from './rate-limit.js';
import type { RateLimitRedis } from './rate-limit-redis.js';
import { type DeprecationDates, deprecationDates } from './retirement.js';
import { createSeededRandom, type SeededRandom } from './seeded-random.js';
import { ServiceError, type ServiceErrorCode } from './service-error.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every non-public route. */
    caller: Caller | undefined;
  }
  interface FastifyContextConfig {
    /** No API key needed (health, /openapi.json); an unknown key is ignored there. */
    public?: boolean;
    /** Fault-injection latency does not apply (/openapi.json). */
    noLatency?: boolean;
  }
}

/** Options common to both services. */
export interface ServiceAppOptions {
  /** Accepted API keys: `key:tier,key:tier` (the API_KEYS format), a Map or an object. @default demo keys `demo-pro` (pro), `demo-enterprise` (enterprise) */
  apiKeys?: ApiKeysInput | undefined;
  /** Seed of the service's random generator; the same seed reproduces a run. @default 42 */
  seed?: number;
  /** Requests per window per free caller (v1 and v2 endpoints together); 0 = unlimited. @default 60 */
  freeRateLimit?: number;
  /** Requests per window per pro key; 0 = unlimited. @default 600 */
  proRateLimit?: number;
  /** Requests per window per enterprise key; 0 = unlimited. @default 0 */
  enterpriseRateLimit?: number;
  /** Length of the rate-limit window in ms. @default 60000 */
  rateLimitWindowMs?: number;
  /** Largest accepted request body in bytes; larger gets 413 PAYLOAD_TOO_LARGE. @default 1048576 (1 MiB) */
  bodyLimit?: number;
  /** Fault injection: latency added to every answer except /openapi.json. @default 0 */
  faultLatencyMs?: number;
  /** Fault injection: share (0..1) of model requests answered 500. @default 0 */
  fault500Rate?: number;
  /** Fault injection: share (0..1) of model requests answered 503 (at 1 health is 503 too). @default 0 */
  fault503Rate?: number;
  /** A pino logger (keys are redacted by the project logger). @default none: the services log nothing */
  logger?: FastifyBaseLogger | undefined;
  /** Log one line per request (at info level) when a logger is given. @default false */
  logRequests?: boolean;
  /**
   * Trust `X-Forwarded-For` for the client address that keys free callers' buckets (fastify's
   * trustProxy). @default false
   */
  trustProxy?: boolean | string | string[];
  /**
   * Keep the rate-limit buckets in Redis, shared with every replica (memory only for the counts Redis
   * cannot make in time). The connection is the caller's: the service does not close it.
   * @default none: buckets in memory
   */
  redis?: RateLimitRedis | undefined;
  /** Prefix of every Redis key the service writes. @default 'null-pi:' */
  redisKeyPrefix?: string;
  /** The `Deprecation` date of deprecated endpoints. @default the moment the service is created */
  deprecatedSince?: Date | undefined;
  /** Days from `deprecatedSince` to the `Sunset` date of deprecated endpoints. @default 90 */
  sunsetDays?: number;
}

/** What a service's routes get from the skeleton. */
export interface ServiceContext {
  /** The service's model dice (seeded). */
  random: SeededRandom;
  faults: FaultInjector;
  seed: number;
  /** The dates deprecated endpoints announce. */
  deprecation: DeprecationDates;
  /** preHandler of the model routes: rolls the fault dice (500/503). */
  injectFaults: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
}

export interface ServiceDefinition {
  /** Short name, part of the service's Redis keys (`null-check`). */
  name: string;
  title: string;
  description: string;
  /** The interface version label of the spec. */
  version: string;
  /** The 500 the fault injection answers with (null paradox or cluster failure). */
  fault500: { code: ServiceErrorCode; message: string };
  mapValidation?: ValidationMapper;
  /** Shared schemas (with an `$id`) the routes reference; they become OpenAPI components. */
  schemas?: readonly object[];
  routes: (scope: FastifyInstance, context: ServiceContext) => void;
  /**
   * GET /api/v1/health (public, no rate limit), added after the routes: the spec section its body
   * follows, the JSON schemas of the service's own fields, and their values. The skeleton adds
   * `status` (`degraded` while fault injection is on) and answers 503 while faults take the service down.
   */
  health: {
    spec: string;
    properties: Record<string, object>;
    fields: (faults: FaultInjector) => Record<string, unknown>;
  };
}

/** What fastify expects back from a validator compiler (not exported by name). */
type QueryValidator = ReturnType<FastifySchemaCompiler<unknown>>;

/**
 * Ajv coerces "1e999" and "Infinity" in a query string to Infinity and then lets it pass `integer`
 * and `maximum`; a non-finite number is refused here instead (as out of range, so `digits=1e999` is
 * DIGITS_OUT_OF_RANGE like any other absurd count).
 */
function finiteQuery(validate: QueryValidator): QueryValidator {
  const wrapped: QueryValidator = (data: unknown) => {
    if (!validate(data)) {
      wrapped.errors = validate.errors;
      return false;
    }
    if (data !== null && typeof data === 'object') {
      for (const [key, value] of Object.entries(data)) {
        if (typeof value === 'number' && !Number.isFinite(value)) {
          const keyword = value > 0 ? 'maximum' : 'minimum';
          wrapped.errors = [
            { keyword, instancePath: `/${key}`, schemaPath: '', params: {}, message: 'must be finite' },
          ];
          return false;
        }
      }
    }
    return true;
  };
  return wrapped;
}

const unavailable = () => new ServiceError(503, 'SERVICE_UNAVAILABLE', 'service unavailable, retry later');

/** The default body limit (1 MiB), documented in the README. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

export function createServiceApp(options: ServiceAppOptions, definition: ServiceDefinition): FastifyInstance {
  const seed = options.seed ?? 42;
  const resolveCaller = createCallerResolver(options.apiKeys);
  const faults = createFaultInjector({
    latencyMs: options.faultLatencyMs ?? 0,
    rate500: options.fault500Rate ?? 0,
    rate503: options.fault503Rate ?? 0,
    seed,
  });

  const app = Fastify({
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    logController: new LogController({ disableRequestLogging: !options.logRequests }),
    requestIdHeader: 'x-request-id',
    trustProxy: options.trustProxy ?? false,
    // While closing, keep answering what arrives on open connections (with Connection: close)
    // instead of fastify's own 503 body, which is not our error shape.
    return503OnClosing: false,
    // `value` may be any JSON, `{"__proto__": 1}` included: drop such keys instead of refusing the
    // body (nothing here merges objects, but later readers of the body might).
    onProtoPoisoning: 'remove',
    onConstructorPoisoning: 'remove',
  }) as unknown as FastifyInstance;
  // ^ the cast erases fastify's logger generic (loggerInstance vs logger), which callers don't need.

  // Query strings are text: coerce "5" to 5 and "true" to true there. Bodies are JSON: a string
  // where a number belongs is a VALIDATION_ERROR, not something to guess at.
  const ajvOptions = { useDefaults: true, removeAdditional: false, allErrors: false } as const;
  const bodyAjv = new Ajv({ ...ajvOptions, coerceTypes: false });
  const queryAjv = new Ajv({ ...ajvOptions, coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body'
      ? (bodyAjv.compile(schema as object) as QueryValidator)
      : finiteQuery(queryAjv.compile(schema as object) as QueryValidator),
  );

  // JSON only: without this, fastify would parse text/plain bodies as strings (415 is clearer).
  app.removeContentTypeParser('text/plain');
  app.addSchema(ERROR_BODY_SCHEMA);
  for (const schema of definition.schemas ?? []) app.addSchema(schema);
  installErrorHandling(app, definition.mapValidation);

  app.decorateRequest('caller', undefined);
  if (faults.latencyMs > 0) {
    app.addHook('onRequest', async (request) => {
      if (!request.routeOptions.config.noLatency) await faults.delay();
    });
  }
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (request.routeOptions.config.public) return done();
    try {
      request.caller = resolveCaller(request.headers, request.ip);
    } catch (error) {
      return done(error as Error);
    }
    done();
  });

  app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: definition.title, description: definition.description, version: definition.version },
      components: { securitySchemes: SECURITY_SCHEMES as never },
    },
    refResolver: {
      // Name shared schemas by their $id (`ErrorBody`) in components, not def-0.
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
  });
  registerRateLimit(app, {
    limits: {
      free: options.freeRateLimit ?? 60,
      pro: options.proRateLimit ?? 600,
      enterprise: options.enterpriseRateLimit ?? 0,
    },
    windowMs: options.rateLimitWindowMs ?? 60_000,
    redis: options.redis,
    redisNameSpace: `${options.redisKeyPrefix ?? 'null-pi:'}rate-limit:${definition.name}:`,
  });

  const context: ServiceContext = {
    random: createSeededRandom(seed),
    faults,
    seed,
    deprecation: deprecationDates(options.deprecatedSince, options.sunsetDays),
    injectFaults: async () => {
      const status = faults.roll();
      if (status === 503) throw unavailable();
      if (status === 500) throw new ServiceError(500, definition.fault500.code, definition.fault500.message);
    },
  };
  const { health } = definition;

  let document: unknown;
  app.register(async (scope) => {
    definition.routes(scope, context);
    scope.get(
      '/api/v1/health',
      {
        schema: healthRouteSchema(health.spec, health.properties),
        config: { public: true, rateLimit: false },
      },
      async () => {
        if (faults.down) throw unavailable();
        return { status: faults.active ? 'degraded' : 'ok', ...health.fields(faults) };
      },
    );
    scope.get(
      '/openapi.json',
      {
        schema: { hide: true } satisfies FastifySchema,
        config: { public: true, rateLimit: false, noLatency: true },
      },
      async () => {
        document ??= app.swagger();
        return document;
      },
    );
  });
  return app;
}
