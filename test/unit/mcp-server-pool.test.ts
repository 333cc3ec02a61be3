/**
 * The MCP lane's reused SDK servers (src/gateway/mcp/server-pool.ts), with the SDK's own `Server` and
 * stateless transport: a released server answers the next request on a fresh transport (the same
 * JSON-RPC id included), requests at once get servers of their own, a request's data reaches the
 * handler through `authInfo`, and a server whose transport was closed under it is not handed out
 * while still attached; warmed at start, its servers are made ahead. In a gateway:
 * test/integration/mcp-*.test.ts.
 */
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createServerPool } from '../../src/gateway/mcp/server-pool.js';

const HEADERS = {
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
  'mcp-protocol-version': '2025-06-18',
};

/** Servers whose one tool answers the caller named in the request's auth info, once `gate` opens. */
function pooled(gate: Promise<void> = Promise.resolve()) {
  const made: Server[] = [];
  const pool = createServerPool({
    create: () => {
      const server = new Server({ name: 'test', version: '1' }, { capabilities: { tools: {} } });
      server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
        await gate;
        return { content: [{ type: 'text', text: String(extra.authInfo?.extra?.caller) }] };
      });
      made.push(server);
      return server;
    },
    maxIdle: 2,
  });
  return { pool, made };
}

const transport = () =>
  new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });

const authOf = (caller: string): AuthInfo => ({ token: '', clientId: '', scopes: [], extra: { caller } });

/** One tools/call, id 1 each time, on transport `t`: the text of its answer. */
async function call(t: WebStandardStreamableHTTPServerTransport, caller: string): Promise<unknown> {
  const response = await t.handleRequest(
    new Request('http://localhost/mcp', { method: 'POST', headers: HEADERS }),
    {
      parsedBody: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'who', arguments: {} } },
      authInfo: authOf(caller),
    },
  );
  const answer = (await response.json()) as { id: number; result: { content: { text: string }[] } };
  expect(answer.id).toBe(1);
  return answer.result.content[0]?.text;
}

describe('createServerPool', () => {
  it("released as soon as the answer is there, the request's handler is not aborted", async () => {
    const signals: AbortSignal[] = [];
    const pool = createServerPool({
      create: () => {
        const server = new Server({ name: 'test', version: '1' }, { capabilities: { tools: {} } });
        server.setRequestHandler(CallToolRequestSchema, (_request, extra) => {
          signals.push(extra.signal);
          return { content: [] };
        });
        return server;
      },
    });
    const t = transport();
    const server = await pool.connect(t);
    const response = await t.handleRequest(
      new Request('http://localhost/mcp', { method: 'POST', headers: HEADERS }),
      { parsedBody: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'who', arguments: {} } } },
    );
    await pool.release(server);
    expect(response.status).toBe(200);
    expect(signals).toHaveLength(1);
    expect(signals[0]?.aborted).toBe(false);
  });

  it('answers one request after another with one server, each on a fresh transport', async () => {
    const { pool, made } = pooled();
    for (const caller of ['first', 'second', 'third']) {
      const t = transport();
      const server = await pool.connect(t);
      expect(await call(t, caller)).toBe(caller);
      await pool.release(server);
    }
    expect(made).toHaveLength(1);
  });

  it('gives requests at once servers of their own, each answering its own caller', async () => {
    let open: () => void = () => {};
    const { pool, made } = pooled(new Promise<void>((resolve) => (open = resolve)));
    const transports = [transport(), transport(), transport()];
    const servers = await Promise.all(transports.map((t) => pool.connect(t)));
    const answers = Promise.all(transports.map((t, i) => call(t, `caller-${i}`)));
    open();
    expect(await answers).toEqual(['caller-0', 'caller-1', 'caller-2']);
    expect(new Set(servers).size).toBe(3);
    await Promise.all(servers.map((server) => pool.release(server)));
    // Two are kept (maxIdle), and they serve again.
    const again = [transport(), transport(), transport()];
    const next = await Promise.all(again.map((t) => pool.connect(t)));
    expect(made).toHaveLength(4);
    expect(await Promise.all(again.map((t, i) => call(t, `again-${i}`)))).toEqual([
      'again-0',
      'again-1',
      'again-2',
    ]);
    await Promise.all(next.map((server) => pool.release(server)));
  });

  it('a server whose transport was closed under it (a client that left) can connect again', async () => {
    const { pool } = pooled();
    const left = transport();
    const server = await pool.connect(left);
    await left.close();
    // Closing the transport detached the server; released, it serves the next request.
    await pool.release(server);
    const t = transport();
    expect(await pool.connect(t)).toBe(server);
    expect(await call(t, 'next')).toBe('next');
  });

  it('warmed at start: servers made ahead, the first run through what an agent sends first, and they serve', async () => {
    const { pool, made } = pooled();
    await pool.warm(2);
    // One server through every warm-up message (each on a fresh transport), one more made: maxIdle 2.
    expect(made).toHaveLength(2);
    const transports = [transport(), transport()];
    const servers = await Promise.all(transports.map((t) => pool.connect(t)));
    expect(made).toHaveLength(2);
    expect(await Promise.all(transports.map((t, i) => call(t, `after-${i}`)))).toEqual([
      'after-0',
      'after-1',
    ]);
    await Promise.all(servers.map((server) => pool.release(server)));
  });

  it('keeps stack traces on for everything else', async () => {
    const { pool } = pooled();
    const before = Error.stackTraceLimit;
    const server = await pool.connect(transport());
    await pool.release(server);
    expect(Error.stackTraceLimit).toBe(before);
  });
});
