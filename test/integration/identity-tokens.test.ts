/**
 * Callers identified by an identity provider's tokens (docs/contract.md, Authentication), against a
 * real OpenID provider (oidc-provider on loopback, client-credentials grant, a `tier` claim) and an
 * upstream that records what reaches it: a verified token is a caller of its own (its own budget,
 * `user:<sub>` scopes, its tier's), the gateway sends its tier's key of UPSTREAM_KEYS and never the
 * token; every bad token is 401 invalid_token with nothing called or billed, on both GraphQL lanes;
 * AUTH_MODE=tokens; the provider down (503 for tokens, API keys unaffected) and back; keys rotated at
 * the provider; no token or upstream key in any log line. /mcp as an OAuth protected resource, with
 * the MCP SDK's own client-credentials client: identity-mcp.test.ts. Who the caller is without a
 * provider: unit/identity.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestGateway } from '../support/gateway.js';
import { codes, type GqlResult, gql, gqlInYoga } from '../support/graphql-client.js';
import {
  signingKey,
  startIdentityProvider,
  type TestIdentityProvider,
} from '../support/identity-provider.js';
import { capturedLogger } from '../support/logs.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { until } from '../support/waits.js';

const AUDIENCE = 'https://gateway.test/graphql';
const UPSTREAM_KEYS = 'pro:up-key-pro-0001,enterprise:up-key-enterprise-0002';
const BUDGETS = JSON.stringify({
  default: { '1h': 0.5 },
  'tier:pro': { '1h': 1 },
  // One user of its own: two calls of 0.004 do not fit.
  'user:web-enterprise': { '1h': 0.006 },
});
const CHECK = '{ isNull(value: 1) { __typename ... on NullCheck { modelName } } }';
const BUDGET = '{ budget { windows { window limitUsd spentUsd reservedUsd } } }';

const scripted = useScriptedGateways();
const captured = capturedLogger('debug');
const tokensSeen: string[] = [];
let idp: TestIdentityProvider;
let gateway: TestGateway;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const token = async (client: Parameters<TestIdentityProvider['token']>[0], audience = AUDIENCE) => {
  const issued = await idp.token(client, audience);
  tokensSeen.push(issued);
  return issued;
};
const checks = () => scripted.upstream.count('POST', '/api/v1/check');
const authOf = (index: number) => scripted.upstream.requests[index]?.headers.authorization;

beforeAll(async () => {
  idp = await startIdentityProvider();
  routeSpecAnswers(scripted.upstream);
  scripted.upstream.route('POST', '/api/v1/check', { body: nullBody({ gpu_cost_usd: 0.004 }) });
  gateway = await scripted.gateway(
    {
      AUTH_ISSUER: idp.issuer,
      AUTH_AUDIENCE: AUDIENCE,
      UPSTREAM_KEYS,
      COST_BUDGETS: BUDGETS,
      AUTH_JWKS_COOLDOWN_S: '0',
    },
    { logger: captured.logger },
  );
});
afterAll(async () => {
  await idp?.stop();
});

describe('a verified token is a caller of its own', () => {
  it("calls the upstream with its tier's key of UPSTREAM_KEYS, never the token, on both lanes", async () => {
    const pro = await token('web-pro');
    scripted.upstream.resetRecords();
    const fast = await gql(gateway.url, CHECK, { headers: bearer(pro) });
    const yoga = await gqlInYoga(gateway, CHECK, { headers: bearer(pro) });
    for (const result of [fast, yoga]) {
      expect(result.status).toBe(200);
      expect(result.data?.isNull).toMatchObject({ __typename: 'NullVerdict' });
    }
    expect(checks()).toBe(2);
    expect([authOf(0), authOf(1)]).toEqual(['Bearer up-key-pro-0001', 'Bearer up-key-pro-0001']);
    for (const request of scripted.upstream.requests) {
      expect(JSON.stringify(request.headers)).not.toContain(pro);
      expect(request.rawBody).not.toContain(pro);
    }
    const enterprise = await token('web-enterprise');
    scripted.upstream.resetRecords();
    await gql(gateway.url, CHECK, { headers: bearer(enterprise) });
    expect(authOf(0)).toBe('Bearer up-key-enterprise-0002');
    // A token sent as X-API-Key is verified as a token, never forwarded as a key.
    scripted.upstream.resetRecords();
    expect((await gql(gateway.url, CHECK, { headers: { 'x-api-key': pro } })).status).toBe(200);
    expect(authOf(0)).toBe('Bearer up-key-pro-0001');
  });

  it('a user without a paying tier claim is the free tier: no key upstream', async () => {
    const free = await token('web-free');
    scripted.upstream.resetRecords();
    const result = await gql(gateway.url, CHECK, { headers: bearer(free) });
    expect(result.status).toBe(200);
    expect(authOf(0)).toBeUndefined();
  });

  it("has its own budget windows: its tier's scope, spent per user, and a user:<sub> scope of its own", async () => {
    const pro = await token('web-pro');
    const agent = await token('agent-pro');
    const before = await gql(gateway.url, BUDGET, { headers: bearer(agent) });
    await gql(gateway.url, CHECK, { headers: bearer(pro) });
    const mine = await gql(gateway.url, BUDGET, { headers: bearer(pro) });
    const theirs = await gql(gateway.url, BUDGET, { headers: bearer(agent) });
    // tier:pro's window for both; the spend of one is not the other's.
    expect(mine.data?.budget.windows[0]).toMatchObject({ window: '1h', limitUsd: 1 });
    expect(mine.data?.budget.windows[0].spentUsd).toBeGreaterThan(0);
    expect(theirs.data?.budget.windows[0]).toEqual(before.data?.budget.windows[0]);
    // A user with a scope of its own (user:web-enterprise, 0.006 an hour): the second call does not fit.
    const enterprise = await token('web-enterprise');
    const own = await gql(gateway.url, BUDGET, { headers: bearer(enterprise) });
    expect(own.data?.budget.windows[0]).toMatchObject({ window: '1h', limitUsd: 0.006 });
    const spent = own.data?.budget.windows[0].spentUsd as number;
    const results: GqlResult[] = [];
    for (let i = 0; i < 2 && results.at(-1)?.status !== 429; i++)
      results.push(await gql(gateway.url, CHECK, { headers: bearer(enterprise) }));
    expect(spent + 0.004 * results.filter((r) => r.status === 200).length).toBeLessThanOrEqual(0.006 + 1e-9);
    expect(codes(results.at(-1) as GqlResult)).toEqual(['BUDGET_EXCEEDED']);
  });

  it('an API key still works beside tokens (AUTH_MODE=both), forwarded as sent', async () => {
    scripted.upstream.resetRecords();
    const result = await gql(gateway.url, CHECK, { headers: { 'x-api-key': 'sk-direct' } });
    expect(result.status).toBe(200);
    expect(authOf(0)).toBe('Bearer sk-direct');
  });
});

describe('a token that fails verification: 401 invalid_token, nothing called, nothing billed', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const good = () => ({
    sub: 'web-pro',
    tier: 'pro',
    iss: idp.issuer,
    aud: AUDIENCE,
    exp: now() + 300,
    iat: now(),
  });
  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

  const cases: Array<[string, () => Promise<string>]> = [
    ['expired (beyond the 30 s tolerance)', () => idp.sign({ ...good(), exp: now() - 120 })],
    ['not yet valid (nbf beyond the tolerance)', () => idp.sign({ ...good(), nbf: now() + 300 })],
    ['from another issuer', () => idp.sign({ ...good(), iss: 'https://evil.test' })],
    ['for another audience', () => idp.sign({ ...good(), aud: 'https://other.test/api' })],
    ['signed by an unknown kid', async () => idp.sign(good(), { key: await signingKey('k-unknown') })],
    ['with alg none', async () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64(good())}.`],
    [
      'HS256 signed with the public key',
      async () => {
        const { createHmac } = await import('node:crypto');
        const head = `${b64({ alg: 'HS256', kid: idp.key.kid })}.${b64(good())}`;
        const secret = JSON.stringify(idp.key.publicJwk);
        return `${head}.${createHmac('sha256', secret).update(head).digest('base64url')}`;
      },
    ],
    [
      'a tampered payload',
      async () => {
        const [head, , signature] = (await idp.sign(good())).split('.');
        return `${head}.${b64({ ...good(), tier: 'enterprise', sub: 'someone-else' })}.${signature}`;
      },
    ],
    ['over 8 KB', () => idp.sign({ ...good(), pad: 'x'.repeat(9000) })],
    ['garbage after Bearer (three dots of nothing)', async () => 'a.b.c'],
  ];

  it.each(cases)('%s', async (_what, make) => {
    const bad = await make();
    tokensSeen.push(bad);
    scripted.upstream.resetRecords();
    const budgetBefore = await gql(gateway.url, BUDGET, { headers: bearer(await token('web-pro')) });
    for (const lane of [gql, (_url: string, q: string, o: object) => gqlInYoga(gateway, q, o)]) {
      const result = await lane(gateway.url, CHECK, { headers: bearer(bad) });
      expect(result.status).toBe(401);
      expect(result.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
      expect(codes(result)).toEqual(['UNAUTHENTICATED']);
      expect(result.data).toBeUndefined();
      expect(result.text).not.toContain(bad);
    }
    expect(checks()).toBe(0);
    // Nothing billed to the user the token claims to be.
    const budgetAfter = await gql(gateway.url, BUDGET, { headers: bearer(await token('web-pro')) });
    expect(budgetAfter.data?.budget).toEqual(budgetBefore.data?.budget);
  });

  it.each([
    ['two words', 'Bearer a.b.c d'],
    ['a bare credential', 'garbage-without-a-scheme'],
  ])('a malformed Authorization header (%s) is 401 invalid_token too', async (_what, header) => {
    scripted.upstream.resetRecords();
    const result = await gql(gateway.url, CHECK, { headers: { authorization: header } });
    expect(result.status).toBe(401);
    expect(result.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    expect(checks()).toBe(0);
  });
});

describe('AUTH_MODE=tokens', () => {
  it('refuses API keys with 401; a caller without a credential is the free tier', async () => {
    const tokensOnly = await scripted.gateway(
      { AUTH_ISSUER: idp.issuer, AUTH_AUDIENCE: AUDIENCE, UPSTREAM_KEYS, AUTH_MODE: 'tokens' },
      { logger: captured.logger },
    );
    scripted.upstream.resetRecords();
    for (const headers of [{ authorization: 'Bearer sk-direct' }, { 'x-api-key': 'sk-direct' }] as Record<
      string,
      string
    >[]) {
      const refused = await gql(tokensOnly.url, CHECK, { headers });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    }
    expect(checks()).toBe(0);
    expect((await gql(tokensOnly.url, CHECK)).status).toBe(200);
    expect(authOf(0)).toBeUndefined();
    const pro = await token('web-pro');
    expect((await gql(tokensOnly.url, CHECK, { headers: bearer(pro) })).status).toBe(200);
    expect(authOf(1)).toBe('Bearer up-key-pro-0001');
  });
});

describe('the provider', () => {
  it('down: token callers get a typed 503 with Retry-After, API-key callers are not affected; back: tokens verify again', async () => {
    await idp.stop();
    // A gateway started while the provider is down: it has neither discovery nor keys.
    const fresh = await scripted.gateway(
      { AUTH_ISSUER: idp.issuer, AUTH_AUDIENCE: AUDIENCE, UPSTREAM_KEYS, AUTH_JWKS_COOLDOWN_S: '0' },
      { logger: captured.logger },
    );
    try {
      const unsigned = await idp.sign({
        sub: 'web-pro',
        tier: 'pro',
        iss: idp.issuer,
        aud: AUDIENCE,
        exp: Math.floor(Date.now() / 1000) + 300,
      });
      tokensSeen.push(unsigned);
      scripted.upstream.resetRecords();
      const down = await gql(fresh.url, CHECK, { headers: bearer(unsigned) });
      expect(down.status).toBe(503);
      expect(codes(down)).toEqual(['UPSTREAM_UNAVAILABLE']);
      expect(down.errors?.[0]?.extensions).toMatchObject({ upstream: 'identity-provider' });
      expect(Number(down.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(checks()).toBe(0);
      const keyed = await gql(fresh.url, CHECK, { headers: { 'x-api-key': 'sk-direct' } });
      expect(keyed.status).toBe(200);
      await idp.start();
      // Discovery is asked again at most once per cooldown (0 here): the next token verifies.
      expect(
        await until(
          async () => (await gql(fresh.url, CHECK, { headers: bearer(unsigned) })).status === 200,
          20,
          100,
        ),
      ).toBe(true);
    } finally {
      if (!idp.issuer) await idp.start();
    }
  });

  it('rotates its keys: the new kid is fetched; the old one stops once the JWKS drops it', async () => {
    const rotating = await scripted.gateway(
      {
        AUTH_ISSUER: idp.issuer,
        AUTH_AUDIENCE: AUDIENCE,
        UPSTREAM_KEYS,
        AUTH_JWKS_COOLDOWN_S: '0',
        AUTH_JWKS_MAX_AGE_S: '1',
      },
      { logger: captured.logger },
    );
    const old = idp.key;
    const oldToken = await token('web-pro');
    expect((await gql(rotating.url, CHECK, { headers: bearer(oldToken) })).status).toBe(200);
    const next = await signingKey('k2');
    // The provider publishes both, signs with the new one.
    await idp.rotate([next, old]);
    const newToken = await token('web-pro');
    expect(newToken).not.toBe(oldToken);
    expect((await gql(rotating.url, CHECK, { headers: bearer(newToken) })).status).toBe(200);
    // Remembered or not, the old token holds while its key is published.
    expect((await gql(rotating.url, CHECK, { headers: bearer(oldToken) })).status).toBe(200);
    // Then the old key leaves the JWKS: within its maximum age (1 s) the old token is refused.
    await idp.rotate([next]);
    expect(
      await until(
        async () => (await gql(rotating.url, CHECK, { headers: bearer(oldToken) })).status === 401,
        40,
        100,
      ),
    ).toBe(true);
    expect((await gql(rotating.url, CHECK, { headers: bearer(newToken) })).status).toBe(200);
  });
});

describe('settings that contradict each other stop the start with one line', () => {
  it.each([
    [{ AUTH_ISSUER: 'http://127.0.0.1:9' }, 'AUTH_ISSUER needs AUTH_AUDIENCE'],
    [{ AUTH_AUDIENCE: AUDIENCE }, 'AUTH_AUDIENCE needs AUTH_ISSUER'],
    [{ AUTH_MODE: 'tokens' }, 'AUTH_MODE=tokens needs AUTH_ISSUER'],
  ])('%j', async (env, message) => {
    await expect(scripted.gateway(env)).rejects.toThrow(message);
  });
});

describe('logs', () => {
  it('no log line holds a token or an upstream key; a user is named by its digest', () => {
    const text = captured.text();
    expect(tokensSeen.length).toBeGreaterThan(10);
    for (const seen of tokensSeen) expect(text).not.toContain(seen);
    // Not even a token's signature or payload part.
    for (const seen of tokensSeen)
      for (const part of seen.split('.')) if (part.length > 20) expect(text).not.toContain(part);
    expect(text).not.toContain('up-key-pro-0001');
    expect(text).not.toContain('up-key-enterprise-0002');
    expect(text).toMatch(/"user:[0-9a-f]{64}"/);
  });
});
