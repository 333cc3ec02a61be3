/**
 * A tool call is the same operation as over POST /graphql (contract §13): for each case, a tool call
 * on one gateway and a POST /graphql of the tool's document with the same variables and headers on
 * another (both in front of one scripted upstream, both fresh, so that their cost models have seen
 * the same calls) give the same data, the same errors, the same `extensions.cost`, and the same bill:
 * the same upstream requests, counted by the upstream.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { builtInTools } from '../../src/gateway/mcp/built-in-tools.js';
import { schema } from '../../src/gateway/schema/index.js';
import type { TestGateway } from '../support/gateway.js';
import { gql } from '../support/graphql-client.js';
import { callTool, connectMcp } from '../support/mcp-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, piBody, routeSpecAnswers } from '../support/upstream-bodies.js';

const scripted = useScriptedGateways();
const sources = new Map(builtInTools(schema).map((tool) => [tool.name, tool.source]));
/** What the scripted upstream billed so far: the gpu_cost_usd and cost of the answers it sent. */
let billed = 0;
const billing = (usd: number, body: object) => {
  billed = Math.round((billed + usd) * 1e8) / 1e8;
  return { body };
};

let viaMcp: TestGateway;
let viaGraphql: TestGateway;
beforeAll(async () => {
  const env = { RETRY_MAX_ATTEMPTS: '1', BREAKER_THRESHOLD: '0', FREE_RATE_LIMIT: '0' };
  [viaMcp, viaGraphql] = await Promise.all([scripted.gateway(env), scripted.gateway(env)]);
});

/** The upstream's side of a run: what it was asked (request id and trace headers aside), and its bill. */
function upstreamSide(usd: number) {
  const requests = scripted.upstream.requests;
  return { requests: requests.map((r) => [r.method, r.path, r.query, r.body, r.headers.authorization]), usd };
}

/** Scores without latencies (the two gateways measured their own). */
const withoutLatency = (data: unknown) =>
  JSON.parse(JSON.stringify(data ?? null), (key, value) => (key === 'meanLatencyMs' ? undefined : value));

type Case = [name: string, tool: string, args: Record<string, unknown>, headers?: Record<string, string>];
const cases: Case[] = [
  ['an answer', 'is_null', { value: 1 }],
  [
    'any JSON, another model and temperature',
    'is_null',
    { value: [1, { a: null }], model: 'NULL_X_OPUS', temperature: 0.5 },
  ],
  ['undefined: UNDEFINED_VALUE', 'is_null', {}],
  ['a field error: BAD_USER_INPUT for a temperature out of range', 'is_null', { value: 1, temperature: 3 }],
  ['pi', 'pi_digits', { digits: 3 }],
  ['pi rate limited: RATE_LIMITED with retryAfterSeconds', 'pi_digits', { digits: 2 }],
  ['over X-Max-Cost-Usd: BUDGET_EXCEEDED', 'is_null', { value: 1 }, { 'x-max-cost-usd': '0.0001' }],
  [
    'with a key and a fallback',
    'is_null',
    { value: 2 },
    { 'x-max-cost-usd': '0.001', 'x-budget-fallback': 'cheaper-model', authorization: 'Bearer agent-key' },
  ],
  ['routed by minAccuracy', 'is_null', { value: 3, minAccuracy: 0.4 }],
  ['inference', 'pi_inference', { input: { desiredDigits: 3, liabilityWaiverSigned: true } }],
  ['budget and models: nothing called', 'model_scores', {}],
];

describe('a tool call and POST /graphql of its operation', () => {
  it.each(cases)('%s', async (name, tool, args, headers = {}) => {
    routeSpecAnswers(scripted.upstream);
    scripted.upstream.route('POST', '/api/v1/check', (request) =>
      'value' in (request.body as object)
        ? billing(nullBody().gpu_cost_usd, nullBody())
        : { status: 400, body: { error: { status: 400, code: 'UNDEFINED_VALUE', message: 'undefined' } } },
    );
    scripted.upstream.route('GET', '/api/v1/pi', () =>
      name.startsWith('pi rate limited')
        ? { status: 429, headers: { 'retry-after': '3' } }
        : billing(piBody().gpu_cost_usd, piBody()),
    );
    const inference = { digits: '3.141', precision: 3, tokens_used: 20, cost: '$0.0004', model: 'pi-x-4o' };
    scripted.upstream.route('POST', '/api/v1/inference', () => billing(0.0004, inference));

    scripted.upstream.resetRecords();
    const client = await connectMcp(viaMcp.origin, { headers });
    billed = 0;
    const result = await callTool(client, tool, args).finally(() => client.close());
    const mcpSide = upstreamSide(billed);

    scripted.upstream.resetRecords();
    billed = 0;
    const answer = await gql(viaGraphql.url, sources.get(tool) as string, {
      variables: args,
      headers,
      accept: 'application/json',
    });
    const graphqlSide = upstreamSide(billed);

    expect(withoutLatency(result.structuredContent)).toEqual(withoutLatency(answer.data));
    expect(result._meta?.errors).toEqual(answer.errors);
    expect(result.isError ?? false).toBe(answer.errors !== undefined);
    expect(result._meta?.cost).toEqual(answer.extensions?.cost);
    expect(result._meta?.sponsoredBy).toEqual(answer.extensions?.sponsoredBy);
    expect(mcpSide).toEqual(graphqlSide);
    // The case's code (in its name), or none.
    const code = /\b[A-Z]+(?:_[A-Z]+)+\b/.exec(name)?.[0];
    expect(result._meta?.errors?.map((e) => e.extensions?.code) ?? []).toEqual(
      code === undefined ? [] : [code],
    );
    expect(result._meta?.cost?.gpuCostUsd ?? 0).toBe(mcpSide.usd);
  });
});
