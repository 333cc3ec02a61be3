/**
 * The gateway over real sockets in front of the project's reference services, driven by the typed
 * documents GraphQL Code Generator makes from test/operations/*.graphql (a schema change that breaks
 * these client operations breaks the typecheck). True digits come from bc's fixtures, not from the
 * digit engine the gateway checks with. Last, the same services with their v1 endpoints retired.
 */
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  HealthDocument,
  InferenceDocument,
  IsNullDocument,
  IsNullUndefinedDocument,
  NullAndPiDocument,
  PiDocument,
} from '../../generated/client/graphql.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { type GqlError, gql, parsed } from '../support/graphql-client.js';
import { agreeingPlaces, constantOf, trueDigits } from '../support/true-digits.js';

interface Result<T> {
  status: number;
  headers: Headers;
  data?: T | null;
  errors?: GqlError[];
  extensions?: {
    cost?: { gpuCostUsd: number; upstreamCalls: number; cacheHits: number };
    sponsoredBy?: string[];
  };
}

async function run<TData, TVariables>(
  url: string,
  document: TypedDocumentNode<TData, TVariables>,
  variables?: TVariables,
  headers: Record<string, string> = {},
): Promise<Result<TData>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify({ query: print(document), variables }),
  });
  return (await parsed(response)) as Result<TData>;
}

const ENTERPRISE = { authorization: 'Bearer demo-enterprise' };

let stack: TestGateway;
beforeAll(async () => {
  // The embedded reference services, with a generous free-tier limit: this file makes more than 60
  // free calls a minute.
  stack = await startTestGateway({ env: { FREE_RATE_LIMIT: '10000' } });
});
afterAll(async () => {
  await stack?.close();
});

describe('isNull against the reference service', () => {
  it('null is null: NullVerdict, actuallyNull, correct; the request id comes back', async () => {
    const result = await run(stack.url, IsNullDocument, { value: null }, { 'x-request-id': 'it-null-1' });
    expect(result.headers.get('x-request-id')).toBe('it-null-1');
    expect(result.data?.isNull).toMatchObject({
      __typename: 'NullVerdict',
      isNull: true,
      actuallyNull: true,
      correct: true,
      model: 'NULL_X_4O',
      modelName: 'null-x-4o',
    });
  });

  it('an object is not null', async () => {
    const result = await run(stack.url, IsNullDocument, { value: { a: [1, null] }, model: 'NULL_X_OPUS' });
    expect(result.data?.isNull).toMatchObject({
      __typename: 'NullVerdict',
      isNull: false,
      actuallyNull: false,
      correct: true,
      model: 'NULL_X_OPUS',
    });
  });

  it('undefined (no value) is the upstream 400: UNDEFINED_VALUE', async () => {
    const result = await run(stack.url, IsNullUndefinedDocument, {});
    expect(result.data).toEqual({ isNull: null });
    expect(result.errors?.[0]).toMatchObject({
      path: ['isNull'],
      extensions: { code: 'UNDEFINED_VALUE', upstream: 'null-check', upstreamStatus: 400 },
    });
  });

  it('strictMode is forbidden on the free tier and allowed with an enterprise key (either header)', async () => {
    const free = await run(stack.url, IsNullDocument, { value: null, strictMode: true });
    expect(free.errors?.[0]?.extensions).toMatchObject({
      code: 'TIER_FORBIDDEN',
      upstream: 'null-check',
      upstreamStatus: 418,
    });
    const bearer = await run(stack.url, IsNullDocument, { value: null, strictMode: true }, ENTERPRISE);
    expect(bearer.data?.isNull).toMatchObject({ isNull: true, correct: true });
    const apiKey = await run(
      stack.url,
      IsNullDocument,
      { value: null, strictMode: true },
      { 'x-api-key': 'demo-enterprise' },
    );
    expect(apiKey.errors).toBeUndefined();
  });

  it('an unknown API key is UNAUTHENTICATED, and the key is not echoed', async () => {
    const result = await run(
      stack.url,
      IsNullDocument,
      { value: 1 },
      { authorization: 'Bearer not-a-real-key-77' },
    );
    expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'UNAUTHENTICATED', upstreamStatus: 401 });
    expect(JSON.stringify(result)).not.toContain('not-a-real-key-77');
  });

  it('at temperature 1, maybe and existential answers come back as their union members', async () => {
    const seen = new Map<string, number>();
    for (let i = 0; i < 30; i++) {
      const result = await run(stack.url, IsNullDocument, { value: i, temperature: 1 }, ENTERPRISE);
      // The reference service answers every check (no fault injection here): an error is a failure.
      expect(result.errors).toBeUndefined();
      const verdict = result.data?.isNull;
      if (!verdict) throw new Error(`no verdict for value ${i}`);
      seen.set(verdict.__typename, (seen.get(verdict.__typename) ?? 0) + 1);
      if (verdict.__typename === 'NullVerdict') expect(verdict.correct).toBe(verdict.isNull === false);
      else expect(verdict.correct).toBeNull();
      if (verdict.__typename === 'ExistentialVerdict') expect(verdict.raw).toBeTypeOf('object');
    }
    // Both odd members reach the client through the gateway (their shares are the services' tests' business).
    expect(seen.get('MaybeVerdict') ?? 0).toBeGreaterThan(0);
    expect(seen.get('ExistentialVerdict') ?? 0).toBeGreaterThan(0);
  });
});

describe('pi against the reference service', () => {
  it('the default is 3 true decimals of pi; extensions.cost is what the service reported', async () => {
    const result = await run(stack.url, PiDocument, {});
    expect(result.data?.pi).toMatchObject({
      __typename: 'PiDigits',
      digits: trueDigits('pi', 3),
      precision: 3,
      requestedDigits: 3,
      correctDigits: 3,
      model: 'PI_X_4O',
      modelName: 'pi-x-4o',
    });
    const reported = result.data?.pi?.gpuCostUsd;
    expect(reported).toBeGreaterThan(0);
    expect(result.extensions?.cost).toMatchObject({ gpuCostUsd: reported, upstreamCalls: 1, cacheHits: 0 });
  });

  it('pi(digits: 0) is "3"', async () => {
    const result = await run(stack.url, PiDocument, { digits: 0 });
    expect(result.data?.pi).toMatchObject({ digits: '3', precision: 0, correctDigits: 0 });
  });

  it('more than 3 digits on the free tier is TIER_FORBIDDEN; an enterprise key gets 1000 true digits', async () => {
    const free = await run(stack.url, PiDocument, { digits: 5 });
    expect(free.errors?.[0]?.extensions).toMatchObject({
      code: 'TIER_FORBIDDEN',
      upstream: 'pi-digits',
      upstreamStatus: 418,
    });
    // The refusal was an answered call, and cost nothing.
    expect(free.extensions?.cost).toMatchObject({ gpuCostUsd: 0, upstreamCalls: 1, cacheHits: 0 });
    const enterprise = await run(stack.url, PiDocument, { digits: 1000 }, ENTERPRISE);
    expect(enterprise.data?.pi).toMatchObject({
      digits: trueDigits('pi', 1000),
      precision: 1000,
      correctDigits: 1000,
    });
  });

  it('sponsored: false is TIER_FORBIDDEN on the free tier', async () => {
    const result = await run(stack.url, PiDocument, { sponsored: false });
    expect(result.errors?.[0]?.extensions?.code).toBe('TIER_FORBIDDEN');
  });

  it('at temperature 1, e comes back as EulerDigits, and every member is checked against its own constant', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 24; i++) {
      const result = await run(stack.url, PiDocument, { digits: 20 + i, temperature: 1 }, ENTERPRISE);
      expect(result.errors).toBeUndefined();
      const pi = result.data?.pi;
      if (!pi) throw new Error(`no pi answer for ${20 + i} digits`);
      // Which constant the digits really are comes from the digits and bc's fixtures, never from the
      // answer's own __typename: a gateway that mistook e for pi (member and correctDigits alike)
      // must fail here, not be checked against its own mistake.
      const constant = constantOf(pi.digits);
      if (constant === undefined) throw new Error(`neither pi nor e: ${pi.digits}`);
      expect({ __typename: pi.__typename, correctDigits: pi.correctDigits }, pi.digits).toEqual({
        __typename: constant === 'e' ? 'EulerDigits' : 'PiDigits',
        correctDigits: agreeingPlaces(pi.digits, constant),
      });
      // pi-x-4o recalls whichever constant it recalls exactly: every place is right.
      expect(pi.correctDigits).toBe(20 + i);
      seen.add(constant);
    }
    // Both constants came back (the seed makes it so), so both verdicts were checked.
    expect([...seen].sort()).toEqual(['e', 'pi']);
  });
});

describe('inference and health against the reference services', () => {
  it('inference with a signed waiver, with the chain of thought', async () => {
    const result = await run(stack.url, InferenceDocument, {
      input: { desiredDigits: 3, useChainOfThought: true, liabilityWaiverSigned: true },
    });
    expect(result.data?.inference).toMatchObject({
      __typename: 'PiInference',
      digits: trueDigits('pi', 3),
      precision: 3,
      requestedDigits: 3,
      correctDigits: 3,
    });
    expect(result.data?.inference?.chainOfThought).toBeTypeOf('string');
    expect(result.data?.inference?.costUsd).toBeTypeOf('number');
  });

  it('inference without the waiver never reaches the service', async () => {
    const result = await run(stack.url, InferenceDocument, {
      input: { desiredDigits: 3, liabilityWaiverSigned: false },
    });
    expect(result.errors?.[0]?.extensions).toEqual({ code: 'WAIVER_REQUIRED' });
    // No upstream was touched: no cost to report.
    expect(result.extensions?.cost).toBeUndefined();
  });

  it('health is OK with every field of both health bodies', async () => {
    const result = await run(stack.url, HealthDocument);
    const health = result.data?.health;
    expect(health?.status).toBe('OK');
    for (const upstream of [health?.nullCheck, health?.pi]) {
      expect(upstream).toMatchObject({ reachable: true, statusCode: 200, error: null, breaker: 'closed' });
      expect(upstream?.latencyMs).toBeGreaterThanOrEqual(0);
    }
    expect(health?.nullCheck).toMatchObject({
      status: 'ok',
      nullDetectable: true,
      philosophyConsultant: null,
    });
    expect(health?.nullCheck.monthlyBurn).toBeTypeOf('string');
    expect(health?.pi.piAvailable).toBe(true);
    expect(health?.pi.monthlyBurnRate).toBeTypeOf('string');
  });

  it('health names the API version in use per upstream, and whether its endpoint is deprecated', async () => {
    // The reference null-check service lists its v2 in /openapi.json: auto starts there. Pi-digits
    // serves GET /api/v1/pi undeprecated: auto stays on v1.
    const result = await gql(
      stack.url,
      '{ health { nullCheck { apiVersion deprecated sunset } pi { apiVersion deprecated sunset } } }',
    );
    expect(result.errors).toBeUndefined();
    expect(result.data?.health).toEqual({
      nullCheck: { apiVersion: 'v2', deprecated: false, sunset: null },
      pi: { apiVersion: 'v1', deprecated: false, sunset: null },
    });
    expect(stack.app.clients.state('null-check')).toMatchObject({ apiVersion: 'v2', breaker: 'closed' });
  });

  it('one failing field leaves the other (partial results)', async () => {
    const result = await run(stack.url, NullAndPiDocument, { digits: 5 });
    // 294 Partial Success: data with a field error (the 2026 draft).
    expect(result.status).toBe(294);
    expect(result.data?.a).toMatchObject({ __typename: 'NullVerdict', actuallyNull: true, correct: true });
    expect(result.data?.b).toBeNull();
    expect(result.errors).toHaveLength(1);
    expect(result.errors?.[0]).toMatchObject({ path: ['b'], extensions: { code: 'TIER_FORBIDDEN' } });
  });
});

describe('the other readings of the spec', () => {
  let other: TestGateway;
  beforeAll(async () => {
    // Clamp politely instead of 418, and a tiny free-tier limit; no retries so a 429 comes back at once.
    other = await startTestGateway({
      env: { PI_OVER_LIMIT: 'clamp', FREE_RATE_LIMIT: '3', RETRY_MAX_ATTEMPTS: '1' },
    });
  });
  afterAll(() => other?.close());

  it('a clamped answer shows precision < requestedDigits', async () => {
    const result = await run(other.url, PiDocument, { digits: 8 });
    expect(result.data?.pi).toMatchObject({ precision: 3, requestedDigits: 8, correctDigits: 3 });
  });

  it('past the free-tier rate limit: RATE_LIMITED with retryAfterSeconds', async () => {
    let limited: Result<unknown>['errors'];
    for (let i = 0; i < 6 && !limited; i++) {
      const result = await run(other.url, IsNullDocument, { value: i });
      if (result.errors) limited = result.errors;
    }
    expect(limited?.[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      upstream: 'null-check',
      upstreamStatus: 429,
    });
    expect(limited?.[0]?.extensions?.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  });
});

describe('one API_KEYS for the gateway and the embedded services: a key has one tier for both', () => {
  const BUDGETS = JSON.stringify({ 'tier:pro': { '1h': 5 }, default: { '1h': 1 } });
  const QUERY = '{ budget { scope } pi(digits: 10) { __typename ... on PiDigits { digits } } }';
  const gateways: TestGateway[] = [];
  afterAll(() => Promise.all(gateways.map((g) => g.close())));
  const start = async (env: Record<string, string>) => {
    const started = await startTestGateway({ env: { COST_BUDGETS: BUDGETS, ...env } });
    gateways.push(started);
    return started;
  };
  /** The budget scope the gateway gives the key, and whether the services served it 10 digits (not free). */
  const tiersOf = async (g: TestGateway, key: string) => {
    const result = await gql(g.url, QUERY, { headers: { authorization: `Bearer ${key}` } });
    return {
      scope: result.data?.budget?.scope,
      pi: result.data?.pi?.__typename,
      code: result.errors?.[0]?.extensions?.code,
    };
  };

  it('API_KEYS unset: the services accept their demo keys, and the gateway gives them their tiers', async () => {
    const g = await start({});
    expect(await tiersOf(g, 'demo-pro')).toEqual({ scope: 'tier:pro', pi: 'PiDigits', code: undefined });
  });

  it('API_KEYS set: the same keys and tiers on both sides, the demo keys gone from both', async () => {
    const g = await start({ API_KEYS: 'k-own:pro' });
    expect(await tiersOf(g, 'k-own')).toEqual({ scope: 'tier:pro', pi: 'PiDigits', code: undefined });
    expect(await tiersOf(g, 'demo-pro')).toEqual({
      scope: 'default',
      pi: undefined,
      code: 'UNAUTHENTICATED',
    });
  });
});

describe("with v1 retired, the README's try-it path (NULL_V1=off PI_V1_PI=off PI_WAIVER_ACCEPTED=true)", () => {
  let retired: TestGateway;
  beforeAll(async () => {
    // The embedded reference services take the retirement settings from the same environment, as
    // under `npm start`. A generous free-tier limit: the GraphiQL tabs send the free key.
    retired = await startTestGateway({
      env: { NULL_V1: 'off', PI_V1_PI: 'off', PI_WAIVER_ACCEPTED: 'true', FREE_RATE_LIMIT: '10000' },
    });
  });
  afterAll(() => retired?.close());

  it('the embedded services really answer v1 with 410 ENDPOINT_RETIRED', async () => {
    // Without this the rest could pass against services that never retired anything.
    const { nullBaseUrl, piBaseUrl, embedded } = retired.app.upstreams;
    expect(embedded).toBe(true);
    const check = await fetch(`${nullBaseUrl}/api/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ value: null }),
    });
    const pi = await fetch(`${piBaseUrl}/api/v1/pi?digits=3`);
    for (const answer of [check, pi]) {
      expect(answer.status).toBe(410);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('ENDPOINT_RETIRED');
    }
  });

  it('every GraphiQL tab runs as shown, with no error and true answers', async () => {
    const page = await (await fetch(retired.url, { headers: { accept: 'text/html' } })).text();
    const json = /<script type="application\/json" id="graphiql-options">(.*?)<\/script>/s.exec(page)?.[1];
    const { defaultTabs = [] } = JSON.parse((json ?? '{}').replaceAll('\\u003c', '<')) as {
      defaultTabs?: Array<{ query: string; variables?: string; headers?: string }>;
    };
    const results = new Map<string, Awaited<ReturnType<typeof gql>>>();
    for (const tab of defaultTabs) {
      const name = /query (\w+)/.exec(tab.query)?.[1] ?? '?';
      const result = await gql(retired.url, tab.query, {
        variables: tab.variables === undefined ? undefined : JSON.parse(tab.variables),
        headers: tab.headers === undefined ? {} : JSON.parse(tab.headers),
      });
      expect({ name, status: result.status, errors: result.errors }).toEqual({
        name,
        status: 200,
        errors: undefined,
      });
      results.set(name, result);
    }
    expect([...results.keys()]).toEqual(['IsNull', 'Pi', 'Inference', 'Health', 'Bill', 'Models']);
    expect(results.get('IsNull')?.data?.isNull).toMatchObject({
      __typename: 'NullVerdict',
      isNull: true,
      actuallyNull: true,
      correct: true,
    });
    // pi over the inference endpoint (the only one left), still PiDigits, still checked.
    expect(results.get('Pi')?.data?.pi).toMatchObject({
      __typename: 'PiDigits',
      digits: trueDigits('pi', 3),
      correctDigits: 3,
    });
    expect(results.get('Inference')?.data?.inference).toMatchObject({
      digits: trueDigits('pi', 3),
      correctDigits: 3,
    });
    expect(results.get('Health')?.data?.health.status).toBe('OK');
    expect(results.get('Bill')?.data).toMatchObject({
      cheap: { modelName: 'null-x-4o' },
      dear: { modelName: 'null-x-opus' },
    });
    // The scoreboard shows the tabs' own answers, judged against the truth.
    expect(results.get('Models')?.data?.models).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          service: 'null-check',
          model: 'null-x-opus',
          band: '0',
          answers: 1,
          correct: 1,
        }),
      ]),
    );
  });

  it('health names v2 for both upstreams once they were called, undeprecated', async () => {
    // Called by the test above, or here when it runs alone: the gateway has moved by itself.
    await gql(retired.url, '{ isNull(value: 1) { __typename } pi { __typename } }');
    const result = await gql(
      retired.url,
      '{ health { nullCheck { apiVersion deprecated } pi { apiVersion deprecated } } }',
    );
    expect(result.errors).toBeUndefined();
    expect(result.data?.health).toEqual({
      nullCheck: { apiVersion: 'v2', deprecated: false },
      pi: { apiVersion: 'v2', deprecated: false },
    });
  });
});
