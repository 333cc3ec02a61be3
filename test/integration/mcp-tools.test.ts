/**
 * The gateway as an MCP server (contract §13; docs/agents.md), through the MCP SDK's own client
 * against a real gateway in front of the reference services: every built-in tool, what a result
 * carries (structuredContent, _meta cost, sponsors, request id, routing), the errors an agent can act
 * on as results with their §2 codes, arguments the input schema refuses, an unknown tool, and each
 * tool call counted as an operation of its name (metrics, log line, span) with no key anywhere.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { capturedLogger } from '../support/logs.js';
import { callTool, connectMcp, type ToolResult, texts, toolCodes } from '../support/mcp-client.js';
import { metricValue } from '../support/metric-values.js';

const KEY = 'demo-pro';
const BUILT_IN = ['is_null', 'pi_digits', 'pi_inference', 'health', 'budget', 'model_scores'];

let gateway: TestGateway;
let client: Client;
const logs = capturedLogger('info');

beforeAll(async () => {
  gateway = await startTestGateway({ logger: logs.logger, env: { FREE_RATE_LIMIT: '0' } });
  client = await connectMcp(gateway.origin);
});
afterAll(async () => {
  await client?.close();
  await gateway?.close();
});

/** The result's data, checked to be the same JSON as its first text item. */
function dataOf(result: ToolResult): Record<string, unknown> {
  expect(result.structuredContent).toBeDefined();
  expect(JSON.parse(texts(result)[0] as string)).toEqual(result.structuredContent);
  return result.structuredContent as Record<string, unknown>;
}

describe('tools/list', () => {
  it('lists the built-in tools with schemas, prices in their descriptions and the annotations', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(BUILT_IN);
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.outputSchema?.type).toBe('object');
      expect(tool.annotations).toEqual({
        title: expect.any(String),
        readOnlyHint: true,
        idempotentHint: false,
        openWorldHint: true,
      });
      expect(tool.description).toMatch(/ USD a call/);
    }
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    // The price table's default models: null-x-4o 0.0042, pi-x-4o 0.0031 + 3 places.
    expect(byName.get('is_null')?.description).toMatch(/null-check service: about 0\.0042 USD .*null-x-4o/);
    expect(byName.get('pi_digits')?.description).toMatch(/pi-digits service: about 0\.003106 USD/);
    expect(byName.get('budget')?.description).toMatch(/calling no service: 0 USD/);
    expect(byName.get('health')?.description).toMatch(/0 USD/);
    expect(Object.keys(byName.get('is_null')?.inputSchema.properties ?? {}).sort()).toEqual(
      ['minAccuracy', 'model', 'strictMode', 'temperature', 'value'].sort(),
    );
    expect(byName.get('pi_inference')?.inputSchema.required).toEqual(['input']);
  });
});

describe('every built-in tool', () => {
  it('is_null: the verdict as structuredContent, its cost, sponsors and request id in _meta', async () => {
    const result = await callTool(client, 'is_null', { value: null });
    expect(result.isError).toBeUndefined();
    const { isNull } = dataOf(result) as { isNull: Record<string, unknown> };
    expect(isNull).toMatchObject({ __typename: 'NullVerdict', actuallyNull: true, modelName: 'null-x-4o' });
    expect(result._meta?.cost).toEqual({
      gpuCostUsd: isNull.gpuCostUsd,
      upstreamCalls: 1,
      cacheHits: 0,
      estimatedCostUsd: 0.0042,
    });
    expect(result._meta?.sponsoredBy).toEqual([isNull.sponsoredBy]);
    expect(result._meta?.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result._meta?.routing).toBeUndefined();
  });

  it('pi_digits, pi_inference, health, budget and model_scores', async () => {
    const pi = dataOf(await callTool(client, 'pi_digits', { digits: 3 })) as { pi: Record<string, unknown> };
    expect(pi.pi).toMatchObject({ __typename: 'PiDigits', digits: '3.141', requestedDigits: 3 });
    // Free tier: 3 digits at most.
    const inference = await callTool(client, 'pi_inference', {
      input: { desiredDigits: 3, liabilityWaiverSigned: true },
    });
    expect(inference._meta?.errors).toBeUndefined();
    expect((dataOf(inference) as { inference: { digits: string } }).inference.digits).toMatch(/^3\.\d{3}$/);
    expect(inference._meta?.cost?.upstreamCalls).toBe(1);
    const health = dataOf(await callTool(client, 'health')) as { health: { status: string } };
    expect(health.health.status).toBe('OK');
    // No budget configured: `budget` is null, and calls nothing.
    const budget = await callTool(client, 'budget');
    expect(dataOf(budget)).toEqual({ budget: null });
    expect(budget._meta?.cost).toBeUndefined();
    const scores = dataOf(await callTool(client, 'model_scores')) as {
      models: Array<{ service: string; model: string; answers: number }>;
    };
    expect(scores.models).toContainEqual(
      expect.objectContaining({ service: 'null-check', model: 'null-x-4o', answers: expect.any(Number) }),
    );
  });

  it('minAccuracy: the model routing chose, in _meta.routing', async () => {
    const result = await callTool(client, 'is_null', { value: 1, minAccuracy: 0.5 });
    expect(result.isError).toBeUndefined();
    expect(result._meta?.routing).toEqual([
      expect.objectContaining({ path: 'isNull', minAccuracy: 0.5, model: expect.any(String) }),
    ]);
    expect(result._meta?.routing).toEqual(result._meta?.cost?.routing);
    const { isNull } = dataOf(result) as { isNull: { modelName: string } };
    expect(isNull.modelName).toBe(result._meta?.routing?.[0]?.model);
  });

  it('the caller key goes to the services (pro: 10 digits), and no answer or log line holds it', async () => {
    const pro = await connectMcp(gateway.origin, { headers: { 'x-api-key': KEY } });
    try {
      const result = await callTool(pro, 'pi_digits', { digits: 10 });
      expect(result._meta?.errors).toBeUndefined();
      expect((dataOf(result) as { pi: { precision: number } }).pi.precision).toBe(10);
      expect(JSON.stringify(result)).not.toContain(KEY);
    } finally {
      await pro.close();
    }
    expect(logs.text()).not.toContain(KEY);
  });
});

describe('errors an agent can act on are results', () => {
  it('UNDEFINED_VALUE: is_null without a value; the failed field is null in structuredContent', async () => {
    const result = await callTool(client, 'is_null', {});
    expect(result.isError).toBe(true);
    expect(dataOf(result)).toEqual({ isNull: null });
    expect(toolCodes(result)).toEqual(['UNDEFINED_VALUE']);
    expect(result._meta?.errors?.[0]).toMatchObject({
      path: ['isNull'],
      extensions: { upstream: 'null-check' },
    });
    expect(texts(result)[1]).toMatch(/^UNDEFINED_VALUE: .* \(at isNull\)$/);
  });

  it.each([
    ['TIER_FORBIDDEN', 'pi_digits', { digits: 3, sponsored: false }],
    ['WAIVER_REQUIRED', 'pi_inference', { input: { desiredDigits: 3, liabilityWaiverSigned: false } }],
    ['BAD_USER_INPUT', 'is_null', { value: 1, temperature: 2 }],
    ['BAD_USER_INPUT', 'is_null', { value: 1, model: 'NULL_X_MINI', minAccuracy: 0.5 }],
    ['BAD_USER_INPUT', 'pi_digits', { digits: -1 }],
  ])('%s: %s %j', async (code, name, args) => {
    const result = await callTool(client, name, args);
    expect(result.isError).toBe(true);
    expect(toolCodes(result)).toEqual([code]);
    expect(texts(result).some((text) => text.startsWith(`${code}: `))).toBe(true);
    expect(JSON.stringify(result)).not.toMatch(/\bat .*\.(ts|js):\d+/);
  });

  it.each([
    ['a wrong type', 'is_null', { value: 1, temperature: 'hot' }, /temperature/],
    ['an unknown argument', 'is_null', { valeu: 1 }, /valeu|additional/],
    ['a missing required argument', 'pi_inference', {}, /input/],
    ['an enum value it does not have', 'pi_digits', { model: 'PI_X_GIANT' }, /model/],
    ['an integer beyond 32 bits', 'pi_digits', { digits: 2 ** 40 }, /digits/],
  ])(
    'arguments the input schema refuses (%s): BAD_USER_INPUT, nothing called',
    async (_, name, args, says) => {
      const result = await callTool(client, name, args);
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toBeUndefined();
      expect(toolCodes(result)).toEqual(['BAD_USER_INPUT']);
      expect(result._meta?.errors?.[0]?.message).toMatch(says);
      expect(result._meta?.cost).toBeUndefined();
    },
  );

  it('an unknown tool is the JSON-RPC error -32602', async () => {
    const error = await client.callTool({ name: 'no_such_tool', arguments: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((error as McpError).message).toMatch(/Unknown tool: no_such_tool/);
  });
});

describe('observability', () => {
  it('each tool call is an operation of its name (metrics, log line); MCP messages are counted', async () => {
    const registry = gateway.app.metrics.registry;
    const operations = (outcome: string) =>
      metricValue(registry, 'gateway_operations_total', { operation: 'IsNull', type: 'query', outcome });
    const mcp = (method: string, outcome: string) =>
      metricValue(registry, 'gateway_mcp_requests_total', { method, outcome });
    const before = {
      ok: (await operations('ok')) ?? 0,
      calls: (await mcp('tools/call', 'ok')) ?? 0,
      errors: (await mcp('tools/call', 'tool_error')) ?? 0,
    };
    const ok = await callTool(client, 'is_null', { value: 'logged' });
    await callTool(client, 'is_null', {});
    expect(await operations('ok')).toBe(before.ok + 1);
    expect(await mcp('tools/call', 'ok')).toBe(before.calls + 1);
    expect(await mcp('tools/call', 'tool_error')).toBe(before.errors + 1);
    expect(await mcp('initialize', 'ok')).toBeGreaterThanOrEqual(1);
    expect(await mcp('tools/list', 'ok')).toBeGreaterThanOrEqual(1);
    const line = logs.lines.find((l) => l.msg === 'graphql operation' && l.requestId === ok._meta?.requestId);
    expect(line).toMatchObject({
      operation: 'IsNull',
      operationType: 'query',
      outcome: 'ok',
      costUsd: 0.0042,
    });
  });

  it('each tool call is an operation span, its upstream call a child span', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const traced = await startTestGateway({
      env: { FREE_RATE_LIMIT: '0', OTEL_TRACING: 'true' },
      tracerProvider: provider,
    });
    const tracedClient = await connectMcp(traced.origin);
    try {
      const result = await callTool(tracedClient, 'is_null', { value: 'traced' });
      const spans = exporter.getFinishedSpans();
      const operation = spans.find(
        (span) => span.attributes['gateway.request_id'] === result._meta?.requestId,
      );
      expect(operation?.name).toBe('query IsNull');
      expect(operation?.attributes).toMatchObject({ 'graphql.operation.name': 'IsNull' });
      const children = spans.filter(
        (span) => span.parentSpanContext?.spanId === operation?.spanContext().spanId,
      );
      expect(children.map((span) => span.name)).toEqual(['null-check check']);
    } finally {
      await tracedClient.close();
      await traced.close();
      await provider.shutdown();
      trace.disable();
    }
  });
});
