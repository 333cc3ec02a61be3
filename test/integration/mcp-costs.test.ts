/**
 * What an agent's tool calls may spend and what they meet (contract §13 with §8 and §2), through the
 * MCP SDK's client, in front of a scripted upstream that counts what reached it: X-Max-Cost-Usd and
 * X-Budget-Fallback on every tool call of a request, a key's budget (BUDGET_EXCEEDED with
 * retryAfterSeconds, nothing called), and each upstream failure's code as a tool result.
 */
import { describe, expect, it } from 'vitest';
import type { RecordedRequest, ScriptedResponse } from '../fixtures/scripted-upstream.js';
import {
  callTool,
  connectMcp,
  postMcp,
  type ToolResult,
  texts,
  toolCodes,
  toolsCall,
} from '../support/mcp-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';

const scripted = useScriptedGateways();
/** One attempt per call, no breaker: each row is exactly one upstream request. */
const PLAIN = { RETRY_MAX_ATTEMPTS: '1', BREAKER_THRESHOLD: '0', FREE_RATE_LIMIT: '0' };
const CHECK = '/api/v1/check';

/** Calls one tool with these request headers on a fresh client (a client's headers are fixed). */
async function callWith(
  origin: string,
  headers: Record<string, string>,
  name: string,
  args: Record<string, unknown>,
): Promise<ToolResult> {
  const client = await connectMcp(origin, { headers });
  try {
    return await callTool(client, name, args);
  } finally {
    await client.close();
  }
}

describe('X-Max-Cost-Usd and X-Budget-Fallback', () => {
  it('a call over the cap: BUDGET_EXCEEDED with the estimate and the cap, nothing called', async () => {
    routeSpecAnswers(scripted.upstream);
    const gateway = await scripted.gateway(PLAIN);
    scripted.upstream.resetRecords();
    const result = await callWith(gateway.origin, { 'x-max-cost-usd': '0.001' }, 'is_null', { value: 1 });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toBeUndefined();
    expect(result._meta?.errors).toEqual([
      {
        message: expect.stringMatching(/X-Max-Cost-Usd/),
        extensions: expect.objectContaining({
          code: 'BUDGET_EXCEEDED',
          estimatedCostUsd: 0.0042,
          maxCostUsd: 0.001,
        }),
      },
    ]);
    expect(texts(result)).toEqual([expect.stringMatching(/^BUDGET_EXCEEDED: /)]);
    expect(scripted.upstream.count('POST', CHECK)).toBe(0);
  });

  it('with X-Budget-Fallback: cheaper-model, the cheaper model answers and _meta.cost says so', async () => {
    routeSpecAnswers(scripted.upstream);
    const gateway = await scripted.gateway(PLAIN);
    scripted.upstream.resetRecords();
    const result = await callWith(
      gateway.origin,
      { 'x-max-cost-usd': '0.001', 'x-budget-fallback': 'cheaper-model' },
      'is_null',
      { value: 1 },
    );
    expect(result.isError).toBeUndefined();
    expect(result._meta?.cost?.fallbacks).toEqual([
      { path: 'isNull', requestedModel: 'null-x-4o', usedModel: 'null-x-mini' },
    ]);
    expect((scripted.upstream.requests[0]?.body as { model?: string } | undefined)?.model).toBe(
      'null-x-mini',
    );
  });

  it('a malformed X-Max-Cost-Usd: BAD_USER_INPUT, nothing called', async () => {
    routeSpecAnswers(scripted.upstream);
    const gateway = await scripted.gateway(PLAIN);
    scripted.upstream.resetRecords();
    const result = await callWith(gateway.origin, { 'x-max-cost-usd': 'plenty' }, 'is_null', { value: 1 });
    expect(toolCodes(result)).toEqual(['BAD_USER_INPUT']);
    expect(scripted.upstream.count()).toBe(0);
  });

  it('the cap applies to each tool call of the request, not to their sum', async () => {
    routeSpecAnswers(scripted.upstream);
    const gateway = await scripted.gateway(PLAIN);
    // Two calls of 0.0042 in one POST (a JSON-RPC batch) under a cap of 0.005: both run.
    const response = await postMcp(
      gateway.origin,
      `[${toolsCall('is_null', { value: 1 }, 1)},${toolsCall('is_null', { value: 2 }, 2)}]`,
      { 'x-max-cost-usd': '0.005', 'mcp-protocol-version': '2025-06-18' },
    );
    expect(response.status).toBe(200);
    const answers = (await response.json()) as Array<{ id: number; result: ToolResult }>;
    expect(answers.map((answer) => [answer.id, answer.result.isError ?? false])).toEqual([
      [1, false],
      [2, false],
    ]);
  });
});

describe("a key's budget", () => {
  it('refuses the call that does not fit with retryAfterSeconds; `budget` shows the window', async () => {
    routeSpecAnswers(scripted.upstream);
    scripted.upstream.route('POST', CHECK, { body: nullBody({ gpu_cost_usd: 0.0042 }) });
    const gateway = await scripted.gateway({
      ...PLAIN,
      COST_BUDGETS: JSON.stringify({ default: { '1h': 0.005 } }),
    });
    scripted.upstream.resetRecords();
    const client = await connectMcp(gateway.origin, { headers: { 'x-api-key': 'agent-key' } });
    try {
      expect((await callTool(client, 'is_null', { value: 1 })).isError).toBeUndefined();
      const refused = await callTool(client, 'is_null', { value: 2 });
      expect(refused.isError).toBe(true);
      expect(toolCodes(refused)).toEqual(['BUDGET_EXCEEDED']);
      expect(refused._meta?.errors?.[0]?.extensions?.retryAfterSeconds).toEqual(expect.any(Number));
      expect(scripted.upstream.count('POST', CHECK)).toBe(1);
      const budget = await callTool(client, 'budget');
      expect(budget.structuredContent).toMatchObject({
        budget: { windows: [{ window: '1h', limitUsd: 0.005, spentUsd: 0.0042 }] },
      });
    } finally {
      await client.close();
    }
    // The answer carries the budget as RateLimit header fields (micro-dollars), as on /graphql.
    const answer = await postMcp(gateway.origin, toolsCall('budget'), {
      'x-api-key': 'agent-key',
      'mcp-protocol-version': '2025-06-18',
    });
    expect(answer.headers.get('ratelimit-policy')).toBe('"1h";q=5000;w=3600;qu="usd-micro"');
    expect(answer.headers.get('ratelimit')).toMatch(/^"1h";r=800;t=\d+$/);
  });
});

describe('a client that leaves', () => {
  it('stops the tool call: the upstream call in flight is aborted', async () => {
    routeSpecAnswers(scripted.upstream);
    let arrived: (request: RecordedRequest) => void = () => {};
    const reached = new Promise<RecordedRequest>((resolve) => (arrived = resolve));
    scripted.upstream.route('POST', CHECK, (request) => {
      arrived(request);
      return { hang: true };
    });
    // Nothing but the client leaving can end the upstream call within the test's time.
    const gateway = await scripted.gateway({
      ...PLAIN,
      UPSTREAM_TIMEOUT_MS: '120000',
      OPERATION_DEADLINE_MS: '120000',
    });
    const leaving = new AbortController();
    const call = fetch(`${gateway.origin}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: toolsCall('is_null', { value: 1 }),
      signal: leaving.signal,
    }).catch((error: unknown) => error);
    const upstreamCall = await reached;
    leaving.abort();
    await call;
    expect(await upstreamCall.ended).toBe('client-closed');
  });
});

describe('upstream failures as results with their §2 codes', () => {
  const secret = (status: number) => ({ error: { status, message: 'INTERNAL-SECRET 10.0.0.7' } });
  type Row = [code: string, tool: string, path: string, script: ScriptedResponse, extra?: object];
  const rows: Row[] = [
    [
      'RATE_LIMITED',
      'pi_digits',
      '/api/v1/pi',
      { status: 429, headers: { 'retry-after': '7' }, body: secret(429) },
      { retryAfterSeconds: 7 },
    ],
    ['NULL_PARADOX', 'is_null', CHECK, { status: 500, body: secret(500) }],
    ['UPSTREAM_ERROR', 'pi_digits', '/api/v1/pi', { status: 500, body: secret(500) }],
    ['UPSTREAM_UNAVAILABLE', 'is_null', CHECK, { status: 503, body: secret(503) }],
    ['UNAUTHENTICATED', 'pi_digits', '/api/v1/pi', { status: 401, body: secret(401) }],
    ['UPSTREAM_BAD_RESPONSE', 'is_null', CHECK, { body: nullBody({ confidence: 'INTERNAL-SECRET' }) }],
  ];
  it.each(rows)('%s (%s)', async (code, tool, path, script, extra = {}) => {
    routeSpecAnswers(scripted.upstream);
    scripted.upstream.route(path === CHECK ? 'POST' : 'GET', path, script);
    const gateway = await scripted.gateway(PLAIN);
    const result = await callWith(gateway.origin, {}, tool, tool === 'is_null' ? { value: 1 } : {});
    expect(result.isError).toBe(true);
    // The failed field is null; the data is kept.
    expect(Object.values(result.structuredContent ?? {})).toEqual([null]);
    expect(result._meta?.errors?.[0]?.extensions).toMatchObject({ code, ...extra });
    expect(JSON.stringify(result)).not.toMatch(/INTERNAL-SECRET|10\.0\.0\.7/);
  });

  it('UPSTREAM_TIMEOUT', async () => {
    routeSpecAnswers(scripted.upstream);
    scripted.upstream.route('GET', '/api/v1/pi', { hang: true });
    const gateway = await scripted.gateway({ ...PLAIN, UPSTREAM_TIMEOUT_MS: '300' });
    const result = await callWith(gateway.origin, {}, 'pi_digits', {});
    expect(toolCodes(result)).toEqual(['UPSTREAM_TIMEOUT']);
  });
});
