/**
 * The floor cost of any one-call gateway on this machine: plain node:http in front, one undici
 * `Pool.request` per incoming request behind, no GraphQL. It reads the client's body, makes the one
 * upstream call the gateway would make (same pool settings as the gateway's clients), reads the
 * upstream body and answers it as JSON.
 *
 * Routes (any method; the client's body is read and ignored):
 *   POST /pi     → GET  {upstream}/api/v1/pi?digits=10
 *   POST /check  → POST {upstream}/api/v1/check  {"value":null}
 *   POST /graphql → POST {upstream}/api/v1/check  {"value": <the body's one variable>}, answered
 *                   as the `isNull` field of a GraphQL response (every NullCheck field, as a NullVerdict):
 *                   the floor of a one-call subgraph without GraphQL, for the benchmark's Hive Gateway
 *                   rows (a router in front of it, beside the same router in front of the gateway)
 *   GET  /health → 200 (readiness probe of the benchmark)
 *
 * Run as its own process: `UPSTREAM_URL=http://127.0.0.1:n PORT=0 node --import tsx test/bench/raw-proxy.ts`
 * prints `{"port": n}` when listening.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';

export interface RawProxyOptions {
  /** Origin of the upstream, e.g. `http://127.0.0.1:4001`. */
  upstreamUrl: string;
  /** @default 0 (ephemeral) */
  port?: number;
  /**
   * Keep-alive connections to the upstream: the gateway's UPSTREAM_CONNECTIONS default.
   * @default 64
   */
  connections?: number;
}

const CHECK_BODY = JSON.stringify({ value: null });

/** The upstream's check answer as GraphQL's `isNull` (what the IsNull operation selects), no execution. */
async function answerAsSubgraph(pool: Pool, body: Buffer, res: ServerResponse): Promise<void> {
  // The document's one variable, whatever the router named it (Hive Gateway sends `_isNull_value`).
  const variables = (JSON.parse(body.toString()) as { variables?: Record<string, unknown> }).variables;
  const value = Object.values(variables ?? {})[0] ?? null;
  const response = await pool.request({
    method: 'POST',
    path: '/api/v1/check',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ value }),
  });
  const answer = (await response.body.json()) as Record<string, unknown>;
  const isNull = answer.is_null === true;
  const text = JSON.stringify({
    data: {
      isNull: {
        __typename: 'NullVerdict',
        actuallyNull: value === null,
        correct: isNull === (value === null),
        confidence: answer.confidence,
        model: 'NULL_X_4O',
        modelName: answer.model,
        inferenceTimeMs: answer.inference_time_ms,
        gpuCostUsd: answer.gpu_cost_usd,
        expertsConsulted: answer.experts_consulted,
        sponsoredBy: answer.sponsored_by,
        disclaimer: answer.disclaimer,
        isNull,
      },
    },
  });
  res.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export async function startRawProxy(
  options: RawProxyOptions,
): Promise<{ port: number; close(): Promise<void> }> {
  const pool = new Pool(options.upstreamUrl, {
    connections: options.connections ?? 64,
    pipelining: 1,
    keepAliveTimeout: 4000,
  });

  const forward = async (req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> => {
    const url = req.url ?? '/';
    if (url === '/health') {
      res.writeHead(200, { 'content-length': 0 }).end();
      return;
    }
    if (url === '/graphql') {
      await answerAsSubgraph(pool, body, res);
      return;
    }
    void body;
    const check = url === '/check';
    const response = await pool.request({
      method: check ? 'POST' : 'GET',
      path: check ? '/api/v1/check' : '/api/v1/pi?digits=10',
      headers: check ? { 'content-type': 'application/json' } : {},
      body: check ? CHECK_BODY : undefined,
    });
    const text = await response.body.text();
    res.writeHead(response.statusCode, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      forward(req, res, Buffer.concat(chunks)).catch(() => {
        if (!res.headersSent) res.writeHead(502, { 'content-length': 0 });
        res.end();
      });
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.close();
    },
  };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const upstreamUrl = process.env.UPSTREAM_URL;
  if (!upstreamUrl) throw new Error('UPSTREAM_URL is required');
  const proxy = await startRawProxy({ upstreamUrl, port: Number(process.env.PORT ?? 0) });
  process.stdout.write(`${JSON.stringify({ port: proxy.port })}\n`);
  const stop = () => proxy.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
