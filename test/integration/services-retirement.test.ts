/**
 * Retiring the v1 endpoints (docs/contract.md, Upstream versions): NULL_V1 for POST /api/v1/check and
 * PI_V1_PI for GET /api/v1/pi, each `on`, `deprecated` or `off`, through startServices (the options every
 * CLI uses). Headers parsed per their RFCs, the 410 body, and what /openapi.json lists. Real HTTP on
 * loopback.
 */
import { validate } from '@readme/openapi-parser';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { servicesOptionsFromSettings } from '../../src/services/settings.js';
import type { EndpointStage } from '../../src/services/shared/retirement.js';
import {
  type RunningServices,
  type ServicesOptions,
  startServices,
} from '../../src/services/start-services.js';
import { type Answer, bearer, call, expectErrorShape, postJson } from './services-test-helpers.js';

const running: RunningServices[] = [];
afterAll(async () => {
  await Promise.all(running.map((r) => r.close()));
});

async function start(options: ServicesOptions): Promise<RunningServices> {
  const services = await startServices(options);
  running.push(services);
  return services;
}

interface Endpoint {
  name: string;
  setting: 'nullV1' | 'piV1Pi';
  service: 'nullCheckUrl' | 'piDigitsUrl';
  method: 'GET' | 'POST';
  path: string;
  /** A valid request to the v1 endpoint. */
  request: RequestInit;
  successor: { method: 'GET' | 'POST'; path: string; request: RequestInit };
  /** A request to the v1 endpoint that the service refuses (a 4xx of its own rules). */
  refused: { request: RequestInit; status: number; code: string };
}

const ENDPOINTS: Endpoint[] = [
  {
    name: 'null-check POST /api/v1/check',
    setting: 'nullV1',
    service: 'nullCheckUrl',
    method: 'POST',
    path: '/api/v1/check',
    request: postJson({ value: null }),
    successor: { method: 'POST', path: '/api/v2/null-or-not', request: postJson({ value: null }) },
    refused: { request: postJson({ value: 1, strict_mode: true }), status: 418, code: 'TIER_FORBIDDEN' },
  },
  {
    name: 'pi-digits GET /api/v1/pi',
    setting: 'piV1Pi',
    service: 'piDigitsUrl',
    method: 'GET',
    path: '/api/v1/pi',
    request: { method: 'GET' },
    successor: {
      method: 'POST',
      path: '/api/v1/inference',
      request: postJson({ desired_digits: 3, liability_waiver_signed: true }),
    },
    refused: { request: { method: 'GET' }, status: 418, code: 'TIER_FORBIDDEN' },
  },
];

/** The refused request of the pi endpoint needs its query; the others are the path itself. */
const refusedPath = (endpoint: Endpoint) =>
  endpoint.method === 'GET' ? `${endpoint.path}?digits=50` : endpoint.path;

const IMF_FIXDATE =
  /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** Parses the three deprecation headers; fails the test when one is missing or malformed. */
function parseDeprecation(answer: Answer<unknown>): { since: number; sunset: number; successor: string } {
  const deprecation = answer.headers.get('deprecation') ?? '';
  const sunset = answer.headers.get('sunset') ?? '';
  const link = answer.headers.get('link') ?? '';
  // RFC 9745: a structured-field Date, `@` and integer seconds.
  const since = /^@(\d+)$/.exec(deprecation);
  expect(since, `Deprecation: ${deprecation}`).not.toBeNull();
  // RFC 8594: an HTTP-date, in its preferred IMF-fixdate form.
  expect(sunset, 'Sunset').toMatch(IMF_FIXDATE);
  const successor = parseSuccessorLink(link);
  return { since: Number(since?.[1]) * 1000, sunset: Date.parse(sunset), successor };
}

/** The target of the `rel="successor-version"` link (RFC 8288 syntax); fails when there is none. */
function parseSuccessorLink(link: string): string {
  const match = /^<([^>]+)>\s*;\s*rel="successor-version"$/.exec(link.trim());
  expect(match, `Link: ${link}`).not.toBeNull();
  return match?.[1] ?? '';
}

interface OpenApiDoc {
  paths: Record<
    string,
    Record<string, { deprecated?: boolean; responses: Record<string, { headers?: object }> }>
  >;
}

async function openApi(url: string): Promise<OpenApiDoc> {
  const answer = await call<OpenApiDoc>(`${url}/openapi.json`);
  expect(answer.status).toBe(200);
  const result = await validate(structuredClone(answer.body) as never);
  expect(result.valid, JSON.stringify(result)).toBe(true);
  return answer.body;
}

describe.each(ENDPOINTS)('$name', (endpoint) => {
  const startAt = async (stage: EndpointStage, extra: ServicesOptions = {}) => {
    const services = await start({ [endpoint.setting]: stage, ...extra });
    return services[endpoint.service];
  };

  it('on (the default): served as always, no deprecation headers, listed and not deprecated', async () => {
    const url = await startAt('on');
    const answer = await call(`${url}${endpoint.path}`, endpoint.request);
    expect(answer.status).toBe(200);
    for (const header of ['deprecation', 'sunset', 'link']) expect(answer.headers.get(header)).toBeNull();
    const operation = (await openApi(url)).paths[endpoint.path]?.[endpoint.method.toLowerCase()];
    expect(operation).toBeDefined();
    expect(operation?.deprecated).toBeUndefined();
    // And with no option at all.
    const defaults = (await start({}))[endpoint.service];
    expect(
      (await call(`${defaults}${endpoint.path}`, endpoint.request)).headers.get('deprecation'),
    ).toBeNull();
  });

  it('deprecated: still answers, with Deprecation, a future Sunset and the successor Link on every answer', async () => {
    const before = Date.now();
    const url = await startAt('deprecated');
    const answer = await call(`${url}${endpoint.path}`, endpoint.request);
    expect(answer.status).toBe(200);
    const { since, sunset, successor } = parseDeprecation(answer);
    expect(successor).toBe(endpoint.successor.path);
    // Default policy: deprecated from the start, sunset 90 days later (so in the future).
    expect(since).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(since).toBeLessThanOrEqual(Date.now());
    expect(sunset).toBeGreaterThan(Date.now());
    expect(sunset - since).toBe(90 * 86_400_000);
    // The Link resolves, against the request URL, to a successor that is served.
    const target = new URL(successor, `${url}${endpoint.path}`).toString();
    expect((await call(target, endpoint.successor.request)).status).toBe(200);
    // Error answers of the endpoint carry them too, unchanged.
    const refused = await call(`${url}${refusedPath(endpoint)}`, endpoint.refused.request);
    expectErrorShape(refused, endpoint.refused.status, endpoint.refused.code);
    expect(parseDeprecation(refused)).toEqual({ since, sunset, successor });
    const unknownKey = await call(`${url}${endpoint.path}`, {
      ...endpoint.request,
      headers: { ...(endpoint.request.headers as Record<string, string>), ...bearer('nope') },
    });
    expectErrorShape(unknownKey, 401, 'UNAUTHENTICATED');
    expect(parseDeprecation(unknownKey).successor).toBe(endpoint.successor.path);
    // The successor itself is not deprecated.
    expect((await call(target, endpoint.successor.request)).headers.get('deprecation')).toBeNull();
  });

  it('deprecated: the OpenAPI operation says deprecated: true and documents the three headers', async () => {
    const url = await startAt('deprecated');
    const doc = await openApi(url);
    const operation = doc.paths[endpoint.path]?.[endpoint.method.toLowerCase()];
    expect(operation?.deprecated).toBe(true);
    expect(Object.keys(operation?.responses['200']?.headers ?? {}).sort()).toEqual([
      'deprecation',
      'link',
      'sunset',
    ]);
    const successor = doc.paths[endpoint.successor.path]?.[endpoint.successor.method.toLowerCase()];
    expect(successor).toBeDefined();
    expect(successor?.deprecated).toBeUndefined();
  });

  it('deprecated with a fixed date: both services announce exactly it and the configured sunset', async () => {
    const config = loadConfig({
      [endpoint.setting === 'nullV1' ? 'NULL_V1' : 'PI_V1_PI']: 'deprecated',
      V1_DEPRECATED_SINCE: '2026-01-15',
      V1_SUNSET_DAYS: '30',
    });
    const services = await start(servicesOptionsFromSettings(config));
    const answer = await call(`${services[endpoint.service]}${endpoint.path}`, endpoint.request);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('deprecation')).toBe(`@${Date.UTC(2026, 0, 15) / 1000}`);
    expect(answer.headers.get('sunset')).toBe('Sat, 14 Feb 2026 00:00:00 GMT');
  });

  it('off: 410 ENDPOINT_RETIRED naming the successor, with the Link, for every caller and body', async () => {
    const url = await startAt('off', { freeRateLimit: 2 });
    const answer = await call(`${url}${endpoint.path}`, endpoint.request);
    const error = expectErrorShape(answer, 410, 'ENDPOINT_RETIRED');
    expect(error.message).toContain(`${endpoint.successor.method} ${endpoint.successor.path}`);
    expect(parseSuccessorLink(answer.headers.get('link') ?? '')).toBe(endpoint.successor.path);
    expect(answer.headers.get('deprecation')).toBeNull();
    // Nothing of the old endpoint is left to check: an unknown key, a bad body or query, and more
    // requests than the free limit all get the same 410.
    const others: RequestInit[] = [
      {
        ...endpoint.request,
        headers: { ...(endpoint.request.headers as Record<string, string>), ...bearer('nope') },
      },
      endpoint.method === 'POST'
        ? { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'not json' }
        : { method: 'GET' },
      endpoint.request,
      endpoint.request,
    ];
    for (const init of others) {
      const path = endpoint.method === 'GET' ? `${endpoint.path}?digits=abc` : endpoint.path;
      expectErrorShape(await call(`${url}${path}`, init), 410, 'ENDPOINT_RETIRED');
    }
    // The successor and health are served, and the retired requests did not use up the limit.
    expect((await call(`${url}${endpoint.successor.path}`, endpoint.successor.request)).status).toBe(200);
    expect((await call(`${url}/api/v1/health`)).status).toBe(200);
  });

  it('off: the OpenAPI document no longer lists it; ENDPOINT_RETIRED is among the error codes', async () => {
    const url = await startAt('off');
    const answer = await call(`${url}/openapi.json`);
    const doc = (await openApi(url)) as OpenApiDoc & {
      components: {
        schemas: { ErrorBody: { properties: { error: { properties: { code: { enum: string[] } } } } } };
      };
    };
    expect(doc.paths).not.toHaveProperty(endpoint.path);
    expect(doc.paths).toHaveProperty(endpoint.successor.path);
    expect(doc.paths).toHaveProperty('/api/v1/health');
    expect(doc.components.schemas.ErrorBody.properties.error.properties.code.enum).toContain(
      'ENDPOINT_RETIRED',
    );
    expect(answer.text).not.toContain(`"${endpoint.path}"`);
  });
});

describe('the two switches are independent', () => {
  it('retiring one service’s v1 leaves the other’s served', async () => {
    const services = await start({ nullV1: 'off', piV1Pi: 'on' });
    expectErrorShape(
      await call(`${services.nullCheckUrl}/api/v1/check`, postJson({ value: 1 })),
      410,
      'ENDPOINT_RETIRED',
    );
    const pi = await call(`${services.piDigitsUrl}/api/v1/pi`);
    expect(pi.status).toBe(200);
    expect(pi.headers.get('deprecation')).toBeNull();
    const both = await start({ nullV1: 'deprecated', piV1Pi: 'deprecated' });
    const a = await call(`${both.nullCheckUrl}/api/v1/check`, postJson({ value: 1 }));
    const b = await call(`${both.piDigitsUrl}/api/v1/pi`);
    // One process, one announcement: both services give the same dates.
    expect(a.headers.get('deprecation')).toBe(b.headers.get('deprecation'));
    expect(a.headers.get('sunset')).toBe(b.headers.get('sunset'));
  });
});
