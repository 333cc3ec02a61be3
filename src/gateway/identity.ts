/**
 * Who the caller is (docs/contract.md, Authentication): the one module that reads a caller's
 * credential from a request's headers and decides, for every lane (the fast path, Yoga's, /mcp),
 * who the caller is, which tier it has, what the gateway sends upstream for it and how every store
 * and log names it. Nothing else in the gateway parses these headers, verifies a token or hashes a
 * key.
 *
 * - The credential: `Authorization: Bearer <credential>` (the scheme in any case), else
 *   `X-API-Key: <key>`. An Authorization header that is there but is not `Bearer <credential>`
 *   (`Basic …`, a bare key, `Bearer` alone) is refused with UNAUTHENTICATED (HTTP 401) before
 *   anything runs, whatever X-API-Key says: the reference services answer it so, and falling back to
 *   X-API-Key would serve the caller under another identity than the one its Authorization header
 *   meant. An empty header counts as absent.
 * - An API key (`kind: 'key'`): forwarded to the upstreams as sent, which accept or refuse it; its
 *   tier from the gateway's own API_KEYS (`key:tier,key:tier`), for the `tier:` budget scopes.
 * - Anonymous (`kind: 'anonymous'`): no credential, or the key `free` (both specs' word for the free
 *   tier, forwarded as sent). Everywhere else the two are one caller: one shared `anonymous` budget,
 *   one caller for shared calls and cached answers and, for bounds per client (APQ registrations), a
 *   client by its address, as nothing else tells anonymous callers apart.
 * - A user (`kind: 'user'`, with AUTH_ISSUER): a credential that is a JWT, in either header (any
 *   bearer one, with AUTH_MODE=tokens), is verified by token-verifier.ts (jose), never forwarded; a verified token is a caller of its
 *   own, its subject scoped by the issuer, its tier from the claim AUTH_TIER_CLAIM. The gateway calls
 *   the upstreams with the key UPSTREAM_KEYS holds for that tier (none for the free tier unless it
 *   lists one): the token goes to no upstream. A token that fails verification is 401 with
 *   `WWW-Authenticate: Bearer error="invalid_token"`; the provider unreachable is 503 with
 *   Retry-After (UPSTREAM_UNAVAILABLE, `upstream: identity-provider`); API keys never wait for it.
 * - The one name of a caller: `key:<sha256 hex of the key>` (src/shared/api-key-digest.ts), as
 *   COST_BUDGETS writes it; `user:<sha256 hex of "<issuer>\n<subject>">`; `anonymous`. Budget store
 *   keys, APQ owners, shared-call and cache keys and log lines use it; no key or token is in any of
 *   them. A user's own budget scope is `user:<subject>` as COST_BUDGETS writes it.
 */
import type { GraphQLError } from 'graphql';
import { LRUCache } from 'lru-cache';
import { apiKeyDigest } from '../shared/api-key-digest.js';
import { inlineOrFile } from '../shared/settings.js';
import { gatewayError } from './errors.js';
import { looksLikeJwt, type TokenVerdict, type TokenVerifier, type VerifiedToken } from './token-verifier.js';

/** The caller tiers API_KEYS names (the services' three; the gateway's own type, it imports none of theirs). */
export type Tier = 'free' | 'pro' | 'enterprise';

/** The key that names the free tier explicitly: an anonymous caller, like no key at all. */
export const FREE_KEY = 'free';

/** How every store and log names the anonymous caller. */
export const ANONYMOUS = 'anonymous';

/** Who a caller is, decided once per request. */
export interface Caller {
  readonly kind: 'anonymous' | 'key' | 'user';
  /** The name in every store and log: `anonymous`, `key:<sha256 hex>` or `user:<sha256 hex>`. */
  readonly id: string;
  /**
   * What goes upstream as the caller's key: its own API key (or `free`), its tier's key of
   * UPSTREAM_KEYS for a user; undefined: none.
   */
  readonly upstreamKey: string | undefined;
  /** API_KEYS' tier for a key it lists, the token's for a user; undefined when not known. */
  readonly tier: Tier | undefined;
  /** The caller's own COST_BUDGETS scope (`key:<sha256 hex>`, `user:<subject>`); undefined: anonymous. */
  readonly scope: string | undefined;
}

/** A caller, or the refusal of its credential (nothing runs). */
export type Identified = Caller | GraphQLError;

/** The anonymous caller without a key. */
export const ANONYMOUS_CALLER: Caller = Object.freeze({
  kind: 'anonymous',
  id: ANONYMOUS,
  upstreamKey: undefined,
  tier: undefined,
  scope: undefined,
});

/** The anonymous caller that sent the key `free`, forwarded as sent. */
const FREE_CALLER: Caller = Object.freeze({ ...ANONYMOUS_CALLER, upstreamKey: FREE_KEY });

const API_KEYS_ENTRY = /^([^:,\s]+):(free|pro|enterprise)$/;

/**
 * Parses API_KEYS, `key:tier,key:tier` (tiers free|pro|enterprise; a key holds no `:`, `,` or
 * space; empty entries are skipped). Throws an Error naming the bad entry by its position, never the
 * key.
 */
export function parseApiKeys(text: string): ReadonlyMap<string, Tier> {
  const tiers = new Map<string, Tier>();
  text.split(',').forEach((raw, index) => {
    const entry = raw.trim();
    if (entry === '') return;
    const match = API_KEYS_ENTRY.exec(entry);
    if (match === null) throw new Error(`entry #${index + 1} is not key:tier with tier free|pro|enterprise`);
    tiers.set(match[1] as string, match[2] as Tier);
  });
  return tiers;
}

const UPSTREAM_KEYS_ENTRY = /^(free|pro|enterprise):([^,\s]+)$/;

/**
 * Parses UPSTREAM_KEYS, `tier:key,tier:key` (tiers free|pro|enterprise, each at most once), or
 * `@<file>` holding the same (a mounted secret; whitespace and newlines between entries allowed).
 * Throws an Error naming the bad entry by its position, never a key.
 */
export function parseUpstreamKeys(value: string): ReadonlyMap<Tier, string> {
  const text = inlineOrFile(value);
  const keys = new Map<Tier, string>();
  text.split(/[,\n]/).forEach((raw, index) => {
    const entry = raw.trim();
    if (entry === '') return;
    const match = UPSTREAM_KEYS_ENTRY.exec(entry);
    if (match === null) throw new Error(`entry #${index + 1} is not tier:key with tier free|pro|enterprise`);
    const tier = match[1] as Tier;
    if (keys.has(tier)) throw new Error(`tier ${tier} is given twice`);
    keys.set(tier, match[2] as string);
  });
  return keys;
}

/** The tier a token's claim names: `enterprise` or `pro` (a list: the highest it holds), else free. */
export function tierOfClaim(value: unknown): Tier {
  const names = Array.isArray(value) ? value : [value];
  if (names.includes('enterprise')) return 'enterprise';
  if (names.includes('pro')) return 'pro';
  return 'free';
}

const BEARER = /^\s*bearer\s+(\S+)\s*$/i;

/** The name of a caller by its API key: `key:<sha256 hex of the key>`, or `anonymous` (none, `free`). */
export function callerIdOf(apiKey: string | undefined): string {
  return apiKey === undefined || apiKey === FREE_KEY ? ANONYMOUS : `key:${apiKeyDigest(apiKey)}`;
}

/**
 * The caller of an API key (`free` and none: the anonymous caller), with the tier API_KEYS gives it.
 * createIdentity keeps one per key; tests and tools build one directly.
 */
export function keyCaller(apiKey: string | undefined, tier?: Tier | undefined): Caller {
  if (apiKey === undefined) return ANONYMOUS_CALLER;
  if (apiKey === FREE_KEY) return FREE_CALLER;
  const id = callerIdOf(apiKey);
  return Object.freeze({ kind: 'key', id, upstreamKey: apiKey, tier, scope: id });
}

/** Who a caller is for bounds per client (APQ registrations): its name, or its address when anonymous. */
export function clientOf(caller: Caller, address: string | undefined): string {
  return caller.kind === 'anonymous' ? `ip:${address ?? 'unknown'}` : caller.id;
}

export interface IdentityOptions {
  /** Tiers of the keys the gateway's API_KEYS lists. */
  tiers?: ReadonlyMap<string, Tier> | undefined;
  /** With AUTH_ISSUER: its tokens' verifier (token-verifier.ts). */
  verifier?: TokenVerifier | undefined;
  /** AUTH_MODE: `tokens` refuses API keys. @default 'both' */
  mode?: 'both' | 'tokens';
  /** AUTH_TIER_CLAIM. @default 'tier' */
  tierClaim?: string;
  /** UPSTREAM_KEYS: the key the gateway sends upstream for a user of each tier. */
  upstreamKeys?: ReadonlyMap<Tier, string> | undefined;
}

export interface Identity {
  /** Whether tokens of an identity provider are verified (AUTH_ISSUER). */
  readonly tokens: boolean;
  /** AUTH_MODE=tokens: API keys are refused. */
  readonly tokensOnly: boolean;
  /**
   * Who sends a request with these headers: a caller or the refusal of its credential, at once for
   * an API key or a remembered token, a promise while a token is verified. Never rejects.
   */
  identify(
    authorization: string | null | undefined,
    xApiKey: string | null | undefined,
  ): Identified | Promise<Identified>;
}

/** An Authorization header that is not `Bearer <credential>`. */
function malformedAuthorization(tokens: boolean): GraphQLError {
  // A new error per request: errors gather paths and locations as they travel.
  return gatewayError(
    'UNAUTHENTICATED',
    tokens
      ? 'The Authorization header must be "Bearer <token>" (or "Bearer <API key>"). Send it there, or nothing for the free tier.'
      : 'The Authorization header must be "Bearer <API key>". Send the key there or in X-API-Key, or neither for the free tier.',
    // RFC 9110: a 401 names the scheme it takes; RFC 6750 §3.1 the error where a token was meant.
    { http: { status: 401, headers: { 'www-authenticate': tokens ? INVALID_TOKEN_CHALLENGE : 'Bearer' } } },
  );
}

/** RFC 6750 §3: the challenge of a 401 for a token that is not valid. */
export const INVALID_TOKEN_CHALLENGE = 'Bearer error="invalid_token"';

function invalidToken(message: string): GraphQLError {
  return gatewayError('UNAUTHENTICATED', message, {
    http: { status: 401, headers: { 'www-authenticate': INVALID_TOKEN_CHALLENGE } },
  });
}

function providerUnavailable(retryAfterS: number): GraphQLError {
  return gatewayError(
    'UPSTREAM_UNAVAILABLE',
    `The identity provider could not be reached to verify the bearer token; try again in ${retryAfterS} s.`,
    {
      upstream: 'identity-provider',
      retryAfterSeconds: retryAfterS,
      http: { status: 503, headers: { 'retry-after': String(retryAfterS) } },
    },
  );
}

/** The identity of this gateway's callers. Throws one line when the options contradict each other. */
export function createIdentity(options: IdentityOptions = {}): Identity {
  const tiers = options.tiers ?? new Map<string, Tier>();
  const { verifier } = options;
  const tokensOnly = options.mode === 'tokens';
  if (tokensOnly && verifier === undefined)
    throw new Error(
      'AUTH_MODE=tokens needs AUTH_ISSUER: without an identity provider no caller could sign in',
    );
  const tierClaim = options.tierClaim ?? 'tier';
  const upstreamKeys = options.upstreamKeys ?? new Map<Tier, string>();

  // One caller per key, not per request: a digest and a lookup, once.
  const keyCallers = new LRUCache<string, Caller>({ max: 10_000 });
  const callerOfKey = (key: string): Caller => {
    let caller = keyCallers.get(key);
    if (caller === undefined) {
      caller = keyCaller(key, tiers.get(key));
      keyCallers.set(key, caller);
    }
    return caller;
  };

  // One caller per verified token (remembered tokens return the same object).
  const userCallers = new WeakMap<VerifiedToken, Caller>();
  const userCaller = (token: VerifiedToken): Caller => {
    let caller = userCallers.get(token);
    if (caller === undefined) {
      const tier = tierOfClaim(token.claims[tierClaim]);
      caller = Object.freeze({
        kind: 'user',
        id: `user:${apiKeyDigest(`${token.issuer}\n${token.subject}`)}`,
        upstreamKey: upstreamKeys.get(tier),
        tier,
        scope: `user:${token.subject}`,
      });
      userCallers.set(token, caller);
    }
    return caller;
  };

  const judged = (verdict: TokenVerdict): Identified => {
    switch (verdict.outcome) {
      case 'verified':
        return userCaller(verdict.token);
      case 'invalid':
        return invalidToken(
          `The bearer token was refused: ${verdict.reason}. Get a new token from the identity provider.`,
        );
      default:
        return providerUnavailable(verdict.retryAfterS);
    }
  };

  const verified = (token: string): Identified | Promise<Identified> => {
    const verdict = (verifier as TokenVerifier).verify(token);
    return verdict instanceof Promise ? verdict.then(judged) : judged(verdict);
  };

  const apiKeyRefused = () =>
    invalidToken(
      'This endpoint takes tokens of its identity provider only (AUTH_MODE=tokens), not API keys. Send "Authorization: Bearer <token>", or nothing for the free tier.',
    );

  return {
    tokens: verifier !== undefined,
    tokensOnly,
    identify(authorization, xApiKey) {
      if (authorization != null && authorization.trim() !== '') {
        const match = BEARER.exec(authorization);
        if (match === null) return malformedAuthorization(verifier !== undefined);
        const credential = match[1] as string;
        if (credential === FREE_KEY) return FREE_CALLER;
        if (verifier !== undefined && (tokensOnly || looksLikeJwt(credential))) return verified(credential);
        return callerOfKey(credential);
      }
      const key = xApiKey?.trim();
      if (!key) return ANONYMOUS_CALLER;
      if (key === FREE_KEY) return FREE_CALLER;
      // A token sent as X-API-Key is still a token: verified, never forwarded upstream as a key.
      if (verifier !== undefined && looksLikeJwt(key)) return verified(key);
      if (tokensOnly) return apiKeyRefused();
      return callerOfKey(key);
    },
  };
}
