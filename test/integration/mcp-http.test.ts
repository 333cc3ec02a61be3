/**
 * POST /mcp at the HTTP level (contract §13): what is refused before anything runs (Origin, a
 * malformed Authorization, methods other than POST, a body over MAX_REQUEST_BODY_BYTES, a body that
 * is not JSON-RPC), both protocol revisions, and MCP=false. Raw HTTP, as a misbehaving client or a
 * browser page would send it; never a stack trace.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { gql } from '../support/graphql-client.js';
import { postMcp, toolsCall } from '../support/mcp-client.js';
import { metricValue } from '../support/metric-values.js';

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startTestGateway({
    env: {
      FREE_RATE_LIMIT: '0',
      MAX_REQUEST_BODY_BYTES: '2048',
      MCP_ALLOWED_ORIGINS: 'https://agent.example.com',
    },
  });
});
afterAll(() => gateway?.close());

const NO_STACK = /\bat .*\.(ts|js):\d+|node:internal/;

/** The refusal's JSON-RPC error (no id: no message was read). */
async function refusal(response: Response): Promise<{ code: number; message: string }> {
  const text = await response.text();
  expect(text).not.toMatch(NO_STACK);
  const body = JSON.parse(text) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
  expect(body).toMatchObject({ jsonrpc: '2.0', id: null });
  return body.error;
}

describe('refused before anything runs', () => {
  it.each(['GET', 'DELETE', 'PUT'])(
    '%s /mcp: 405 with Allow: POST (no standalone stream)',
    async (method) => {
      const response = await postMcp(gateway.origin, '{}', { accept: 'text/event-stream' }, method);
      expect(response.status).toBe(405);
      expect(response.headers.get('allow')).toBe('POST');
      expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      expect((await refusal(response)).message).toMatch(/POST/);
    },
  );

  it.each([
    ['http://evil.example.com', 403],
    ['null', 403],
    ['https://agent.example.com.evil.example', 403],
    ['http://localhost:6274', 200],
    ['http://127.0.0.1:9', 200],
    ['http://[::1]:3000', 200],
    ['https://agent.example.com', 200],
  ])('Origin %s: %i', async (origin, status) => {
    const registry = gateway.app.metrics.registry;
    const before =
      (await metricValue(registry, 'gateway_operations_total', {
        operation: 'Health',
        type: 'query',
        outcome: 'ok',
      })) ?? 0;
    const response = await postMcp(gateway.origin, toolsCall('health'), { origin });
    expect(response.status).toBe(status);
    const after =
      (await metricValue(registry, 'gateway_operations_total', {
        operation: 'Health',
        type: 'query',
        outcome: 'ok',
      })) ?? 0;
    // Refused: the tool did not run.
    expect(after - before).toBe(status === 200 ? 1 : 0);
    if (status === 403) expect((await refusal(response)).message).toMatch(/Origin/);
  });

  it("an allowed origin's page may call it (CORS preflight, Access-Control-Allow-Origin); another's may not", async () => {
    const preflight = (origin: string) =>
      fetch(`${gateway.origin}/mcp`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type, authorization, mcp-protocol-version',
        },
      });
    const allowed = await preflight('http://localhost:6274');
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('http://localhost:6274');
    expect(allowed.headers.get('access-control-allow-methods')).toBe('POST');
    expect(allowed.headers.get('access-control-allow-headers')).toMatch(
      /authorization.*mcp-protocol-version/,
    );
    expect((await preflight('http://evil.example.com')).status).toBe(403);
    const answer = await postMcp(gateway.origin, toolsCall('budget'), {
      origin: 'https://agent.example.com',
      'mcp-protocol-version': '2025-06-18',
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBe('https://agent.example.com');
    expect(answer.headers.get('access-control-expose-headers')).toMatch(/x-request-id/);
    // Without an Origin, nothing of CORS.
    const plain = await postMcp(gateway.origin, toolsCall('budget'), {
      'mcp-protocol-version': '2025-06-18',
    });
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('a malformed Authorization: 401 with WWW-Authenticate: Bearer, the header not echoed', async () => {
    const response = await postMcp(gateway.origin, toolsCall('health'), {
      authorization: 'Basic c2VjcmV0LWtleQ==',
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    const error = await refusal(response);
    expect(error.message).toMatch(/Bearer <API key>/);
    expect(error.message).not.toContain('c2VjcmV0LWtleQ');
  });

  it('a body over MAX_REQUEST_BODY_BYTES: 413', async () => {
    const response = await postMcp(gateway.origin, toolsCall('is_null', { value: 'x'.repeat(4096) }));
    expect(response.status).toBe(413);
    expect((await refusal(response)).code).toBe(-32000);
  });

  it.each([
    ['not JSON', '{"jsonrpc": "2.0", "id": 1, "method": '],
    ['JSON, not JSON-RPC', '{"hello": "world"}'],
    ['an empty body', ''],
  ])('%s: 400 with the JSON-RPC parse error', async (_, body) => {
    const response = await postMcp(gateway.origin, body);
    expect(response.status).toBe(400);
    expect((await refusal(response)).code).toBe(-32700);
  });

  it('refusals are counted with method "(none)"', async () => {
    const value = await metricValue(gateway.app.metrics.registry, 'gateway_mcp_requests_total', {
      method: '(none)',
      outcome: 'refused',
    });
    expect(value).toBeGreaterThanOrEqual(5);
  });
});

describe('the protocol', () => {
  it.each(['2025-06-18', '2025-11-25'])('initialize at %s, stateless: no session id', async (version) => {
    const response = await postMcp(
      gateway.origin,
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('mcp-session-id')).toBeNull();
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const body = (await response.json()) as { result: { protocolVersion: string; capabilities: object } };
    expect(body.result.protocolVersion).toBe(version);
    expect(body.result.capabilities).toEqual({ tools: { listChanged: false } });
  });

  it('a tools/call needs no initialize before it (any replica answers any request)', async () => {
    const response = await postMcp(gateway.origin, toolsCall('budget', {}, 7), {
      'mcp-protocol-version': '2025-06-18',
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ id: 7, result: { structuredContent: { budget: null } } });
  });
  it('a batch: every request answered, in one JSON array; notifications alone: 202 without a body', async () => {
    const headers = { 'mcp-protocol-version': '2025-06-18' };
    const batch = `[${toolsCall('budget', {}, 11)},${toolsCall('budget', {}, 12)}]`;
    const response = await postMcp(gateway.origin, batch, headers);
    expect(response.status).toBe(200);
    const answers = (await response.json()) as Array<{ id: number; result: object }>;
    expect(answers.map((answer) => answer.id).sort()).toEqual([11, 12]);
    for (const answer of answers)
      expect(answer.result).toMatchObject({ structuredContent: { budget: null } });
    const notification = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const accepted = await postMcp(gateway.origin, notification, headers);
    expect(accepted.status).toBe(202);
    expect(await accepted.text()).toBe('');
  });
});

describe('MCP=false', () => {
  it('/mcp is 404; POST /graphql is unchanged', async () => {
    const off = await startTestGateway({ env: { MCP: 'false' } });
    try {
      const response = await postMcp(off.origin, toolsCall('health'));
      expect(response.status).toBe(404);
      expect(await response.text()).not.toMatch(NO_STACK);
      expect((await gql(off.url, '{ budget { scope } }')).data).toEqual({ budget: null });
    } finally {
      await off.close();
    }
  });
});
