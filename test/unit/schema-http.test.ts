/**
 * The gateway's HTTP face in process (yoga.fetch): request ids, API keys, GraphiQL and its assets
 * under a strict CSP, feature switches, and the operation limits.
 */

import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { DigitEngine } from '../../src/digits/digit-engine.js';
import { GRAPHIQL_TABS } from '../../src/gateway/plugins/use-graphiql.js';
import { schema } from '../../src/gateway/schema/index.js';
import { UpstreamError } from '../../src/gateway/upstream/errors.js';
import type {
  CallOptions,
  PiRequest,
  PiResponse,
  UpstreamClients,
} from '../../src/gateway/upstream/types.js';
import { countUpstreamCalls, createGateway } from '../../src/gateway/yoga.js';
import { createLogger } from '../../src/shared/logger.js';

// The graphql-js copy the schema was built with (CommonJS): vitest would hand this file the ESM copy,
// and graphql-js refuses a schema from "another realm".
const { parse, validate } = createRequire(import.meta.url)('graphql') as typeof import('graphql');

/** Records the CallOptions of each pi call; answers 3 digits (not checked here). */
function recordingClients(onPi?: (r: PiRequest, o: CallOptions | undefined) => Promise<PiResponse>) {
  const seen: Array<CallOptions | undefined> = [];
  const answer = (): PiResponse => ({
    digits: '3.141',
    precision: 3,
    confidence: 1,
    model: 'pi-x-4o',
    inferenceTimeMs: 1,
    gpuCostUsd: 0,
    sponsoredBy: null,
    disclaimer: null,
    constantMarker: null,
    raw: {},
  });
  const unused = () => Promise.reject(new Error('not used in this test'));
  const clients: UpstreamClients = {
    nullCheck: { check: unused, health: unused, close: async () => {} },
    piDigits: {
      pi: (r, o) => {
        seen.push(o);
        return onPi ? onPi(r, o) : Promise.resolve(answer());
      },
      inference: unused,
      health: unused,
      close: async () => {},
    },
  };
  return { clients, seen };
}

const noDigits: DigitEngine = {
  digits: async () => '3.141',
  peek: () => '3.141',
  close: async () => {},
};

function gateway(
  env: Record<string, string> = {},
  clients = recordingClients().clients,
  logger = createLogger({ level: 'silent' }),
) {
  return createGateway({
    clients,
    digits: noDigits,
    config: loadConfig({ NODE_ENV: 'test', ...env }),
    logger,
  });
}

const post = (query: string, headers: Record<string, string> = {}, variables?: unknown) =>
  new Request('http://gateway.test/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });

describe('x-request-id', () => {
  it('echoes a sane caller id and sends it upstream', async () => {
    const { clients, seen } = recordingClients();
    const response = await gateway({}, clients).fetch(
      post('{ pi { __typename } }', { 'x-request-id': 'req-42_a.b' }),
    );
    expect(response.headers.get('x-request-id')).toBe('req-42_a.b');
    expect(seen[0]?.requestId).toBe('req-42_a.b');
  });

  it.each([
    ['too long', 'a'.repeat(129)],
    ['odd characters', 'id with spaces/and"quotes'],
  ])('replaces an id with %s by a generated UUID', async (_what, id) => {
    const { clients, seen } = recordingClients();
    const response = await gateway({}, clients).fetch(post('{ pi { __typename } }', { 'x-request-id': id }));
    const sent = response.headers.get('x-request-id');
    expect(sent).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(seen[0]?.requestId).toBe(sent);
  });

  it('is set on every response: errors, 404s, GraphiQL', async () => {
    const yoga = gateway();
    const responses = await Promise.all([
      yoga.fetch(post('{ nope }')),
      yoga.fetch('http://gateway.test/elsewhere'),
      yoga.fetch('http://gateway.test/graphql', { headers: { accept: 'text/html' } }),
    ]);
    for (const response of responses) expect(response.headers.get('x-request-id')).toBeTruthy();
    expect(new Set(responses.map((r) => r.headers.get('x-request-id'))).size).toBe(3);
  });
});

describe('API keys', () => {
  it.each([
    [{ authorization: 'Bearer k-123' }, 'k-123'],
    [{ authorization: 'bearer   k-456  ' }, 'k-456'],
    [{ 'x-api-key': 'k-789' }, 'k-789'],
    [{ authorization: 'Basic dXNlcjpwYXNz' }, undefined],
    [{}, undefined],
    [{ 'x-api-key': '' }, undefined],
  ])('%j → apiKey %s', async (headers, expected) => {
    const { clients, seen } = recordingClients();
    await gateway({}, clients).fetch(post('{ pi { __typename } }', headers));
    expect(seen[0]?.apiKey).toBe(expected);
  });

  it('never appears in a response or a log line, even on failures', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'trace' },
      new Writable({
        write(chunk, _encoding, done) {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    const { clients } = recordingClients(() =>
      Promise.reject(
        new UpstreamError('UNAUTHENTICATED', 'The pi-digits service rejected the API key.', {
          upstream: 'pi-digits',
          statusCode: 401,
        }),
      ),
    );
    const yoga = gateway({}, clients, logger);
    const key = 'sk-live-SECRET-9f8e7d';
    const responses = await Promise.all([
      yoga.fetch(post('{ pi { __typename } }', { authorization: `Bearer ${key}` })),
      yoga.fetch(post('{ boom }', { 'x-api-key': key })),
    ]);
    const bodies = await Promise.all(responses.map((r) => r.text()));
    expect(bodies[0]).toContain('UNAUTHENTICATED');
    for (const text of [...bodies, ...lines]) expect(text).not.toContain('SECRET');
  });
});

describe('the operation deadline', () => {
  it('aborts the upstream call with a TimeoutError reason when OPERATION_DEADLINE_MS passes', async () => {
    let reason: unknown;
    const { clients } = recordingClients(
      (_r, o) =>
        new Promise((_resolve, reject) => {
          o?.signal?.addEventListener('abort', () => {
            reason = o.signal?.reason;
            reject(new UpstreamError('UPSTREAM_TIMEOUT', 'too slow', { upstream: 'pi-digits' }));
          });
        }),
    );
    const response = await gateway({ OPERATION_DEADLINE_MS: '50' }, clients).fetch(
      post('{ pi { __typename } }'),
    );
    const body = (await response.json()) as { errors: Array<{ extensions: { code: string } }> };
    expect((reason as Error).name).toBe('TimeoutError');
    expect(body.errors[0]?.extensions.code).toBe('UPSTREAM_TIMEOUT');
  });
});

describe('the operation scope', () => {
  it('is released when execution ends: a finished operation is never aborted by its deadline later', async () => {
    const { clients, seen } = recordingClients();
    const response = await gateway({ OPERATION_DEADLINE_MS: '30' }, clients).fetch(
      post('{ pi { __typename } }'),
    );
    expect(response.status).toBe(200);
    const signal = seen[0]?.signal;
    expect(signal).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(signal?.aborted).toBe(false);
  });
});

describe('GraphiQL', () => {
  const page = (yoga: ReturnType<typeof gateway>) =>
    yoga.fetch('http://gateway.test/graphql', { headers: { accept: 'text/html,application/xhtml+xml' } });

  it('is served with a CSP that allows no inline or foreign script, and its assets are same-origin', async () => {
    const yoga = gateway();
    const response = await page(yoga);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = response.headers.get('content-security-policy') ?? '';
    const scriptSrc = csp.split(';').find((d) => d.trim().startsWith('script-src')) ?? '';
    expect(scriptSrc.trim()).toBe("script-src 'self'");
    expect(csp).toContain("worker-src 'self'");
    expect(csp).toContain("default-src 'none'");
    const html = await response.text();
    // No inline executable script: every <script> either has src or is a JSON data block.
    const scripts = html.match(/<script[^>]*>/g) ?? [];
    expect(scripts.length).toBeGreaterThanOrEqual(3); // the options block, the boot script, the bundle
    for (const tag of scripts) expect(tag).toMatch(/src="|type="application\/json"/);
    const urls = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(urls.length).toBeGreaterThanOrEqual(4);
    for (const url of urls) {
      expect(url.startsWith('/graphql/assets/')).toBe(true);
      const asset = await yoga.fetch(`http://gateway.test${url}`);
      expect(asset.status).toBe(200);
      expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(100);
    }
  });

  it('serves the Monaco workers, gzipped on request, revalidated by ETag', async () => {
    const yoga = gateway();
    const first = await yoga.fetch('http://gateway.test/graphql/assets/graphql.worker.js', {
      headers: { 'accept-encoding': 'gzip' },
    });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/javascript/);
    expect(first.headers.get('content-encoding')).toBe('gzip');
    // The fetch API may or may not decode it; either way it is the worker's code.
    const bytes = Buffer.from(await first.arrayBuffer());
    const text = bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes).toString() : bytes.toString();
    expect(text).toContain('importScripts');
    const etag = first.headers.get('etag') ?? '';
    const again = await yoga.fetch('http://gateway.test/graphql/assets/graphql.worker.js', {
      headers: { 'if-none-match': etag },
    });
    expect(again.status).toBe(304);
    expect((await yoga.fetch('http://gateway.test/graphql/assets/nope.js')).status).toBe(404);
  });

  it('offers a valid example operation for each of the four queries and a headers example', async () => {
    const html = await (await page(gateway())).text();
    const json =
      /<script type="application\/json" id="graphiql-options">(.*?)<\/script>/s.exec(html)?.[1] ?? '{}';
    const options = JSON.parse(json) as {
      defaultTabs: Array<{ query: string; headers?: string }>;
      headers: string;
    };
    expect(options.defaultTabs).toHaveLength(GRAPHIQL_TABS.length);
    const roots = new Set<string>();
    for (const tab of options.defaultTabs) {
      const document = parse(tab.query);
      expect(validate(schema, document)).toEqual([]);
      for (const match of tab.query.matchAll(/^\s{2}(isNull|pi|inference|health)\b/gm))
        roots.add(match[1] as string);
      expect(JSON.parse(tab.headers ?? '{}')).toHaveProperty('Authorization');
    }
    expect([...roots].sort()).toEqual(['health', 'inference', 'isNull', 'pi']);
  });

  it('is on in every environment, production included, and switchable off by GRAPHIQL', async () => {
    expect((await page(gateway({ NODE_ENV: 'production' }))).status).toBe(200);
    const off = gateway({ GRAPHIQL: 'false' });
    expect((await off.fetch('http://gateway.test/graphql/assets/graphiql.js')).status).toBe(404);
  });
});

describe('introspection', () => {
  const introspect = async (yoga: ReturnType<typeof gateway>) =>
    (await (await yoga.fetch(post('{ __schema { queryType { name } } }'))).json()) as {
      data?: unknown;
      errors?: unknown[];
    };

  it('is on in every environment, production included, and switchable off by INTROSPECTION', async () => {
    const answer = { __schema: { queryType: { name: 'Query' } } };
    expect((await introspect(gateway())).data).toEqual(answer);
    expect((await introspect(gateway({ NODE_ENV: 'production' }))).data).toEqual(answer);
    expect((await introspect(gateway({ INTROSPECTION: 'false' }))).errors).toHaveLength(1);
  });
});

describe('operation limits', () => {
  it('counts distinct upstream calls, health as two', () => {
    const count = (q: string, name?: string) => countUpstreamCalls(parse(q), name);
    expect(count('{ a: pi b: pi c: pi(digits: 2) }')).toBe(2);
    expect(count('{ health h: health ...F } fragment F on Query { isNull(value: 1) { __typename } }')).toBe(
      3,
    );
    expect(count('query A { pi } query B { pi pi(digits: 1) health }', 'B')).toBe(4);
  });

  it('refuses an operation over MAX_UPSTREAM_CALLS before any upstream call', async () => {
    const { clients, seen } = recordingClients();
    const yoga = gateway({ MAX_UPSTREAM_CALLS: '2' }, clients);
    const over = (await (
      await yoga.fetch(
        post(
          '{ a: pi(digits: 1) { __typename } b: pi(digits: 2) { __typename } c: pi(digits: 3) { __typename } }',
        ),
      )
    ).json()) as {
      errors: Array<{ extensions: { code: string } }>;
    };
    expect(over.errors[0]?.extensions.code).toBe('BAD_USER_INPUT');
    expect(seen).toHaveLength(0);
    const dupes = await yoga.fetch(
      post('{ a: pi { __typename } b: pi { __typename } c: pi { __typename } }'),
    );
    expect(((await dupes.json()) as { errors?: unknown }).errors).toBeUndefined();
    expect(seen).toHaveLength(1);
  });

  it('refuses a document over MAX_TOKENS with a parse error (not a masked one)', async () => {
    const query = `{ ${Array.from({ length: 30 }, (_, i) => `a${i}: __typename`).join(' ')} }`;
    const body = (await (await gateway({ MAX_TOKENS: '20' }).fetch(post(query))).json()) as {
      errors: Array<{ message: string; extensions: { code: string } }>;
    };
    expect(body.errors[0]?.message).toMatch(/more tha\w* 20 tokens/);
    expect(body.errors[0]?.extensions.code).toBe('GRAPHQL_PARSE_FAILED');
  });

  it('answers 413 to a body over MAX_REQUEST_BODY_BYTES', async () => {
    const response = await gateway({ MAX_REQUEST_BODY_BYTES: '2048' }).fetch(
      post(`{ pi { __typename } } # ${'x'.repeat(4096)}`),
    );
    expect(response.status).toBe(413);
  });

  it('limits depth and aliases (graphql-armor)', async () => {
    const yoga = gateway({ MAX_ALIASES: '2' });
    const body = (await (
      await yoga.fetch(post('{ a: health { status } b: health { status } c: health { status } }'))
    ).json()) as {
      errors?: Array<{ message: string }>;
    };
    expect(body.errors?.[0]?.message).toMatch(/alias/i);
  });
});

describe('CORS', () => {
  const preflight = (yoga: ReturnType<typeof gateway>) =>
    yoga.fetch('http://gateway.test/graphql', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });

  it('sends no CORS headers unless CORS_ORIGINS allows the origin', async () => {
    expect((await preflight(gateway())).headers.get('access-control-allow-origin')).toBeNull();
    const allowed = await preflight(gateway({ CORS_ORIGINS: 'https://app.example' }));
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(allowed.headers.get('access-control-allow-headers')).toMatch(/x-api-key/);
  });
});
