/**
 * The fragment matcher the typed client ships (generated/client/possible-types.ts, written by
 * codegen's fragment-matcher plugin beside the typed documents): Apollo Client's InMemoryCache only
 * knows that a PiDigits is a ConstantDigits when it is told, and otherwise drops every field selected
 * through `... on ConstantDigits`, answering `{ __typename: 'PiDigits' }`. The generated map must
 * name every union and interface of the schema (taken from the schema the gateway serves, not from
 * the generated file) with exactly its possible types, and the real Apollo Client, against a real
 * gateway in front of the embedded reference services, reads a field through a fragment on each of
 * them with it, and loses that field without it.
 */
import { format } from 'node:util';
import { ApolloClient, gql as apolloGql, type DocumentNode, HttpLink, InMemoryCache } from '@apollo/client';
import { isAbstractType } from 'graphql';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { PiDocument } from '../../generated/client/graphql.js';
import introspection from '../../generated/client/possible-types.js';
import { schema } from '../../src/gateway/schema/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

/** Every union and interface of the gateway's schema → its possible types, sorted. */
const abstractTypes: Record<string, string[]> = Object.fromEntries(
  Object.values(schema.getTypeMap())
    .filter(isAbstractType)
    .map((type) => [
      type.name,
      schema
        .getPossibleTypes(type)
        .map((member) => member.name)
        .sort(),
    ]),
);

const { possibleTypes } = introspection;

/**
 * One query per union and interface, reading one field through a fragment on it. `at` is the path
 * of the object the fragment applies to; `read` is what Apollo Client answers there with the
 * possible types (without them: `{ __typename }` alone).
 */
interface Case {
  query: DocumentNode;
  headers?: Record<string, string>;
  at: string[];
  read: Record<string, unknown>;
}

// temperature 0: the reference services answer the plain member (PiDigits, NullVerdict, PiInference).
const cases: Record<string, Case> = {
  ConstantDigits: {
    query: apolloGql`query ThroughConstantDigits {
      pi(digits: 3, temperature: 0) { __typename ... on ConstantDigits { digits } }
    }`,
    at: ['pi'],
    read: { __typename: 'PiDigits', digits: '3.141' },
  },
  PiResult: {
    query: apolloGql`
      fragment PiAnswer on PiResult { ... on PiDigits { digits } }
      query ThroughPiResult { pi(digits: 3, temperature: 0) { __typename ...PiAnswer } }`,
    at: ['pi'],
    read: { __typename: 'PiDigits', digits: '3.141' },
  },
  NullCheck: {
    query: apolloGql`query ThroughNullCheck {
      isNull(value: null, temperature: 0) { __typename ... on NullCheck { actuallyNull } }
    }`,
    at: ['isNull'],
    read: { __typename: 'NullVerdict', actuallyNull: true },
  },
  NullCheckResult: {
    query: apolloGql`
      fragment NullAnswer on NullCheckResult { ... on NullVerdict { isNull } }
      query ThroughNullCheckResult { isNull(value: null, temperature: 0) { __typename ...NullAnswer } }`,
    at: ['isNull'],
    read: { __typename: 'NullVerdict', isNull: true },
  },
  Inference: {
    query: apolloGql`query ThroughInference {
      inference(input: { desiredDigits: 5, temperature: 0, liabilityWaiverSigned: true }) {
        __typename ... on Inference { digits }
      }
    }`,
    headers: { authorization: 'Bearer demo-pro' },
    at: ['inference'],
    read: { __typename: 'PiInference', digits: '3.14159' },
  },
  InferenceResult: {
    query: apolloGql`
      fragment InferenceAnswer on InferenceResult { ... on PiInference { digits } }
      query ThroughInferenceResult {
        inference(input: { desiredDigits: 5, temperature: 0, liabilityWaiverSigned: true }) {
          __typename ...InferenceAnswer
        }
      }`,
    headers: { authorization: 'Bearer demo-pro' },
    at: ['inference'],
    read: { __typename: 'PiInference', digits: '3.14159' },
  },
  UpstreamHealth: {
    query: apolloGql`query ThroughUpstreamHealth {
      health { pi { __typename ... on UpstreamHealth { reachable } } }
    }`,
    at: ['health', 'pi'],
    read: { __typename: 'PiHealth', reachable: true },
  },
};

let gateway: TestGateway;
beforeAll(async () => {
  gateway = await startTestGateway();
});
afterAll(async () => {
  await gateway?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** What Apollo Client warned (in development it says so when a fragment cannot be matched). */
function apolloWarnings(): string[] {
  const warnings: string[] = [];
  vi.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => {
    warnings.push(format(...args));
  });
  return warnings;
}

function apollo(cache: InMemoryCache, headers: Record<string, string> = {}) {
  return new ApolloClient({ link: new HttpLink({ uri: gateway.url, headers }), cache });
}

/** The query's answer as Apollo Client's cache gives it back (written, then read). */
async function throughCache(testCase: Case, cache: InMemoryCache): Promise<unknown> {
  const client = apollo(cache, testCase.headers);
  const { data } = await client.query({ query: testCase.query, fetchPolicy: 'network-only' });
  return testCase.at.reduce<unknown>((value, key) => (value as Record<string, unknown>)[key], data);
}

describe('generated possibleTypes (generated/client/possible-types.ts)', () => {
  it('names every union and interface of the schema with exactly its possible types', () => {
    expect(Object.keys(abstractTypes).length).toBeGreaterThan(0);
    const generated = Object.fromEntries(
      Object.entries(possibleTypes).map(([supertype, members]) => [supertype, [...members].sort()]),
    );
    expect(generated).toEqual(abstractTypes);
  });

  it('this file has a query through each union and interface of the schema', () => {
    expect(Object.keys(cases).sort()).toEqual(Object.keys(abstractTypes).sort());
  });
});

describe("Apollo Client's InMemoryCache through every union and interface", () => {
  for (const [supertype, testCase] of Object.entries(cases)) {
    it(`... on ${supertype}: read with the generated possibleTypes, dropped without them`, async () => {
      const warnings = apolloWarnings();
      const withMatcher = await throughCache(testCase, new InMemoryCache({ possibleTypes }));
      expect(withMatcher).toEqual(testCase.read);
      expect(warnings).toEqual([]);
      // The issue: without possibleTypes the cache cannot tell that the member is a `supertype`, drops
      // the fragment's fields, and says so only in a development warning.
      const without = await throughCache(testCase, new InMemoryCache());
      expect(without).toEqual({ __typename: testCase.read.__typename });
      expect(warnings.join('\n')).toContain(
        `on \`${supertype}\` against \`${testCase.read.__typename}\`. This indicates a missing \`possibleTypes\` entry`,
      );
    });
  }

  it("the README's example: the typed PiDocument (`...ConstantDigitsFields on ConstantDigits`) reads digits", async () => {
    const client = new ApolloClient({
      link: new HttpLink({ uri: gateway.url }),
      cache: new InMemoryCache({ possibleTypes: introspection.possibleTypes }),
    });
    const { data } = await client.query({ query: PiDocument, variables: { digits: 3, temperature: 0 } });
    expect(data?.pi?.digits).toBe('3.141');
    expect(data?.pi).toMatchObject({ __typename: 'PiDigits', requestedDigits: 3, correctDigits: 3 });
    // And from the cache alone, without another request.
    const cached = client.readQuery({ query: PiDocument, variables: { digits: 3, temperature: 0 } });
    expect(cached?.pi?.digits).toBe('3.141');

    // The same without possibleTypes: what the issue saw, typed as a string and undefined at runtime.
    const warnings = apolloWarnings();
    const bare = new ApolloClient({ link: new HttpLink({ uri: gateway.url }), cache: new InMemoryCache() });
    const dropped = await bare.query({ query: PiDocument, variables: { digits: 3, temperature: 0 } });
    expect(dropped.data?.pi).toEqual({ __typename: 'PiDigits' });
    expect(warnings.join('\n')).toContain('Cannot match fragment `ConstantDigitsFields` on `ConstantDigits`');
  });
});
