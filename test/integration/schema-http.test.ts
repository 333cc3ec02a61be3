/**
 * The gateway's HTTP face (`createApp` on a loopback port, in front of a scripted upstream): request
 * ids, API keys, GraphiQL and its assets under a strict CSP, feature
 * switches, the operation limits and CORS.
 *
 * Where a behaviour belongs to both request paths, it is checked on both: the fast path (a JSON POST
 * over HTTP) and Yoga's handler (`app.yoga.fetch`).
 */
import { Script } from 'node:vm';
import { gunzipSync } from 'node:zlib';
import { parse, validate } from 'graphql';
import { beforeEach, describe, expect, it } from 'vitest';
import { GRAPHIQL_TABS } from '../../src/gateway/plugins/use-graphiql.js';
import { schema } from '../../src/gateway/schema/index.js';
import type { TestGateway } from '../support/gateway.js';
import { codes, type GqlResult, gql, gqlInYoga } from '../support/graphql-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, piBody } from '../support/upstream-bodies.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const scripted = useScriptedGateways();
beforeEach(() => {
  scripted.upstream.reset();
  scripted.upstream.route('GET', '/api/v1/pi', { body: piBody() });
  scripted.upstream.route('POST', '/api/v1/check', { body: nullBody() });
});

const byEnv = new Map<string, Promise<TestGateway>>();

/**
 * A gateway in front of the scripted upstream, with these settings (closed after the file), shared by
 * every test asking for the same settings.
 */
function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const key = JSON.stringify(env);
  const shared = byEnv.get(key);
  if (shared !== undefined) return shared;
  const starting = scripted.gateway(env);
  byEnv.set(key, starting);
  return starting;
}

type Send = (g: TestGateway, query: string, headers?: Record<string, string>) => Promise<GqlResult>;
const PATHS: Array<[string, Send]> = [
  ['fast path', (g, query, headers) => gql(g.url, query, { headers })],
  ["Yoga's handler", (g, query, headers) => gqlInYoga(g, query, { headers })],
];

const PI = '{ pi { __typename } }';
const piRequests = () => scripted.upstream.requests.filter((r) => r.path === '/api/v1/pi');

describe.each(PATHS)('x-request-id (%s)', (_path, send) => {
  it('echoes a sane caller id and sends it upstream', async () => {
    const g = await gateway();
    const result = await send(g, PI, { 'x-request-id': 'req-42_a.b' });
    expect(result.headers.get('x-request-id')).toBe('req-42_a.b');
    expect(piRequests()[0]?.headers['x-request-id']).toBe('req-42_a.b');
  });

  it.each([
    ['too long', 'a'.repeat(129)],
    ['made of odd characters', 'id with spaces/and"quotes'],
    ['empty', ''],
    ['missing', undefined],
  ])('uses a generated UUID, which goes upstream, when the caller id is %s', async (_what, id) => {
    const g = await gateway();
    const result = await send(g, PI, id === undefined ? {} : { 'x-request-id': id });
    const sent = result.headers.get('x-request-id');
    expect(sent).toMatch(UUID);
    expect(piRequests()[0]?.headers['x-request-id']).toBe(sent);
  });
});

describe.each(PATHS)('API keys (%s)', (_path, send) => {
  it.each([
    [{ authorization: 'Bearer k-123' }, 'Bearer k-123'],
    [{ authorization: 'bearer   k-456  ' }, 'Bearer k-456'],
    [{ 'x-api-key': 'k-789' }, 'Bearer k-789'],
    [{ authorization: 'Bearer k-first', 'x-api-key': 'k-second' }, 'Bearer k-first'],
    [{ authorization: '', 'x-api-key': 'k-empty-auth' }, 'Bearer k-empty-auth'],
    [{ authorization: 'Bearer free' }, 'Bearer free'],
    [{}, undefined],
    [{ 'x-api-key': '' }, undefined],
    [{ 'x-api-key': '   ' }, undefined],
  ])('%j reaches the upstream as authorization: %s', async (headers, expected) => {
    const g = await gateway();
    expect((await send(g, PI, headers)).errors).toBeUndefined();
    expect(piRequests()).toHaveLength(1);
    expect(piRequests()[0]?.headers.authorization).toBe(expected);
  });

  // As the reference services answer it: a caller is never served under another identity than the
  // one its Authorization header meant (src/gateway/identity.ts).
  it.each([
    ['Basic credentials', { authorization: 'Basic dXNlcjpwYXNz' }],
    [
      'Basic credentials beside an X-API-Key',
      { authorization: 'Basic dXNlcjpwYXNz', 'x-api-key': 'k-basic' },
    ],
    ['a bare key', { authorization: 'k-bare' }],
    ['the scheme alone', { authorization: 'Bearer' }],
    ['two words after Bearer', { authorization: 'Bearer k-1 k-2' }],
  ])(
    'an Authorization header with %s is refused with UNAUTHENTICATED, 401 and WWW-Authenticate, calling nothing',
    async (_what, headers) => {
      const g = await gateway();
      const result = await send(g, PI, headers);
      expect(result.status).toBe(401);
      expect(result.headers.get('www-authenticate')).toBe('Bearer');
      expect(codes(result)).toEqual(['UNAUTHENTICATED']);
      expect(result.data).toBeUndefined();
      expect(result.text).not.toContain('dXNlcjpwYXNz');
      expect(scripted.upstream.requests).toHaveLength(0);
    },
  );
});

describe('API keys, a malformed Authorization header', () => {
  it('is 401 for legacy application/json clients too, on both lanes', async () => {
    const g = await gateway();
    const headers = { authorization: 'Basic dXNlcjpwYXNz' };
    for (const result of [
      await gql(g.url, PI, { headers, accept: 'application/json' }),
      await gqlInYoga(g, PI, { headers, accept: 'application/json' }),
    ]) {
      expect(result.status).toBe(401);
      expect(codes(result)).toEqual(['UNAUTHENTICATED']);
    }
    expect(scripted.upstream.requests).toHaveLength(0);
  });
});

describe('API keys', () => {
  it('go upstream in the header UPSTREAM_AUTH_HEADER names, bare, and in no other', async () => {
    const g = await gateway({ UPSTREAM_AUTH_HEADER: 'X-Upstream-Key' });
    await gql(g.url, PI, { headers: { authorization: 'Bearer k-custom' } });
    expect(piRequests()[0]?.headers['x-upstream-key']).toBe('k-custom');
    expect(piRequests()[0]?.headers.authorization).toBeUndefined();
  });
});

describe('GraphiQL', () => {
  const page = (g: TestGateway) => fetch(g.url, { headers: { accept: 'text/html,application/xhtml+xml' } });

  it('is served with a CSP that allows no inline or foreign script, and its assets are same-origin', async () => {
    const g = await gateway();
    const response = await page(g);
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
    expect(urls.length).toBeGreaterThanOrEqual(2);
    for (const url of urls) {
      expect(url.startsWith('/graphql/assets/')).toBe(true);
      const asset = await fetch(`${g.origin}${url}`);
      expect(asset.status).toBe(200);
      expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(100);
    }
  });

  it('serves the Monaco workers, gzipped on request, revalidated by ETag', async () => {
    const g = await gateway();
    const first = await g.app.yoga.fetch('http://gateway.test/graphql/assets/graphql.worker.js', {
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
    expect(etag).not.toBe('');
    const again = await g.app.yoga.fetch('http://gateway.test/graphql/assets/graphql.worker.js', {
      headers: { 'if-none-match': etag },
    });
    expect(again.status).toBe(304);
    expect((await g.app.yoga.fetch('http://gateway.test/graphql/assets/nope.js')).status).toBe(404);
  });

  it('serves its boot script compiled from graphiql-boot.browser.ts, and gives it the workers as data', async () => {
    const g = await gateway();
    const html = await (await page(g)).text();
    const src = /<script defer src="(\/graphql\/assets\/boot\.js\?v=[^"]+)"><\/script>/.exec(html)?.[1];
    expect(src).toBeDefined();
    const boot = await fetch(`${g.origin}${src}`);
    expect(boot.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(boot.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const code = await boot.text();
    // JavaScript, not TypeScript: it compiles as a classic script (type annotations would not).
    expect(() => new Script(code)).not.toThrow();
    expect(code).toContain('renderYogaGraphiQL');
    expect(code).toContain('MonacoEnvironment');
    // Its data is not in its code: the worker URLs come in a JSON block, versioned, same-origin.
    const json = /<script type="application\/json" id="graphiql-workers">(.*?)<\/script>/s.exec(html)?.[1];
    const workers = JSON.parse(json ?? '{}') as Record<string, string>;
    expect(Object.keys(workers).sort()).toEqual(['editorWorkerService', 'graphql', 'json']);
    for (const url of Object.values(workers)) {
      expect(url).toMatch(/^\/graphql\/assets\/[a-z.]+\.worker\.js\?v=/);
      expect((await fetch(`${g.origin}${url}`)).status).toBe(200);
    }
  });

  it('offers a valid example operation for each of the four queries and a headers example', async () => {
    const g = await gateway();
    const html = await (await page(g)).text();
    const json =
      /<script type="application\/json" id="graphiql-options">(.*?)<\/script>/s.exec(html)?.[1] ?? '{}';
    const options = JSON.parse(json) as {
      defaultTabs: Array<{ query: string; headers?: string }>;
      headers: string;
    };
    expect(options.defaultTabs).toHaveLength(GRAPHIQL_TABS.length);
    const roots = new Set<string>();
    for (const tab of options.defaultTabs) {
      expect(validate(schema, parse(tab.query))).toEqual([]);
      for (const match of tab.query.matchAll(/^\s{2}(isNull|pi|inference|health)\b/gm))
        roots.add(match[1] as string);
      expect(JSON.parse(tab.headers ?? '{}')).toHaveProperty('Authorization');
    }
    expect([...roots].sort()).toEqual(['health', 'inference', 'isNull', 'pi']);
  });

  it('is on in every environment, production included', async () => {
    const g = await gateway({ NODE_ENV: 'production' });
    const response = await page(g);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    expect(response.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await response.text()).toContain('graphiql-options');
    expect((await fetch(`${g.origin}/graphql/assets/graphiql.js`)).status).toBe(200);
  });

  it('GRAPHIQL=false: a browser gets a short page saying so, the assets are gone, the API still answers', async () => {
    const g = await gateway({ GRAPHIQL: 'false' });
    const response = await page(g);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await response.text();
    expect(html).toMatch(/GraphiQL is off/);
    expect(html).not.toContain('<script');
    expect(html.length).toBeLessThan(2000);
    expect((await fetch(`${g.origin}/graphql/assets/graphiql.js`)).status).toBe(404);
    // GET with a query and POST still run operations.
    const viaGet = await fetch(`${g.url}?query=${encodeURIComponent('{ __typename }')}`, {
      headers: { accept: 'application/json' },
    });
    expect(await viaGet.json()).toEqual({ data: { __typename: 'Query' } });
    expect((await gql(g.url, PI)).data).toEqual({ pi: { __typename: 'PiDigits' } });
  });
});

describe('introspection', () => {
  const INTROSPECT = '{ __schema { queryType { name } } }';

  it.each(PATHS)('is on in every environment, production included (%s)', async (_path, send) => {
    const answer = { __schema: { queryType: { name: 'Query' } } };
    for (const env of [{}, { NODE_ENV: 'production' }] as Array<Record<string, string>>) {
      const result = await send(await gateway(env), INTROSPECT);
      expect(result.status).toBe(200);
      expect(result.data).toEqual(answer);
    }
  });

  it.each(PATHS)('is refused with INTROSPECTION=false, production or not (%s)', async (_path, send) => {
    for (const env of [
      { INTROSPECTION: 'false' },
      { NODE_ENV: 'production', INTROSPECTION: 'false' },
    ] as Array<Record<string, string>>) {
      const g = await gateway(env);
      for (const query of [INTROSPECT, '{ __type(name: "Query") { name } }']) {
        const result = await send(g, query);
        expect(result.status).toBe(422);
        expect(result.data).toBeUndefined();
        expect(codes(result)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
        expect(result.errors?.[0]?.message).toMatch(/introspection is disabled/);
      }
      // __typename is not introspection of the schema.
      expect((await send(g, '{ __typename }')).data).toEqual({ __typename: 'Query' });
    }
  });
});

/** `n` aliased root fields, each `field(i)`. */
const aliased = (n: number, field: (i: number) => string) =>
  `{ ${Array.from({ length: n }, (_, i) => `a${i}: ${field(i)}`).join(' ')} }`;

describe.each(PATHS)('operation limits (%s)', (_path, send) => {
  it('refuses an operation over MAX_UPSTREAM_CALLS before any upstream call, fan-out in fragments included; duplicates count once', async () => {
    const g = await gateway({ MAX_UPSTREAM_CALLS: '2' });
    const over = await send(
      g,
      '{ a: pi(digits: 1) { __typename } b: pi(digits: 2) { __typename } c: pi(digits: 3) { __typename } }',
    );
    expect(over.status).toBe(400);
    expect(over.data).toBeUndefined();
    expect(over.errors?.[0]?.extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      upstreamCalls: 3,
      limit: 2,
    });
    expect(over.errors?.[0]?.message).toMatch(/MAX_UPSTREAM_CALLS/);
    // health is two calls (one per upstream): with pi, three.
    const health = await send(g, '{ health { status } pi { __typename } }');
    expect(health.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', upstreamCalls: 3 });
    // Fan-out hidden in fragments counts too.
    const hidden = await send(
      g,
      '{ ...F ...G } fragment F on Query { a: pi(digits: 1) { __typename } b: pi(digits: 2) { __typename } } fragment G on Query { c: pi(digits: 3) { __typename } }',
    );
    expect(hidden.status).toBe(400);
    expect(hidden.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', upstreamCalls: 3 });
    // The default limit is 20: 25 distinct calls (under MAX_ALIASES) are refused too.
    const defaults = await send(
      await gateway(),
      aliased(25, (i) => `isNull(value: ${i}) { __typename }`),
    );
    expect(defaults.status).toBe(400);
    expect(defaults.errors?.[0]?.extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      upstreamCalls: 25,
      limit: 20,
    });
    expect(scripted.upstream.count()).toBe(0);
    const dupes = await send(g, '{ a: pi { __typename } b: pi { __typename } c: pi { __typename } }');
    expect(dupes.errors).toBeUndefined();
    expect(scripted.upstream.count()).toBe(1);
  });

  it('refuses a document over MAX_TOKENS with a parse error (not a masked one), before any upstream call', async () => {
    const g = await gateway({ MAX_TOKENS: '20' });
    const result = await send(
      g,
      aliased(30, () => 'pi { __typename }'),
    );
    expect(result.status).toBe(400);
    expect(result.errors?.[0]?.message).toMatch(/more tha\w* 20 tokens/);
    expect(codes(result)).toEqual(['GRAPHQL_PARSE_FAILED']);
    // With the defaults, 5000 aliases meet MAX_TOKENS (2000) before MAX_ALIASES.
    const flood = await send(
      await gateway(),
      aliased(5000, () => 'pi { __typename }'),
    );
    expect(flood.status).toBe(400);
    expect(codes(flood)).toEqual(['GRAPHQL_PARSE_FAILED']);
    expect(scripted.upstream.count()).toBe(0);
  });

  it('limits aliases and depth (graphql-armor), as validation errors (422), before any upstream call', async () => {
    const g = await gateway({ MAX_ALIASES: '2', MAX_DEPTH: '2' });
    const aliases = await send(g, '{ a: health { status } b: health { status } c: health { status } }');
    expect(aliases.status).toBe(422);
    expect(aliases.errors?.[0]?.message).toMatch(/Aliases limit of 2/);
    expect(codes(aliases)).toContain('GRAPHQL_VALIDATION_FAILED');
    const deep = await send(g, '{ health { nullCheck { status } } }');
    expect(deep.status).toBe(422);
    expect(deep.errors?.[0]?.message).toMatch(/depth/i);
    expect(codes(deep)).toContain('GRAPHQL_VALIDATION_FAILED');
    // The defaults: 30 aliases (50 distinct pi calls are refused by it, not by MAX_UPSTREAM_CALLS), depth 10.
    const defaults = await gateway();
    const many = await send(
      defaults,
      aliased(50, (i) => `pi(digits: ${i % 4}, temperature: ${i / 100}) { __typename }`),
    );
    expect(many.status).toBe(422);
    expect(codes(many)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    expect(many.errors?.[0]?.message).toMatch(/Aliases limit of 30/);
    const deeper = await send(
      defaults,
      `{ health { nullCheck { __typename } } ${'...on Query { '.repeat(12)}__typename${' }'.repeat(12)} }`,
    );
    expect(deeper.status).toBe(422);
    expect(codes(deeper)[0]).toMatch(/GRAPHQL_(VALIDATION|PARSE)_FAILED/);
    expect(scripted.upstream.count()).toBe(0);
  });
});

describe('CORS', () => {
  const preflight = (g: TestGateway) =>
    fetch(g.url, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });

  it('sends no CORS headers unless CORS_ORIGINS allows the origin', async () => {
    expect((await preflight(await gateway())).headers.get('access-control-allow-origin')).toBeNull();
    const g = await gateway({ CORS_ORIGINS: 'https://app.example' });
    const allowed = await preflight(g);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(allowed.headers.get('access-control-allow-headers')).toMatch(/x-api-key/i);
    // Every header of the contract a page may send (§3, §8, §9), and the answer fields it must read.
    for (const name of ['authorization', 'x-max-cost-usd', 'x-budget-fallback', 'traceparent'])
      expect(
        allowed.headers
          .get('access-control-allow-headers')
          ?.toLowerCase()
          .split(/\s*,\s*/),
      ).toContain(name);
    // A real request from the allowed origin carries the header too (the fast path steps aside for CORS).
    const result = await gql(g.url, PI, { headers: { origin: 'https://app.example' } });
    expect(result.headers.get('access-control-allow-origin')).toBe('https://app.example');
    const exposed = result.headers
      .get('access-control-expose-headers')
      ?.toLowerCase()
      .split(/\s*,\s*/);
    for (const name of ['x-request-id', 'ratelimit', 'ratelimit-policy', 'retry-after'])
      expect(exposed).toContain(name);
    expect(g.app.fastPath.served.fast).toBe(0);
    const other = await preflight(await gateway({ CORS_ORIGINS: 'https://other.example' }));
    expect(other.headers.get('access-control-allow-origin')).not.toBe('https://app.example');
  });
});

describe('the two paths', () => {
  it('plain POSTs take the fast path from the first request on, and yoga.fetch does not (the tests above compare two paths)', async () => {
    // Settings of its own: a gateway no other test used. No media type is learnt from traffic: the
    // very first plain POST takes the fast path.
    const g = await gateway({ HTTP_FAST_PATH: 'true' });
    expect(g.app.fastPath.served).toEqual({ fast: 0, lifted: 0, handedOver: 0 });
    expect((await gql(g.url, PI)).errors).toBeUndefined();
    expect(g.app.fastPath.served).toEqual({ fast: 1, lifted: 0, handedOver: 0 });
    await g.app.yoga.fetch('http://gateway.test/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: PI }),
    });
    expect(g.app.fastPath.served).toEqual({ fast: 1, lifted: 0, handedOver: 0 });
    expect(piRequests()).toHaveLength(2);
  });
});
