/**
 * The HTTP QUERY method (RFC 10008; docs/contract.md, Delivery to frontends): `QUERY /graphql` with a
 * POST's body is answered exactly as that POST. Each case is sent twice over real HTTP, by POST and by
 * QUERY, on both lanes (the fast path first, and Yoga only with HTTP_FAST_PATH=false), and the two
 * answers must be equal: status, the header fields clients act on, the body byte for byte. The cases
 * are the rows of the status table (docs/contract.md, Errors; test/integration/http-status.test.ts
 * checks the statuses themselves) in both media types, and the policies: trusted documents, APQ,
 * the cost cap and a budget's RateLimit fields, compression, @defer. Then what only QUERY has: a
 * mutation is 405 with `Allow: POST`; every 405 and a CORS preflight name QUERY.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { METHODS } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestGateway } from '../support/gateway.js';
import { HEADERS_CLIENTS_ACT_ON, type RawAnswer, sendRaw } from '../support/raw-http.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, piBody } from '../support/upstream-bodies.js';

/** With a budget's RateLimit fields. */
const HEADERS_THAT_MATTER = [...HEADERS_CLIENTS_ACT_ON, 'ratelimit-policy', 'ratelimit'];

/**
 * What must be equal. Two things move between the two requests of a pair whatever the method: the
 * estimate follows the running mean of observed costs (the first request moved it), and a budget's
 * `r` and `t` follow the spend and the clock; both are checked to be numbers, each body's length
 * against itself.
 */
function comparable(answer: RawAnswer) {
  const headers = Object.fromEntries(HEADERS_THAT_MATTER.map((h) => [h, answer.headers[h]]));
  let body = answer.body;
  if (body.includes('"estimatedCostUsd":') && headers['content-encoding'] === undefined) {
    if (headers['content-length'] !== undefined) {
      expect(headers['content-length']).toBe(String(Buffer.byteLength(body)));
      headers['content-length'] = 'its body length';
    }
    body = body.replace(/"estimatedCostUsd":\d+(?:\.\d+)?(?:e-\d+)?/g, '"estimatedCostUsd":"a number"');
  }
  if (typeof headers.ratelimit === 'string') headers.ratelimit = headers.ratelimit.replace(/=\d+/g, '=n');
  return { status: answer.status, headers, body };
}

const JSON_TYPE = 'application/json';
const GRAPHQL_RESPONSE = 'application/graphql-response+json';
const json = (value: unknown) => JSON.stringify(value);
const q = (query: string, variables?: Record<string, unknown>) => json({ query, variables });

const TRUSTED = 'query Trusted { isNull(value: "t") { __typename } }';
const TRUSTED_ID = createHash('sha256').update(TRUSTED).digest('hex');
const APQ_TEXT = 'query Apq { isNull(value: "apq") { __typename } }';
const APQ_HASH = createHash('sha256').update(APQ_TEXT).digest('hex');
const DEFER = 'query Later { isNull(value: 1) { __typename } ... @defer { pi(digits: 3) { __typename } } }';

interface Case {
  name: string;
  body: string;
  headers?: Record<string, string>;
  /** The gateway's settings beyond the lane's (a separate gateway per distinct set). */
  env?: 'enforce' | 'budget';
}

const CASES: Case[] = [
  // The status table's rows (docs/contract.md, Errors).
  { name: 'data, no errors', body: q('{ isNull(value: 1) { __typename } pi(digits: 3) { __typename } }') },
  { name: 'data and a field error (partial results)', body: q('{ a: isNull { __typename } b: __typename }') },
  // "data null and an error": only a mutation gives it, which QUERY refuses (below).
  { name: 'the body is not JSON', body: '{"query": ' },
  { name: 'the document does not parse', body: q('{ pi( }') },
  { name: 'no query', body: json({ variables: {} }) },
  { name: 'variables not an object', body: json({ query: '{ __typename }', variables: 5 }) },
  { name: 'an unexpected parameter', body: json({ query: '{ __typename }', other: 1 }) },
  { name: 'the document fails validation', body: q('{ notAField }') },
  { name: 'the operation cannot be determined', body: q('query A { __typename } query B { __typename }') },
  {
    name: 'variables cannot be coerced',
    body: q('query ($d: Int) { pi(digits: $d) { __typename } }', { d: 'x' }),
  },
  {
    name: 'refused by the cost cap (BUDGET_EXCEEDED)',
    body: q('{ isNull(value: 1, model: NULL_X_OPUS) { __typename } }'),
    headers: { 'x-max-cost-usd': '0.0001' },
  },
  {
    name: 'a malformed X-Max-Cost-Usd',
    body: q('{ isNull(value: 1) { __typename } }'),
    headers: { 'x-max-cost-usd': 'lots' },
  },
  { name: 'an unknown persisted document', body: json({ documentId: `sha256:${'0'.repeat(64)}` }) },
  {
    name: 'an unsupported Content-Type',
    body: '{ __typename }',
    headers: { 'content-type': 'text/plain' },
  },
  {
    name: 'a form Content-Type without a CSRF header',
    body: 'query=%7B__typename%7D',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  },
  { name: 'no acceptable media type', body: q('{ __typename }'), headers: { accept: 'text/html' } },
  { name: 'a body larger than MAX_REQUEST_BODY_BYTES', body: q(`{ __typename } #${'x'.repeat(2_100_000)}`) },
  { name: 'an array while batching is off', body: json([{ query: '{ __typename }' }]) },
  // Policies.
  {
    name: 'APQ: a hash alone, unknown',
    body: json({ extensions: { persistedQuery: { version: 1, sha256Hash: APQ_HASH.replace(/^./, 'f') } } }),
  },
  {
    name: 'APQ: a hash with its text',
    body: json({ query: APQ_TEXT, extensions: { persistedQuery: { version: 1, sha256Hash: APQ_HASH } } }),
  },
  {
    name: 'trusted documents: by documentId',
    body: json({ documentId: `sha256:${TRUSTED_ID}` }),
    env: 'enforce',
  },
  {
    name: 'trusted documents: a document outside the manifest',
    body: q('{ isNull(value: 2) { __typename } }'),
    env: 'enforce',
  },
  {
    name: "a budget: the RateLimit fields and the answer's cost",
    body: q('{ isNull(value: 1) { __typename } }'),
    env: 'budget',
  },
  {
    name: 'a budget that does not fit',
    body: q(
      '{ a: isNull(value: 1, model: NULL_X_OPUS) { __typename } b: isNull(value: 2, model: NULL_X_OPUS) { __typename } }',
    ),
    env: 'budget',
  },
  {
    name: 'compression: a large answer, gzip',
    body: q('{ __schema { types { name description } } }'),
    headers: { 'accept-encoding': 'gzip' },
  },
  {
    name: 'compression: a large answer, br',
    body: q('{ __schema { types { name description } } }'),
    headers: { 'accept-encoding': 'br' },
  },
  { name: '@defer over multipart/mixed', body: q(DEFER), headers: { accept: 'multipart/mixed' } },
  {
    name: '@defer, a JSON type accepted too (the fast path hands it over)',
    body: q(DEFER),
    headers: { accept: 'multipart/mixed, application/json' },
  },
  { name: '@defer over text/event-stream', body: q(DEFER), headers: { accept: 'text/event-stream' } },
];

const scripted = useScriptedGateways();
const dir = mkdtempSync(join(tmpdir(), 'query-method-'));
const manifest = join(dir, 'persisted-documents.json');
writeFileSync(manifest, JSON.stringify({ [TRUSTED_ID]: TRUSTED }));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ENVS = {
  plain: {},
  enforce: { TRUSTED_DOCUMENTS: manifest, TRUSTED_DOCUMENTS_MODE: 'enforce' },
  // 0.01 per hour: one check fits, two opus checks do not.
  budget: { COST_BUDGET_USD_PER_HOUR: '0.01' },
};

it('node parses QUERY (22.2 and later)', () => {
  expect(METHODS).toContain('QUERY');
});

describe.each([
  ['the fast path first', 'true'],
  ['Yoga only (HTTP_FAST_PATH=false)', 'false'],
])('QUERY answers as POST, %s', (_lane, fastPath) => {
  const gateways = new Map<string, Promise<TestGateway>>();
  const gatewayFor = (env: keyof typeof ENVS) => {
    let started = gateways.get(env);
    if (started === undefined) {
      scripted.upstream.route('POST', '/api/v1/check', { body: nullBody() });
      scripted.upstream.route('GET', '/api/v1/pi', { body: piBody() });
      started = scripted.gateway({ HTTP_FAST_PATH: fastPath, RESPONSE_CACHE: 'false', ...ENVS[env] });
      gateways.set(env, started);
    }
    return started;
  };
  let n = 0;

  describe.each([GRAPHQL_RESPONSE, JSON_TYPE])('Accept: %s', (accept) => {
    it.each(CASES)('$name', async (c) => {
      const g = await gatewayFor(c.env ?? 'plain');
      const port = Number(new URL(g.url).port);
      const exchange = (method: string) => {
        // Each request its own id (both answers carry the one sent) and, with a budget, its own key:
        // the two start from the same spend.
        const headers: Record<string, string> = {
          'content-type': JSON_TYPE,
          accept,
          'x-request-id': `pair-${fastPath}-${++n}`,
          ...(c.env === 'budget' ? { 'x-api-key': `sk-query-${randomUUID()}` } : {}),
          ...c.headers,
        };
        return sendRaw(port, { method, headers, body: c.body });
      };
      const post = await exchange('POST');
      const query = await exchange('QUERY');
      const expected = comparable(post);
      expected.headers['x-request-id'] = query.headers['x-request-id'];
      expect(comparable(query)).toEqual(expected);
    });
  });

  it('the fast path served QUERY requests itself (or none, when it is off)', async () => {
    const g = await gatewayFor('plain');
    const port = Number(new URL(g.url).port);
    const before = g.app.fastPath.served.fast;
    const answer = await sendRaw(port, {
      method: 'QUERY',
      headers: { 'content-type': JSON_TYPE, accept: GRAPHQL_RESPONSE },
      body: q('{ __typename }'),
    });
    expect(answer.status).toBe(200);
    expect(g.app.fastPath.served.fast - before).toBe(fastPath === 'true' ? 1 : 0);
  });

  it('a mutation by QUERY is 405 with Allow: POST (the same document by POST is not refused so)', async () => {
    const g = await gatewayFor('plain');
    const port = Number(new URL(g.url).port);
    const headers = { 'content-type': JSON_TYPE, accept: GRAPHQL_RESPONSE };
    const body = q('mutation M { x }');
    const query = await sendRaw(port, { method: 'QUERY', headers, body });
    expect(query.status).toBe(405);
    expect(query.headers.allow).toBe('POST');
    expect(JSON.parse(query.body).errors[0].extensions.code).toBe('METHOD_NOT_ALLOWED');
    expect((await sendRaw(port, { method: 'POST', headers, body })).status).not.toBe(405);
  });

  it.each(['PUT', 'DELETE', 'PATCH'])('%s is 405 with Allow: GET, POST, QUERY', async (method) => {
    const g = await gatewayFor('plain');
    const answer = await fetch(g.url, {
      method,
      headers: { 'content-type': JSON_TYPE, accept: GRAPHQL_RESPONSE },
      body: q('{ __typename }'),
    });
    expect(answer.status).toBe(405);
    expect(answer.headers.get('allow')).toBe('GET, POST, QUERY');
    expect(
      ((await answer.json()) as { errors: Array<{ extensions: { code: string } }> }).errors[0]?.extensions
        .code,
    ).toBe('METHOD_NOT_ALLOWED');
  });
});

describe('CORS (CORS_ORIGINS set)', () => {
  it('a preflight for QUERY names it in Access-Control-Allow-Methods; the QUERY then answers as POST', async () => {
    const origin = 'https://app.example';
    const g = await scripted.gateway({ CORS_ORIGINS: origin });
    const port = Number(new URL(g.url).port);
    const preflight = await sendRaw(port, {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'QUERY',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(preflight.status).toBeLessThan(300);
    expect(String(preflight.headers['access-control-allow-methods']).split(/,\s*/)).toContain('QUERY');
    const headers = { origin, 'content-type': JSON_TYPE, accept: GRAPHQL_RESPONSE, 'x-request-id': 'cors' };
    const body = q('{ __typename }');
    const post = await sendRaw(port, { method: 'POST', headers, body });
    const query = await sendRaw(port, { method: 'QUERY', headers, body });
    expect(query.status).toBe(200);
    expect(query.headers['access-control-allow-origin']).toBe(origin);
    expect(comparable(query)).toEqual(comparable(post));
  });
});
