/**
 * The HTTP status table of docs/contract.md (Errors), measured over real HTTP on both lanes (the
 * fast path first, and Yoga only with HTTP_FAST_PATH=false): the 2026 GraphQL-over-HTTP draft for
 * application/graphql-response+json, the statuses legacy application/json clients always had; then
 * Apollo Client, urql and graphql-request, which must still hand the errors to the application.
 */
import { ApolloClient, gql as apolloGql, HttpLink, InMemoryCache } from '@apollo/client';
import { Client, fetchExchange, gql as urqlGql } from '@urql/core';
import { ClientError, GraphQLClient } from 'graphql-request';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const GRAPHQL_RESPONSE = 'application/graphql-response+json';
const JSON_TYPE = 'application/json';

interface Case {
  situation: string;
  request: {
    method?: string;
    path?: string;
    contentType?: string | null;
    body?: string;
    headers?: Record<string, string>;
  };
  /** [application/graphql-response+json, application/json] */
  status: [number, number];
}

const post = (body: unknown) => JSON.stringify(body);

const CASES: Case[] = [
  { situation: 'data, no errors', request: { body: post({ query: '{ __typename }' }) }, status: [200, 200] },
  {
    situation: 'data and a field error (partial results)',
    request: { body: post({ query: '{ a: isNull { __typename } b: __typename }' }) },
    status: [294, 200],
  },
  {
    situation: 'data null and an error',
    request: { body: post({ query: 'mutation { x }' }) },
    status: [294, 200],
  },
  { situation: 'the body is not JSON', request: { body: '{"query": ' }, status: [400, 400] },
  {
    situation: 'the document does not parse',
    request: { body: post({ query: '{ pi( }' }) },
    status: [400, 200],
  },
  {
    situation: 'the document does not parse (GET)',
    request: { method: 'GET', path: `?query=${encodeURIComponent('{ pi( }')}` },
    status: [400, 200],
  },
  { situation: 'no query', request: { body: post({ variables: {} }) }, status: [422, 200] },
  {
    situation: 'variables not an object',
    request: { body: post({ query: '{ __typename }', variables: 5 }) },
    status: [422, 400],
  },
  {
    situation: 'the document fails validation',
    request: { body: post({ query: '{ notAField }' }) },
    status: [422, 200],
  },
  {
    situation: 'the document fails validation (GET)',
    request: { method: 'GET', path: `?query=${encodeURIComponent('{ notAField }')}` },
    status: [422, 200],
  },
  {
    situation: 'the operation cannot be determined',
    request: { body: post({ query: 'query A { __typename } query B { __typename }' }) },
    status: [422, 400],
  },
  {
    situation: 'variables cannot be coerced',
    request: {
      body: post({ query: 'query ($d: Int) { pi(digits: $d) { __typename } }', variables: { d: 'x' } }),
    },
    status: [422, 400],
  },
  {
    situation: 'refused by the cost cap (BUDGET_EXCEEDED)',
    request: {
      body: post({ query: '{ isNull(value: 1, model: NULL_X_OPUS) { __typename } }' }),
      headers: { 'x-max-cost-usd': '0.0001' },
    },
    status: [400, 200],
  },
  {
    situation: 'an unknown persisted document (PERSISTED_QUERY_NOT_FOUND)',
    request: { body: post({ documentId: `sha256:${'0'.repeat(64)}` }) },
    status: [404, 404],
  },
  {
    situation: 'an unsupported Content-Type (before the CSRF check)',
    request: { contentType: 'text/plain', body: '{ __typename }' },
    status: [415, 415],
  },
  {
    situation: 'no acceptable media type in Accept',
    request: { body: post({ query: '{ __typename }' }), headers: { accept: 'text/html' } },
    status: [406, 406],
  },
  {
    situation: 'a body larger than MAX_REQUEST_BODY_BYTES',
    request: { body: post({ query: `{ __typename } #${'x'.repeat(2_100_000)}` }) },
    status: [413, 413],
  },
  {
    situation: 'a method other than GET, POST and QUERY',
    request: { method: 'PUT', body: post({ query: '{ __typename }' }) },
    status: [405, 405],
  },
  {
    situation: 'a URI longer than 8 KiB',
    request: {
      method: 'GET',
      path: `?query=${encodeURIComponent('{ __typename }')}&pad=${'a'.repeat(12_000)}`,
    },
    status: [414, 414],
  },
  {
    situation: 'a URI of 100 KB (refused by the HTTP parser)',
    request: {
      method: 'GET',
      path: `?query=${encodeURIComponent('{ __typename }')}&pad=${'a'.repeat(100_000)}`,
    },
    status: [414, 414],
  },
  {
    situation: 'headers too large',
    request: {
      method: 'GET',
      path: `?query=${encodeURIComponent('{ __typename }')}`,
      headers: { 'x-pad': 'b'.repeat(40_000) },
    },
    status: [431, 431],
  },
];

async function send(url: string, c: Case, accept: string): Promise<{ status: number; allow: string | null }> {
  const { method = 'POST', path = '', contentType = 'application/json', body, headers = {} } = c.request;
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { accept, ...(contentType === null ? {} : { 'content-type': contentType }), ...headers },
    body: method === 'GET' ? undefined : body,
  });
  await response.arrayBuffer();
  return { status: response.status, allow: response.headers.get('allow') };
}

describe.each([
  ['the fast path first', 'true'],
  ['Yoga only (HTTP_FAST_PATH=false)', 'false'],
])('the status table (docs/contract.md, Errors), %s', (_lane, fastPath) => {
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await startTestGateway({ env: { HTTP_FAST_PATH: fastPath } });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  it.each(CASES)('$situation', async (c) => {
    const [draft, legacy] = c.status;
    expect((await send(gateway.url, c, GRAPHQL_RESPONSE)).status, GRAPHQL_RESPONSE).toBe(draft);
    const old = await send(gateway.url, c, JSON_TYPE);
    expect(old.status, JSON_TYPE).toBe(legacy);
    if (legacy === 405) expect(old.allow).toBe('GET, POST, QUERY');
  });

  it('the fast path served its part (or none, when it is off)', () => {
    expect(gateway.app.fastPath.served.fast > 0).toBe(fastPath === 'true');
  });
});

describe('real clients still hand the errors to the application', () => {
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await startTestGateway();
  });
  afterAll(async () => {
    await gateway?.close();
  });

  const PARTIAL = '{ a: isNull { __typename } b: __typename }';
  const INVALID = '{ notAField }';

  it('Apollo Client: a 294 gives data and the field error; a 422 gives the validation error', async () => {
    const client = new ApolloClient({
      link: new HttpLink({ uri: gateway.url }),
      cache: new InMemoryCache(),
    });
    const options = { errorPolicy: 'all', fetchPolicy: 'no-cache' } as const;
    const partial = await client.query({ query: apolloGql(PARTIAL), ...options });
    expect(partial.data).toEqual({ a: null, b: 'Query' });
    expect(JSON.stringify(partial.error)).toContain('UNDEFINED_VALUE');
    const invalid = await client.query({ query: apolloGql(INVALID), ...options });
    expect(invalid.error?.message).toMatch(/Cannot query field "notAField"/);
  });

  it('urql: a 294 gives data and the field error; a 422 gives the validation error', async () => {
    const client = new Client({ url: gateway.url, exchanges: [fetchExchange], preferGetMethod: false });
    const partial = await client.query(urqlGql(PARTIAL), {}).toPromise();
    expect(partial.data).toEqual({ a: null, b: 'Query' });
    expect(partial.error?.graphQLErrors[0]?.extensions?.code).toBe('UNDEFINED_VALUE');
    const invalid = await client.query(urqlGql(INVALID), {}).toPromise();
    expect(invalid.error?.graphQLErrors[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });

  it('graphql-request: a 294 gives data and the field error; a 422 throws a ClientError with it', async () => {
    const client = new GraphQLClient(gateway.url, { errorPolicy: 'all' });
    const partial = await client.rawRequest<{ a: null; b: string }>(PARTIAL);
    expect(partial.status).toBe(294);
    expect(partial.data).toEqual({ a: null, b: 'Query' });
    expect(partial.errors?.[0]?.extensions?.code).toBe('UNDEFINED_VALUE');
    const strict = new GraphQLClient(gateway.url);
    const thrown = await strict.request(INVALID).catch((error: unknown) => error);
    expect(thrown).toBeInstanceOf(ClientError);
    expect((thrown as ClientError).response.status).toBe(422);
    expect((thrown as ClientError).response.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});
