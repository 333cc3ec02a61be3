/**
 * Batching (docs/contract.md, Delivery): off by default, as in Yoga and Apollo Server; BATCH_LIMIT=n
 * accepts a JSON array of at most n operations in one POST, answered with an array. Each operation is
 * checked and billed as if it came alone (validation, limits, budget reservation); X-Max-Cost-Usd and
 * MAX_UPSTREAM_CALLS count the batch as a whole. The client is Apollo Client's BatchHttpLink, the
 * real package, against a real gateway in front of an upstream that counts what reaches it.
 */
import { ApolloClient, ApolloLink, gql as apolloGql, type DocumentNode, InMemoryCache } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { map } from 'rxjs';
import { beforeEach, describe, expect, it } from 'vitest';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody } from '../support/upstream-bodies.js';

interface RawResult {
  data?: Record<string, unknown> | null;
  errors?: Array<{ message: string; extensions?: Record<string, unknown> }>;
  extensions?: { cost?: { gpuCostUsd: number; estimatedCostUsd?: number } };
}

const scripted = useScriptedGateways();
const { gateway } = scripted;
beforeEach(() => {
  scripted.upstream.reset();
  scripted.upstream.route('POST', '/api/v1/check', (req) => ({
    body: nullBody({ gpu_cost_usd: 0.004, is_null: (req.body as { value?: unknown }).value === null }),
  }));
});

/**
 * An Apollo Client over BatchHttpLink whose every POST is counted, and a link before it that keeps
 * each operation's raw result (errors and extensions included, which the client's own result drops).
 */
function apollo(url: string, headers: Record<string, string> = {}) {
  const posts: unknown[][] = [];
  const raw = new Map<string, RawResult>();
  const countingFetch: typeof fetch = async (input, init) => {
    posts.push(JSON.parse(String(init?.body)) as unknown[]);
    return fetch(input, init);
  };
  const keep = new ApolloLink((operation, forward) =>
    forward(operation).pipe(
      map((result) => {
        raw.set(operation.operationName ?? '', result as RawResult);
        return result;
      }),
    ),
  );
  const client = new ApolloClient({
    link: ApolloLink.from([
      keep,
      new BatchHttpLink({ uri: url, headers, fetch: countingFetch, batchMax: 10, batchInterval: 20 }),
    ]),
    cache: new InMemoryCache(),
  });
  const query = (document: DocumentNode) =>
    client.query({ query: document, fetchPolicy: 'no-cache', errorPolicy: 'all' });
  return { client, posts, raw, query };
}

const answered = (result: { data?: unknown }) =>
  (result.data as { isNull?: unknown } | undefined)?.isNull != null;

const check = (name: string, value: number) =>
  apolloGql(`query ${name} { isNull(value: ${value}) { __typename ... on NullVerdict { isNull } } }`);

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify(body),
  });

describe('BATCH_LIMIT unset (off, the default)', () => {
  it('an array is refused with a clear coded 422 (400 for application/json), handed by the fast path to Yoga, calling nothing', async () => {
    const g = await gateway({});
    expect(g.config.limits.batchLimit).toBe(0);
    const before = g.app.fastPath.served.handedOver;
    const response = await post(g.url, [{ query: '{ isNull(value: 1) { __typename } }' }]);
    // Not a well-formed request for this gateway: 422 under application/graphql-response+json.
    expect(response.status).toBe(
      response.headers.get('content-type')?.startsWith('application/json') ? 400 : 422,
    );
    const body = (await response.json()) as RawResult;
    expect(body.errors?.[0]).toMatchObject({
      message: 'Batching is not supported.',
      extensions: { code: 'BAD_REQUEST' },
    });
    expect(g.app.fastPath.served.handedOver).toBe(before + 1);
    expect(scripted.upstream.count()).toBe(0);
  });
});

describe('BATCH_LIMIT=3', () => {
  it("Apollo Client's BatchHttpLink: three queries in one POST, answered as an array, each with its own data, errors and extensions", async () => {
    const g = await gateway({ BATCH_LIMIT: '3' });
    const { posts, raw, query } = apollo(g.url);
    const [a, b, c] = await Promise.all([
      query(check('A', 1)),
      query(check('B', 2)),
      // Not valid: an unknown field. Refused on its own; its neighbours run.
      query(apolloGql('query C { isNull(value: 3) { nope } }')),
    ]);
    expect(posts).toHaveLength(1);
    expect(posts[0]).toHaveLength(3);
    expect(a.data).toEqual({ isNull: { __typename: 'NullVerdict', isNull: false } });
    expect(b.data).toEqual({ isNull: { __typename: 'NullVerdict', isNull: false } });
    expect(c.data).toBeUndefined();
    expect(raw.get('C')?.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    // Each billed as if it came alone.
    for (const name of ['A', 'B'])
      expect(raw.get(name)?.extensions?.cost).toMatchObject({ gpuCostUsd: 0.004, upstreamCalls: 1 });
    expect(raw.get('C')?.extensions).toBeUndefined();
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(2);
  });

  it('more operations than BATCH_LIMIT: a clear coded 4xx, nothing called', async () => {
    const g = await gateway({ BATCH_LIMIT: '3' });
    const operation = { query: '{ isNull(value: 1) { __typename } }' };
    const response = await post(g.url, [operation, operation, operation, operation]);
    expect(response.status).toBe(413);
    const body = (await response.json()) as RawResult;
    expect(body.errors?.[0]).toMatchObject({
      message: 'Batching is limited to 3 operations per request.',
      extensions: { code: 'BAD_REQUEST' },
    });
    expect(scripted.upstream.count()).toBe(0);
  });

  it('X-Max-Cost-Usd caps the batch as a whole: operations that do not fit, in order, are refused and call nothing', async () => {
    const g = await gateway({ BATCH_LIMIT: '3' });
    // Each check is estimated at about 0.004: two fit in 0.009, three do not.
    const { posts, raw, query } = apollo(g.url, { 'x-max-cost-usd': '0.009' });
    const results = await Promise.all([query(check('P', 1)), query(check('Q', 2)), query(check('R', 3))]);
    expect(posts).toHaveLength(1);
    expect(results.map((r) => answered(r))).toEqual([true, true, false]);
    expect(raw.get('R')?.errors?.[0]?.extensions).toMatchObject({
      code: 'BUDGET_EXCEEDED',
      maxCostUsd: 0.009,
    });
    expect(raw.get('R')?.errors?.[0]?.message).toMatch(/whole batch/);
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(2);
    // The same operations sent one per request are each under the cap.
    const alone = await post(
      g.url,
      { query: '{ isNull(value: 4) { __typename } }' },
      { 'x-max-cost-usd': '0.009' },
    );
    expect(((await alone.json()) as RawResult).errors).toBeUndefined();
  });

  it('MAX_UPSTREAM_CALLS counts across the batch', async () => {
    const g = await gateway({ BATCH_LIMIT: '3', MAX_UPSTREAM_CALLS: '3' });
    const { raw, query } = apollo(g.url);
    const two = apolloGql(
      'query Two { a: isNull(value: 1) { __typename } b: isNull(value: 2) { __typename } }',
    );
    const other = apolloGql(
      'query Other { a: isNull(value: 3) { __typename } b: isNull(value: 4) { __typename } }',
    );
    const one = check('One', 5);
    const results = await Promise.all([query(two), query(other), query(one)]);
    // 2 calls, then 2 more would make 4 > 3: refused; then 1 more makes 3: runs.
    expect(results.map((r) => r.data != null && Object.values(r.data).every((v) => v !== null))).toEqual([
      true,
      false,
      true,
    ]);
    expect(raw.get('Other')?.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', limit: 3 });
    expect(raw.get('Other')?.errors?.[0]?.message).toMatch(/whole batch \(MAX_UPSTREAM_CALLS\)/);
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(3);
  });

  it('each operation reserves its own estimate against the hourly budget', async () => {
    const g = await gateway({ BATCH_LIMIT: '3', COST_BUDGET_USD_PER_HOUR: '0.009' });
    const { raw, query } = apollo(g.url, { 'x-api-key': 'sk-batch-budget' });
    const results = await Promise.all([query(check('X', 1)), query(check('Y', 2)), query(check('Z', 3))]);
    expect(results.filter((r) => answered(r))).toHaveLength(2);
    const refused = [...raw.values()].filter((r) => r.errors?.[0]?.extensions?.code === 'BUDGET_EXCEEDED');
    expect(refused).toHaveLength(1);
    expect(refused[0]?.errors?.[0]?.extensions).toMatchObject({ budgetUsdPerHour: 0.009 });
    expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(2);
  });
});
