/**
 * A real OpenID provider on loopback for the tests of tokens (docs/contract.md, Authentication):
 * `oidc-provider` (a certified OpenID Connect server) issuing JWT access tokens by the
 * client-credentials grant, each client a user of its own (`sub` = its client id) with a `tier`
 * claim, for an audience the test names (`resource`, RFC 8707).
 *
 * The provider's signing keys are the test's own (it is given them as its JWKS), so a test can also
 * sign the tokens a provider never issues (expired, not yet valid, another issuer or audience) with
 * the very key the gateway trusts. `stop()` and `start()` take the provider off its port and put it
 * back (the issuer down, then up again); `rotate(keys)` restarts it with another JWKS, as a provider's
 * key rotation does.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';
import Provider from 'oidc-provider';

/** A signing key: its id and its private half (JWK, for the provider; CryptoKey, for the test). */
export interface SigningKey {
  readonly kid: string;
  readonly privateJwk: JWK;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
}

/** A new RS256 key pair (the algorithm Keycloak and Auth0 sign access tokens with by default). */
export async function signingKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return {
    kid,
    privateKey,
    privateJwk: { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' },
    publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' },
  };
}

/** The clients the provider knows: each is a user (`sub`) with its tier claim (none: the free tier). */
export const CLIENTS = {
  'web-pro': 'pro',
  'web-enterprise': 'enterprise',
  'web-free': undefined,
  'agent-pro': 'pro',
} as const;
export type ClientId = keyof typeof CLIENTS;
/** Every client's secret (client_secret_basic). */
export const CLIENT_SECRET = 'test-client-secret';

export interface TestIdentityProvider {
  /** `http://127.0.0.1:<port>`: the issuer (no trailing slash). */
  readonly issuer: string;
  /** Requests the provider answered, by path (discovery, jwks, token). */
  readonly served: Map<string, number>;
  /** The key it signs with now. */
  readonly key: SigningKey;
  /** A client-credentials access token (JWT) of `client` for `audience`. */
  token(client: ClientId, audience: string): Promise<string>;
  /** A token the test signs itself with the provider's key (or another), claims as given. */
  sign(claims: JWTPayload, options?: { key?: SigningKey; header?: Record<string, unknown> }): Promise<string>;
  /** Restarts it on the same port signing with `keys[0]` and publishing every key of `keys`. */
  rotate(keys: SigningKey[]): Promise<void>;
  /** Off its port: connections refused (the issuer down). */
  stop(): Promise<void>;
  /** Back on its port with the keys it had. */
  start(): Promise<void>;
}

export async function startIdentityProvider(
  options: { keys?: SigningKey[]; accessTokenTtlS?: number } = {},
): Promise<TestIdentityProvider> {
  let keys = options.keys ?? [await signingKey('k1')];
  const served = new Map<string, number>();
  let server: Server | undefined;
  let port = 0;
  let issuer = '';

  const providerOf = (published: SigningKey[]) => {
    const provider = new Provider(issuer, {
      jwks: { keys: published.map((key) => key.privateJwk) },
      clients: Object.entries(CLIENTS).map(([clientId, tier]) => ({
        client_id: clientId,
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        ...(tier === undefined ? {} : { tier }),
      })),
      extraClientMetadata: { properties: ['tier'] },
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => 'urn:test:no-resource',
          // JWT access tokens (RFC 9068) for whatever resource a client names: its `aud`.
          getResourceServerInfo: (_ctx, resource) => ({
            scope: 'api',
            audience: resource,
            accessTokenTTL: options.accessTokenTtlS ?? 300,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          }),
          useGrantedResource: () => true,
        },
      },
      ttl: { ClientCredentials: options.accessTokenTtlS ?? 300 },
      extraTokenClaims: (ctx) => {
        const tier = (ctx.oidc.client as { tier?: string } | undefined)?.tier;
        return tier === undefined ? {} : { tier };
      },
    });
    return provider;
  };

  const listen = async () => {
    server = createServer();
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
    issuer = `http://127.0.0.1:${port}`;
    const callback = providerOf(keys).callback();
    server.on('request', (req, res) => {
      // No keep-alive: a connection never outlives a restart (rotate, stop) to fail the next request.
      res.setHeader('connection', 'close');
      const path = (req.url ?? '').split('?')[0] as string;
      served.set(path, (served.get(path) ?? 0) + 1);
      callback(req, res);
    });
  };
  const close = async () => {
    const running = server;
    server = undefined;
    if (running === undefined) return;
    running.closeAllConnections();
    await new Promise<void>((resolve) => running.close(() => resolve()));
  };

  // oidc-provider warns once about its in-memory adapter and default TTLs: not the tests' business.
  const warn = console.warn;
  console.warn = () => {};
  try {
    await listen();
  } finally {
    console.warn = warn;
  }

  return {
    get issuer() {
      return issuer;
    },
    served,
    get key() {
      return keys[0] as SigningKey;
    },
    async token(client, audience) {
      const response = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${client}:${CLIENT_SECRET}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'api', resource: audience }),
      });
      const body = (await response.json()) as { access_token?: string; error?: string };
      if (body.access_token === undefined) throw new Error(`no token: ${response.status} ${body.error}`);
      return body.access_token;
    },
    async sign(claims, signOptions = {}) {
      const key = signOptions.key ?? (keys[0] as SigningKey);
      return new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt', ...signOptions.header })
        .sign(key.privateKey);
    },
    async rotate(next) {
      keys = next;
      await close();
      await listen();
    },
    stop: close,
    start: listen,
  };
}
