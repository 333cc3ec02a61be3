/**
 * The gateway as a Federation 2 subgraph, asked directly (contract §14; FEDERATION=true): `_service`
 * answers subgraph.graphql, `_entities` resolves Model representations with one scoreboard read for
 * all of them on both lanes, null for a name no service has, BAD_USER_INPUT at the index of a
 * representation that is not a Model; without FEDERATION there is no `_service`. Through a real
 * router: federation-router.test.ts; the SDL itself (weights, drift): unit/subgraph-schema.test.ts.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { codes, type GqlOptions, type GqlResult, gql, gqlInYoga } from '../support/graphql-client.js';

const SUBGRAPH = readFileSync(fileURLToPath(new URL('../../subgraph.graphql', import.meta.url)), 'utf8');

const ENTITIES = `query Entities($representations: [_Any!]!) {
  _entities(representations: $representations) {
    __typename
    ... on Model { name service priceUsd costWeight bands { band answers correct accuracy } }
  }
}`;

let federated: TestGateway;
let plain: TestGateway;

beforeAll(async () => {
  [federated, plain] = await Promise.all([
    startTestGateway({ env: { FEDERATION: 'true' } }),
    startTestGateway(),
  ]);
  // One measured answer of null-x-4o at band 0 (the reference service's 4o is right at temperature 0).
  const scored = await gql(federated.url, '{ isNull(value: null, temperature: 0) { __typename } }');
  expect(scored.errors).toBeUndefined();
});

afterAll(async () => {
  await Promise.all([federated?.close(), plain?.close()]);
});

describe('FEDERATION=true', () => {
  it('answers _service { sdl } with subgraph.graphql', async () => {
    const result = await gql(federated.url, '{ _service { sdl } }');
    expect(result.errors).toBeUndefined();
    expect(`${result.data?._service.sdl}\n`).toBe(SUBGRAPH);
  });

  it.each([
    ['the fast path', (query: string, options: GqlOptions) => gql(federated.url, query, options)],
    ["Yoga's handler", (query: string, options: GqlOptions) => gqlInYoga(federated, query, options)],
  ] as const)('resolves each representation, all with one scoreboard read (%s)', async (_lane, ask) => {
    const read = vi.spyOn(federated.app.sharedState.scores, 'read');
    let result: GqlResult;
    try {
      result = await ask(ENTITIES, {
        variables: {
          representations: [
            { __typename: 'Model', name: 'null-x-4o' },
            { __typename: 'Model', name: 'no-such-model' },
            { __typename: 'Health', name: 'null-x-4o' },
            { __typename: 'Model', name: 'pi-x-mini' },
            'null-x-mini',
            { __typename: 'Model', name: 'null-x-opus' },
            { __typename: 'Model' },
          ],
        },
      });
      expect(read).toHaveBeenCalledTimes(1);
    } finally {
      read.mockRestore();
    }
    expect(result.status).toBe(294);
    const [fourO, unknown, health, piMini, bare, opus, nameless] = result.data?._entities ?? [];
    expect(fourO).toEqual({
      __typename: 'Model',
      name: 'null-x-4o',
      service: 'null-check',
      priceUsd: 0.0042,
      costWeight: 42,
      bands: [{ band: '0', answers: expect.any(Number), correct: expect.any(Number), accuracy: 1 }],
    });
    expect(fourO.bands[0].answers).toBeGreaterThanOrEqual(1);
    expect(piMini).toMatchObject({
      name: 'pi-x-mini',
      service: 'pi-digits',
      priceUsd: 0.0004009,
      costWeight: 5,
    });
    expect(opus).toMatchObject({ name: 'null-x-opus', priceUsd: 0.042, costWeight: 420, bands: [] });
    // A name no service has is null, and no error; the others each fail at their own index.
    expect([unknown, health, bare, nameless]).toEqual([null, null, null, null]);
    expect(codes(result)).toEqual(['BAD_USER_INPUT', 'BAD_USER_INPUT', 'BAD_USER_INPUT']);
    expect(result.errors?.map((e) => e.path)).toEqual([
      ['_entities', 2],
      ['_entities', 4],
      ['_entities', 6],
    ]);
    expect(result.errors?.[0]?.message).toMatch(
      /__typename must name an entity of this subgraph \(Model\), got "Health"/,
    );
  });
});

describe('without FEDERATION', () => {
  it('serves the public schema: no _service, no _entities', async () => {
    const result = await gql(plain.url, '{ _service { sdl } }');
    expect(result.status).toBe(422);
    expect(result.errors?.[0]?.message).toMatch(/Cannot query field "_service"/);
  });
});
