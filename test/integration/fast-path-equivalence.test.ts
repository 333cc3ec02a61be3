/**
 * The HTTP fast path (src/http/fast-path.ts) answers exactly what Yoga's own handler answers: the same
 * status, the headers that matter and the same body, for a table of requests (successes, every kind
 * of request error, upstream errors, limits, CORS), with both listeners over ONE gateway instance.
 * Also: which requests take the fast path, and that its operations still get their log line and
 * metrics.
 */
import { once } from 'node:events';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppConfig, loadConfig } from '../../src/config.js';
import { createDigitEngine } from '../../src/digits/digit-engine.js';
import { createGatewayServer, type GatewayServer } from '../../src/gateway/http/gateway-server.js';
import { createObservability } from '../../src/gateway/observability/create-observability.js';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { createGateway } from '../../src/gateway/yoga.js';
import type { Logger } from '../../src/shared/logger.js';
import { type FixedUpstreamHandle, startFixedUpstream } from '../bench/fixed-upstream.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One raw HTTP exchange: node:http adds only Host and Connection (and Content-Length for a body). */
function send(
  port: number,
  options: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'POST',
        path: options.path ?? '/graphql',
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The headers whose values clients and browsers act on. */
const HEADERS_THAT_MATTER = [
  'content-type',
  'content-length',
  'x-request-id',
  'allow',
  'accept',
  'access-control-allow-origin',
  'access-control-allow-methods',
  'access-control-allow-headers',
  'access-control-expose-headers',
  'access-control-max-age',
  'access-control-allow-credentials',
  'vary',
  'cache-control',
];

const comparable = (answer: Answer) => ({
  status: answer.status,
  headers: Object.fromEntries(HEADERS_THAT_MATTER.map((h) => [h, answer.headers[h]])),
  body: answer.body,
});

const PI_QUERY = `query Pi($digits: Int) { pi(digits: $digits) { __typename ... on ConstantDigits { digits precision requestedDigits correctDigits model modelName sponsoredBy disclaimer } } }`;
const IS_NULL_QUERY = `query IsNull($value: JSON) { isNull(value: $value) { __typename ... on NullCheck { actuallyNull correct confidence model sponsoredBy } ... on NullVerdict { isNull } } }`;

const JSON_TYPE = 'application/json';
const GRAPHQL_RESPONSE = 'application/graphql-response+json';

interface Case {
  name: string;
  headers?: Record<string, string>;
  body: string | Buffer;
  /** Expected to take the fast path (POST /graphql, JSON, Content-Length within the limit). */
  fast: boolean;
}

const json = (value: unknown) => JSON.stringify(value);
const headers = (extra: Record<string, string> = {}) => ({ 'content-type': JSON_TYPE, ...extra });

const CASES: Case[] = [
  {
    name: 'pi, graphql-response+json',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({ query: PI_QUERY, variables: { digits: 5 } }),
    fast: true,
  },
  {
    name: 'isNull, application/json',
    headers: headers({ accept: JSON_TYPE }),
    body: json({ query: IS_NULL_QUERY, variables: { value: null } }),
    fast: true,
  },
  { name: 'no Accept header', headers: headers(), body: json({ query: '{ __typename }' }), fast: true },
  {
    name: 'Accept */*',
    headers: headers({ accept: '*/*' }),
    body: json({ query: '{ __typename }' }),
    fast: true,
  },
  {
    name: 'Accept both, json first',
    headers: headers({ accept: `${JSON_TYPE}, ${GRAPHQL_RESPONSE}` }),
    body: json({ query: '{ __typename }' }),
    fast: true,
  },
  {
    name: 'Accept text/html only (406)',
    headers: headers({ accept: 'text/html' }),
    body: json({ query: '{ __typename }' }),
    fast: true,
  },
  {
    name: 'charset in Content-Type',
    headers: { 'content-type': `${JSON_TYPE}; charset=utf-8` },
    body: json({ query: '{ __typename }' }),
    fast: true,
  },
  {
    name: 'API key and request id headers',
    headers: headers({ authorization: 'Bearer demo-pro', 'x-api-key': 'other' }),
    body: json({ query: PI_QUERY, variables: { digits: 3 } }),
    fast: true,
  },
  {
    name: 'operationName and extensions',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({
      query: `${PI_QUERY} query Other { __typename }`,
      operationName: 'Other',
      extensions: { a: 1 },
    }),
    fast: true,
  },
  { name: 'invalid JSON', headers: headers(), body: '{"query": ', fast: true },
  { name: 'empty body', headers: headers(), body: '', fast: true },
  {
    name: 'JSON with a byte order mark',
    headers: headers(),
    body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json({ query: '{ __typename }' }))]),
    fast: true,
  },
  { name: 'JSON null', headers: headers(), body: 'null', fast: true },
  { name: 'JSON string', headers: headers(), body: '"query"', fast: true },
  { name: 'batch (array)', headers: headers(), body: json([{ query: '{ __typename }' }]), fast: true },
  {
    name: 'no query',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({ variables: {} }),
    fast: true,
  },
  { name: 'query not a string', headers: headers(), body: json({ query: 42 }), fast: true },
  {
    name: 'variables not an object',
    headers: headers(),
    body: json({ query: '{ __typename }', variables: 'x' }),
    fast: true,
  },
  {
    name: 'unknown parameter',
    headers: headers(),
    body: json({ query: '{ __typename }', qurey: 1 }),
    fast: true,
  },
  {
    name: 'syntax error, graphql-response+json',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({ query: '{ pi(' }),
    fast: true,
  },
  {
    name: 'syntax error, application/json',
    headers: headers({ accept: JSON_TYPE }),
    body: json({ query: '{ pi(' }),
    fast: true,
  },
  {
    name: 'unknown field',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({ query: '{ nope }' }),
    fast: true,
  },
  {
    name: 'wrong variable type',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({ query: PI_QUERY, variables: { digits: 'ten' } }),
    fast: true,
  },
  { name: 'mutation', headers: headers(), body: json({ query: 'mutation { x }' }), fast: true },
  {
    name: 'unknown operationName',
    headers: headers(),
    body: json({ query: PI_QUERY, operationName: 'Nope' }),
    fast: true,
  },
  {
    name: 'field error: negative digits',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({ query: PI_QUERY, variables: { digits: -1 } }),
    fast: true,
  },
  {
    name: 'upstream error (404 → UPSTREAM_ERROR)',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({
      query: '{ inference(input: { desiredDigits: 3, liabilityWaiverSigned: true }) { __typename } }',
    }),
    fast: true,
  },
  {
    name: 'alias limit',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({
      query: `{ ${Array.from({ length: 40 }, (_, i) => `a${i}: isNull(value: 1) { __typename }`).join(' ')} }`,
    }),
    fast: true,
  },
  {
    name: 'too many upstream calls',
    headers: headers({ accept: GRAPHQL_RESPONSE }),
    body: json({
      query: `{ ${Array.from({ length: 25 }, (_, i) => `p${i}: pi(digits: ${i}) { __typename }`).join(' ')} }`,
    }),
    fast: true,
  },
  {
    name: 'text/plain POST (CSRF)',
    headers: { 'content-type': 'text/plain' },
    body: json({ query: '{ __typename }' }),
    fast: false,
  },
  {
    name: 'form POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'query=%7B__typename%7D',
    fast: false,
  },
  {
    name: 'Accept text/event-stream',
    headers: headers({ accept: 'text/event-stream' }),
    body: json({ query: '{ __typename }' }),
    fast: false,
  },
];

const BODY_LIMIT = 4096;

let upstream: FixedUpstreamHandle;
let clients: HttpUpstreamClients;
const engine = createDigitEngine({ useWorker: false });
const servers: Server[] = [];
const lines: Record<string, unknown>[] = [];
let fastServer: GatewayServer;
let yogaPort = 0;
let fastPort = 0;
let corsFast = 0;
let corsYoga = 0;
let metricsText: () => Promise<string>;

async function listen(server: Server): Promise<number> {
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

function gateway(config: AppConfig, logger: Logger) {
  const observability = createObservability({ config, logger, defaultMetrics: false });
  const yoga = createGateway({ clients, digits: engine, config, logger, observability });
  return { yoga, observability };
}

beforeAll(async () => {
  upstream = await startFixedUpstream();
  const base = `http://127.0.0.1:${upstream.port}`;
  clients = createUpstreamClients({ nullBaseUrl: base, piBaseUrl: base, retryMaxAttempts: 1 });
  // Every log line lands in `lines` (to check the fast path's operations are logged).
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString().split('\n')) if (text) lines.push(JSON.parse(text));
      done();
    },
  });
  const logger = pino({ level: 'info' }, sink);
  // Cache off: a cached second answer would differ (extensions.cache) by design.
  const config = loadConfig({
    NODE_ENV: 'test',
    RESPONSE_CACHE: 'false',
    MAX_REQUEST_BODY_BYTES: String(BODY_LIMIT),
  });
  const { yoga, observability } = gateway(config, logger);
  metricsText = () => observability.registry.metrics();
  fastServer = createGatewayServer({ yoga, config, logger });
  fastPort = await listen(fastServer);
  yogaPort = await listen(createServer(yoga));

  const corsConfig = loadConfig({
    NODE_ENV: 'test',
    RESPONSE_CACHE: 'false',
    CORS_ORIGINS: 'https://a.example,https://b.example',
  });
  const cors = gateway(corsConfig, pino({ level: 'silent' }));
  corsFast = await listen(
    createGatewayServer({ yoga: cors.yoga, config: corsConfig, logger: pino({ level: 'silent' }) }),
  );
  corsYoga = await listen(createServer(cors.yoga));
});

afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await clients.close();
  await upstream.close();
  await engine.close();
});

describe('fast path and Yoga path answer alike', () => {
  it('serves eligible requests on the fast path', () => {
    expect(fastServer.gatewayListener.fastPath).toBe(true);
  });

  for (const c of CASES) {
    it(c.name, async () => {
      const request = { headers: { 'x-request-id': 'equiv-1', ...c.headers }, body: c.body };
      const before = { ...fastServer.gatewayListener.served };
      const viaFast = await send(fastPort, request);
      const viaYoga = await send(yogaPort, request);
      expect(comparable(viaFast)).toEqual(comparable(viaYoga));
      const after = fastServer.gatewayListener.served;
      expect(after.fast - before.fast).toBe(c.fast ? 1 : 0);
    });
  }

  it('a generated request id has the same shape on both paths', async () => {
    const body = json({ query: '{ __typename }' });
    const viaFast = await send(fastPort, { headers: headers(), body });
    const viaYoga = await send(yogaPort, { headers: headers(), body });
    expect(viaFast.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(viaYoga.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(viaFast.body).toBe(viaYoga.body);
  });

  it('CORS headers for an allowed and a refused origin', async () => {
    for (const [origin, allowed] of [
      ['https://a.example', 'https://a.example'],
      ['https://evil.example', 'null'],
    ] as const) {
      const request = {
        headers: headers({ origin, 'x-request-id': 'cors-1' }),
        body: json({ query: '{ __typename }' }),
      };
      const viaFast = await send(corsFast, request);
      const viaYoga = await send(corsYoga, request);
      expect(comparable(viaFast)).toEqual(comparable(viaYoga));
      // Both paths equal is not enough: both must also let the listed origin in and keep the other out.
      expect(viaFast.headers['access-control-allow-origin']).toBe(allowed);
    }
  });
});

describe('what goes to Yoga', () => {
  const routed: Array<[string, Parameters<typeof send>[1]]> = [
    ['GET with a query', { method: 'GET', path: `/graphql?query=${encodeURIComponent('{ __typename }')}` }],
    [
      'POST with a query string',
      { path: '/graphql?x=1', headers: headers(), body: json({ query: '{ __typename }' }) },
    ],
    ['another path', { path: '/other', headers: headers(), body: json({ query: '{ __typename }' }) }],
    [
      'a body over the limit',
      { headers: headers(), body: json({ query: `{ __typename } # ${'x'.repeat(BODY_LIMIT)}` }) },
    ],
    [
      'chunked body (no Content-Length)',
      { headers: headers({ 'transfer-encoding': 'chunked' }), body: json({ query: '{ __typename }' }) },
    ],
    ['GET /health', { method: 'GET', path: '/health' }],
    [
      'OPTIONS preflight',
      {
        method: 'OPTIONS',
        headers: { origin: 'https://a.example', 'access-control-request-method': 'POST' },
      },
    ],
  ];
  for (const [name, request] of routed) {
    it(`${name}: Yoga's handler, same answer`, async () => {
      const tagged = { ...request, headers: { 'x-request-id': 'routed-1', ...request.headers } };
      const before = { ...fastServer.gatewayListener.served };
      const viaFast = await send(fastPort, tagged);
      const viaYoga = await send(yogaPort, tagged);
      expect(comparable(viaFast)).toEqual(comparable(viaYoga));
      expect(fastServer.gatewayListener.served.fast).toBe(before.fast);
      expect(fastServer.gatewayListener.served.yoga).toBe(before.yoga + 1);
    });
  }
});

describe('observability of fast-path operations', () => {
  it('logs one operation line with the request id and counts the operation', async () => {
    const answer = await send(fastPort, {
      headers: headers({ 'x-request-id': 'fast-log-1', accept: GRAPHQL_RESPONSE }),
      body: json({ query: PI_QUERY, operationName: 'Pi', variables: { digits: 4 } }),
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).extensions?.sponsoredBy).toEqual(['Digits sponsored by Pi Hut']);
    const line = lines.find((l) => l.requestId === 'fast-log-1' && l.msg === 'graphql operation');
    expect(line).toMatchObject({ operation: 'Pi', operationType: 'query', outcome: 'ok' });
    expect(line?.upstreamCalls).toEqual([
      expect.objectContaining({ upstream: 'pi-digits', endpoint: 'pi', status: 200 }),
    ]);
    expect(await metricsText()).toMatch(/gateway_operations_total\{[^}]*operation="Pi"[^}]*\} [1-9]/);
  });
});
