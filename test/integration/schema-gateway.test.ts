/**
 * The schema through the real gateway (`createApp`, over a loopback socket) in front of two scripted
 * upstreams that answer what each test says and record every request: union members, the truth
 * fields, argument checks before any upstream call, dedupe within an operation, health.
 *
 * What reaches the upstream is read off the wire (the recorded request bodies and queries), so
 * "undefined vs null" and "no upstream call" are checked where they matter. What a client is told
 * when an upstream fails (the error table, partial results, masking) is in gateway-faults.test.ts;
 * hostile requests and the default limits are in hostile-input.test.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type RecordedRequest,
  type ScriptedUpstream,
  startScriptedUpstream,
} from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway, testDigitEngine } from '../support/gateway.js';
import { type GqlResult, gql } from '../support/graphql-client.js';
import { metricValue } from '../support/metric-values.js';
import { nullBody, nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';
import { gate, until } from '../support/waits.js';

const engine = testDigitEngine();

let nullUp: ScriptedUpstream;
let piUp: ScriptedUpstream;
let gateway: TestGateway;

const ENV = {
  NULL_API_VERSION: 'v1',
  PI_API_VERSION: 'v1',
  MAX_DIGITS: '5000',
  MAX_JSON_DEPTH: '8',
  MAX_TOKENS: '100000',
  // One attempt per call, and a breaker that never opens: each test sees exactly its own answers.
  RETRY_MAX_ATTEMPTS: '1',
  BREAKER_THRESHOLD: '10000',
  // Seconds: a scripted answer is never taken for a timeout, however busy the machine.
  UPSTREAM_TIMEOUT_MS: '10000',
  HEALTH_TIMEOUT_MS: '5000',
};

beforeAll(async () => {
  [nullUp, piUp] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
  gateway = await startTestGateway({ nullBaseUrl: nullUp.url, piBaseUrl: piUp.url, env: ENV });
});
afterAll(async () => {
  await gateway?.close();
  await Promise.all([nullUp?.close(), piUp?.close()]);
});

/** Honest upstreams: is_null is `value === null`, digits are the true digits of pi. */
function honest() {
  nullUp.reset();
  piUp.reset();
  nullUp.route('POST', '/api/v1/check', (request) => {
    const body = request.body as Record<string, unknown>;
    return {
      body: nullBody({
        is_null: 'value' in body && body.value === null,
        confidence: 0.97,
        gpu_cost_usd: 0.002,
        sponsored_by: 'Acme Nulls',
      }),
    };
  });
  piUp.route('GET', '/api/v1/pi', async (request) => {
    const digits = request.query.digits === undefined ? 3 : Number(request.query.digits);
    return { body: piBody({ digits: await engine.digits('pi', digits), precision: digits }) };
  });
  piUp.route('POST', '/api/v1/inference', async (request) => {
    const body = request.body as { desired_digits: number; use_chain_of_thought?: boolean; model?: string };
    return {
      body: {
        digits: await engine.digits('pi', body.desired_digits),
        chain_of_thought: body.use_chain_of_thought ? 'Step 1: think.' : null,
        tokens_used: 42,
        cost: '$0.0042',
        precision: body.desired_digits,
        model: body.model ?? 'pi-x-4o',
      },
    };
  });
  nullUp.route('GET', '/api/v1/health', { body: nullHealth });
  piUp.route('GET', '/api/v1/health', { body: piHealth });
}
beforeEach(honest);

/** The bodies the null-check upstream received on /api/v1/check. */
const checks = () =>
  nullUp.requests.filter((r) => r.path === '/api/v1/check').map((r) => r.body as Record<string, unknown>);
/** The pi calls the pi-digits upstream received. */
const piCalls = (): RecordedRequest[] => piUp.requests.filter((r) => r.path === '/api/v1/pi');
const inferences = () =>
  piUp.requests.filter((r) => r.path === '/api/v1/inference').map((r) => r.body as Record<string, unknown>);

const run = (query: string, variables?: Record<string, unknown>): Promise<GqlResult> =>
  gql(gateway.url, query, { variables });
const errorAt = (result: GqlResult, field: string) => result.errors?.find((e) => e.path?.[0] === field);

const NULL_FIELDS = `__typename ... on NullCheck { actuallyNull correct model modelName confidence }
  ... on NullVerdict { isNull } ... on MaybeVerdict { answer } ... on ExistentialVerdict { musing raw }`;

describe('isNull: undefined vs null', () => {
  it('an explicit null reaches the upstream as a value; actuallyNull and correct are true', async () => {
    const result = await run(`{ isNull(value: null) { ${NULL_FIELDS} } }`);
    expect(checks()).toEqual([{ value: null }]);
    expect(result.data?.isNull).toMatchObject({
      __typename: 'NullVerdict',
      isNull: true,
      actuallyNull: true,
      correct: true,
    });
  });

  it('an omitted value reaches the upstream without a value key (undefined), and is not null', async () => {
    const result = await run(`{ isNull { ${NULL_FIELDS} } }`);
    expect(checks()).toHaveLength(1);
    expect(checks()[0]).not.toHaveProperty('value');
    expect(nullUp.requests[0]?.rawBody).not.toContain('value');
    expect(result.data?.isNull).toMatchObject({ isNull: false, actuallyNull: false, correct: true });
  });

  it('an unset variable is undefined; a variable set to null is null', async () => {
    const query = `query($v: JSON) { isNull(value: $v) { ${NULL_FIELDS} } }`;
    const unset = await run(query, {});
    const setNull = await run(query, { v: null });
    expect(checks().map((body) => 'value' in body)).toEqual([false, true]);
    expect(checks()[1]).toEqual({ value: null });
    expect(unset.data?.isNull.actuallyNull).toBe(false);
    expect(setNull.data?.isNull.actuallyNull).toBe(true);
  });

  it('any other JSON value passes through untouched and is not null', async () => {
    const value = { a: [1, 'two', null, { b: false }], c: 3.5 };
    const result = await run(`query($v: JSON) { isNull(value: $v) { ${NULL_FIELDS} } }`, { v: value });
    expect(checks()[0]?.value).toEqual(value);
    expect(result.data?.isNull).toMatchObject({ isNull: false, actuallyNull: false, correct: true });
  });

  it('literal JSON (objects, lists, numbers, nested variables) becomes the same value', async () => {
    await run(
      `query($x: JSON, $missing: JSON) { isNull(value: {a: [1, 2.5, "s", true, null], b: {c: $x}, d: $missing}) { __typename } }`,
      { x: { y: 1 } },
    );
    expect(checks()[0]?.value).toEqual({ a: [1, 2.5, 's', true, null], b: { c: { y: 1 } } });
    expect(checks()[0]?.value).not.toHaveProperty('d');
  });

  it('a wrong boolean answer is flagged correct: false', async () => {
    nullUp.route('POST', '/api/v1/check', { body: nullBody({ is_null: false }) });
    const result = await run(`{ isNull(value: null) { ${NULL_FIELDS} } }`);
    expect(result.data?.isNull).toMatchObject({ isNull: false, actuallyNull: true, correct: false });
  });
});

describe('isNull: arguments on the wire', () => {
  it('arguments become the upstream fields (snake_case, model strings)', async () => {
    await run(
      '{ isNull(value: {a: [1]}, model: NULL_X_MINI, temperature: 0.25, strictMode: true) { __typename } }',
    );
    expect(checks()).toEqual([
      { value: { a: [1] }, model: 'null-x-mini', temperature: 0.25, strict_mode: true },
    ]);
  });
});

describe('isNull: answer shapes', () => {
  it('"maybe" is a MaybeVerdict with correct: null (actuallyNull still says what was sent)', async () => {
    nullUp.route('POST', '/api/v1/check', { body: nullBody({ is_null: 'maybe' }) });
    const result = await run(`{ isNull(value: null, temperature: 0.5) { ${NULL_FIELDS} } }`);
    expect(result.data?.isNull).toMatchObject({
      __typename: 'MaybeVerdict',
      answer: 'maybe',
      correct: null,
      actuallyNull: true,
    });
    expect(checks()).toEqual([{ value: null, temperature: 0.5 }]);
  });

  it.each([
    ['a string', nullBody({ is_null: 'The void stares back.' }), 'The void stares back.'],
    [
      'an object with a musing',
      nullBody({ is_null: { musing: 'Is anything truly null?' } }),
      'Is anything truly null?',
    ],
    [
      'an object with a thought, in a body with fields of its own',
      { is_null: { thought: 'What is null, really?' }, confidence: 0.1, extra: [1, 2] },
      'What is null, really?',
    ],
    ['a number', nullBody({ is_null: 42 }), null],
  ])(
    'any other shape (%s) is an ExistentialVerdict carrying its text and the untouched body',
    async (_what, body, musing) => {
      nullUp.route('POST', '/api/v1/check', { body });
      const result = await run(`{ isNull(value: "x", temperature: 0.9) { ${NULL_FIELDS} } }`);
      expect(result.errors).toBeUndefined();
      expect(result.data?.isNull).toMatchObject({
        __typename: 'ExistentialVerdict',
        correct: null,
        actuallyNull: false,
      });
      // Null when the answer had no text: nothing is made up.
      expect(result.data?.isNull.musing).toBe(musing);
      expect(result.data?.isNull.raw).toEqual(body);
    },
  );

  it('an unknown model string is model: null with the raw modelName, not a crash', async () => {
    nullUp.route('POST', '/api/v1/check', { body: nullBody({ model: 'null-x-5-preview' }) });
    const result = await run(`{ isNull(value: null, model: NULL_X_OPUS) { ${NULL_FIELDS} } }`);
    expect(checks()[0]?.model).toBe('null-x-opus');
    expect(result.errors).toBeUndefined();
    expect(result.data?.isNull).toMatchObject({ model: null, modelName: 'null-x-5-preview' });
  });
});

describe('isNull: argument checks happen before any upstream call', () => {
  it.each([-0.1, 1.01, 5])('temperature %s → BAD_USER_INPUT', async (temperature) => {
    const result = await run('query($t: Float) { isNull(value: null, temperature: $t) { __typename } }', {
      t: temperature,
    });
    expect(errorAt(result, 'isNull')?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(result.data).toEqual({ isNull: null });
    expect(nullUp.count()).toBe(0);
  });

  it('a value deeper than MAX_JSON_DEPTH → BAD_USER_INPUT', async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 9; i++) deep = [deep];
    const result = await run('query($v: JSON) { isNull(value: $v) { __typename } }', { v: deep });
    expect(errorAt(result, 'isNull')?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(errorAt(result, 'isNull')?.message).toMatch(/nested 9 levels/);
    expect(nullUp.count()).toBe(0);
    // At the limit it goes through.
    await run('query($v: JSON) { isNull(value: $v) { __typename } }', { v: (deep as unknown[])[0] });
    expect(nullUp.count()).toBe(1);
  });

  it('a 40k-deep literal is a clear client error, not a stack overflow', async () => {
    const n = 40_000;
    const result = await run(`{ isNull(value: ${'['.repeat(n)}${']'.repeat(n)}) { __typename } }`);
    // A request error (no data): 400 under application/graphql-response+json.
    expect(result.status).toBe(400);
    expect(result.data).toBeUndefined();
    expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(result.errors?.[0]?.message).toMatch(/nested too deeply/);
    expect(nullUp.count()).toBe(0);
  });

  it('bare words are not JSON strings', async () => {
    const result = await run('{ isNull(value: {a: hello}) { __typename } }');
    expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(nullUp.count()).toBe(0);
  });
});

describe('dataloaders: identical calls within one operation reach the upstream once', () => {
  /** Calls saved so far (0 before the first one). */
  const dedup = async (upstream: string) =>
    (await metricValue(gateway.app.metrics.registry, 'gateway_dedup_hits_total', {
      upstream,
      source: 'dataloader',
    })) ?? 0;

  it('dedupes identical isNull and pi calls, keeps distinct ones, pays once, and counts each call it saved', async () => {
    const [nullBefore, piBefore] = [await dedup('null-check'), await dedup('pi-digits')];
    const result = await run(`{
      a: isNull(value: {x: 1}) { __typename } b: isNull(value: {x: 1}) { __typename } b2: isNull(value: {x: 1}) { __typename }
      c: isNull(value: {x: 2}) { __typename } n: isNull { __typename } m: isNull(value: null) { __typename }
      p: pi(digits: 2) { __typename } q: pi(digits: 2) { __typename } r: pi { __typename }
    }`);
    expect(result.status).toBe(200);
    expect(result.errors).toBeUndefined();
    expect(checks()).toHaveLength(4);
    expect(piCalls().map((r) => r.query.digits)).toEqual(expect.arrayContaining(['2', undefined]));
    expect(piCalls()).toHaveLength(2);
    // Paid once per upstream call: four checks at 0.002, two pi calls at 0.01.
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: 0.028, upstreamCalls: 6, cacheHits: 0 });
    // Each call served from the loader counts: three identical checks saved two.
    expect(await dedup('null-check')).toBe(nullBefore + 2);
    expect(await dedup('pi-digits')).toBe(piBefore + 1);
  });

  it('does not share calls between operations (the response cache is off by default)', async () => {
    expect(gateway.app.fastPath.served.fast).toBeGreaterThan(0);
    expect(gateway.config.cache.responseCache).toBe(false);
    await run('{ pi { __typename } }');
    await run('{ pi { __typename } }');
    expect(piCalls()).toHaveLength(2);
  });
});

const PI_FIELDS =
  '__typename ... on ConstantDigits { digits precision requestedDigits correctDigits model modelName sponsoredBy }';

describe('pi: members and the truth', () => {
  it('honest pi is PiDigits with every decimal correct; omitted digits ask for the default (3)', async () => {
    const result = await run(`{ pi { ${PI_FIELDS} } }`);
    expect(piCalls()[0]?.query).toEqual({});
    expect(result.data?.pi).toMatchObject({
      __typename: 'PiDigits',
      digits: await engine.digits('pi', 3),
      requestedDigits: 3,
      correctDigits: 3,
    });
  });

  it('pi(digits: 0) is "3"', async () => {
    const result = await run(`{ pi(digits: 0) { ${PI_FIELDS} } }`);
    expect(piCalls()[0]?.query).toEqual({ digits: '0' });
    expect(result.data?.pi).toMatchObject({
      digits: '3',
      precision: 0,
      requestedDigits: 0,
      correctDigits: 0,
    });
  });

  it('e digits, without a marker and with one, are EulerDigits, checked against e', async () => {
    const e40 = await engine.digits('e', 40);
    piUp.route('GET', '/api/v1/pi', [
      { body: piBody({ digits: e40, precision: 40 }) },
      { body: piBody({ digits: e40, precision: 40, constant: 'e' }) },
    ]);
    const result = await run(`{ pi(digits: 40, temperature: 1) { ${PI_FIELDS} } }`);
    expect(piCalls()[0]?.query).toEqual({ digits: '40', temperature: '1' });
    expect(result.data?.pi).toMatchObject({ __typename: 'EulerDigits', digits: e40, correctDigits: 40 });
    const marked = await run(`{ pi(digits: 40, temperature: 0.8) { ${PI_FIELDS} } }`);
    expect(marked.data?.pi).toMatchObject({ __typename: 'EulerDigits', digits: e40, correctDigits: 40 });
  });

  it('an explicit marker wins over the digits', async () => {
    piUp.route('GET', '/api/v1/pi', {
      body: piBody({ digits: await engine.digits('pi', 5), precision: 5, constant: 'e' }),
    });
    const result = await run(`{ pi(digits: 5) { ${PI_FIELDS} } }`);
    // Pi's digits under an "e" marker: EulerDigits, and none of its decimals agree with e (integer part 3 ≠ 2).
    expect(result.data?.pi).toMatchObject({ __typename: 'EulerDigits', correctDigits: 0 });
  });

  it('hallucinated digits count only the agreeing prefix', async () => {
    const truth = await engine.digits('pi', 20);
    const wrongAt = 11; // decimal place (1-based) that the model gets wrong
    const index = 1 + wrongAt; // in the string "3.xxxx"
    const wrong = `${truth.slice(0, index)}${truth[index] === '0' ? '1' : '0'}${truth.slice(index + 1)}`;
    piUp.route('GET', '/api/v1/pi', { body: piBody({ digits: wrong, precision: 20 }) });
    const result = await run(`{ pi(digits: 20) { ${PI_FIELDS} } }`);
    // The digits come back as answered, wrong place and all.
    expect(result.data?.pi).toMatchObject({
      __typename: 'PiDigits',
      digits: wrong,
      correctDigits: wrongAt - 1,
    });
  });

  it('digits of neither constant are PiDigits with 0 correct (the tie rule)', async () => {
    piUp.route('GET', '/api/v1/pi', { body: piBody({ digits: '7.1234', precision: 4 }) });
    const result = await run(`{ pi(digits: 4) { ${PI_FIELDS} } }`);
    expect(result.data?.pi).toMatchObject({ __typename: 'PiDigits', correctDigits: 0 });
  });

  it('a clamp is visible as precision < requestedDigits', async () => {
    piUp.route('GET', '/api/v1/pi', { body: piBody({ digits: await engine.digits('pi', 3), precision: 3 }) });
    const result = await run(`{ pi(digits: 10, model: PI_X_OPUS_ALMOST_CORRECT) { ${PI_FIELDS} } }`);
    expect(piCalls()[0]?.query).toEqual({ digits: '10', model: 'pi-x-opus-almost-correct' });
    expect(result.data?.pi).toMatchObject({ precision: 3, requestedDigits: 10, correctDigits: 3 });
  });

  it('an unknown model is model: null with the raw modelName', async () => {
    piUp.route('GET', '/api/v1/pi', { body: piBody({ model: 'pi-x-9000' }) });
    const result = await run(`{ pi(model: PI_X_MINI, sponsored: true) { ${PI_FIELDS} } }`);
    expect(piCalls()[0]?.query).toEqual({ model: 'pi-x-mini', sponsored: 'true' });
    expect(result.data?.pi).toMatchObject({ model: null, modelName: 'pi-x-9000' });
  });

  it.each([
    ['digits: -1', /0 or more/],
    ['digits: 5001', /at most 5000/],
    ['temperature: 2', /between 0 and 1/],
  ])('%s → BAD_USER_INPUT without an upstream call', async (args, message) => {
    const result = await run(`{ pi(${args}) { __typename } }`);
    // Refused by the resolver: data ({ pi: null }) with an error, 294 Partial Success.
    expect(result.status).toBe(294);
    expect(result.data).toEqual({ pi: null });
    expect(result.errors).toHaveLength(1);
    expect(errorAt(result, 'pi')).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    expect(errorAt(result, 'pi')?.message).toMatch(message);
    expect(piUp.count()).toBe(0);
  });
});

const INFERENCE =
  '__typename ... on Inference { digits precision requestedDigits correctDigits chainOfThought tokensUsed cost costUsd model modelName }';

describe('inference', () => {
  it('answers with the checked digits and the chain of thought', async () => {
    const result = await run(
      `{ inference(input: {desiredDigits: 6, useChainOfThought: true, liabilityWaiverSigned: true}) { ${INFERENCE} } }`,
    );
    expect(inferences()).toEqual([
      { desired_digits: 6, use_chain_of_thought: true, liability_waiver_signed: true },
    ]);
    expect(result.data?.inference).toMatchObject({
      __typename: 'PiInference',
      digits: await engine.digits('pi', 6),
      correctDigits: 6,
      requestedDigits: 6,
      chainOfThought: 'Step 1: think.',
      cost: '$0.0042',
      costUsd: 0.0042,
    });
  });

  it('without a signed waiver → WAIVER_REQUIRED, no upstream call', async () => {
    const result = await run(
      '{ inference(input: {desiredDigits: 3, liabilityWaiverSigned: false}) { __typename } }',
    );
    expect(errorAt(result, 'inference')?.extensions?.code).toBe('WAIVER_REQUIRED');
    expect(piUp.count()).toBe(0);
  });

  it('negative desiredDigits → BAD_USER_INPUT, no upstream call', async () => {
    const result = await run(
      '{ inference(input: {desiredDigits: -3, liabilityWaiverSigned: true}) { __typename } }',
    );
    expect(result.status).toBe(294);
    expect(result.errors).toHaveLength(1);
    expect(errorAt(result, 'inference')?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(piUp.count()).toBe(0);
  });

  it('e without a model name is EulerInference with modelName null', async () => {
    piUp.route('POST', '/api/v1/inference', {
      body: { digits: await engine.digits('e', 8), tokens_used: 9, cost: 'about a dollar', precision: 8 },
    });
    const result = await run(
      `{ inference(input: {desiredDigits: 8, liabilityWaiverSigned: true}) { ${INFERENCE} } }`,
    );
    expect(result.errors).toBeUndefined();
    expect(result.data?.inference).toMatchObject({
      __typename: 'EulerInference',
      correctDigits: 8,
      model: null,
      modelName: null,
      cost: 'about a dollar',
      costUsd: null,
      chainOfThought: null,
    });
  });
});

describe('health', () => {
  const HEALTH = `{ health { status
    nullCheck { reachable latencyMs statusCode error breaker status apiVersion deprecated sunset
      nullDetectable undefinedDetectable clusterStatus philosophyConsultant monthlyBurn }
    pi { reachable latencyMs statusCode error breaker status apiVersion deprecated sunset
      piAvailable gpuCluster monthlyBurnRate } } }`;
  const probe = {
    reachable: true,
    latencyMs: expect.any(Number),
    statusCode: 200,
    error: null,
    breaker: 'closed',
  };
  const versions = { apiVersion: 'v1', deprecated: false, sunset: null };

  it('OK when both are reachable and healthy, with every body field', async () => {
    piUp.route('GET', '/api/v1/health', { body: { ...piHealth, status: 'Healthy' } });
    const result = await run(HEALTH);
    expect(result.errors).toBeUndefined();
    expect(result.data?.health).toEqual({
      status: 'OK',
      nullCheck: {
        ...probe,
        ...versions,
        status: 'ok',
        nullDetectable: true,
        undefinedDetectable: false,
        clusterStatus: 'warm',
        philosophyConsultant: null,
        monthlyBurn: '$1',
      },
      pi: {
        ...probe,
        ...versions,
        status: 'Healthy',
        piAvailable: true,
        gpuCluster: 'nominal',
        monthlyBurnRate: '$2',
      },
    });
    // Health is not tier-dependent: no API key goes to it.
    expect(nullUp.requests[0]?.headers.authorization).toBeUndefined();
  });

  it('DEGRADED when one is unreachable or reports another status, or a body that does not fit', async () => {
    nullUp.route('GET', '/api/v1/health', { status: 503 });
    const oneDown = await run(HEALTH);
    expect(oneDown.errors).toBeUndefined();
    // The other one fully reported.
    expect(oneDown.data?.health).toMatchObject({
      status: 'DEGRADED',
      nullCheck: { reachable: false, statusCode: 503 },
      pi: { reachable: true, status: 'ok', piAvailable: true },
    });
    expect(oneDown.data?.health.nullCheck.error).toEqual(expect.any(String));
    honest();
    piUp.route('GET', '/api/v1/health', { body: { ...piHealth, status: 'degraded' } });
    expect((await run(HEALTH)).data?.health.status).toBe('DEGRADED');
    honest();
    piUp.route('GET', '/api/v1/health', { body: { status: 'ok', pi_available: 'yes' } });
    const odd = await run(HEALTH);
    expect(odd.data?.health.status).toBe('DEGRADED');
    // Reachable (it answered 2xx) but its body is unusable: no field is invented.
    expect(odd.data?.health.pi).toMatchObject({
      reachable: true,
      statusCode: 200,
      status: null,
      piAvailable: null,
    });
    expect(odd.data?.health.pi.error).toEqual(expect.any(String));
  });

  it('DOWN when neither is reachable, and never an error', async () => {
    nullUp.route('GET', '/api/v1/health', { status: 503, body: { error: { message: 'RAW-HEALTH-BODY' } } });
    piUp.route('GET', '/api/v1/health', { destroy: true });
    const result = await run(HEALTH);
    expect(result.errors).toBeUndefined();
    expect(result.data?.health.status).toBe('DOWN');
    expect(result.data?.health.nullCheck).toMatchObject({ reachable: false, statusCode: 503, status: null });
    expect(result.data?.health.pi).toMatchObject({
      reachable: false,
      statusCode: null,
      status: null,
      piAvailable: null,
    });
    for (const side of [result.data?.health.nullCheck, result.data?.health.pi]) {
      expect(side.error).toEqual(expect.any(String));
      expect(side.error.length).toBeGreaterThan(0);
    }
    expect(result.text).not.toContain('RAW-HEALTH-BODY');
    expect(result.text).not.toContain(`:${nullUp.port}`);
    expect(result.text).not.toContain(`:${piUp.port}`);
  });

  it('probes both upstreams concurrently, once per operation', async () => {
    const held = gate();
    nullUp.route('GET', '/api/v1/health', { holdUntil: held.opened, body: nullHealth });
    piUp.route('GET', '/api/v1/health', { holdUntil: held.opened, body: piHealth });
    const pending = run('{ a: health { status } b: health { status } }');
    const started = () => nullUp.count('GET', '/api/v1/health') + piUp.count('GET', '/api/v1/health');
    // Both probes are running while neither has answered (both are held): concurrent.
    expect(await until(() => started() === 2, 200)).toBe(true);
    held.open();
    expect((await pending).data).toEqual({ a: { status: 'OK' }, b: { status: 'OK' } });
    expect(nullUp.count('GET', '/api/v1/health')).toBe(1);
    expect(piUp.count('GET', '/api/v1/health')).toBe(1);
  });
});
