/**
 * Trusted documents and persisted queries (docs/contract.md, same heading) against a real gateway in
 * front of a scripted upstream that counts its calls: the manifest checked at start, `documentId` by POST
 * and GET on both paths, the three modes, and APQ with the real client libraries (Apollo Client's
 * PersistedQueryLink, urql's persistedExchange), unchanged.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, gql as apolloGql, HttpLink, InMemoryCache } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { Client, fetchExchange, gql as urqlGql } from '@urql/core';
import { persistedExchange } from '@urql/exchange-persisted';
import { validate } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadManifest } from '../../src/gateway/request/trusted-documents.js';
import { schema } from '../../src/gateway/schema/index.js';
import type { TestGateway } from '../support/gateway.js';
import { capturedLogger, LEVEL } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody } from '../support/upstream-bodies.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const TRUSTED = 'query Trusted($value: JSON) { isNull(value: $value) { __typename } }';
const OTHER = 'query Other { isNull(value: 2) { __typename ... on NullVerdict { isNull } } }';
const TRUSTED_ID = sha256(TRUSTED);

const dir = mkdtempSync(join(tmpdir(), 'trusted-documents-'));
const manifestFile = join(dir, 'persisted-documents.json');
writeFileSync(manifestFile, JSON.stringify({ [TRUSTED_ID]: TRUSTED }));

const scripted = useScriptedGateways();
const { gateway } = scripted;
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeEach(() => {
  scripted.upstream.reset();
  scripted.upstream.route('POST', '/api/v1/check', { body: nullBody({ is_null: false }) });
});

interface Answer {
  status: number;
  body: { data?: unknown; errors?: Array<{ message: string; extensions?: { code?: string } }> };
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

async function get(url: string, params: Record<string, string>): Promise<Answer> {
  const response = await fetch(`${url}?${new URLSearchParams(params)}`, {
    headers: { accept: 'application/graphql-response+json' },
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

const checks = () => scripted.upstream.count('POST', '/api/v1/check');

describe('the manifest at start', () => {
  const check = (entries: Record<string, string> | string) => {
    const file = join(dir, `m-${Math.random()}.json`);
    writeFileSync(file, typeof entries === 'string' ? entries : JSON.stringify(entries));
    return () => loadManifest(file, (document) => validate(schema, document));
  };

  it('accepts a good manifest', () => {
    expect(check({ [TRUSTED_ID]: TRUSTED })().get(TRUSTED_ID)).toBe(TRUSTED);
  });
  it('refuses a hash that is not its document sha256, naming the entry', () => {
    expect(check({ [sha256('x')]: TRUSTED })).toThrow(
      /TRUSTED_DOCUMENTS=.*entry [0-9a-f]{12}…: the key is not the sha256 of its document/,
    );
  });
  it('refuses a document that does not validate', () => {
    const bad = '{ nope }';
    expect(check({ [sha256(bad)]: bad })).toThrow(/not valid here \(Cannot query field "nope"/);
  });
  it('refuses a file that is not JSON', () => {
    expect(check('{')).toThrow(/not JSON/);
  });
  it('stops the gateway start with that line (enforce without a manifest too)', async () => {
    await expect(gateway({ TRUSTED_DOCUMENTS_MODE: 'enforce' })).rejects.toThrow(
      /TRUSTED_DOCUMENTS_MODE=enforce needs TRUSTED_DOCUMENTS/,
    );
  });
});

describe.each([
  ['the fast path', {}],
  ["Yoga's handler", { HTTP_FAST_PATH: 'false' }],
])('enforce mode on %s', (_name, env) => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await gateway({ ...env, TRUSTED_DOCUMENTS: manifestFile, TRUSTED_DOCUMENTS_MODE: 'enforce' });
  });

  it.each([`sha256:${TRUSTED_ID}`, TRUSTED_ID])(
    'runs a manifest document by documentId %s (POST)',
    async (id) => {
      const answer = await post(g.url, { documentId: id, variables: { value: 'a' } });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ data: { isNull: { __typename: 'NullVerdict' } } });
      expect(checks()).toBe(1);
    },
  );

  it('runs it by documentId in a GET query string', async () => {
    const answer = await get(g.url, { documentId: `sha256:${TRUSTED_ID}`, variables: '{"value":"b"}' });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ data: { isNull: { __typename: 'NullVerdict' } } });
  });

  it('runs it by identical text', async () => {
    const answer = await post(g.url, { query: TRUSTED, variables: { value: 'c' } });
    expect(answer.status).toBe(200);
    expect(checks()).toBe(1);
  });

  it('refuses any other document with PERSISTED_QUERY_NOT_IN_LIST, calling nothing', async () => {
    const answer = await post(g.url, { query: OTHER });
    expect(answer.status).toBe(403);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_IN_LIST');
    expect(answer.body.errors?.[0]?.message).toMatch(/TRUSTED_DOCUMENTS_MODE=enforce/);
    expect(answer.body.data).toBeUndefined();
    expect(checks()).toBe(0);
  });

  it('refuses an unknown id, and registers nothing from an APQ request', async () => {
    const unknown = await post(g.url, { documentId: sha256(OTHER) });
    expect(unknown.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_IN_LIST');
    const apq = await post(g.url, {
      query: OTHER,
      extensions: { persistedQuery: { version: 1, sha256Hash: sha256(OTHER) } },
    });
    expect(apq.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_IN_LIST');
    const again = await post(g.url, { documentId: sha256(OTHER) });
    expect(again.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_IN_LIST');
    expect(checks()).toBe(0);
  });

  it('refuses a malformed documentId with BAD_USER_INPUT', async () => {
    const answer = await post(g.url, { documentId: 'sha256:xyz' });
    expect(answer.status).toBe(400);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  });

  it("opens GraphiQL with the manifest's documents as its tabs (they run as shown)", async () => {
    const page = await (await fetch(g.url, { headers: { accept: 'text/html' } })).text();
    const json = /<script type="application\/json" id="graphiql-options">(.*?)<\/script>/s.exec(page)?.[1];
    const options = JSON.parse((json ?? '{}').replaceAll('\\u003c', '<')) as {
      defaultTabs?: Array<{ query: string }>;
    };
    expect(options.defaultTabs?.map((t) => t.query)).toEqual([TRUSTED]);
  });

  it('answers introspection (GraphiQL and codegen need the schema)', async () => {
    const answer = await post(g.url, { query: '{ __schema { queryType { name } } }' });
    expect(answer.body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
  });
});

describe('log mode (the default with a manifest)', () => {
  it('runs every operation, counts and logs once each document outside the manifest', async () => {
    const log = capturedLogger('info');
    const g = await gateway({ TRUSTED_DOCUMENTS: manifestFile }, { logger: log.logger });
    const metric = async () => {
      const text = await (await fetch(`${g.origin}/metrics`)).text();
      return Number(/^gateway_untrusted_operations_total (\d+)/m.exec(text)?.[1] ?? 'NaN');
    };
    expect(await metric()).toBe(0);
    expect((await post(g.url, { query: TRUSTED, variables: { value: 1 } })).status).toBe(200);
    expect(await metric()).toBe(0);
    for (let i = 0; i < 3; i++) expect((await post(g.url, { query: OTHER })).status).toBe(200);
    expect(await metric()).toBe(3);
    // Documents the fast path reads and then hands to Yoga's handler (here: invalid ones, which Yoga
    // answers with its errors) are counted once too, not once on each path.
    for (let i = 0; i < 2; i++)
      expect((await post(g.url, { query: '{ notAField }' })).body.errors?.[0]?.extensions?.code).toBe(
        'GRAPHQL_VALIDATION_FAILED',
      );
    expect(await metric()).toBe(5);
    expect(checks()).toBe(4);
    // Counted five times, logged once per document: OTHER and the invalid one, never the trusted one.
    // A warning, with the id and the text an operator needs to add the document or chase its sender.
    const lines = log.lines.filter(
      (line) => line.msg === 'operation outside the trusted documents (TRUSTED_DOCUMENTS_MODE=log)',
    );
    expect(lines.map(({ level, documentId, document }) => ({ level, documentId, document }))).toEqual([
      { level: LEVEL.warn, documentId: `sha256:${sha256(OTHER)}`, document: OTHER },
      { level: LEVEL.warn, documentId: `sha256:${sha256('{ notAField }')}`, document: '{ notAField }' },
    ]);
  });
});

describe('automatic persisted queries (off mode), with the real client libraries', () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await gateway({});
  });

  it.each([
    ['does not parse', 'query Broken { isNull(value: 1) {', 400],
    ['fails validation', 'query Invalid { notAField }', 422],
    [
      'is over a limit (MAX_DEPTH)',
      '{ __type(name: "Query") { fields { type { fields { type { fields { type { fields { type { name } } } } } } } } } }',
      422,
    ],
  ])(
    'a document that %s, sent with its hash, is answered with its error and not registered',
    async (_what, query, status) => {
      const hash = sha256(query);
      const sent = await post(g.url, {
        query,
        extensions: { persistedQuery: { version: 1, sha256Hash: hash } },
      });
      expect(sent.status).toBe(status);
      expect(sent.body.errors?.[0]?.extensions?.code).not.toBe('PERSISTED_QUERY_NOT_FOUND');
      // The hash alone is still unknown: nothing was registered (Apollo Server's rule).
      const alone = await post(g.url, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
      expect(alone.status).toBe(404);
      expect(alone.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    },
  );

  it('APQ_MAX_DOCUMENT_BYTES: a larger document runs but is not registered; one within it is', async () => {
    const bounded = await gateway({ APQ_MAX_DOCUMENT_BYTES: '100' });
    const large = `query Large { isNull(value: 13) { __typename } } # ${'x'.repeat(100)}`;
    const small = 'query Small { isNull(value: 14) { __typename } }';
    for (const [query, registered] of [
      [large, false],
      [small, true],
    ] as const) {
      const hash = sha256(query);
      const run = await post(bounded.url, {
        query,
        extensions: { persistedQuery: { version: 1, sha256Hash: hash } },
      });
      expect(run.body.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
      const alone = await post(bounded.url, {
        extensions: { persistedQuery: { version: 1, sha256Hash: hash } },
      });
      expect(alone.status, query.slice(0, 11)).toBe(registered ? 200 : 404);
    }
    expect(
      await metricValue(bounded.app.metrics.registry, 'gateway_apq_documents_dropped_total', {
        reason: 'size',
      }),
    ).toBe(1);
  });

  it('APQ_MAX_DOCUMENTS_PER_CLIENT bounds what one client registers; another client still registers', async () => {
    const bounded = await gateway({ APQ_MAX_DOCUMENTS_PER_CLIENT: '2' });
    const register = (query: string, key: string) =>
      post(
        bounded.url,
        { query, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } },
        { 'x-api-key': key },
      );
    const known = async (query: string) =>
      (await post(bounded.url, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } }))
        .status !== 404;
    const docs = [1, 2, 3].map((i) => `query Bounded${i} { isNull(value: ${i}) { __typename } }`);
    for (const query of docs) expect((await register(query, 'sk-busy')).body.data).toBeDefined();
    // The third ran, but was not stored: one client cannot fill the store.
    expect(await Promise.all(docs.map(known))).toEqual([true, true, false]);
    const other = 'query BoundedOther { isNull(value: 9) { __typename } }';
    await register(other, 'sk-quiet');
    expect(await known(other)).toBe(true);
  });

  it('APQ_MAX_DOCUMENTS_PER_CLIENT: the key "free" is no client of its own: with no key, anonymous callers count by their address', async () => {
    // Every test client comes from 127.0.0.1: one anonymous client, whichever way it says "free".
    const bounded = await gateway({ APQ_MAX_DOCUMENTS_PER_CLIENT: '2' });
    const docs = [1, 2, 3].map((i) => `query Anonymous${i} { isNull(value: ${20 + i}) { __typename } }`);
    const senders: Array<Record<string, string>> = [
      { authorization: 'Bearer free' },
      {},
      { 'x-api-key': 'free' },
    ];
    for (const [index, query] of docs.entries()) {
      const sent = await post(
        bounded.url,
        { query, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } },
        senders[index],
      );
      expect(sent.body.data).toBeDefined();
    }
    const known = async (query: string) =>
      (await post(bounded.url, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } }))
        .status !== 404;
    expect(await Promise.all(docs.map(known))).toEqual([true, true, false]);
    expect(
      await metricValue(bounded.app.metrics.registry, 'gateway_apq_documents_dropped_total', {
        reason: 'owner',
      }),
    ).toBe(1);
  });

  it('APQ=false: a hash with its text runs but registers nothing; a hash alone stays unknown', async () => {
    const off = await gateway({ APQ: 'false' });
    const query = 'query ApqOff { isNull(value: 12) { __typename } }';
    const hash = sha256(query);
    const run = await post(off.url, {
      query,
      extensions: { persistedQuery: { version: 1, sha256Hash: hash } },
    });
    expect(run.body).toEqual({
      data: { isNull: { __typename: 'NullVerdict' } },
      extensions: expect.anything(),
    });
    const alone = await post(off.url, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(alone.status).toBe(404);
    expect(alone.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    // The same on the default gateway registers it.
    await post(g.url, { query, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    const known = await post(g.url, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(known.body.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
  });

  it('a hash alone is PERSISTED_QUERY_NOT_FOUND; hash and text register it; a wrong hash is BAD_USER_INPUT', async () => {
    const query = 'query Apq1 { isNull(value: 11) { __typename } }';
    const hash = sha256(query);
    const miss = await post(g.url, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
    expect(miss.status).toBe(404);
    expect(miss.body.errors?.[0]).toMatchObject({
      message: 'PersistedQueryNotFound',
      extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' },
    });
    const wrong = await post(g.url, {
      query,
      extensions: { persistedQuery: { version: 1, sha256Hash: sha256('x') } },
    });
    expect(wrong.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const register = await post(g.url, {
      query,
      extensions: { persistedQuery: { version: 1, sha256Hash: hash } },
    });
    expect(register.status).toBe(200);
    const hit = await get(g.url, {
      extensions: JSON.stringify({ persistedQuery: { version: 1, sha256Hash: hash } }),
    });
    expect(hit.status).toBe(200);
    expect(hit.body).toMatchObject({ data: { isNull: { __typename: 'NullVerdict' } } });
    const byId = await post(g.url, { documentId: `sha256:${hash}` });
    expect(byId.status).toBe(200);
  });

  it('APQ documents have a store of their own: registrations neither count as cache entries nor evict cached answers', async () => {
    const cached = await gateway({ RESPONSE_CACHE: 'true', RESPONSE_CACHE_MAX_ENTRIES: '2' });
    const isNull = { query: 'query Cached { isNull(value: 7) { __typename } }' };
    expect((await post(cached.url, isNull)).status).toBe(200);
    expect(checks()).toBe(1);
    const entries = async () =>
      Number(/^gateway_response_cache_entries (\d+)$/m.exec(await cached.app.metrics.render())?.[1]);
    expect(await entries()).toBe(1);
    // Five registrations of documents that call nothing: with the cache's store they filled its two
    // places and pushed the cached answer out.
    for (let i = 0; i < 5; i++) {
      const query = `query Registered${i} { __typename }`;
      const registered = await post(cached.url, {
        query,
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } },
      });
      expect(registered.body).toEqual({ data: { __typename: 'Query' } });
    }
    expect(await entries()).toBe(1);
    expect((await post(cached.url, isNull)).status).toBe(200);
    expect(checks()).toBe(1);
    // And each registration is still there, by hash alone.
    const again = await post(cached.url, {
      extensions: { persistedQuery: { version: 1, sha256Hash: sha256('query Registered0 { __typename }') } },
    });
    expect(again.body).toEqual({ data: { __typename: 'Query' } });
  });

  it("Apollo Client's PersistedQueryLink: a miss, the text once, then hashes only", async () => {
    const bodies: Array<Record<string, unknown>> = [];
    const counting: typeof fetch = async (input, init) => {
      if (typeof init?.body === 'string') bodies.push(JSON.parse(init.body) as Record<string, unknown>);
      return fetch(input, init);
    };
    const client = new ApolloClient({
      link: new PersistedQueryLink({ sha256: async (text) => sha256(text) }).concat(
        new HttpLink({ uri: g.url, fetch: counting }),
      ),
      cache: new InMemoryCache(),
    });
    const query = apolloGql`query ApolloApq($value: JSON) { isNull(value: $value) { __typename } }`;
    const first = await client.query({
      query,
      variables: { value: 'apollo-1' },
      fetchPolicy: 'network-only',
    });
    expect(first.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
    const second = await client.query({
      query,
      variables: { value: 'apollo-2' },
      fetchPolicy: 'network-only',
    });
    expect(second.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
    // hash only (miss), hash + text (registers), hash only (hit)
    expect(bodies.map((b) => typeof b.query === 'string')).toEqual([false, true, false]);
    expect(checks()).toBe(2);
  });

  it("urql's persistedExchange: the same round trip, unchanged", async () => {
    const bodies: Array<Record<string, unknown>> = [];
    const counting: typeof fetch = async (input, init) => {
      if (typeof init?.body === 'string') bodies.push(JSON.parse(init.body) as Record<string, unknown>);
      return fetch(input, init);
    };
    const client = new Client({
      url: g.url,
      fetch: counting,
      exchanges: [persistedExchange({ preferGetForPersistedQueries: false }), fetchExchange],
      requestPolicy: 'network-only',
    });
    const query = urqlGql`query UrqlApq($value: JSON) { isNull(value: $value) { __typename } }`;
    const first = await client.query(query, { value: 'urql-1' }).toPromise();
    expect(first.error).toBeUndefined();
    expect(first.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
    const second = await client.query(query, { value: 'urql-2' }).toPromise();
    expect(second.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
    expect(bodies.map((b) => typeof b.query === 'string')).toEqual([false, true, false]);
    expect(checks()).toBe(2);
  });
});

describe('inside a batch (BATCH_LIMIT)', () => {
  it('enforce: each operation of a batch is resolved and checked as if it came alone', async () => {
    const g = await gateway({
      TRUSTED_DOCUMENTS: manifestFile,
      TRUSTED_DOCUMENTS_MODE: 'enforce',
      BATCH_LIMIT: '4',
    });
    const response = await fetch(g.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify([
        { documentId: `sha256:${TRUSTED_ID}`, variables: { value: 'batch-1' } },
        { query: OTHER },
        { query: TRUSTED, variables: { value: 'batch-2' } },
        { documentId: `sha256:${sha256(OTHER)}` },
      ]),
    });
    const answers = (await response.json()) as Answer['body'][];
    expect(answers.map((a) => a.errors?.[0]?.extensions?.code ?? 'ok')).toEqual([
      'ok',
      'PERSISTED_QUERY_NOT_IN_LIST',
      'ok',
      'PERSISTED_QUERY_NOT_IN_LIST',
    ]);
    expect(answers[0]?.data).toEqual({ isNull: { __typename: 'NullVerdict' } });
    // Only the two trusted operations called the upstream.
    expect(checks()).toBe(2);
  });

  it('log: each untrusted operation of a batch is counted once', async () => {
    const g = await gateway({ TRUSTED_DOCUMENTS: manifestFile, BATCH_LIMIT: '4' });
    const untrusted = async () =>
      Number(
        /^gateway_untrusted_operations_total (\d+)/m.exec(
          await (await fetch(`${g.origin}/metrics`)).text(),
        )?.[1],
      );
    const before = await untrusted();
    const response = await fetch(g.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify([
        { query: OTHER },
        { query: TRUSTED, variables: { value: 'b' } },
        { query: OTHER },
      ]),
    });
    const answers = (await response.json()) as Answer['body'][];
    expect(answers.every((a) => a.errors === undefined)).toBe(true);
    expect((await untrusted()) - before).toBe(2);
  });
});
