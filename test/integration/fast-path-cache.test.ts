/**
 * The deterministic-answer cache end to end: the gateway as `npm start` builds it (fast path, cache
 * on by default) in front of the real reference services. Cached answers carry `extensions.cache` and
 * their sponsor message; tier-dependent errors never cross API keys; identical concurrent operations
 * make one upstream call; non-deterministic calls are never cached.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDigitEngine } from '../../src/digits/digit-engine.js';
import { createGatewayServer, type GatewayServer } from '../../src/gateway/http/gateway-server.js';
import {
  createObservability,
  type GatewayObservability,
} from '../../src/gateway/observability/create-observability.js';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { createGateway } from '../../src/gateway/yoga.js';
import { type RunningServices, startServices } from '../../src/services/start-services.js';
import { createLogger } from '../../src/shared/logger.js';

interface GraphQLAnswer {
  data?: Record<string, Record<string, unknown> | null>;
  errors?: Array<{ message: string; extensions?: { code?: string } }>;
  extensions?: { cache?: { hits: number; misses: number }; sponsoredBy?: string[] };
}

const engine = createDigitEngine({ useWorker: false });
let services: RunningServices;
let clients: HttpUpstreamClients;
let observability: GatewayObservability;
let server: GatewayServer;
let url = '';

/** Latency of the reference pi service: long enough for concurrent calls to overlap for sure. */
const PI_LATENCY_MS = 150;

beforeAll(async () => {
  services = await startServices({ digitEngine: engine, piFaultLatencyMs: PI_LATENCY_MS, freeRateLimit: 0 });
  // The response cache is opt-in (off by default: the gateway cannot know a real model is deterministic).
  expect(loadConfig({}).cache.responseCache).toBe(false);
  const config = loadConfig({ NODE_ENV: 'test', RESPONSE_CACHE: 'true' });
  const logger = createLogger({ level: 'silent' });
  observability = createObservability({ config, logger, defaultMetrics: false });
  clients = createUpstreamClients({
    nullBaseUrl: services.nullCheckUrl,
    piBaseUrl: services.piDigitsUrl,
    onCall: observability.onCall,
  });
  const yoga = createGateway({ clients, digits: engine, config, logger, observability });
  server = createGatewayServer({ yoga, config, logger });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await clients.close();
  await services.close();
  await engine.close();
});

async function graphql(query: string, apiKey?: string): Promise<GraphQLAnswer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
    },
    body: JSON.stringify({ query }),
  });
  return (await response.json()) as GraphQLAnswer;
}

async function upstreamCalls(endpoint: string): Promise<number> {
  const text = await observability.registry.metrics();
  let total = 0;
  for (const match of text.matchAll(
    new RegExp(`gateway_upstream_requests_total\\{[^}]*endpoint="${endpoint}"[^}]*\\} (\\d+)`, 'g'),
  ))
    total += Number(match[1]);
  return total;
}

const PI = (args: string) =>
  `{ pi(${args}) { __typename ... on ConstantDigits { digits correctDigits sponsoredBy } } }`;

describe('deterministic-answer cache', () => {
  it('answers a repeated deterministic operation from the cache, sponsor message included', async () => {
    const first = await graphql(PI('digits: 2'));
    const second = await graphql(PI('digits: 2'));
    expect(first.errors).toBeUndefined();
    expect(second.data).toEqual(first.data);
    expect(first.extensions?.cache).toEqual({ hits: 0, misses: 1 });
    expect(second.extensions?.cache).toEqual({ hits: 1, misses: 0 });
    const sponsor = first.data?.pi?.sponsoredBy;
    expect(typeof sponsor).toBe('string');
    expect(first.extensions?.sponsoredBy).toEqual([sponsor]);
    expect(second.extensions?.sponsoredBy).toEqual([sponsor]);
  });

  it('never lets a tier-dependent error or answer cross API keys', async () => {
    // Free tier: more than 3 digits is 418 TIER_FORBIDDEN; pro may have 5.
    const pro = await graphql(PI('digits: 5'), 'demo-pro');
    expect(pro.data?.pi?.digits).toBe('3.14159');
    const free = await graphql(PI('digits: 5'));
    expect(free.errors?.[0]?.extensions?.code).toBe('TIER_FORBIDDEN');
    const freeAgain = await graphql(PI('digits: 5'), 'free');
    expect(freeAgain.errors?.[0]?.extensions?.code).toBe('TIER_FORBIDDEN');
    // The error was not cached: the second free call went upstream again.
    expect(freeAgain.extensions?.cache).toEqual({ hits: 0, misses: 1 });
    const proAgain = await graphql(PI('digits: 5'), 'demo-pro');
    expect(proAgain.data?.pi?.digits).toBe('3.14159');
    expect(proAgain.extensions?.cache).toEqual({ hits: 1, misses: 0 });
  });

  it('makes one upstream call for identical concurrent operations', async () => {
    const before = await upstreamCalls('pi');
    const answers = await Promise.all(Array.from({ length: 5 }, () => graphql(PI('digits: 1'))));
    expect(await upstreamCalls('pi')).toBe(before + 1);
    expect(new Set(answers.map((a) => JSON.stringify(a.data))).size).toBe(1);
    const hits = answers.map((a) => a.extensions?.cache?.hits ?? 0);
    expect(hits.reduce((a, b) => a + b, 0)).toBe(4);
  });

  it('never caches non-deterministic calls or a missing value', async () => {
    const mini = `{ isNull(value: 1, model: NULL_X_MINI) { __typename } }`;
    await graphql(mini);
    const again = await graphql(mini);
    expect(again.extensions?.cache).toBeUndefined();
    const warm = await graphql(PI('digits: 3, temperature: 0.5'));
    expect(warm.extensions?.cache).toBeUndefined();
    const undefinedValue = `{ isNull { __typename } }`;
    await graphql(undefinedValue);
    const missing = await graphql(undefinedValue);
    expect(missing.errors?.[0]?.extensions?.code).toBe('UNDEFINED_VALUE');
    expect(missing.extensions?.cache).toBeUndefined();
  });

  it('caches deterministic null checks per value', async () => {
    const isNull = (value: string) =>
      `{ isNull(value: ${value}) { __typename ... on NullVerdict { isNull } ... on NullCheck { actuallyNull } } }`;
    const a = await graphql(isNull('null'));
    const b = await graphql(isNull('null'));
    const c = await graphql(isNull('"null"'));
    expect(a.data?.isNull).toEqual({ __typename: 'NullVerdict', isNull: true, actuallyNull: true });
    expect(b.extensions?.cache).toEqual({ hits: 1, misses: 0 });
    expect(c.data?.isNull).toEqual({ __typename: 'NullVerdict', isNull: false, actuallyNull: false });
    expect(c.extensions?.cache).toEqual({ hits: 0, misses: 1 });
    const metrics = await observability.registry.metrics();
    expect(metrics).toMatch(
      /gateway_response_cache_requests_total\{upstream="null-check",result="hit"\} [1-9]/,
    );
    expect(metrics).toMatch(/gateway_dedup_hits_total\{[^}]*source="cache"[^}]*\} [1-9]/);
  });
});
