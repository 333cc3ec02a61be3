/**
 * API keys never reach a log line or a client-visible error (docs/contract.md, Errors and
 * Authentication; docs/resilience.md, API keys in logs and errors), on success and even when every
 * upstream path fails and the upstream itself echoes the key back in its error bodies and headers;
 * on both request paths (the fast path, and Yoga's handler in process). The logger writes at level
 * trace into memory, as JSON without any redaction paths (so the lines are clean because nothing puts
 * the key there, not because the logger hides it) and, for a second pair of gateways, as the pretty
 * lines people read (the project's logger at debug, where every field is shown in full, nothing
 * shortened); the tests grep all of it and every response. This is the one place the tests check that
 * a key stays out of logs and responses; how the scrubbing works is in test/unit/logger.test.ts and
 * test/unit/observability-upstream-observer.test.ts.
 */
import { type Logger, pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, flushLogger } from '../../src/shared/logger.js';
import {
  type RecordedRequest,
  refusedUrl,
  type ScriptedResponse,
  type ScriptedUpstream,
  startScriptedUpstream,
} from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { codes, type GqlResult, gql, parsed } from '../support/graphql-client.js';
import type { LogLine } from '../support/logs.js';
import { nullBody, nullHealth, piHealth } from '../support/upstream-bodies.js';

const KEY = 'sk-live-7f3a9c1e5b2d4f60-KEYMARK';
/** Every level, as JSON, and no redaction paths at all. */
const log = (() => {
  const raw: string[] = [];
  const lines: LogLine[] = [];
  const logger = pino(
    { level: 'trace' },
    {
      write(line: string) {
        raw.push(line);
        lines.push(JSON.parse(line) as LogLine);
      },
    },
  );
  return { logger, lines, text: () => raw.join('') };
})();
/** The project's pretty format at debug, as `LOG_FORMAT=pretty LOG_LEVEL=debug` writes it (no colour). */
let prettyText = '';
const prettyLogger = createLogger({
  level: 'debug',
  format: 'pretty',
  destination: {
    write(chunk: string, callback?: (error?: Error | null) => void) {
      prettyText += chunk;
      callback?.();
      return true;
    },
  },
});
let nullUp: ScriptedUpstream;
let piUp: ScriptedUpstream;
/** Each pair: one in front of the hostile upstreams, one in front of refused ports. */
let gateway: TestGateway;
let downGateway: TestGateway;
let prettyGateway: TestGateway;
let prettyDownGateway: TestGateway;

/** A hostile upstream: every failure echoes the Authorization header it received. */
function echoing(request: RecordedRequest): ScriptedResponse {
  const echo = `key was ${String(request.headers.authorization)}`;
  const value = (request.body as { value?: unknown } | undefined)?.value ?? request.query.digits;
  const error = (status: number) => ({ error: { status, code: 'X', message: echo } });
  switch (value) {
    case 'u401':
      return { status: 401, body: error(401), headers: { 'www-authenticate': `Bearer realm="${echo}"` } };
    case 'u500':
    case '5':
      return { status: 500, body: error(500) };
    case 'u503':
      return { status: 503, body: error(503), headers: { 'retry-after': '0' } };
    case 'u429':
    case '6':
      return { status: 429, body: error(429), headers: { 'retry-after': '3600' } };
    case 'u418':
      return { status: 418, body: error(418) };
    case 'html':
      return { html: `<html><body>Bad gateway. ${echo}</body></html>` };
    case 'wrong-types':
      return { body: { is_null: true, confidence: echo, model: 7, inference_time_ms: echo } };
    case 'truncated':
      return { body: { is_null: true, message: echo }, truncate: 20 };
    case 'ok':
      return { body: nullBody() };
    case 'hang':
      return { hang: true };
    case 'reset':
      return { destroy: true };
    default:
      return { status: 400, body: error(400) };
  }
}

beforeAll(async () => {
  [nullUp, piUp] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
  nullUp.route('POST', '/api/v1/check', echoing);
  nullUp.route('GET', '/api/v1/health', { body: nullHealth });
  piUp.route('GET', '/api/v1/pi', echoing);
  piUp.route('POST', '/api/v1/inference', echoing);
  piUp.route('GET', '/api/v1/health', { body: piHealth });
  const env = { UPSTREAM_TIMEOUT_MS: '300', RETRY_MAX_ATTEMPTS: '2', BREAKER_THRESHOLD: '0' };
  const backoff = { baseMs: 5, capMs: 20 };
  const pair = async (logger: Logger): Promise<[TestGateway, TestGateway]> => [
    await startTestGateway({ nullBaseUrl: nullUp.url, piBaseUrl: piUp.url, logger, env, backoff }),
    await startTestGateway({
      nullBaseUrl: await refusedUrl(),
      piBaseUrl: await refusedUrl(),
      logger,
      env,
      backoff,
    }),
  ];
  [gateway, downGateway] = await pair(log.logger);
  [prettyGateway, prettyDownGateway] = await pair(prettyLogger);
});
afterAll(async () => {
  await Promise.all([gateway, downGateway, prettyGateway, prettyDownGateway].map((g) => g?.close()));
  await Promise.all([nullUp?.close(), piUp?.close()]);
});

const FAILURES = [
  'u401',
  'u500',
  'u503',
  'u429',
  'u418',
  'html',
  'wrong-types',
  'truncated',
  'hang',
  'reset',
];

/** A success and every failing path, with the key in either header: the responses, in order. */
async function provoke(hostile: TestGateway, down: TestGateway): Promise<GqlResult[]> {
  const responses: GqlResult[] = [];
  const byBearer = { authorization: `Bearer ${KEY}` };
  const byHeader = { 'x-api-key': KEY };
  // A call that succeeds: the key is in play on the happy path too.
  const ok = await gql(hostile.url, '{ isNull(value: "ok") { __typename } }', { headers: byBearer });
  expect(ok.errors).toBeUndefined();
  responses.push(ok);
  for (const value of FAILURES) {
    responses.push(
      await gql(hostile.url, `{ isNull(value: "${value}") { __typename } }`, { headers: byBearer }),
      await gql(hostile.url, `{ isNull(value: "${value}") { __typename } }`, { headers: byHeader }),
    );
  }
  responses.push(
    await gql(hostile.url, '{ a: pi(digits: 5) { __typename } b: pi(digits: 6) { __typename } }', {
      headers: byBearer,
    }),
    await gql(
      hostile.url,
      '{ inference(input: { desiredDigits: 3, liabilityWaiverSigned: true }) { __typename } }',
      { headers: byHeader },
    ),
    // Gateway-side failures with a key: refused upstreams, a bad query, a too-deep value, health.
    await gql(down.url, '{ isNull(value: 1) { __typename } pi { __typename } }', { headers: byBearer }),
    await gql(down.url, '{ health { status nullCheck { error } pi { error } } }', { headers: byBearer }),
    await gql(hostile.url, '{ nope }', { headers: byBearer }),
    await gql(hostile.url, '{ pi(digits: -1) { __typename } }', { headers: byHeader }),
    await gql(hostile.url, '{ pi(digits: 5) { __typename } }', {
      headers: { ...byBearer, 'x-max-cost-usd': 'nonsense' },
    }),
    // Yoga's handler, in process: the other request path.
    await parsed(
      await hostile.app.yoga.fetch('http://gateway.test/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...byBearer },
        body: JSON.stringify({
          query: '{ isNull(value: "u401") { __typename } pi(digits: 5) { __typename } }',
        }),
      }),
    ),
  );
  // Every path failed with its code.
  const seen = new Set(responses.flatMap(codes));
  for (const code of [
    'UNAUTHENTICATED',
    'NULL_PARADOX',
    'UPSTREAM_ERROR',
    'UPSTREAM_UNAVAILABLE',
    'RATE_LIMITED',
    'TIER_FORBIDDEN',
    'UPSTREAM_BAD_RESPONSE',
    'UPSTREAM_TIMEOUT',
    'BAD_USER_INPUT',
    'GRAPHQL_VALIDATION_FAILED',
  ]) {
    expect(seen).toContain(code);
  }
  return responses;
}

const MARKER = 'KEYMARK';

/** No response, header or log text holds the key, or its first half. */
function expectNoKey(responses: GqlResult[], logText: string): void {
  for (const response of responses) {
    expect(response.text).not.toContain(MARKER);
    for (const [name, value] of response.headers) expect(`${name}: ${value}`).not.toContain(MARKER);
  }
  expect(logText).not.toContain(MARKER);
  expect(logText).not.toContain(KEY.slice(0, 16));
}

describe('API keys on failing paths', () => {
  it('never appear in a response or a log line, on success or whichever way the upstreams fail', async () => {
    const responses = await provoke(gateway, downGateway);

    // The key was really in play: forwarded to the upstreams.
    // (Health probes and the API version discovery are sent without any key: they are not the caller's.)
    const calls = [...nullUp.requests, ...piUp.requests].filter(
      (r) => r.path !== '/api/v1/health' && r.path !== '/openapi.json',
    );
    expect(calls.length).toBeGreaterThan(20);
    expect(calls.every((r) => r.headers.authorization === `Bearer ${KEY}`)).toBe(true);
    // The log really recorded those failures (with the upstreams' bodies, the key scrubbed out of them).
    const logText = log.text();
    expect(log.lines.length).toBeGreaterThan(20);
    expect(logText).toContain('key was');
    const failed = log.lines.filter((line) => line.msg === 'upstream call failed');
    expect(failed.some((line) => String(line.upstreamBody).includes('[redacted]'))).toBe(true);
    // Debug level: the operation lines carry each call in full, and they were written too.
    const operations = log.lines.filter((line) => line.msg === 'graphql operation');
    expect(operations.length).toBeGreaterThanOrEqual(responses.length);
    expect(operations.some((line) => Array.isArray(line.calls) && line.calls.length > 0)).toBe(true);

    expectNoKey(responses, logText);
  });

  it('never appear in the pretty log at debug level either, where every field is shown in full', async () => {
    // The pretty format is a second writer of every line (pino-pretty, its own field formatting),
    // and at debug it shortens nothing: an upstream body that echoes the key is shown whole.
    const responses = await provoke(prettyGateway, prettyDownGateway);
    await flushLogger(prettyLogger);
    const lines = prettyText.trimEnd().split('\n');
    expect(lines.length).toBeGreaterThan(20);
    // Pretty lines indeed, not JSON, debug ones among them, with the upstreams' (scrubbed) bodies.
    for (const line of lines) expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] (DEBUG|INFO|WARN|ERROR): /);
    expect(lines.some((line) => line.includes('] DEBUG: '))).toBe(true);
    expect(lines.filter((line) => line.includes('graphql operation')).length).toBeGreaterThanOrEqual(
      responses.length,
    );
    expect(prettyText).toContain('key was');

    expectNoKey(responses, prettyText);
  });
});
