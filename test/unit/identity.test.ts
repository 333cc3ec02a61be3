/**
 * Who the caller is (src/gateway/identity.ts) on its own: the key read from the headers, anonymity,
 * the gateway's own API_KEYS and the one digest. In a gateway: the headers on both lanes in
 * integration/schema-http.test.ts, the APQ bound per client in integration/trusted-documents.test.ts,
 * one API_KEYS for the gateway and the embedded services in integration/gateway-services.test.ts.
 */
import { createHash } from 'node:crypto';
import type { GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { parseBudgets } from '../../src/gateway/budget-settings.js';
import { budgetPolicy } from '../../src/gateway/cost/budget-policy.js';
import {
  ANONYMOUS_CALLER,
  type Caller,
  callerIdOf,
  clientOf,
  createIdentity,
  keyCaller,
  parseApiKeys,
  parseUpstreamKeys,
  tierOfClaim,
} from '../../src/gateway/identity.js';
import { keyBucket, parseApiKeys as servicesParseApiKeys } from '../../src/services/shared/api-keys.js';

/** What `printf %s "$KEY" | sha256sum` prints: how an operator writes a `key:` scope. */
const sha256Hex = (key: string) => createHash('sha256').update(key).digest('hex');

/** Who sends these headers, to a gateway without an identity provider (API keys only: synchronous). */
const identify = (authorization: string | null | undefined, xApiKey: string | null | undefined) =>
  createIdentity().identify(authorization, xApiKey) as Caller | GraphQLError;

describe('the key, from the headers', () => {
  it.each([
    ['Authorization: Bearer', 'Bearer k-1', undefined, 'k-1'],
    ['the scheme in any case, spaces around', '  bEaReR   k-2  ', undefined, 'k-2'],
    ['X-API-Key', undefined, ' k-3 ', 'k-3'],
    ['Bearer before X-API-Key', 'Bearer k-first', 'k-second', 'k-first'],
    ['an empty Authorization counts as absent', '  ', 'k-4', 'k-4'],
    ['neither', undefined, undefined, undefined],
    ['an empty X-API-Key', null, '   ', undefined],
    ['the key free, kept as sent', 'Bearer free', undefined, 'free'],
  ])('%s', (_what, authorization, xApiKey, key) => {
    expect((identify(authorization, xApiKey) as Caller).upstreamKey).toBe(key);
  });

  it.each([
    ['Basic credentials', 'Basic dXNlcjpwYXNz', undefined],
    ['Basic credentials beside X-API-Key (no fall back to it)', 'Basic dXNlcjpwYXNz', 'k-x'],
    ['a bare key', 'k-bare', undefined],
    ['the scheme alone', 'Bearer', undefined],
    ['two tokens', 'Bearer k-1 k-2', undefined],
  ])(
    'an Authorization header with %s is refused: UNAUTHENTICATED, 401, naming no key',
    (_what, authorization, xApiKey) => {
      const refusal = identify(authorization, xApiKey) as GraphQLError;
      expect(refusal.extensions).toMatchObject({
        code: 'UNAUTHENTICATED',
        http: { status: 401, headers: { 'www-authenticate': 'Bearer' } },
      });
      expect(refusal.message).not.toContain('dXNlcjpwYXNz');
      expect(refusal.message).not.toContain('k-');
    },
  );
});

describe('anonymous callers', () => {
  it('no key and the key "free" are one anonymous caller; any other key is not', () => {
    const kind = (key: string | undefined) => (identify(undefined, key) as Caller).kind;
    expect(kind(undefined)).toBe('anonymous');
    expect(kind('free')).toBe('anonymous');
    expect(kind('Free')).toBe('key');
    expect(kind('demo-pro')).toBe('key');
    expect((identify('Bearer free', undefined) as Caller).id).toBe(ANONYMOUS_CALLER.id);
    expect(callerIdOf('free')).toBe('anonymous');
    expect(callerIdOf(undefined)).toBe('anonymous');
  });

  it('for bounds per client, anonymous callers are told apart by their address, "free" included', () => {
    const free = keyCaller('free');
    expect(clientOf(free, '10.0.0.1')).toBe(clientOf(keyCaller(undefined), '10.0.0.1'));
    expect(clientOf(free, '10.0.0.1')).toBe('ip:10.0.0.1');
    expect(clientOf(free, '10.0.0.1')).not.toBe(clientOf(free, '10.0.0.2'));
    // A key is one client wherever it calls from.
    expect(clientOf(keyCaller('k-1'), '10.0.0.1')).toBe(clientOf(keyCaller('k-1'), '10.0.0.2'));
  });
});

describe('the one digest of a key', () => {
  const key = 'sk-live-0123456789';

  it('names a caller `key:<sha256 hex of the key>`, never the key', () => {
    expect(callerIdOf(key)).toBe(`key:${sha256Hex(key)}`);
    expect(callerIdOf(key)).not.toContain(key);
    expect(clientOf(keyCaller(key), '10.0.0.1')).toBe(callerIdOf(key));
    expect((identify(`Bearer ${key}`, undefined) as Caller).id).toBe(callerIdOf(key));
  });

  it('is the name of the key scope in COST_BUDGETS, the budget store key, and the services’ rate-limit bucket', () => {
    const policy = budgetPolicy({
      budgets: parseBudgets(JSON.stringify({ [`key:${sha256Hex(key)}`]: { '1h': 1 } })),
    });
    const caller = policy?.callerOf(keyCaller(key));
    expect(caller?.scope.name).toBe(callerIdOf(key));
    expect(caller?.id).toBe(callerIdOf(key));
    expect(keyBucket(key)).toBe(callerIdOf(key));
  });
});

describe("the gateway's API_KEYS", () => {
  it('parses key:tier pairs, skipping empty entries', () => {
    expect([...parseApiKeys(' alice:pro , bob:enterprise,,carol:free ')]).toEqual([
      ['alice', 'pro'],
      ['bob', 'enterprise'],
      ['carol', 'free'],
    ]);
    expect(parseApiKeys('').size).toBe(0);
  });

  it.each([
    ['an unknown tier', 'sk-secret:gold', 1],
    ['no tier', 'ok:pro,sk-secret', 2],
    ['no key', 'ok:pro,:pro', 2],
    ['a key with a space', 'ok:pro,sk secret:pro', 2],
  ])('refuses %s, naming the entry by its position and never the key', (_what, text, position) => {
    let message = '';
    try {
      parseApiKeys(text);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toBe(`entry #${position} is not key:tier with tier free|pro|enterprise`);
    expect(message).not.toContain('secret');
  });

  it.each(['alice:pro', ' alice:pro , bob:enterprise ,carol:free', 'dup:pro,dup:enterprise'])(
    'reads %j as the reference services read it (the embedded services and the gateway agree)',
    (text) => {
      expect([...parseApiKeys(text)]).toEqual([...servicesParseApiKeys(text)]);
    },
  );

  it('is a setting of the gateway group, parsed at start; unset, the gateway knows no tiers', () => {
    const config = loadConfig({ API_KEYS: 'k1:pro, k2:enterprise' });
    expect([...(config.server.apiKeys ?? [])]).toEqual([
      ['k1', 'pro'],
      ['k2', 'enterprise'],
    ]);
    expect(loadConfig({}).server.apiKeys).toBeUndefined();
  });

  it('a bad value stops the start with one problem on one line, the value hidden', () => {
    let message = '';
    try {
      loadConfig({ API_KEYS: 'sk-secret-key:platinum' });
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      message = (error as Error).message;
    }
    // The gateway and the embedded services read the one variable: it is named once.
    expect(message).toBe(
      'invalid configuration: API_KEYS=(value hidden): must be key:tier,key:tier with tiers free|pro|enterprise',
    );
  });
});

describe('UPSTREAM_KEYS, the keys the gateway holds for token callers', () => {
  it('parses tier:key pairs, inline or from a file (a mounted secret, one per line)', async () => {
    expect([...parseUpstreamKeys(' pro:sk-p ,enterprise:sk-e ')]).toEqual([
      ['pro', 'sk-p'],
      ['enterprise', 'sk-e'],
    ]);
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const file = join(mkdtempSync(join(tmpdir(), 'upstream-keys-')), 'keys');
    writeFileSync(file, 'pro:sk-p\nenterprise:sk-e\n');
    expect([...parseUpstreamKeys(`@${file}`)]).toEqual([
      ['pro', 'sk-p'],
      ['enterprise', 'sk-e'],
    ]);
  });

  it.each([
    ['an unknown tier', 'gold:sk-secret', 'entry #1 is not tier:key with tier free|pro|enterprise'],
    ['a tier twice', 'pro:sk-secret,pro:sk-secret2', 'tier pro is given twice'],
    ['no key', 'pro:', 'entry #1 is not tier:key with tier free|pro|enterprise'],
  ])('refuses %s without printing a key', (_what, text, message) => {
    expect(() => parseUpstreamKeys(text)).toThrow(message);
    let line = '';
    try {
      loadConfig({ UPSTREAM_KEYS: text });
    } catch (error) {
      line = (error as Error).message;
    }
    expect(line).toBe(`invalid configuration: UPSTREAM_KEYS=(value hidden): ${message}`);
    expect(line).not.toContain('sk-secret');
  });
});

describe("a token's tier claim", () => {
  it.each([
    ['pro', 'pro'],
    ['enterprise', 'enterprise'],
    [['user', 'pro'], 'pro'],
    [['pro', 'enterprise'], 'enterprise'],
    ['gold', 'free'],
    [undefined, 'free'],
    [42, 'free'],
  ])('%j is the %s tier', (claim, tier) => {
    expect(tierOfClaim(claim)).toBe(tier);
  });
});

describe('settings of the identity provider', () => {
  it('AUTH_MODE=tokens without an issuer stops the start with one line', () => {
    expect(() => createIdentity({ mode: 'tokens' })).toThrow('AUTH_MODE=tokens needs AUTH_ISSUER');
  });

  it('COST_BUDGETS takes user:<sub> scopes, and names a bad one by its position (a subject may be an address)', () => {
    expect([...parseBudgets('{"user:alice@example.com":{"1h":1}}').keys()]).toEqual([
      'user:alice@example.com',
    ]);
    expect(() => parseBudgets('{"user:alice@example.com":{"1h":"a lot"}}')).toThrow(
      'scope #1: window "1h" must be a number of dollars from 0 to 1000000',
    );
    expect(() => parseBudgets('{"user:":{"1h":1}}')).toThrow(/^scope #1 is not/);
  });

  it('a user without a scope of its own has its tier’s, else the default', () => {
    const policy = budgetPolicy({
      budgets: parseBudgets('{"default":{"1h":0.5},"tier:pro":{"1h":1},"user:alice":{"1h":2}}'),
    });
    const user = (subject: string, tier: 'free' | 'pro'): Caller => ({
      kind: 'user',
      id: `user:${sha256Hex(subject)}`,
      upstreamKey: undefined,
      tier,
      scope: `user:${subject}`,
    });
    expect(policy?.callerOf(user('alice', 'pro'))?.scope.name).toBe('user:alice');
    expect(policy?.callerOf(user('bob', 'pro'))?.scope.name).toBe('tier:pro');
    expect(policy?.callerOf(user('carol', 'free'))?.scope.name).toBe('default');
    // Stored under the caller's id (a digest), never the subject.
    expect(policy?.callerOf(user('alice', 'pro'))?.id).toBe(`user:${sha256Hex('alice')}`);
    expect(policy?.callerOf(user('alice', 'pro'))?.scope.kind).toBe('user');
  });
});
