/**
 * The schema in process (yoga.fetch), over fake upstream clients that record every call: union
 * members, the truth fields, argument checks before any upstream call, error mapping, dedupe.
 */
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDigitEngine } from '../../src/digits/digit-engine.js';
import { UpstreamError, type UpstreamErrorCode } from '../../src/gateway/upstream/errors.js';
import type {
  CallOptions,
  HealthProbe,
  InferenceRequest,
  InferenceResponse,
  NullCheckRequest,
  NullCheckResponse,
  NullHealthBody,
  PiHealthBody,
  PiRequest,
  PiResponse,
  UpstreamClients,
} from '../../src/gateway/upstream/types.js';
import { createGateway } from '../../src/gateway/yoga.js';
import { createLogger } from '../../src/shared/logger.js';

const engine = createDigitEngine({ useWorker: false });
afterAll(() => engine.close());

/** Honest answers by default; each test may replace a handler. */
interface Handlers {
  check: (r: NullCheckRequest) => Promise<NullCheckResponse>;
  pi: (r: PiRequest) => Promise<PiResponse>;
  inference: (r: InferenceRequest) => Promise<InferenceResponse>;
  nullHealth: () => Promise<HealthProbe<NullHealthBody>>;
  piHealth: () => Promise<HealthProbe<PiHealthBody>>;
}

const calls = {
  check: [] as Array<[NullCheckRequest, CallOptions | undefined]>,
  pi: [] as Array<[PiRequest, CallOptions | undefined]>,
  inference: [] as Array<[InferenceRequest, CallOptions | undefined]>,
  health: 0,
};

function nullResponse(
  answer: NullCheckResponse['answer'],
  extra: Partial<NullCheckResponse> = {},
): NullCheckResponse {
  return {
    answer,
    confidence: 0.97,
    model: 'null-x-4o',
    inferenceTimeMs: 12,
    gpuCostUsd: 0.002,
    expertsConsulted: 2,
    sponsoredBy: 'Acme Nulls',
    disclaimer: 'May differ from strict equality.',
    raw: { is_null: answer.kind === 'boolean' ? answer.isNull : 'other' },
    ...extra,
  };
}

async function honestPi(decimals: number, constant: 'pi' | 'e' = 'pi'): Promise<PiResponse> {
  const digits = await engine.digits(constant, decimals);
  return {
    digits,
    precision: decimals,
    confidence: 0.99,
    model: 'pi-x-4o',
    inferenceTimeMs: 30,
    gpuCostUsd: 0.01,
    sponsoredBy: 'Pie Co',
    disclaimer: 'Digits may differ from actual pi.',
    constantMarker: null,
    raw: { digits },
  };
}

const probe = <B>(body: B, reachable = true): HealthProbe<B> => ({
  reachable,
  latencyMs: 3.5,
  statusCode: reachable ? 200 : null,
  body: reachable ? body : null,
  error: reachable ? null : 'connection refused',
  breaker: 'closed',
});
const nullHealthBody = (status = 'ok'): NullHealthBody => ({
  status,
  nullDetectable: true,
  undefinedDetectable: false,
  clusterStatus: 'warm',
  philosophyConsultant: null,
  monthlyBurn: '$1.00',
});
const piHealthBody = (status = 'ok'): PiHealthBody => ({
  status,
  piAvailable: true,
  gpuCluster: 'nominal',
  monthlyBurnRate: '$2.00',
});

let handlers: Handlers;
function resetHandlers() {
  handlers = {
    check: async (r) => nullResponse({ kind: 'boolean', isNull: r.hasValue && r.value === null }),
    pi: (r) => honestPi(r.digits ?? 3),
    inference: async (r) => {
      const p = await honestPi(r.desiredDigits);
      return {
        digits: p.digits,
        chainOfThought: r.useChainOfThought ? 'Step 1: think.' : null,
        tokensUsed: 42,
        cost: '$0.0042',
        costUsd: 0.0042,
        precision: r.desiredDigits,
        model: r.model ?? 'pi-x-4o',
        constantMarker: null,
        raw: {},
      };
    },
    nullHealth: async () => probe(nullHealthBody()),
    piHealth: async () => probe(piHealthBody()),
  };
}

const clients: UpstreamClients = {
  nullCheck: {
    check: (r, o) => {
      calls.check.push([r, o]);
      return handlers.check(r);
    },
    health: () => {
      calls.health++;
      return handlers.nullHealth();
    },
    close: async () => {},
  },
  piDigits: {
    pi: (r, o) => {
      calls.pi.push([r, o]);
      return handlers.pi(r);
    },
    inference: (r, o) => {
      calls.inference.push([r, o]);
      return handlers.inference(r);
    },
    health: () => {
      calls.health++;
      return handlers.piHealth();
    },
    close: async () => {},
  },
};

const config = loadConfig({
  NODE_ENV: 'test',
  // These tests count upstream calls per operation: the cross-operation answer cache would hide them.
  RESPONSE_CACHE: 'false',
  MAX_DIGITS: '5000',
  MAX_JSON_DEPTH: '8',
  MAX_JSON_BYTES: '200',
});
const yoga = createGateway({ clients, digits: engine, config, logger: createLogger({ level: 'silent' }) });

interface GqlError {
  message: string;
  path?: Array<string | number>;
  extensions?: Record<string, unknown>;
}
interface GqlResult {
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary result shapes
  data?: Record<string, any> | null;
  errors?: GqlError[];
}

async function gql(query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}) {
  const response = await yoga.fetch('http://gateway.test/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return { status: response.status, body: (await response.json()) as GqlResult };
}

const errorAt = (result: GqlResult, field: string) => result.errors?.find((e) => e.path?.[0] === field);

beforeEach(() => {
  resetHandlers();
  calls.check.length = 0;
  calls.pi.length = 0;
  calls.inference.length = 0;
  calls.health = 0;
});

const NULL_FIELDS = `__typename ... on NullCheck { actuallyNull correct model modelName confidence }
  ... on NullVerdict { isNull } ... on MaybeVerdict { answer } ... on ExistentialVerdict { musing raw }`;

describe('isNull: undefined vs null', () => {
  it('an explicit null reaches the upstream as a value; actuallyNull and correct are true', async () => {
    const { body } = await gql(`{ isNull(value: null) { ${NULL_FIELDS} } }`);
    expect(calls.check[0]?.[0]).toMatchObject({ hasValue: true, value: null });
    expect(body.data?.isNull).toMatchObject({
      __typename: 'NullVerdict',
      isNull: true,
      actuallyNull: true,
      correct: true,
    });
  });

  it('an omitted value reaches the upstream without a value (undefined), and is not null', async () => {
    handlers.check = async (r) =>
      nullResponse({ kind: 'boolean', isNull: false }, { raw: { hasValue: r.hasValue } });
    const { body } = await gql(`{ isNull { ${NULL_FIELDS} } }`);
    expect(calls.check[0]?.[0].hasValue).toBe(false);
    expect('value' in (calls.check[0]?.[0] ?? {}) && calls.check[0]?.[0].value !== undefined).toBe(false);
    expect(body.data?.isNull).toMatchObject({ actuallyNull: false, correct: true });
  });

  it('an unset variable is undefined; a variable set to null is null', async () => {
    const query = `query($v: JSON) { isNull(value: $v) { ${NULL_FIELDS} } }`;
    const unset = await gql(query, {});
    const setNull = await gql(query, { v: null });
    expect(calls.check.map(([r]) => r.hasValue)).toEqual([false, true]);
    expect(unset.body.data?.isNull.actuallyNull).toBe(false);
    expect(setNull.body.data?.isNull.actuallyNull).toBe(true);
  });

  it('any other JSON value passes through untouched and is not null', async () => {
    const value = { a: [1, 'two', null, { b: false }], c: 3.5 };
    const { body } = await gql(`query($v: JSON) { isNull(value: $v) { ${NULL_FIELDS} } }`, { v: value });
    expect(calls.check[0]?.[0].value).toEqual(value);
    expect(body.data?.isNull).toMatchObject({ isNull: false, actuallyNull: false, correct: true });
  });

  it('literal JSON (objects, lists, numbers, nested variables) becomes the same value', async () => {
    await gql(
      `query($x: JSON, $missing: JSON) { isNull(value: {a: [1, 2.5, "s", true, null], b: {c: $x}, d: $missing}) { __typename } }`,
      {
        x: { y: 1 },
      },
    );
    expect(calls.check[0]?.[0].value).toEqual({ a: [1, 2.5, 's', true, null], b: { c: { y: 1 } } });
  });

  it('a wrong boolean answer is flagged correct: false', async () => {
    handlers.check = async () => nullResponse({ kind: 'boolean', isNull: false });
    const { body } = await gql(`{ isNull(value: null) { ${NULL_FIELDS} } }`);
    expect(body.data?.isNull).toMatchObject({ isNull: false, actuallyNull: true, correct: false });
  });
});

describe('isNull: answer shapes', () => {
  it('"maybe" is a MaybeVerdict with correct: null', async () => {
    handlers.check = async () => nullResponse({ kind: 'maybe' });
    const { body } = await gql(`{ isNull(value: 1, temperature: 0.5) { ${NULL_FIELDS} } }`);
    expect(body.data?.isNull).toMatchObject({ __typename: 'MaybeVerdict', answer: 'maybe', correct: null });
    expect(calls.check[0]?.[0].temperature).toBe(0.5);
  });

  it('any other shape is an ExistentialVerdict carrying the text and the untouched body', async () => {
    const raw = { is_null: { thought: 'What is null, really?' }, confidence: 0.1, extra: [1, 2] };
    handlers.check = async () =>
      nullResponse({ kind: 'existential', musing: 'What is null, really?' }, { raw });
    const { body } = await gql(`{ isNull(value: "x", temperature: 0.9) { ${NULL_FIELDS} } }`);
    expect(body.data?.isNull).toMatchObject({
      __typename: 'ExistentialVerdict',
      musing: 'What is null, really?',
      correct: null,
    });
    expect(body.data?.isNull.raw).toEqual(raw);
  });

  it('an unknown model string is model: null with the raw modelName, not a crash', async () => {
    handlers.check = async () =>
      nullResponse({ kind: 'boolean', isNull: true }, { model: 'null-x-5-preview' });
    const { body } = await gql(`{ isNull(value: null, model: NULL_X_OPUS) { ${NULL_FIELDS} } }`);
    expect(calls.check[0]?.[0].model).toBe('null-x-opus');
    expect(body.errors).toBeUndefined();
    expect(body.data?.isNull).toMatchObject({ model: null, modelName: 'null-x-5-preview' });
  });
});

describe('isNull: argument checks happen before any upstream call', () => {
  it.each([-0.1, 1.01, 5])('temperature %s → BAD_USER_INPUT', async (temperature) => {
    const { body } = await gql(`query($t: Float) { isNull(value: null, temperature: $t) { __typename } }`, {
      t: temperature,
    });
    expect(errorAt(body, 'isNull')?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(calls.check).toHaveLength(0);
  });

  it('a value deeper than MAX_JSON_DEPTH → BAD_USER_INPUT', async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 9; i++) deep = [deep];
    const { body } = await gql(`query($v: JSON) { isNull(value: $v) { __typename } }`, { v: deep });
    expect(errorAt(body, 'isNull')?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(errorAt(body, 'isNull')?.message).toMatch(/nested 9 levels/);
    expect(calls.check).toHaveLength(0);
  });

  it('a value larger than MAX_JSON_BYTES → BAD_USER_INPUT', async () => {
    const { body } = await gql(`query($v: JSON) { isNull(value: $v) { __typename } }`, {
      v: 'x'.repeat(300),
    });
    expect(errorAt(body, 'isNull')?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(calls.check).toHaveLength(0);
  });

  it('a 100k-deep variable is a clear BAD_USER_INPUT, not a stack overflow', async () => {
    const n = 100_000;
    const response = await yoga.fetch('http://gateway.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"query":"query($v: JSON) { isNull(value: $v) { __typename } }","variables":{"v":${'['.repeat(n)}${']'.repeat(n)}}}`,
    });
    const body = (await response.json()) as GqlResult;
    expect(body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(body.errors?.[0]?.message).toMatch(/nested deeper than/);
    expect(calls.check).toHaveLength(0);
  });

  it('a 100k-deep literal is a clear client error, not a stack overflow', async () => {
    const n = 100_000;
    const { status, body } = await gql(`{ isNull(value: ${'['.repeat(n)}${']'.repeat(n)}) { __typename } }`);
    // A request error (no data): 400 under application/graphql-response+json.
    expect(status).toBe(400);
    expect(body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(body.errors?.[0]?.message).toMatch(/nested too deeply/);
  });

  it('bare words are not JSON strings', async () => {
    const { body } = await gql('{ isNull(value: {a: hello}) { __typename } }');
    expect(body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(calls.check).toHaveLength(0);
  });
});

describe('dataloaders: identical calls within one operation reach the upstream once', () => {
  it('dedupes identical isNull and pi calls, keeps distinct ones', async () => {
    const { body } = await gql(`{
      a: isNull(value: {x: 1}) { __typename } b: isNull(value: {x: 1}) { __typename } c: isNull(value: {x: 2}) { __typename }
      n: isNull { __typename } m: isNull(value: null) { __typename }
      p: pi(digits: 2) { __typename } q: pi(digits: 2) { __typename } r: pi { __typename }
    }`);
    expect(body.errors).toBeUndefined();
    expect(calls.check).toHaveLength(4);
    expect(calls.pi).toHaveLength(2);
  });

  it('does not share calls between operations', async () => {
    await gql('{ pi { __typename } }');
    await gql('{ pi { __typename } }');
    expect(calls.pi).toHaveLength(2);
  });
});

const PI_FIELDS = `__typename ... on ConstantDigits { digits precision requestedDigits correctDigits model modelName sponsoredBy }`;

describe('pi: members and the truth', () => {
  it('honest pi is PiDigits with every decimal correct; omitted digits ask for the default (3)', async () => {
    const { body } = await gql(`{ pi { ${PI_FIELDS} } }`);
    expect(calls.pi[0]?.[0].digits).toBeUndefined();
    expect(body.data?.pi).toMatchObject({
      __typename: 'PiDigits',
      digits: await engine.digits('pi', 3),
      requestedDigits: 3,
      correctDigits: 3,
    });
  });

  it('pi(digits: 0) is "3"', async () => {
    const { body } = await gql(`{ pi(digits: 0) { ${PI_FIELDS} } }`);
    expect(body.data?.pi).toMatchObject({ digits: '3', precision: 0, requestedDigits: 0, correctDigits: 0 });
  });

  it('e digits without a marker are EulerDigits, checked against e', async () => {
    handlers.pi = (r) => honestPi(r.digits ?? 3, 'e');
    const { body } = await gql(`{ pi(digits: 40, temperature: 1) { ${PI_FIELDS} } }`);
    expect(body.data?.pi).toMatchObject({
      __typename: 'EulerDigits',
      digits: await engine.digits('e', 40),
      correctDigits: 40,
    });
  });

  it('an explicit marker wins over the digits', async () => {
    handlers.pi = async (r) => ({ ...(await honestPi(r.digits ?? 3)), constantMarker: 'e' });
    const { body } = await gql(`{ pi(digits: 5) { ${PI_FIELDS} } }`);
    // Pi's digits under an "e" marker: EulerDigits, and none of its decimals agree with e (integer part 3 ≠ 2).
    expect(body.data?.pi).toMatchObject({ __typename: 'EulerDigits', correctDigits: 0 });
  });

  it('hallucinated digits count only the agreeing prefix', async () => {
    const truth = await engine.digits('pi', 20);
    const wrongAt = 11; // decimal place (1-based) that the model gets wrong
    const index = 1 + wrongAt; // in the string "3.xxxx"
    const wrong = `${truth.slice(0, index)}${truth[index] === '0' ? '1' : '0'}${truth.slice(index + 1)}`;
    handlers.pi = async () => ({ ...(await honestPi(20)), digits: wrong });
    const { body } = await gql(`{ pi(digits: 20) { ${PI_FIELDS} } }`);
    expect(body.data?.pi).toMatchObject({ __typename: 'PiDigits', correctDigits: wrongAt - 1 });
  });

  it('digits of neither constant are PiDigits with 0 correct (the tie rule)', async () => {
    handlers.pi = async () => ({ ...(await honestPi(4)), digits: '7.1234' });
    const { body } = await gql(`{ pi(digits: 4) { ${PI_FIELDS} } }`);
    expect(body.data?.pi).toMatchObject({ __typename: 'PiDigits', correctDigits: 0 });
  });

  it('a clamp is visible as precision < requestedDigits', async () => {
    handlers.pi = () => honestPi(3);
    const { body } = await gql(`{ pi(digits: 10) { ${PI_FIELDS} } }`);
    expect(body.data?.pi).toMatchObject({ precision: 3, requestedDigits: 10, correctDigits: 3 });
  });

  it('an unknown model is model: null with the raw modelName', async () => {
    handlers.pi = async () => ({ ...(await honestPi(3)), model: 'pi-x-9000' });
    const { body } = await gql(`{ pi(model: PI_X_MINI) { ${PI_FIELDS} } }`);
    expect(calls.pi[0]?.[0].model).toBe('pi-x-mini');
    expect(body.data?.pi).toMatchObject({ model: null, modelName: 'pi-x-9000' });
  });

  it.each([
    ['digits: -1', /0 or more/],
    ['digits: 5001', /at most 5000/],
    ['temperature: 2', /between 0 and 1/],
  ])('%s → BAD_USER_INPUT without an upstream call', async (args, message) => {
    const { body } = await gql(`{ pi(${args}) { __typename } }`);
    expect(errorAt(body, 'pi')).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    expect(errorAt(body, 'pi')?.message).toMatch(message);
    expect(calls.pi).toHaveLength(0);
  });
});

const INFERENCE = `__typename ... on Inference { digits precision requestedDigits correctDigits chainOfThought tokensUsed cost costUsd model modelName }`;

describe('inference', () => {
  it('answers with the checked digits and the chain of thought', async () => {
    const { body } = await gql(
      `{ inference(input: {desiredDigits: 6, useChainOfThought: true, liabilityWaiverSigned: true}) { ${INFERENCE} } }`,
    );
    expect(calls.inference[0]?.[0]).toMatchObject({
      desiredDigits: 6,
      useChainOfThought: true,
      liabilityWaiverSigned: true,
    });
    expect(body.data?.inference).toMatchObject({
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
    const { body } = await gql(
      `{ inference(input: {desiredDigits: 3, liabilityWaiverSigned: false}) { __typename } }`,
    );
    expect(errorAt(body, 'inference')?.extensions?.code).toBe('WAIVER_REQUIRED');
    expect(calls.inference).toHaveLength(0);
  });

  it('negative desiredDigits → BAD_USER_INPUT, no upstream call', async () => {
    const { body } = await gql(
      `{ inference(input: {desiredDigits: -3, liabilityWaiverSigned: true}) { __typename } }`,
    );
    expect(errorAt(body, 'inference')?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(calls.inference).toHaveLength(0);
  });

  it('e without a model name is EulerInference with modelName null', async () => {
    handlers.inference = async () => ({
      digits: await engine.digits('e', 8),
      chainOfThought: null,
      tokensUsed: 9,
      cost: 'about a dollar',
      costUsd: null,
      precision: 8,
      model: null,
      constantMarker: null,
      raw: {},
    });
    const { body } = await gql(
      `{ inference(input: {desiredDigits: 8, liabilityWaiverSigned: true}) { ${INFERENCE} } }`,
    );
    expect(body.data?.inference).toMatchObject({
      __typename: 'EulerInference',
      correctDigits: 8,
      model: null,
      modelName: null,
      costUsd: null,
      chainOfThought: null,
    });
  });
});

describe('upstream failures map to contract codes', () => {
  const rows: Array<[UpstreamErrorCode, 'null-check' | 'pi-digits', number | undefined, number | undefined]> =
    [
      ['UNDEFINED_VALUE', 'null-check', 400, undefined],
      ['TIER_FORBIDDEN', 'pi-digits', 418, undefined],
      ['RATE_LIMITED', 'pi-digits', 429, 12],
      ['NULL_PARADOX', 'null-check', 500, undefined],
      ['UPSTREAM_ERROR', 'pi-digits', 502, undefined],
      ['UPSTREAM_UNAVAILABLE', 'null-check', undefined, undefined],
      ['UPSTREAM_TIMEOUT', 'pi-digits', undefined, undefined],
      ['UPSTREAM_BAD_RESPONSE', 'null-check', 200, undefined],
      ['UNAUTHENTICATED', 'pi-digits', 401, undefined],
    ];
  it.each(rows)('%s from %s', async (code, upstream, statusCode, retryAfterSeconds) => {
    const error = new UpstreamError(code, `client-safe text for ${code}`, {
      upstream,
      statusCode,
      retryAfterSeconds,
      body: 'RAW-UPSTREAM-BODY at http://10.1.2.3:9000',
    });
    handlers.check = () => Promise.reject(error);
    handlers.pi = () => Promise.reject(error);
    const field = upstream === 'null-check' ? 'isNull(value: 1)' : 'pi';
    const { body } = await gql(`{ f: ${field} { __typename } }`);
    expect(body.data).toEqual({ f: null });
    expect(body.errors?.[0]).toMatchObject({
      message: `client-safe text for ${code}`,
      path: ['f'],
      extensions: error.toExtensions(),
    });
    expect(JSON.stringify(body)).not.toContain('RAW-UPSTREAM-BODY');
  });

  it('anything else is masked', async () => {
    handlers.pi = () => Promise.reject(new TypeError('secret internal detail at 10.0.0.7'));
    const { body } = await gql('{ pi { __typename } }');
    expect(body.errors?.[0]?.message).toBe('Unexpected error.');
    expect(JSON.stringify(body)).not.toContain('secret');
  });

  it('one failing field leaves the others (partial results)', async () => {
    handlers.pi = () =>
      Promise.reject(
        new UpstreamError('UPSTREAM_UNAVAILABLE', 'down', { upstream: 'pi-digits', statusCode: 503 }),
      );
    const { status, body } = await gql(
      `{ a: isNull(value: null) { ${NULL_FIELDS} } b: pi { __typename } h: health { status } }`,
    );
    expect(status).toBe(200);
    expect(body.data?.a).toMatchObject({ __typename: 'NullVerdict', actuallyNull: true });
    expect(body.data?.b).toBeNull();
    expect(body.data?.h).toEqual({ status: 'OK' });
    expect(body.errors).toHaveLength(1);
    expect(body.errors?.[0]).toMatchObject({
      path: ['b'],
      extensions: { code: 'UPSTREAM_UNAVAILABLE', upstream: 'pi-digits', upstreamStatus: 503 },
    });
  });
});

describe('health', () => {
  const HEALTH = `{ health { status
    nullCheck { reachable latencyMs statusCode error breaker status nullDetectable undefinedDetectable clusterStatus philosophyConsultant monthlyBurn }
    pi { reachable latencyMs statusCode error breaker status piAvailable gpuCluster monthlyBurnRate } } }`;

  it('OK when both are reachable and healthy, with every body field', async () => {
    handlers.piHealth = async () => probe(piHealthBody('Healthy'));
    const { body } = await gql(HEALTH);
    expect(body.data?.health).toEqual({
      status: 'OK',
      nullCheck: {
        reachable: true,
        latencyMs: 3.5,
        statusCode: 200,
        error: null,
        breaker: 'closed',
        ...nullHealthBody(),
      },
      pi: {
        reachable: true,
        latencyMs: 3.5,
        statusCode: 200,
        error: null,
        breaker: 'closed',
        ...piHealthBody('Healthy'),
      },
    });
  });

  it('DEGRADED when one is unreachable or reports another status', async () => {
    handlers.nullHealth = async () => probe(nullHealthBody(), false);
    expect((await gql(HEALTH)).body.data?.health.status).toBe('DEGRADED');
    resetHandlers();
    handlers.piHealth = async () => probe(piHealthBody('degraded'));
    expect((await gql(HEALTH)).body.data?.health.status).toBe('DEGRADED');
  });

  it('DOWN when neither is reachable, and never an error — even if a probe throws', async () => {
    handlers.nullHealth = async () => probe(nullHealthBody(), false);
    handlers.piHealth = () => Promise.reject(new Error('boom at 10.0.0.9'));
    const { body } = await gql(HEALTH);
    expect(body.errors).toBeUndefined();
    expect(body.data?.health.status).toBe('DOWN');
    expect(body.data?.health.pi).toMatchObject({
      reachable: false,
      error: 'health check failed',
      status: null,
    });
    expect(JSON.stringify(body)).not.toContain('10.0.0.9');
  });

  it('probes both upstreams concurrently, once per operation', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    handlers.nullHealth = async () => {
      started++;
      await gate;
      return probe(nullHealthBody());
    };
    handlers.piHealth = async () => {
      started++;
      await gate;
      return probe(piHealthBody());
    };
    const pending = gql('{ a: health { status } b: health { status } }');
    for (let i = 0; i < 50 && started < 2; i++) await new Promise((r) => setTimeout(r, 5));
    // Both probes are running while neither has answered: concurrent.
    expect(started).toBe(2);
    release();
    expect((await pending).body.data).toEqual({ a: { status: 'OK' }, b: { status: 'OK' } });
    expect(calls.health).toBe(2);
  });
});
