/**
 * /mcp as an OAuth 2.1 protected resource (contract §13's last point; the MCP authorization
 * specification, RFC 9728), against a real OpenID provider (oidc-provider on loopback): the
 * metadata document names the provider; with AUTH_MODE=tokens a request without a token is 401
 * pointing at it; a token for another audience is refused; and the MCP SDK's own client, with its
 * client-credentials provider, finds the provider from the 401, gets a token for the /mcp resource,
 * lists and calls tools as that user, under that user's budget, the gateway sending the tier's key
 * upstream. Tokens on the GraphQL lanes: identity-tokens.test.ts.
 */
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, type TestGateway } from '../support/gateway.js';
import {
  CLIENT_SECRET,
  startIdentityProvider,
  type TestIdentityProvider,
} from '../support/identity-provider.js';
import { callTool, connectMcp, postMcp, toolCodes } from '../support/mcp-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';

const scripted = useScriptedGateways();
let idp: TestIdentityProvider;
let gateway: TestGateway;
let resource = '';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
});

beforeAll(async () => {
  idp = await startIdentityProvider();
  routeSpecAnswers(scripted.upstream);
  scripted.upstream.route('POST', '/api/v1/check', { body: nullBody({ gpu_cost_usd: 0.004 }) });
  // The resource is this gateway's /mcp URL, which its tokens must name: known before it listens.
  const port = await freePort();
  resource = `http://127.0.0.1:${port}/mcp`;
  gateway = await scripted.gateway(
    {
      AUTH_ISSUER: idp.issuer,
      AUTH_AUDIENCE: resource,
      AUTH_MODE: 'tokens',
      UPSTREAM_KEYS: 'pro:up-key-pro-0001',
      COST_BUDGETS: JSON.stringify({ 'user:agent-pro': { '1h': 0.006 } }),
    },
    { port },
  );
});
afterAll(async () => {
  await idp?.stop();
});

describe('the protected resource metadata (RFC 9728)', () => {
  it.each(['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp'])(
    '%s names the /mcp resource and the provider as its authorization server',
    async (path) => {
      const response = await fetch(`${gateway.origin}${path}`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(await response.json()).toMatchObject({
        resource,
        authorization_servers: [idp.issuer],
        bearer_methods_supported: ['header'],
      });
    },
  );
});

describe('refusals name the metadata', () => {
  const metadata = () => `resource_metadata="${gateway.origin}/.well-known/oauth-protected-resource"`;

  it('no token (AUTH_MODE=tokens): 401 with WWW-Authenticate: Bearer resource_metadata', async () => {
    const response = await postMcp(gateway.origin, INITIALIZE);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(`Bearer ${metadata()}`);
    // An API key is not a token here either.
    const keyed = await postMcp(gateway.origin, INITIALIZE, { 'x-api-key': 'sk-direct' });
    expect(keyed.status).toBe(401);
  });

  it('a token for another audience: 401 invalid_token, nothing called', async () => {
    const other = await idp.token('agent-pro', 'https://other-mcp.test/mcp');
    scripted.upstream.resetRecords();
    const response = await postMcp(gateway.origin, INITIALIZE, { authorization: `Bearer ${other}` });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(`Bearer error="invalid_token", ${metadata()}`);
    const body = await response.text();
    expect(body).toContain('another audience');
    expect(body).not.toContain(other);
    expect(scripted.upstream.requests).toHaveLength(0);
  });
});

describe("the MCP SDK's client over OAuth (client credentials)", () => {
  it('finds the provider from the 401, gets a token for /mcp, and calls tools as that user with its budget', async () => {
    const provider = new ClientCredentialsProvider({
      clientId: 'agent-pro',
      clientSecret: CLIENT_SECRET,
      expectedIssuer: idp.issuer,
    });
    const client = await connectMcp(gateway.origin, { authProvider: provider });
    try {
      // The token the SDK got is the provider's, for this resource.
      const token = provider.tokens()?.access_token as string;
      const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
      expect(claims).toMatchObject({ iss: idp.issuer, aud: resource, sub: 'agent-pro', tier: 'pro' });
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toContain('is_null');
      scripted.upstream.resetRecords();
      const first = await callTool(client, 'is_null', { value: 1 });
      expect(first.isError).toBeUndefined();
      // The tier's key upstream, never the token.
      expect(scripted.upstream.requests[0]?.headers.authorization).toBe('Bearer up-key-pro-0001');
      expect(JSON.stringify(scripted.upstream.requests[0]?.headers)).not.toContain(token);
      // The user's own budget (user:agent-pro, 0.006 an hour): the budget tool shows it, the second
      // call does not fit.
      const budget = await callTool(client, 'budget');
      expect(budget.structuredContent).toMatchObject({
        budget: { windows: [{ window: '1h', limitUsd: 0.006 }] },
      });
      const second = await callTool(client, 'is_null', { value: 2 });
      expect(second.isError).toBe(true);
      expect(toolCodes(second)).toEqual(['BUDGET_EXCEEDED']);
      expect(scripted.upstream.count('POST', '/api/v1/check')).toBe(1);
    } finally {
      await client.close();
    }
  });
});
