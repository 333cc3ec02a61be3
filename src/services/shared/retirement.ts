/**
 * Retiring a v1 endpoint step by step (docs/contract.md, Upstream versions):
 *
 * - `on`: served as always.
 * - `deprecated`: served as always, and every answer of the endpoint carries `Deprecation` (RFC 9745,
 *   `@<unix seconds>`), `Sunset` (RFC 8594, an HTTP date) and `Link: <successor>; rel="successor-version"`
 *   (RFC 5829); the OpenAPI operation says `deprecated: true` and documents the three headers.
 * - `off`: every request to it is answered 410 ENDPOINT_RETIRED (before auth, rate limit and body
 *   parsing: there is nothing left to authorise or parse), still with the `Link` header, and the
 *   OpenAPI document no longer lists it.
 */
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  RouteGenericInterface,
  RouteHandlerMethod,
  RouteShorthandOptions,
} from 'fastify';
import { errorBody } from './service-error.js';

export const ENDPOINT_STAGES = ['on', 'deprecated', 'off'] as const;
/** Where a v1 endpoint stands in its retirement. */
export type EndpointStage = (typeof ENDPOINT_STAGES)[number];

/** Days from the deprecation date to the Sunset date, unless configured. */
export const DEFAULT_SUNSET_DAYS = 90;

const DAY_MS = 86_400_000;

/** The two dates a deprecated endpoint announces. */
export interface DeprecationDates {
  /** Sent as `Deprecation: @<unix seconds>`. */
  since: Date;
  /** Sent as `Sunset: <HTTP date>`. */
  sunset: Date;
}

/**
 * The announced dates: `since` (whole seconds; unset: `now`, the moment the service was created) and
 * the sunset `sunsetDays` later. A fixed `since` makes every replica and every restart announce the
 * same dates.
 */
export function deprecationDates(
  since: Date | undefined,
  sunsetDays: number = DEFAULT_SUNSET_DAYS,
  now: Date = new Date(),
): DeprecationDates {
  const start = Math.floor((since ?? now).getTime() / 1000) * 1000;
  return { since: new Date(start), sunset: new Date(start + sunsetDays * DAY_MS) };
}

/** The endpoint that replaces a retired one. */
export interface Successor {
  method: 'GET' | 'POST';
  path: string;
  /** How to move, for the 410 message (e.g. "same request body"). */
  howTo: string;
}

/** One v1 endpoint that can be retired. */
export interface RetirableEndpoint {
  method: 'GET' | 'POST';
  path: string;
  stage: EndpointStage;
  successor: Successor;
  dates: DeprecationDates;
}

/** `Link` header value pointing at the successor (a path, resolved against the request URL). */
export function successorLink(successor: Successor): string {
  return `<${successor.path}>; rel="successor-version"`;
}

/** The three headers of a deprecated endpoint's answers. */
export function deprecationHeaders(endpoint: RetirableEndpoint): Record<string, string> {
  return {
    deprecation: `@${Math.floor(endpoint.dates.since.getTime() / 1000)}`,
    sunset: endpoint.dates.sunset.toUTCString(),
    link: successorLink(endpoint.successor),
  };
}

/** The shape of a route schema this module can mark deprecated. */
interface DocumentedSchema {
  description?: string;
  response?: Record<number | string, object>;
}

/** OpenAPI documentation of the three headers, added to every response of a deprecated operation. */
function documentedHeaders(endpoint: RetirableEndpoint): Record<string, object> {
  const { since, sunset } = endpoint.dates;
  return {
    deprecation: {
      type: 'string',
      pattern: '^@[0-9]+$',
      description: `RFC 9745: deprecated since this moment (unix seconds), here ${since.toISOString()}.`,
      examples: [deprecationHeaders(endpoint).deprecation],
    },
    sunset: {
      type: 'string',
      description: `RFC 8594: the endpoint may stop answering after this HTTP date, here ${sunset.toUTCString()}.`,
      examples: [sunset.toUTCString()],
    },
    link: {
      type: 'string',
      description: `The successor: ${endpoint.successor.method} ${endpoint.successor.path}.`,
      examples: [successorLink(endpoint.successor)],
    },
  };
}

/**
 * Route options for a served stage. `on`: unchanged. `deprecated`: the schema says `deprecated: true`
 * and documents the headers, and an onSend hook adds them to every answer of the route (errors
 * included). Do not call for `off` (see {@link registerRetired}).
 */
function retirableRoute<O extends { schema: DocumentedSchema }>(endpoint: RetirableEndpoint, options: O): O {
  if (endpoint.stage !== 'deprecated') return options;
  const headers = deprecationHeaders(endpoint);
  const docs = documentedHeaders(endpoint);
  const response: Record<string, object> = {};
  for (const [status, entry] of Object.entries(options.schema.response ?? {})) {
    const existing = (entry as { headers?: Record<string, object> }).headers;
    response[status] = { ...entry, headers: { ...existing, ...docs } };
  }
  const { successor, dates } = endpoint;
  const note = `Deprecated since ${dates.since.toISOString()}, sunset ${dates.sunset.toUTCString()}: use ${successor.method} ${successor.path} (${successor.howTo}).`;
  return {
    ...options,
    schema: {
      ...options.schema,
      deprecated: true,
      description: options.schema.description ? `${options.schema.description} ${note}` : note,
      response,
    },
    onSend: async (_request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      reply.headers(headers);
      return payload;
    },
  };
}

/** `off`: registers the 410 stand-in of the endpoint (absent from the OpenAPI document). */
function registerRetired(scope: FastifyInstance, endpoint: RetirableEndpoint): void {
  const { method, path, successor } = endpoint;
  const body = errorBody(
    410,
    'ENDPOINT_RETIRED',
    `${method} ${path} is retired; use ${successor.method} ${successor.path} instead (${successor.howTo})`,
  );
  const link = successorLink(successor);
  scope.route({
    method,
    url: path,
    schema: { hide: true },
    config: { public: true, rateLimit: false },
    // Answer before the body is parsed: a retired endpoint has no body format left to enforce.
    onRequest: async (_request, reply) => {
      reply.code(410).header('link', link).send(body);
      return reply;
    },
    handler: async (_request, reply) => reply,
  });
}

/**
 * Registers the endpoint as its stage says: served with `options` and `handler` (`on`), the same with
 * the deprecation headers (`deprecated`), or its 410 stand-in (`off`).
 */
export function registerRetirable<Route extends RouteGenericInterface>(
  scope: FastifyInstance,
  endpoint: RetirableEndpoint,
  options: RouteShorthandOptions & { schema: DocumentedSchema },
  handler: RouteHandlerMethod<FastifyInstance['server'], FastifyRequest['raw'], FastifyReply['raw'], Route>,
): void {
  if (endpoint.stage === 'off') registerRetired(scope, endpoint);
  else
    scope.route<Route>({
      method: endpoint.method,
      url: endpoint.path,
      ...retirableRoute(endpoint, options),
      handler,
    });
}
