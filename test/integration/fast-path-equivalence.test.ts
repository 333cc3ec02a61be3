/**
 * The fast path answers exactly what Yoga's own handler answers: for a table of requests
 * (successes of every union member, every error code, variables errors, syntax and validation
 * errors, limits, Accept variants, keys, cost caps, malformed bodies), ONE gateway is asked twice,
 * once through its server (fast path first) and once through Yoga's node handler directly, and the
 * status, the headers that matter and the body must be equal byte for byte. Also: which requests the
 * fast path serves itself, and that its operations are logged and counted.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { capturedLogger } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import {
  type HandlerServer,
  HEADERS_CLIENTS_ACT_ON,
  listenHandler,
  type RawAnswer,
  sendRaw,
} from '../support/raw-http.js';
import { nullBody, nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';

/** Also `Accept` and `Connection`: the fast path must answer them as Yoga's handler does. */
const HEADERS_THAT_MATTER = [...HEADERS_CLIENTS_ACT_ON, 'accept', 'connection'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const comparable = (answer: RawAnswer) => {
  const headers = Object.fromEntries(HEADERS_THAT_MATTER.map((h) => [h, answer.headers[h]]));
  // A generated request id is random: equal when both are UUIDs.
  if (typeof headers['x-request-id'] === 'string' && UUID.test(headers['x-request-id']))
    headers['x-request-id'] = 'uuid';
  // Keep-alive or close is node's own choice per connection, the same for both handlers.
  delete headers.connection;
  // The estimate (extensions.cost.estimatedCostUsd) follows the running mean of observed costs, which
  // the first of the two requests moved: equal when both are numbers, each length checked against
  // its own body.
  let body = answer.body;
  if (body.includes('"estimatedCostUsd":')) {
    expect(headers['content-length']).toBe(String(Buffer.byteLength(body)));
    headers['content-length'] = 'its body length';
    body = body.replace(ESTIMATE, '"estimatedCostUsd":"a number"');
  }
  return { status: answer.status, headers, body };
};
const ESTIMATE = /"estimatedCostUsd":\d+(?:\.\d+)?(?:e-\d+)?/g;

const JSON_TYPE = 'application/json';
const GRAPHQL_RESPONSE = 'application/graphql-response+json';

const PI = `query Pi($digits: Int) { pi(digits: $digits) { __typename ... on ConstantDigits { digits precision requestedDigits correctDigits model modelName confidence gpuCostUsd sponsoredBy disclaimer } } }`;
const IS_NULL = `query IsNull($value: JSON) { isNull(value: $value) { __typename ... on NullCheck { actuallyNull correct confidence model modelName sponsoredBy } ... on NullVerdict { isNull } ... on MaybeVerdict { answer } ... on ExistentialVerdict { musing raw } } }`;
const INFERENCE = `query Inference($input: InferenceInput!) { inference(input: $input) { __typename ... on Inference { digits precision requestedDigits correctDigits chainOfThought tokensUsed cost costUsd } } }`;
const HEALTH = `{ health { status nullCheck { reachable statusCode error breaker status nullDetectable clusterStatus apiVersion } pi { reachable status piAvailable gpuCluster } } }`;

interface Case {
  name: string;
  headers?: Record<string, string>;
  body: string;
  /** Served by the fast path itself (true), or handed to Yoga (false). */
  fast: boolean;
}

const json = (value: unknown) => JSON.stringify(value);
const APQ_TEXT = 'query Apq { isNull(value: "apq") { __typename } }';
const APQ = {
  persistedQuery: { version: 1, sha256Hash: createHash('sha256').update(APQ_TEXT).digest('hex') },
};
const SCHEMA_TYPES = '{ __schema { types { name description } } }';
let n = 0;
/** Each case has its own request id, so both answers carry the same one. */
const headers = (extra: Record<string, string> = {}) => ({
  'content-type': JSON_TYPE,
  accept: GRAPHQL_RESPONSE,
  'x-request-id': `case-${++n}`,
  ...extra,
});
const query = (q: string, variables?: Record<string, unknown>, operationName?: string) =>
  json({ query: q, variables, operationName });

const CASES: Case[] = [
  // --- answers of every union member --------------------------------------------------------
  { name: 'pi: PiDigits', headers: headers(), body: query(PI, { digits: 5 }), fast: true },
  {
    name: 'pi: EulerDigits (e instead of pi)',
    headers: headers(),
    body: query(PI, { digits: 4 }),
    fast: true,
  },
  { name: 'pi: digits 0 is "3"', headers: headers(), body: query(PI, { digits: 0 }), fast: true },
  { name: 'isNull: NullVerdict', headers: headers(), body: query(IS_NULL, { value: null }), fast: true },
  {
    name: 'isNull: MaybeVerdict',
    headers: headers(),
    body: query(IS_NULL, { value: 'maybe-please' }),
    fast: true,
  },
  {
    name: 'isNull: ExistentialVerdict',
    headers: headers(),
    body: query(IS_NULL, { value: 'existential' }),
    fast: true,
  },
  {
    name: 'isNull: an object value',
    headers: headers(),
    body: query(IS_NULL, { value: { a: [1, null] } }),
    fast: true,
  },
  {
    name: 'inference: PiInference',
    headers: headers(),
    body: query(INFERENCE, {
      input: { desiredDigits: 3, liabilityWaiverSigned: true, useChainOfThought: true },
    }),
    fast: true,
  },
  {
    name: 'inference: EulerInference',
    headers: headers(),
    body: query(INFERENCE, { input: { desiredDigits: 4, liabilityWaiverSigned: true } }),
    fast: true,
  },
  { name: 'health', headers: headers(), body: query(HEALTH), fast: true },
  { name: '__typename only', headers: headers(), body: query('{ __typename }'), fast: true },
  {
    name: 'introspection of a type',
    headers: headers(),
    body: query('{ __type(name: "PiResult") { kind possibleTypes { name } } }'),
    fast: true,
  },
  {
    name: 'two operations, the named one runs',
    headers: headers(),
    body: query('query A { __typename } query B { pi(digits: 2) { __typename } }', undefined, 'B'),
    fast: true,
  },
  {
    name: 'fragments on the interface mixed with member selections and aliases',
    headers: headers(),
    body: query(
      `{ a: pi(digits: 3) { ...D ... on PiDigits { precision } __typename } b: isNull(value: 1) { ... on NullVerdict { isNull } ...N } }
       fragment D on ConstantDigits { digits correctDigits } fragment N on NullCheck { actuallyNull correct }`,
    ),
    fast: true,
  },
  {
    name: 'every root field at once (partial: one fails)',
    headers: headers(),
    body: query(
      `{ isNull(value: "tier") { __typename } pi(digits: 2) { __typename } health { status } inference(input: { desiredDigits: 2, liabilityWaiverSigned: true }) { __typename } }`,
    ),
    fast: true,
  },
  // --- every field error code ---------------------------------------------------------------
  { name: 'UNDEFINED_VALUE', headers: headers(), body: query('{ isNull { __typename } }'), fast: true },
  { name: 'TIER_FORBIDDEN', headers: headers(), body: query(IS_NULL, { value: 'tier' }), fast: true },
  {
    name: 'RATE_LIMITED with retryAfterSeconds',
    headers: headers(),
    body: query(IS_NULL, { value: 'rate' }),
    fast: true,
  },
  { name: 'NULL_PARADOX', headers: headers(), body: query(IS_NULL, { value: 'paradox' }), fast: true },
  { name: 'UPSTREAM_ERROR', headers: headers(), body: query(PI, { digits: 7 }), fast: true },
  { name: 'UPSTREAM_UNAVAILABLE', headers: headers(), body: query(IS_NULL, { value: 'down' }), fast: true },
  { name: 'UPSTREAM_BAD_RESPONSE', headers: headers(), body: query(IS_NULL, { value: 'bad' }), fast: true },
  { name: 'UNAUTHENTICATED', headers: headers(), body: query(IS_NULL, { value: 'key' }), fast: true },
  {
    name: 'WAIVER_REQUIRED',
    headers: headers(),
    body: query(INFERENCE, { input: { desiredDigits: 3, liabilityWaiverSigned: false } }),
    fast: true,
  },
  {
    name: 'BAD_USER_INPUT: temperature',
    headers: headers(),
    body: query('{ pi(temperature: 2) { __typename } }'),
    fast: true,
  },
  {
    name: 'BAD_USER_INPUT: negative digits',
    headers: headers(),
    body: query(PI, { digits: -1 }),
    fast: true,
  },
  {
    name: 'BAD_USER_INPUT: minAccuracy beside a model',
    headers: headers(),
    body: query('{ isNull(value: 1, model: NULL_X_MINI, minAccuracy: 0.5) { __typename } }'),
    fast: true,
  },
  // --- routing by quality and the scoreboard (docs/graphql.md, Models) --------------------------
  {
    // The upstream fails it, so nothing is scored between the two asks: both route alike.
    name: 'routed by minAccuracy (extensions.cost.routing)',
    headers: headers(),
    body: query('query R($m: Float) { isNull(value: "paradox", minAccuracy: $m) { __typename } }', {
      m: 0.5,
    }),
    fast: true,
  },
  { name: 'models', headers: headers(), body: query('{ models { service model band } }'), fast: true },
  // --- variables ------------------------------------------------------------------------------
  { name: 'variable of the wrong type', headers: headers(), body: query(PI, { digits: 'five' }), fast: true },
  {
    name: 'missing non-null variable',
    headers: headers(),
    body: query('query I($input: InferenceInput!) { inference(input: $input) { __typename } }'),
    fast: true,
  },
  {
    name: 'variables null',
    headers: headers(),
    body: json({ query: '{ __typename }', variables: null }),
    fast: true,
  },
  // --- documents Yoga answers ------------------------------------------------------------------
  { name: 'syntax error', headers: headers(), body: query('{ pi( }'), fast: false },
  { name: 'unknown field', headers: headers(), body: query('{ pie { digits } }'), fast: false },
  {
    name: 'over MAX_DEPTH',
    headers: headers(),
    body: query(
      '{ __type(name: "Query") { fields { type { fields { type { fields { type { fields { type { name } } } } } } } } } }',
    ),
    fast: false,
  },
  {
    name: 'over MAX_ALIASES',
    headers: headers(),
    body: query(`{ ${Array.from({ length: 31 }, (_, i) => `a${i}: health { status }`).join(' ')} }`),
    fast: false,
  },
  {
    name: 'over MAX_UPSTREAM_CALLS',
    headers: headers(),
    body: query(
      `{ ${Array.from({ length: 21 }, (_, i) => `p${i}: pi(digits: ${i}) { __typename }`).join(' ')} }`,
    ),
    // A limit of the pipeline's admission, which both lanes run.
    fast: true,
  },
  {
    name: 'operationName not in the document',
    headers: headers(),
    body: query('query A { __typename }', undefined, 'B'),
    fast: false,
  },
  { name: 'mutation on a query-only schema', headers: headers(), body: query('mutation { x }'), fast: false },
  // --- literals: documents of one shape are validated by shape from the third (document-shapes.ts)
  { name: 'a literal', headers: headers(), body: query('{ l: pi(digits: 3) { __typename } }'), fast: true },
  {
    name: 'the same shape, another literal',
    headers: headers(),
    body: query('{ l: pi(digits: 5) { __typename } }'),
    fast: true,
  },
  {
    name: 'the same shape, an Int literal out of range',
    headers: headers(),
    body: query('{ l: pi(digits: 99999999999) { __typename } }'),
    fast: false,
  },
  {
    name: 'a JSON number literal',
    headers: headers(),
    body: query('{ isNull(value: 1.5) { __typename } }'),
    fast: true,
  },
  {
    name: 'another JSON number literal',
    headers: headers(),
    body: query('{ isNull(value: 2.5) { __typename } }'),
    fast: true,
  },
  {
    name: 'the same shape, a JSON number out of range',
    headers: headers(),
    body: query('{ isNull(value: 1e999) { __typename } }'),
    fast: false,
  },
  {
    name: 'one response name twice with equal literals',
    headers: headers(),
    body: query('{ m: pi(digits: 2) { __typename } m: pi(digits: 2) { __typename } }'),
    fast: true,
  },
  {
    name: 'the same shape, other equal literals',
    headers: headers(),
    body: query('{ m: pi(digits: 8) { __typename } m: pi(digits: 8) { __typename } }'),
    fast: true,
  },
  {
    name: 'the same shape with different literals: the fields no longer merge',
    headers: headers(),
    body: query('{ m: pi(digits: 2) { __typename } m: pi(digits: 6) { __typename } }'),
    fast: false,
  },
  // --- trusted documents and APQ (the pipeline's resolve step) ----------------------------------
  {
    name: 'APQ: a hash with its text',
    headers: headers(),
    body: json({ query: APQ_TEXT, extensions: APQ }),
    fast: true,
  },
  {
    name: 'APQ: the hash alone, once registered',
    headers: headers(),
    body: json({ extensions: APQ }),
    fast: true,
  },
  {
    name: 'a documentId the gateway does not know',
    headers: headers(),
    body: json({ documentId: `sha256:${'0'.repeat(64)}` }),
    fast: false,
  },
  {
    name: 'APQ: a wrong hash',
    headers: headers(),
    body: json({
      query: APQ_TEXT,
      extensions: { persistedQuery: { version: 1, sha256Hash: '1'.repeat(64) } },
    }),
    fast: false,
  },
  // --- compression of a large answer ------------------------------------------------------------
  {
    name: 'a large answer, gzip accepted',
    headers: headers({ 'accept-encoding': 'gzip' }),
    body: query(SCHEMA_TYPES),
    fast: true,
  },
  {
    name: 'a large answer, br preferred',
    headers: headers({ 'accept-encoding': 'gzip;q=0.5, br' }),
    body: query(SCHEMA_TYPES),
    fast: true,
  },
  {
    name: 'a large answer, nothing accepted',
    headers: headers({ 'accept-encoding': 'identity' }),
    body: query(SCHEMA_TYPES),
    fast: true,
  },
  // --- malformed requests ----------------------------------------------------------------------
  { name: 'a batch (array)', headers: headers(), body: json([{ query: '{ __typename }' }]), fast: false },
  {
    name: 'an unknown parameter',
    headers: headers(),
    body: json({ query: '{ __typename }', foo: 1 }),
    fast: false,
  },
  { name: 'query not a string', headers: headers(), body: json({ query: 42 }), fast: false },
  { name: 'no query', headers: headers(), body: json({ variables: {} }), fast: false },
  { name: 'body not JSON', headers: headers(), body: '{"query": ', fast: false },
  { name: 'body null', headers: headers(), body: 'null', fast: false },
  {
    name: 'operationName an object',
    headers: headers(),
    body: json({ query: '{ __typename }', operationName: {} }),
    fast: false,
  },
  // --- cost ------------------------------------------------------------------------------------
  {
    name: 'X-Max-Cost-Usd malformed',
    headers: headers({ 'x-max-cost-usd': '-1' }),
    body: query(PI, { digits: 2 }),
    fast: true,
  },
  {
    name: 'X-Max-Cost-Usd below the estimate: BUDGET_EXCEEDED',
    headers: headers({ 'x-max-cost-usd': '0.001' }),
    body: query(PI, { digits: 2 }),
    fast: true,
  },
  {
    name: 'X-Max-Cost-Usd above the estimate',
    headers: headers({ 'x-max-cost-usd': '0.5' }),
    body: query(PI, { digits: 2 }),
    fast: true,
  },
  // --- keys, ids, Accept and content types ------------------------------------------------------
  {
    name: 'bearer key',
    headers: headers({ authorization: 'Bearer demo-pro' }),
    body: query(PI, { digits: 5 }),
    fast: true,
  },
  {
    name: 'X-API-Key',
    headers: headers({ 'x-api-key': 'demo-pro' }),
    body: query(PI, { digits: 5 }),
    fast: true,
  },
  {
    name: 'no x-request-id (generated)',
    headers: { 'content-type': JSON_TYPE },
    body: query('{ __typename }'),
    fast: true,
  },
  {
    name: 'an insane x-request-id (replaced)',
    headers: headers({ 'x-request-id': 'bad id with spaces' }),
    body: query('{ __typename }'),
    fast: true,
  },
  {
    name: 'Accept application/json',
    headers: headers({ accept: JSON_TYPE }),
    body: query(PI, { digits: 5 }),
    fast: true,
  },
  {
    name: 'Accept application/json with a request error (200, legacy)',
    headers: headers({ accept: JSON_TYPE }),
    body: query(PI, { digits: 'five' }),
    fast: true,
  },
  { name: 'Accept */*', headers: headers({ accept: '*/*' }), body: query(PI, { digits: 5 }), fast: true },
  {
    name: 'Accept both JSON types',
    headers: headers({ accept: `${GRAPHQL_RESPONSE}, ${JSON_TYPE};q=0.9` }),
    body: query(IS_NULL, { value: null }),
    fast: true,
  },
  {
    name: 'Accept text/html only (406)',
    headers: headers({ accept: 'text/html' }),
    body: query('{ __typename }'),
    fast: false,
  },
  {
    name: 'content type with a charset',
    headers: headers({ 'content-type': 'application/json; charset=utf-8' }),
    body: query(PI, { digits: 5 }),
    fast: true,
  },
];

let upstream: ScriptedUpstream;
let gateway: TestGateway;
let yogaOnly: HandlerServer | undefined;
let gatewayPort = 0;
let yogaPort = 0;
const captured = capturedLogger('info');

const DIGITS = '3.14159265358979323846';
const E_DIGITS = '2.71828182845904523536';

beforeAll(async () => {
  upstream = await startScriptedUpstream();
  upstream.route('POST', '/api/v1/check', (req) => {
    const body = req.body as { value?: unknown };
    if (!('value' in body))
      return { status: 400, body: { error: { status: 400, code: 'UNDEFINED_VALUE', message: 'x' } } };
    switch (body.value) {
      case 'maybe-please':
        return { body: nullBody({ is_null: 'maybe', sponsored_by: 'Sponsor M' }) };
      case 'existential':
        return { body: nullBody({ is_null: 'the void stares back', sponsored_by: 'Sponsor E' }) };
      case 'tier':
        return { status: 418 };
      case 'rate':
        return { status: 429, headers: { 'retry-after': '7' } };
      case 'paradox':
        return { status: 500 };
      case 'down':
        return { status: 503 };
      case 'bad':
        return { body: nullBody({ confidence: 'high' }) };
      case 'key':
        return { status: 401 };
      default:
        return { body: nullBody({ is_null: body.value === null, sponsored_by: 'Sponsor N' }) };
    }
  });
  upstream.route('GET', '/pi-prefix/api/v1/pi', (req) => {
    const digits = Number(req.query.digits ?? 3);
    if (digits === 7) return { status: 502 };
    const text = digits === 4 ? E_DIGITS : DIGITS;
    return {
      body: piBody({
        digits: text.slice(0, digits === 0 ? 1 : digits + 2),
        precision: digits,
        sponsored_by: 'Sponsor P',
      }),
    };
  });
  upstream.route('POST', '/pi-prefix/api/v1/inference', (req) => {
    const digits = (req.body as { desired_digits: number }).desired_digits;
    const text = digits === 4 ? E_DIGITS : DIGITS;
    return {
      body: {
        digits: text.slice(0, digits + 2),
        chain_of_thought: 'I recall.',
        tokens_used: 20,
        cost: '$0.0004',
      },
    };
  });
  upstream.route('GET', '/api/v1/health', { body: nullHealth });
  upstream.route('GET', '/pi-prefix/api/v1/health', { body: piHealth });
  gateway = await startTestGateway({
    nullBaseUrl: upstream.url,
    piBaseUrl: `${upstream.url}/pi-prefix`,
    logger: captured.logger,
    // Deterministic answers: no retries, no breaker (both handlers must see the same upstream).
    env: { RETRY_MAX_ATTEMPTS: '1', BREAKER_THRESHOLD: '0' },
  });
  gatewayPort = Number(new URL(gateway.origin).port);
  yogaOnly = await listenHandler(gateway.app.yoga);
  yogaPort = yogaOnly.port;
});

afterAll(async () => {
  await yogaOnly?.close();
  await gateway?.close();
  await upstream?.close();
});

describe('the fast path and Yoga answer alike', () => {
  it(`has a table of at least 40 requests`, () => {
    expect(CASES.length).toBeGreaterThanOrEqual(40);
  });

  it('runs repeated documents compiled (graphql-jit), as gateway_executions_total shows', async () => {
    const request = { headers: headers(), body: query('query Jit { __typename }') };
    const executions = async (executor: string) =>
      (await metricValue(gateway.app.metrics.registry, 'gateway_executions_total', { executor })) ?? 0;
    const before = { js: await executions('graphql-js'), jit: await executions('graphql-jit') };
    for (let i = 0; i < 3; i++) expect((await sendRaw(gatewayPort, request)).status).toBe(200);
    // The first run interpreted, the next two compiled.
    expect((await executions('graphql-js')) - before.js).toBe(1);
    expect((await executions('graphql-jit')) - before.jit).toBe(2);
  });

  it.each(CASES)('$name', async (c) => {
    const request = { headers: c.headers, body: c.body };
    // The first request runs the document once (its second run is compiled, on either lane), and
    // lets documents of one shape be learnt (document-shapes.ts): the second is compared.
    await sendRaw(gatewayPort, request);
    const before = gateway.app.fastPath.served.fast;
    const fast = await sendRaw(gatewayPort, request);
    const tookFastPath = gateway.app.fastPath.served.fast > before;
    const yoga = await sendRaw(yogaPort, request);
    expect(comparable(fast)).toEqual(comparable(yoga));
    expect(tookFastPath).toBe(c.fast);
  });
});

describe('fast-path operations are observed like any other', () => {
  it('logs one line and counts the operation', async () => {
    const id = 'observed-fast-1';
    const before = captured.lines.filter((l) => l.msg === 'graphql operation').length;
    const answer = await sendRaw(gatewayPort, {
      headers: { 'content-type': JSON_TYPE, accept: GRAPHQL_RESPONSE, 'x-request-id': id },
      body: query(PI, { digits: 5 }),
    });
    expect(answer.status).toBe(200);
    const lines = captured.lines.filter((l) => l.msg === 'graphql operation');
    expect(lines.length).toBe(before + 1);
    expect(lines.at(-1)).toMatchObject({ requestId: id, operation: 'Pi', outcome: 'ok', upstreamCalls: 1 });
    const metrics = await gateway.app.metrics.render();
    expect(metrics).toMatch(/gateway_operations_total\{operation="Pi",type="query",outcome="ok"\} [1-9]/);
  });
});
