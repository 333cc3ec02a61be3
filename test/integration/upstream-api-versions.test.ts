/**
 * The v2 migration of both upstreams (docs/contract.md, Upstream versions), on the whole client stack in
 * front of scripted upstreams that behave oddly: null-check `auto` discovery from /openapi.json, the
 * run-time switch on a retired (404/410) endpoint within the same call, what does not count as a
 * retirement, fixed versions, pi over the v2 inference endpoint and its waiver, and deprecation headers
 * (metric, one log line per endpoint, the state the health query shows).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { createTestClients, failureOf, type TestClients, testOperation } from '../support/clients.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { gql } from '../support/graphql-client.js';
import { capturedLogger, count, LEVEL, type LogLine } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { nullBody, nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';
import { until } from '../support/waits.js';

const CHECK_V1 = '/api/v1/check';
const CHECK_V2 = '/api/v2/null-or-not';
const PI_V1 = '/api/v1/pi';
const INFERENCE = '/api/v1/inference';
const OPENAPI = '/openapi.json';

const SUNSET = 'Thu, 01 Jan 2026 00:00:00 GMT';
const DEPRECATED = { deprecation: '@1767225600', sunset: SUNSET };

const analysis = { school: 'apophatic', verdict: 'null is the absence that proves presence' };
const v2Body = () => nullBody({ is_null: false, philosophical_analysis: analysis });
/** How the client reads `analysis`: the typed fields it has, null where it has none, `raw` the object. */
const analysisRead = {
  school: 'apophatic',
  certainty: null,
  argument: null,
  references: null,
  verdictStability: null,
  depth: null,
  raw: analysis,
};
const gone = (status: number) => ({
  status,
  body: { error: { status, code: 'GONE', message: 'use /api/v2/null-or-not' } },
});

const openapi = (withV2: boolean) => ({
  openapi: '3.1.0',
  info: { title: 'null-check', version: withV2 ? '2.0.0' : '1.0.0' },
  paths: {
    [CHECK_V1]: { post: { summary: 'check' } },
    ...(withV2 ? { [CHECK_V2]: { post: { summary: 'null or not' } } } : {}),
  },
});

let nullUp: ScriptedUpstream;
let piUp: ScriptedUpstream;
const opened: Array<{ close(): Promise<unknown> }> = [];
let lines: LogLine[];

function clientsWith(env: Record<string, string> = {}): TestClients {
  const captured = capturedLogger('debug');
  lines = captured.lines;
  const clients = createTestClients({
    nullBaseUrl: nullUp.url,
    piBaseUrl: piUp.url,
    env,
    logger: captured.logger,
  });
  opened.push(clients);
  return clients;
}

const paths = (up: ScriptedUpstream) => up.requests.map((r) => `${r.method} ${r.path}`);
const warnings = () => lines.filter((l) => l.level === LEVEL.warn);

/** How the start-up read of /openapi.json ends, and what it leaves to wait for. */
type Discovery = 'v2' | 'lists v1' | 'missing' | 'failed';

/** Waits (bounded) until the start-up read of /openapi.json has been answered and acted on. */
async function discovered(clients: TestClients, how: Discovery): Promise<void> {
  expect(await until(() => nullUp.count('GET', OPENAPI) === 1)).toBe(true);
  await nullUp.requests.find((r) => r.path === OPENAPI)?.ended;
  const done = {
    v2: () => clients.state('null-check').apiVersion === 'v2',
    // Nothing changes: the answer is read as v1 (a later resolution cannot change the state).
    'lists v1': () => true,
    // The 404/410 attempt is logged (at debug) before the discovery reads it as v1.
    missing: () => lines.some((l) => l.endpoint === 'openapi' && l.upstreamStatus !== undefined),
    failed: () => lines.some((l) => l.msg.includes('API version discovery failed')),
  }[how];
  expect(await until(done)).toBe(true);
  expect(clients.state('null-check').apiVersion).toBe(how === 'v2' ? 'v2' : 'v1');
}

beforeAll(async () => {
  [nullUp, piUp] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await Promise.all([nullUp?.close(), piUp?.close()]);
});
beforeEach(() => {
  nullUp.reset();
  piUp.reset();
  nullUp.route('GET', '/api/v1/health', { body: nullHealth });
  piUp.route('GET', '/api/v1/health', { body: piHealth });
});

describe('null-check auto: the start version from /openapi.json', () => {
  it('uses v2 when the document lists POST /api/v2/null-or-not', async () => {
    nullUp.route('GET', OPENAPI, { body: openapi(true) });
    nullUp.route('POST', CHECK_V2, { body: v2Body() });
    const clients = clientsWith();
    await discovered(clients, 'v2');
    nullUp.resetRecords();

    const answer = await clients.nullCheck.check(
      { hasValue: true, value: 0 },
      testOperation({ apiKey: 'demo-pro' }),
    );
    expect(answer.answer).toEqual({ kind: 'boolean', isNull: false });
    expect(answer.philosophicalAnalysis).toEqual(analysisRead);
    expect(paths(nullUp)).toEqual([`POST ${CHECK_V2}`]);
    // The same request body as v1, and the caller's key.
    expect(nullUp.requests[0]?.body).toEqual({ value: 0 });
    expect(nullUp.requests[0]?.headers.authorization).toBe('Bearer demo-pro');
    expect(clients.state('null-check')).toMatchObject({ apiVersion: 'v2', deprecated: false, sunset: null });
    expect(warnings()).toEqual([]);
  });

  it('reads the document once, without the caller key, and v1 when it lists no v2', async () => {
    nullUp.route('GET', OPENAPI, { body: openapi(false) });
    nullUp.route('POST', CHECK_V1, { body: nullBody() });
    const clients = clientsWith();
    await discovered(clients, 'lists v1');
    expect(nullUp.requests[0]?.headers).not.toHaveProperty('authorization');
    await clients.nullCheck.check({ hasValue: true, value: null }, testOperation({ apiKey: 'demo-pro' }));
    expect(paths(nullUp)).toEqual([`GET ${OPENAPI}`, `POST ${CHECK_V1}`]);
  });

  it.each([
    ['missing (404)', { status: 404 }],
    ['gone (410)', { status: 410 }],
  ])(
    'keeps v1 when the document is %s, quietly: no failure, no warn line, never asked again',
    async (_name, script) => {
      nullUp.route('GET', OPENAPI, script);
      nullUp.route('POST', CHECK_V1, { body: nullBody() });
      const clients = clientsWith();
      await discovered(clients, 'missing');
      const answer = await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
      expect(answer.answer).toEqual({ kind: 'boolean', isNull: true });
      expect(paths(nullUp)).toEqual([`GET ${OPENAPI}`, `POST ${CHECK_V1}`]);
      expect(warnings()).toEqual([]);
      expect(lines.find((l) => l.endpoint === 'openapi')).toMatchObject({
        level: LEVEL.debug,
        code: 'UPSTREAM_ERROR',
      });
      // An answer, not a failure: no "trying again later" (a failed discovery is retried every 30 s).
      expect(lines.filter((l) => l.msg.includes('discovery failed'))).toEqual([]);
    },
  );

  it.each([
    ['broken JSON', { body: '{"openapi": "3.1.0", "paths": {' }],
    ['HTML', { html: '<h1>docs moved</h1>' }],
    ['a 500', { status: 500 }],
    ['a 503', { status: 503 }],
  ])('keeps v1 when the document is %s, no call fails, and tries again later', async (_name, script) => {
    nullUp.route('GET', OPENAPI, script);
    nullUp.route('POST', CHECK_V1, { body: nullBody() });
    nullUp.route('POST', CHECK_V2, { body: v2Body() });
    const clients = clientsWith();
    await discovered(clients, 'failed');
    const answer = await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(answer.answer).toEqual({ kind: 'boolean', isNull: true });
    expect(paths(nullUp)).toEqual([`GET ${OPENAPI}`, `POST ${CHECK_V1}`]);
    expect(clients.state('null-check')).toMatchObject({ apiVersion: 'v1', breaker: 'closed' });
    expect(lines.find((l) => l.msg.includes('discovery failed'))).toMatchObject({ level: LEVEL.info });
  });

  it('never reads the document for pi-digits (its v2 is always served, but needs a waiver)', async () => {
    nullUp.route('GET', OPENAPI, { body: openapi(false) });
    piUp.route('GET', PI_V1, { body: piBody() });
    const clients = clientsWith();
    await discovered(clients, 'lists v1');
    await clients.piDigits.pi({ digits: 3 }, testOperation());
    await clients.close(); // every request it started has ended
    expect(paths(piUp)).toEqual([`GET ${PI_V1}`]);
  });
});

describe('null-check auto: a retired v1 endpoint', () => {
  it.each([410, 404])(
    'a v1 call answered %i is retried over v2 in the same call; later calls go to v2; one warn line',
    async (status) => {
      // No document: read as v1 before the first call, and never able to undo a switch later.
      nullUp.route('GET', OPENAPI, { status: 404 });
      const clients = clientsWith();
      await discovered(clients, 'missing');
      nullUp.resetRecords();
      nullUp.route('POST', CHECK_V1, gone(status));
      nullUp.route('POST', CHECK_V2, { body: v2Body() });

      const operation = testOperation();
      const answer = await clients.nullCheck.check({ hasValue: true, value: 'x' }, operation);
      expect(answer.answer).toEqual({ kind: 'boolean', isNull: false });
      expect(answer.philosophicalAnalysis).toEqual(analysisRead);
      expect(paths(nullUp)).toEqual([`POST ${CHECK_V1}`, `POST ${CHECK_V2}`]);
      // The same body went to both.
      expect(nullUp.requests[1]?.rawBody).toBe(nullUp.requests[0]?.rawBody);
      expect(clients.state('null-check').apiVersion).toBe('v2');
      // The call shows the endpoint that answered; both answered attempts count (docs/contract.md, Cost).
      expect(operation.ledger.calls).toEqual([
        expect.objectContaining({ endpoint: 'null-or-not', status: 200 }),
      ]);
      expect(operation.ledger.upstreamCalls).toBe(2);

      for (let i = 0; i < 3; i++)
        await clients.nullCheck.check({ hasValue: true, value: i }, testOperation());
      expect(nullUp.count('POST', CHECK_V1)).toBe(1);
      expect(nullUp.count('POST', CHECK_V2)).toBe(4);

      const moved = warnings().filter((l) => String(l.msg).includes('moved to v2'));
      expect(moved).toHaveLength(1);
      expect(moved[0]).toMatchObject({
        upstream: 'null-check',
        from: 'v1',
        to: 'v2',
        upstreamStatus: status,
      });
      expect(warnings()).toHaveLength(1);
    },
  );

  it('a 404 that is no retirement (v2 answers 404 too) changes nothing: the caller gets the original error', async () => {
    nullUp.route('GET', OPENAPI, { status: 404 });
    const clients = clientsWith();
    await discovered(clients, 'missing');
    nullUp.resetRecords();
    nullUp.route('POST', CHECK_V1, { status: 404, body: 'v1: no such route' });
    nullUp.route('POST', CHECK_V2, { status: 404, body: 'v2: no such route either' });

    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: null }, testOperation()));
    expect(error).toMatchObject({ code: 'UPSTREAM_ERROR', statusCode: 404, body: 'v1: no such route' });
    expect(paths(nullUp)).toEqual([`POST ${CHECK_V1}`, `POST ${CHECK_V2}`]);
    expect(clients.state('null-check').apiVersion).toBe('v1');
    expect(lines.filter((l) => String(l.msg).includes('moved to'))).toEqual([]);
    // Not silent: a failure no switch explains is upstream trouble (warn).
    expect(
      warnings().filter((l) => l.msg === 'upstream call failed' && l.upstreamStatus === 404),
    ).not.toEqual([]);

    // Nothing was learnt: the next call tries v1 first again.
    nullUp.route('POST', CHECK_V1, { body: nullBody() });
    await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(nullUp.count('POST', CHECK_V1)).toBe(2);
    expect(nullUp.count('POST', CHECK_V2)).toBe(1);
  });

  it.each([
    [500, 'NULL_PARADOX', 2],
    [502, 'UPSTREAM_ERROR', 1],
    [503, 'UPSTREAM_UNAVAILABLE', 3],
  ])(
    'v1 gone and v2 answering %i: the caller gets the v2 error (%s) and the state moves to v2',
    async (status, code, v2Attempts) => {
      nullUp.route('GET', OPENAPI, { status: 404 });
      const clients = clientsWith();
      await discovered(clients, 'missing');
      nullUp.resetRecords();
      nullUp.route('POST', CHECK_V1, gone(410));
      nullUp.route('POST', CHECK_V2, { status, body: { error: { status, code: 'V2_TROUBLE' } } });

      const error = await failureOf(
        clients.nullCheck.check({ hasValue: true, value: null }, testOperation()),
      );
      expect(error).toMatchObject({ code, statusCode: status, upstream: 'null-check' });
      // v2 calls are retried as any read (500 once, 503 up to RETRY_MAX_ATTEMPTS); v1 is never retried.
      expect(nullUp.count('POST', CHECK_V1)).toBe(1);
      expect(nullUp.count('POST', CHECK_V2)).toBe(v2Attempts);
      expect(clients.state('null-check').apiVersion).toBe('v2');
      expect(lines.filter((l) => String(l.msg).includes('moved to v2'))).toHaveLength(1);

      // v2 recovers: no more v1 calls.
      nullUp.route('POST', CHECK_V2, { body: v2Body() });
      await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
      expect(nullUp.count('POST', CHECK_V1)).toBe(1);
    },
  );
});

describe('null-check fixed versions', () => {
  it('NULL_API_VERSION=v1 never reads the document and never switches: a 410 is the caller’s error', async () => {
    nullUp.route('GET', OPENAPI, { body: openapi(true) });
    nullUp.route('POST', CHECK_V1, gone(410));
    nullUp.route('POST', CHECK_V2, { body: v2Body() });
    const clients = clientsWith({ NULL_API_VERSION: 'v1' });
    for (let i = 0; i < 2; i++) {
      const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: i }, testOperation()));
      expect(error).toMatchObject({ code: 'UPSTREAM_ERROR', statusCode: 410 });
    }
    // Closed, the clients have finished every request they had started (a start-up read would
    // have been started with them): none was a read of the document.
    await clients.close();
    expect(paths(nullUp)).toEqual([`POST ${CHECK_V1}`, `POST ${CHECK_V1}`]);
    expect(clients.state('null-check').apiVersion).toBe('v1');
    // Here the 410 is the caller's failure, and logged as upstream trouble each time.
    expect(
      warnings().filter((l) => l.msg === 'upstream call failed' && l.upstreamStatus === 410),
    ).toHaveLength(2);
  });

  it('NULL_API_VERSION=v2 calls v2 at once and never falls back to v1', async () => {
    nullUp.route('GET', OPENAPI, { body: openapi(false) });
    nullUp.route('POST', CHECK_V1, { body: nullBody() });
    nullUp.route('POST', CHECK_V2, { body: v2Body() });
    const clients = clientsWith({ NULL_API_VERSION: 'v2' });
    expect(clients.state('null-check').apiVersion).toBe('v2');
    expect(
      (await clients.nullCheck.check({ hasValue: true, value: 1 }, testOperation())).philosophicalAnalysis,
    ).toMatchObject({ school: 'apophatic', raw: analysis });
    nullUp.route('POST', CHECK_V2, gone(404));
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: 2 }, testOperation()));
    expect(error).toMatchObject({ code: 'UPSTREAM_ERROR', statusCode: 404 });
    await clients.close(); // every request it started has ended: no fallback to v1, no document read
    expect(paths(nullUp)).toEqual([`POST ${CHECK_V2}`, `POST ${CHECK_V2}`]);
  });

  it('reads a v2 answer without a philosophical analysis as null, and refuses a wrong-typed one', async () => {
    nullUp.route('POST', CHECK_V2, { body: nullBody() });
    const clients = clientsWith({ NULL_API_VERSION: 'v2' });
    expect(
      (await clients.nullCheck.check({ hasValue: true, value: 1 }, testOperation())).philosophicalAnalysis,
    ).toBeNull();
    nullUp.route('POST', CHECK_V2, { body: nullBody({ philosophical_analysis: 'a string' }) });
    const error = await failureOf(clients.nullCheck.check({ hasValue: true, value: 2 }, testOperation()));
    expect(error.code).toBe('UPSTREAM_BAD_RESPONSE');
    expect(error.message).toContain('philosophical_analysis');
  });
});

describe('pi over v2: the inference endpoint and the operator’s waiver', () => {
  const inferenceBody = { digits: '3.14159', chain_of_thought: null, tokens_used: 42, cost: '$0.0042' };

  it('PI_API_VERSION=v2 without PI_WAIVER_ACCEPTED: WAIVER_REQUIRED naming the setting, no upstream request', async () => {
    piUp.route('POST', INFERENCE, { body: inferenceBody });
    piUp.route('GET', PI_V1, { body: piBody() });
    const clients = clientsWith({ PI_API_VERSION: 'v2' });
    const operation = testOperation();
    for (let i = 0; i < 3; i++) {
      const error = await failureOf(clients.piDigits.pi({ digits: 5 + i }, operation));
      expect(error).toMatchObject({ code: 'WAIVER_REQUIRED', upstream: 'pi-digits', statusCode: undefined });
      expect(error.message).toContain('PI_WAIVER_ACCEPTED');
      expect(error.toExtensions()).toEqual({ code: 'WAIVER_REQUIRED', upstream: 'pi-digits' });
    }
    expect(piUp.count()).toBe(0);
    expect(operation.ledger.upstreamCalls).toBe(0);
    expect(operation.ledger.calls?.map((c) => c.code)).toEqual([
      'WAIVER_REQUIRED',
      'WAIVER_REQUIRED',
      'WAIVER_REQUIRED',
    ]);
    // The explicit inference query is not pi: it still goes out (the caller signs its own waiver).
    await clients.piDigits.inference({ desiredDigits: 3, liabilityWaiverSigned: true }, testOperation());
    expect(paths(piUp)).toEqual([`POST ${INFERENCE}`]);
  });

  it('with the waiver, pi is served by POST /api/v1/inference; fields the answer lacks are null', async () => {
    piUp.route('POST', INFERENCE, { body: inferenceBody });
    const clients = clientsWith({ PI_API_VERSION: 'v2', PI_WAIVER_ACCEPTED: 'true' });
    const operation = testOperation({ apiKey: 'demo-enterprise' });
    const answer = await clients.piDigits.pi({ digits: 5, model: 'pi-x-4o', temperature: 0 }, operation);
    expect(paths(piUp)).toEqual([`POST ${INFERENCE}`]);
    expect(piUp.requests[0]?.body).toEqual({
      desired_digits: 5,
      model: 'pi-x-4o',
      temperature: 0,
      liability_waiver_signed: true,
    });
    expect(piUp.requests[0]?.headers.authorization).toBe('Bearer demo-enterprise');
    expect(answer).toMatchObject({
      digits: '3.14159',
      precision: 5,
      confidence: null,
      model: null,
      inferenceTimeMs: null,
      gpuCostUsd: null,
      costUsd: 0.0042,
      sponsoredBy: null,
      disclaimer: null,
      constantMarker: null,
    });
    // Its cost is the inference's cost string.
    expect(operation.ledger.costUsd).toBe(0.0042);
    expect(clients.state('pi-digits')).toMatchObject({ apiVersion: 'v2', deprecated: false });
  });

  it('with the waiver, asks for the service default of 3 digits when pi gives none, and keeps fields that are there', async () => {
    piUp.route('POST', INFERENCE, {
      body: {
        ...inferenceBody,
        digits: '2.718',
        confidence: 0.5,
        gpu_cost_usd: 0.02,
        model: 'pi-x-mini',
        constant: 'e',
      },
    });
    const clients = clientsWith({ PI_API_VERSION: 'v2', PI_WAIVER_ACCEPTED: 'true' });
    const answer = await clients.piDigits.pi({}, testOperation());
    expect(piUp.requests[0]?.body).toEqual({ desired_digits: 3, liability_waiver_signed: true });
    expect(answer).toMatchObject({
      digits: '2.718',
      precision: 3,
      confidence: 0.5,
      gpuCostUsd: 0.02,
      model: 'pi-x-mini',
      constantMarker: 'e',
    });
  });

  it('auto: a retired GET /pi moves pi to the inference endpoint within the same call, with the waiver', async () => {
    piUp.route('GET', PI_V1, gone(410));
    piUp.route('POST', INFERENCE, { body: inferenceBody });
    const clients = clientsWith({ PI_WAIVER_ACCEPTED: 'true' });
    const answer = await clients.piDigits.pi({ digits: 5 }, testOperation());
    expect(answer.digits).toBe('3.14159');
    expect(paths(piUp)).toEqual([`GET ${PI_V1}`, `POST ${INFERENCE}`]);
    expect(clients.state('pi-digits').apiVersion).toBe('v2');
    await clients.piDigits.pi({ digits: 6 }, testOperation());
    expect(piUp.count('GET', PI_V1)).toBe(1);
    expect(lines.filter((l) => String(l.msg).includes('pi-digits moved to v2'))).toHaveLength(1);
  });

  it('auto: a retired GET /pi without the waiver is WAIVER_REQUIRED, and no inference is sent', async () => {
    piUp.route('GET', PI_V1, gone(410));
    piUp.route('POST', INFERENCE, { body: inferenceBody });
    const clients = clientsWith();
    const error = await failureOf(clients.piDigits.pi({ digits: 5 }, testOperation()));
    expect(error.code).toBe('WAIVER_REQUIRED');
    expect(error.message).toContain('PI_WAIVER_ACCEPTED');
    expect(paths(piUp)).toEqual([`GET ${PI_V1}`]);
    // The upstream has moved (v1 is gone); later calls are refused without any network.
    expect(clients.state('pi-digits').apiVersion).toBe('v2');
    expect((await failureOf(clients.piDigits.pi({ digits: 6 }, testOperation()))).code).toBe(
      'WAIVER_REQUIRED',
    );
    expect(piUp.count()).toBe(1);
  });

  it('auto: refused over v2 without the waiver, it looks at v1 again every 30 s and returns when v1 is back', async () => {
    piUp.route('GET', PI_V1, gone(410));
    const clients = clientsWith();
    const start = Date.now();
    expect((await failureOf(clients.piDigits.pi({ digits: 5 }, testOperation()))).code).toBe(
      'WAIVER_REQUIRED',
    );
    piUp.route('GET', PI_V1, { body: piBody() });
    // Only the clock moves (no sleep): within 30 s still refused without network, after it v1 is tried.
    vi.useFakeTimers({ toFake: ['Date'], now: start + 10_000 });
    try {
      expect((await failureOf(clients.piDigits.pi({ digits: 5 }, testOperation()))).code).toBe(
        'WAIVER_REQUIRED',
      );
      expect(piUp.count('GET', PI_V1)).toBe(1);
      vi.setSystemTime(start + 31_000);
      const answer = await clients.piDigits.pi({ digits: 3 }, testOperation());
      expect(answer.digits).toBe('3.141');
      expect(clients.state('pi-digits').apiVersion).toBe('v1');
      expect(piUp.count('GET', PI_V1)).toBe(2);
      expect(lines.filter((l) => String(l.msg).includes('pi-digits moved back to v1'))).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('auto: keeps GET /pi while it is served, deprecated included', async () => {
    piUp.route('GET', PI_V1, { headers: DEPRECATED, body: piBody() });
    const clients = clientsWith({ PI_WAIVER_ACCEPTED: 'true' });
    for (let i = 0; i < 2; i++) await clients.piDigits.pi({ digits: i }, testOperation());
    expect(paths(piUp)).toEqual([`GET ${PI_V1}`, `GET ${PI_V1}`]);
    expect(clients.state('pi-digits')).toMatchObject({ apiVersion: 'v1', deprecated: true, sunset: SUNSET });
  });
});

describe('deprecation headers', () => {
  it('are counted on every answer, logged once per endpoint with the Sunset date, and kept in the state', async () => {
    nullUp.route('POST', CHECK_V1, { headers: DEPRECATED, body: nullBody() });
    piUp.route('GET', PI_V1, { headers: { deprecation: '@1767225600' }, body: piBody() });
    const clients = clientsWith({ NULL_API_VERSION: 'v1' });
    expect(clients.state('null-check')).toMatchObject({ deprecated: false, sunset: null });

    for (let i = 0; i < 3; i++) await clients.nullCheck.check({ hasValue: true, value: i }, testOperation());
    for (let i = 0; i < 2; i++) await clients.piDigits.pi({ digits: i }, testOperation());

    const deprecated = (upstream: string, endpoint: string) =>
      metricValue(clients.metrics.registry, 'gateway_upstream_deprecated_total', { upstream, endpoint });
    expect(await deprecated('null-check', 'check')).toBe(3);
    expect(await deprecated('pi-digits', 'pi')).toBe(2);

    const logged = lines.filter((l) => l.msg === 'upstream endpoint is deprecated');
    expect(logged).toHaveLength(2);
    expect(logged[0]).toMatchObject({
      level: LEVEL.warn,
      upstream: 'null-check',
      endpoint: 'check',
      sunset: SUNSET,
    });
    expect(logged[1]).toMatchObject({
      level: LEVEL.warn,
      upstream: 'pi-digits',
      endpoint: 'pi',
      sunset: null,
    });

    expect(clients.state('null-check')).toMatchObject({ apiVersion: 'v1', deprecated: true, sunset: SUNSET });
    expect(clients.state('pi-digits')).toMatchObject({ apiVersion: 'v1', deprecated: true, sunset: null });
    // The health probes report the same.
    expect(await clients.health.nullCheck()).toMatchObject({
      reachable: true,
      apiVersion: 'v1',
      deprecated: true,
      sunset: SUNSET,
    });
  });

  it('counts only answers that came from the upstream (a cache hit is not one)', async () => {
    nullUp.route('POST', CHECK_V1, { headers: DEPRECATED, body: nullBody() });
    const clients = clientsWith({ NULL_API_VERSION: 'v1', RESPONSE_CACHE: 'true' });
    for (let i = 0; i < 3; i++)
      await clients.nullCheck.check({ hasValue: true, value: null }, testOperation());
    expect(nullUp.count('POST', CHECK_V1)).toBe(1);
    expect(
      await metricValue(clients.metrics.registry, 'gateway_upstream_deprecated_total', {
        upstream: 'null-check',
        endpoint: 'check',
      }),
    ).toBe(1);
  });

  it('a deprecated v1 that is then retired: the state follows the endpoint now in use', async () => {
    nullUp.route('GET', OPENAPI, { status: 404 });
    nullUp.route('POST', CHECK_V1, { headers: DEPRECATED, body: nullBody() });
    const clients = clientsWith();
    await discovered(clients, 'missing');
    await clients.nullCheck.check({ hasValue: true, value: 1 }, testOperation());
    expect(clients.state('null-check')).toMatchObject({ apiVersion: 'v1', deprecated: true, sunset: SUNSET });

    nullUp.route('POST', CHECK_V1, gone(410));
    nullUp.route('POST', CHECK_V2, { body: v2Body() });
    await clients.nullCheck.check({ hasValue: true, value: 2 }, testOperation());
    expect(clients.state('null-check')).toMatchObject({ apiVersion: 'v2', deprecated: false, sunset: null });
    expect(count(lines, LEVEL.warn, 'upstream endpoint is deprecated')).toBe(1);
  });
});

describe('through the gateway', () => {
  let gateway: TestGateway | undefined;
  afterEach(async () => {
    await gateway?.close();
    gateway = undefined;
  });

  it('a client never sees the switch: no error, and health shows the version and deprecation', async () => {
    nullUp.route('GET', OPENAPI, { status: 404 });
    nullUp.route('POST', CHECK_V1, gone(410));
    nullUp.route('POST', CHECK_V2, { headers: DEPRECATED, body: v2Body() });
    const captured = capturedLogger('debug');
    gateway = await startTestGateway({
      nullBaseUrl: nullUp.url,
      piBaseUrl: piUp.url,
      logger: captured.logger,
    });
    // The start-up discovery found no document (v1) before the first call.
    expect(
      await until(() => captured.lines.some((l) => l.endpoint === 'openapi' && l.upstreamStatus === 404)),
    ).toBe(true);

    const result = await gql(
      gateway.url,
      '{ isNull(value: 0) { __typename ... on NullVerdict { isNull } } }',
    );
    expect(result.errors).toBeUndefined();
    expect(result.data).toEqual({ isNull: { __typename: 'NullVerdict', isNull: false } });

    const health = await gql(
      gateway.url,
      '{ health { nullCheck { apiVersion deprecated sunset } pi { apiVersion } } }',
    );
    expect(health.errors).toBeUndefined();
    expect(health.data?.health).toEqual({
      nullCheck: { apiVersion: 'v2', deprecated: true, sunset: SUNSET },
      pi: { apiVersion: 'v1' },
    });
  });

  it('pi over v2 without the waiver is a WAIVER_REQUIRED field error, other fields still resolve', async () => {
    nullUp.route('POST', CHECK_V1, { body: nullBody() });
    gateway = await startTestGateway({
      nullBaseUrl: nullUp.url,
      piBaseUrl: piUp.url,
      env: { PI_API_VERSION: 'v2', NULL_API_VERSION: 'v1' },
    });
    const result = await gql(gateway.url, '{ isNull(value: null) { __typename } pi { __typename } }');
    expect(result.data).toEqual({ isNull: { __typename: 'NullVerdict' }, pi: null });
    expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'WAIVER_REQUIRED', upstream: 'pi-digits' });
    expect(result.errors?.[0]?.message).toContain('PI_WAIVER_ACCEPTED');
    expect(piUp.count()).toBe(0);
  });
});
