/**
 * The gateway in a supergraph, behind a real router (contract §14): Hive Gateway's runtime serving the
 * composition (@theguild/federation-composition) of the gateway's own `_service { sdl }` and a small
 * second subgraph, a catalog that names models (test/support/supergraph.ts holds the router's
 * settings, those of docs/federation.md). Through the router, nothing changes for the caller: every
 * GraphiQL tab answers the same data (and `extensions.cost`) as directly, a key's budget and
 * X-Max-Cost-Usd refuse with the same codes, trusted documents run by id; the catalog's models join our
 * price and accuracy in one `_entities` fetch; the router's demand control refuses by our `@cost`
 * weights before anything reaches the gateway. The subgraph asked directly: federation-subgraph.test.ts.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildSubgraphSchema } from '@apollo/subgraph';
import type { GatewayPlugin } from '@graphql-hive/gateway';
import { parse } from 'graphql';
import { createYoga } from 'graphql-yoga';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { GRAPHIQL_TABS } from '../../src/gateway/plugins/use-graphiql.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { codes, type GqlOptions, type GqlResult, gql, parsed } from '../support/graphql-client.js';
import { composeSupergraph, type HiveRouter, startHiveRouter } from '../support/supergraph.js';

/** The second subgraph: use cases, each with the model a catalog recommends, known by name only. */
const CATALOG_SDL = `
extend schema @link(url: "https://specs.apollo.dev/federation/v2.9", import: ["@key"])

type Query {
  recommendations: [Recommendation!]!
}

type Recommendation {
  useCase: String!
  model: Model!
}

type Model @key(fields: "name", resolvable: false) {
  name: String!
}
`;
const RECOMMENDATIONS = [
  { useCase: 'cheap checks', model: { name: 'null-x-mini' } },
  { useCase: 'checks that must be right', model: { name: 'null-x-4o' } },
  { useCase: 'digits of pi', model: { name: 'pi-x-4o' } },
];

async function startCatalog(): Promise<{ url: string; close(): Promise<void> }> {
  const schema = buildSubgraphSchema({
    typeDefs: parse(CATALOG_SDL),
    resolvers: { Query: { recommendations: () => RECOMMENDATIONS } },
  });
  const server = createServer(createYoga({ schema, logging: false }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The router's fetches to the gateway, by the document they carry. */
const fetchesToGateway: string[] = [];
let gatewayUrl = '';
const countFetches: GatewayPlugin = {
  onFetch({ url, options }) {
    if (url === gatewayUrl) fetchesToGateway.push(String(options.body));
  },
};

const IS_NULL_DOCUMENT = '{ isNull(value: "trusted") { __typename ... on NullCheck { modelName } } }';
const MANIFEST = { [createHash('sha256').update(IS_NULL_DOCUMENT).digest('hex')]: IS_NULL_DOCUMENT };
const PRO = { authorization: 'Bearer demo-pro' };

let gateway: TestGateway;
let catalog: Awaited<ReturnType<typeof startCatalog>>;
let router: HiveRouter;
let trustedRouter: HiveRouter;

beforeAll(async () => {
  [gateway, catalog] = await Promise.all([
    startTestGateway({
      // demo-pro (the embedded services' pro key) gets a budget of one default null check an hour.
      env: { FEDERATION: 'true', COST_BUDGETS: JSON.stringify({ 'tier:pro': { '1h': 0.005 } }) },
    }),
    startCatalog(),
  ]);
  gatewayUrl = gateway.url;
  const sdl = (await gql(gateway.url, '{ _service { sdl } }')).data?._service.sdl as string;
  const supergraph = composeSupergraph([
    { name: 'gateway', url: gateway.url, sdl },
    { name: 'catalog', url: catalog.url, sdl: CATALOG_SDL },
  ]);
  // 100: every GraphiQL tab fits (the dearest, Bill, is 2 × (42 + 1)); three isNull fields do not.
  [router, trustedRouter] = await Promise.all([
    startHiveRouter({ supergraph, maxCost: 100, plugins: [countFetches] }),
    startHiveRouter({ supergraph, manifest: MANIFEST }),
  ]);
});

afterAll(async () => {
  await Promise.all([router?.close(), trustedRouter?.close()]);
  await Promise.all([gateway?.close(), catalog?.close()]);
});

/** Fields whose value differs between two calls by design: their type is compared, not their value. */
const VARYING = new Set(['confidence', 'sponsoredBy', 'latencyMs']);
function comparable(value: unknown, key = ''): unknown {
  if (VARYING.has(key) && value !== null) return typeof value;
  if (Array.isArray(value)) return value.map((v) => comparable(v));
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, comparable(v, k)]));
  return value;
}

describe('through Hive Gateway', () => {
  const tabs = GRAPHIQL_TABS.map((tab) => {
    const query = tab.query ?? '';
    return [/^query (\w+)/m.exec(query)?.[1] ?? '?', { ...tab, query }] as const;
  });
  it.each(tabs)('the GraphiQL tab %s answers the same data as directly', async (_name, tab) => {
    const options: GqlOptions = {
      variables: tab.variables ? JSON.parse(tab.variables) : undefined,
      headers: tab.headers ? JSON.parse(tab.headers) : undefined,
    };
    const direct = await gql(gateway.url, tab.query, options);
    const routed = await gql(router.url, tab.query, options);
    expect(direct.errors).toBeUndefined();
    expect(routed.errors).toBeUndefined();
    expect(comparable(routed.data)).toEqual(comparable(direct.data));
    // The gateway's extensions reach the caller (docs/federation.md: the router's plugin carries them).
    // (Not estimatedCostUsd: the estimate follows what the first of the two calls cost.)
    const { cost, sponsoredBy } = (direct.extensions ?? {}) as { cost?: object; sponsoredBy?: unknown };
    const { estimatedCostUsd: _estimate, ...billed } = (cost ?? {}) as Record<string, unknown>;
    if (cost !== undefined) expect(routed.extensions?.cost).toMatchObject(billed);
    if (sponsoredBy !== undefined) expect(routed.extensions?.sponsoredBy).toEqual(expect.any(Array));
  });

  it("joins the catalog's models with their price and accuracy in one _entities fetch", async () => {
    const read = vi.spyOn(gateway.app.sharedState.scores, 'read');
    fetchesToGateway.length = 0;
    let result: GqlResult;
    try {
      result = await gql(
        router.url,
        '{ recommendations { useCase model { name service priceUsd costWeight bands { band answers accuracy } } } }',
      );
      expect(read).toHaveBeenCalledTimes(1);
    } finally {
      read.mockRestore();
    }
    expect(result.errors).toBeUndefined();
    expect(fetchesToGateway).toHaveLength(1);
    expect(fetchesToGateway[0]).toContain('_entities');
    const models = Object.fromEntries(
      ((result.data?.recommendations ?? []) as Array<{ model: { name: string; bands?: unknown } }>).map(
        (r) => [r.model.name, r.model],
      ),
    );
    expect(Object.keys(models)).toEqual(RECOMMENDATIONS.map((r) => r.model.name));
    expect(models['null-x-mini']).toMatchObject({ service: 'null-check', priceUsd: 0.0006, costWeight: 6 });
    expect(models['pi-x-4o']).toMatchObject({ service: 'pi-digits', priceUsd: 0.003106, costWeight: 32 });
    // The accuracy is the scoreboard's: the tabs above measured null-x-4o at temperature 0.
    const direct = await gql(gateway.url, '{ models { model band answers accuracy } }');
    const rows = ((direct.data?.models ?? []) as Array<{ model: string; band: string }>).filter(
      (row) => row.model === 'null-x-4o',
    );
    expect(rows.length).toBeGreaterThan(0);
    expect(models['null-x-4o']?.bands).toEqual(rows.map(({ model: _m, ...band }) => band));
  });

  it("refuses over a key's budget and over X-Max-Cost-Usd with the gateway's codes", async () => {
    const first = await gql(router.url, '{ isNull(value: "pro 1") { __typename } }', { headers: PRO });
    expect(first.errors).toBeUndefined();
    // The budget's RateLimit fields come back through the router.
    expect(first.headers.get('ratelimit-policy')).toMatch(/w=3600/);
    const second = await gql(router.url, '{ isNull(value: "pro 2") { __typename } }', { headers: PRO });
    expect(second.data).toEqual({ isNull: null });
    expect(codes(second)).toEqual(['BUDGET_EXCEEDED']);
    expect(second.errors?.[0]?.extensions).toMatchObject({
      budgetScope: 'tier:pro',
      retryAfterSeconds: expect.any(Number),
    });

    const capped = await gql(router.url, '{ isNull(value: 1, model: NULL_X_OPUS) { __typename } }', {
      headers: { 'x-max-cost-usd': '0.01' },
    });
    expect(codes(capped)).toEqual(['BUDGET_EXCEEDED']);
    expect(capped.errors?.[0]?.extensions).toMatchObject({ estimatedCostUsd: 0.042, maxCostUsd: 0.01 });
    const malformed = await gql(router.url, '{ isNull(value: 1) { __typename } }', {
      headers: { 'x-max-cost-usd': 'lots' },
    });
    expect(codes(malformed)).toEqual(['BAD_USER_INPUT']);
  });

  it("refuses by our @cost weights in the router's demand control, before anything reaches the gateway", async () => {
    fetchesToGateway.length = 0;
    const three = await gql(
      router.url,
      '{ a: isNull(value: 1) { __typename } b: isNull(value: 2) { __typename } c: isNull(value: 3) { __typename } }',
    );
    expect(codes(three)).toEqual(Array(3).fill('COST_ESTIMATED_TOO_EXPENSIVE'));
    // 3 × (isNull's weight 42 + 1 for the union it returns), over the router's maxCost of 100.
    expect(three.errors?.[0]?.extensions?.cost).toEqual({ estimated: 129, max: 100 });
    expect(fetchesToGateway).toEqual([]);
  });

  it('runs trusted documents by their id, and refuses others with the gateway’s codes', async () => {
    const post = async (body: Record<string, unknown>) =>
      parsed(
        await fetch(trustedRouter.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
          body: JSON.stringify(body),
        }),
      );
    const [id] = Object.keys(MANIFEST);
    const byId = await post({ documentId: `sha256:${id}` });
    expect(byId.errors).toBeUndefined();
    expect(byId.data).toEqual({ isNull: { __typename: 'NullVerdict', modelName: 'null-x-4o' } });
    expect(codes(await post({ documentId: `sha256:${'0'.repeat(64)}` }))).toEqual([
      'PERSISTED_QUERY_NOT_FOUND',
    ]);
    expect(codes(await post({ query: '{ health { status } }' }))).toEqual(['PERSISTED_QUERY_NOT_IN_LIST']);
  });
});
