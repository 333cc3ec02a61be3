/**
 * Verifies the bearer tokens of an identity provider (docs/contract.md, Authentication): JWTs signed
 * by a key of the issuer's JWKS, read through its OpenID Connect discovery document. identity.ts
 * decides who a caller is and asks this module only "is this token good, and whose is it".
 *
 * Everything cryptographic is jose's (`jwtVerify`, `createRemoteJWKSet` with its cache, its cooldown
 * and its timeout); nothing here parses or checks a signature. What is here:
 * - discovery: `<AUTH_ISSUER>/.well-known/openid-configuration` read once (its `issuer` must be
 *   AUTH_ISSUER exactly, as OpenID Connect Discovery §4.3 requires), its `jwks_uri` handed to jose;
 *   fetched at start in the background and again on the first token while it has not answered, at
 *   most once per cooldown, so a provider that is down is not asked on every request;
 * - the rules jose is given: asymmetric algorithms only (`none` and HMAC refused, so no token
 *   "signed" with the public key as an HMAC secret), `iss`, `aud`, `exp` and `nbf` with the clock
 *   tolerance, `sub` and `exp` required;
 * - remembered tokens: a verified token's text maps to its verdict, bounded in count and bytes, never
 *   past its `exp`, and forgotten once the JWKS was fetched again (the key that signed it may have
 *   left) or is older than its maximum age (jose would fetch it again for a verification);
 * - the outcome as a value, never an exception: the verified claims, or `invalid` with a reason a
 *   client may read (never the token), or `unavailable` when the provider could not be reached.
 */
import {
  createRemoteJWKSet,
  errors,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwksCache,
  jwtVerify,
  type RemoteJWKSet,
} from 'jose';
import { LRUCache } from 'lru-cache';
import { isPromise } from '../shared/is-promise.js';

/** The algorithms a token may be signed with: asymmetric ones (RFC 7518, RFC 8037). */
export const TOKEN_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

/** Longest token verified, in characters: a larger one is refused unread. */
export const MAX_TOKEN_CHARS = 8192;

export interface TokenVerifierOptions {
  /** AUTH_ISSUER, exactly as the provider writes it in `iss` (a trailing slash is kept). */
  issuer: string;
  /** AUTH_AUDIENCE: the `aud` values accepted (a token must name one of them). */
  audiences: readonly string[];
  /** AUTH_CLOCK_TOLERANCE_S. @default 30 */
  clockToleranceS?: number;
  /** AUTH_JWKS_MAX_AGE_S: how long the JWKS is used before it is fetched again. @default 600 */
  jwksMaxAgeS?: number;
  /** AUTH_JWKS_COOLDOWN_S: after a fetch, how long an unknown `kid` waits before another. @default 30 */
  jwksCooldownS?: number;
  /** AUTH_ISSUER_TIMEOUT_MS: one fetch of the discovery document or the JWKS. @default 3000 */
  timeoutMs?: number;
  /** AUTH_TOKEN_CACHE: verified tokens remembered; 0 remembers none. @default 10000 */
  rememberedTokens?: number;
  /** The clock, in ms (tests move it). @default Date.now */
  now?: () => number;
}

/** What a verified token says. */
export interface VerifiedToken {
  readonly issuer: string;
  readonly subject: string;
  readonly claims: JWTPayload;
  /** `exp`, in ms. */
  readonly expiresAtMs: number;
}

/** Why a token was refused, in words a client may read: none of them quotes the token. */
export type InvalidReason =
  | 'too large'
  | 'not a JWT'
  | 'expired'
  | 'not yet valid'
  | 'issued by another issuer'
  | 'for another audience'
  | 'without a subject or an expiry'
  | 'signed with an algorithm this gateway does not accept'
  | 'signed by a key the issuer does not publish'
  | 'its signature does not verify'
  | 'its claims are not valid';

export type TokenVerdict =
  | { readonly outcome: 'verified'; readonly token: VerifiedToken }
  | { readonly outcome: 'invalid'; readonly reason: InvalidReason }
  | { readonly outcome: 'unavailable'; readonly retryAfterS: number };

export interface TokenVerifier {
  /** The verdict on a token: a value at once when it is remembered, else a promise. */
  verify(token: string): TokenVerdict | Promise<TokenVerdict>;
  /** Discovery and the JWKS fetched ahead of the first token: whether both answered; never rejects. */
  warm(): Promise<boolean>;
}

/** The discovery document's URL: the issuer without its trailing slashes, then the well-known path. */
export function discoveryUrl(issuer: string): string {
  return `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Whether a bearer credential has a JWT's shape (three base64url parts): API keys do not. */
export function looksLikeJwt(credential: string): boolean {
  return JWT_SHAPE.test(credential);
}

/** jose's error as the reason a client reads, or undefined when it is the provider's fault. */
function invalidReason(error: unknown): InvalidReason | undefined {
  if (error instanceof errors.JWTExpired) return 'expired';
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'nbf':
      case 'iat':
        return 'not yet valid';
      case 'iss':
        return 'issued by another issuer';
      case 'aud':
        return 'for another audience';
      case 'sub':
      case 'exp':
        return 'without a subject or an expiry';
      default:
        return 'its claims are not valid';
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported)
    return 'signed with an algorithm this gateway does not accept';
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
    return 'signed by a key the issuer does not publish';
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'its signature does not verify';
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) return 'not a JWT';
  // JWKSTimeout, JWKSInvalid, a refused connection, a JWKS answered 5xx: the provider, not the token.
  return undefined;
}

interface Remembered {
  readonly token: VerifiedToken;
  /** The JWKS fetch the token was verified with (jose's `uat`). */
  readonly fetchedAt: number | undefined;
}

/** A verifier of AUTH_ISSUER's tokens. */
export function createTokenVerifier(options: TokenVerifierOptions): TokenVerifier {
  const { issuer, audiences } = options;
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? 3000;
  const cooldownMs = (options.jwksCooldownS ?? 30) * 1000;
  const clockTolerance = options.clockToleranceS ?? 30;
  const verifyOptions = {
    issuer,
    audience: [...audiences],
    algorithms: [...TOKEN_ALGORITHMS],
    clockTolerance,
    requiredClaims: ['sub', 'exp'],
  };
  // jose's documented external cache: it writes the JWKS and the time of each fetch here, which says
  // whether the JWKS changed since a token was remembered.
  const cache: { jwks?: unknown; uat?: number } = {};
  let keys: RemoteJWKSet | undefined;
  let discovering: Promise<RemoteJWKSet | undefined> | undefined;
  let lastAttempt = Number.NEGATIVE_INFINITY;
  const retryAfterS = Math.max(1, Math.ceil(cooldownMs / 1000));

  const discover = async (): Promise<RemoteJWKSet | undefined> => {
    lastAttempt = now();
    try {
      const response = await fetch(discoveryUrl(issuer), {
        headers: { accept: 'application/json' },
        redirect: 'error',
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!response.ok) return undefined;
      const metadata = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
      if (metadata.issuer !== issuer || typeof metadata.jwks_uri !== 'string') return undefined;
      keys = createRemoteJWKSet(new URL(metadata.jwks_uri), {
        timeoutDuration: timeoutMs,
        cooldownDuration: cooldownMs,
        cacheMaxAge: (options.jwksMaxAgeS ?? 600) * 1000,
        [jwksCache]: cache as Record<string, never>,
      });
      return keys;
    } catch {
      return undefined;
    }
  };

  /** The JWKS resolver; undefined while the provider has not answered its discovery document. */
  const keysNow = (): RemoteJWKSet | undefined | Promise<RemoteJWKSet | undefined> => {
    if (keys !== undefined) return keys;
    if (discovering !== undefined) return discovering;
    // A provider that did not answer is asked again after the cooldown, not on every request.
    if (now() - lastAttempt < Math.min(cooldownMs, 5000)) return undefined;
    discovering = discover().finally(() => {
      discovering = undefined;
    });
    return discovering;
  };

  const rememberedTokens = options.rememberedTokens ?? 10_000;
  const remembered =
    rememberedTokens > 0
      ? new LRUCache<string, Remembered>({
          max: rememberedTokens,
          // Bounded in bytes too: tokens may be up to 8 KB each.
          maxSize: 8 * 1024 * 1024,
          sizeCalculation: (_value, token) => token.length,
        })
      : undefined;

  const unavailable: TokenVerdict = { outcome: 'unavailable', retryAfterS };

  const check = async (token: string, resolver: JWTVerifyGetKey): Promise<TokenVerdict> => {
    try {
      const rules =
        options.now === undefined ? verifyOptions : { ...verifyOptions, currentDate: new Date(now()) };
      const { payload } = await jwtVerify(token, resolver, rules);
      const verified: VerifiedToken = {
        issuer,
        subject: payload.sub as string,
        claims: payload,
        expiresAtMs: (payload.exp as number) * 1000,
      };
      remembered?.set(token, { token: verified, fetchedAt: cache.uat });
      return { outcome: 'verified', token: verified };
    } catch (error) {
      const reason = invalidReason(error);
      return reason === undefined ? unavailable : { outcome: 'invalid', reason };
    }
  };

  return {
    verify(token) {
      if (token.length > MAX_TOKEN_CHARS) return { outcome: 'invalid', reason: 'too large' };
      if (!looksLikeJwt(token)) return { outcome: 'invalid', reason: 'not a JWT' };
      const known = remembered?.get(token);
      if (known !== undefined) {
        // Never past its exp; never once the JWKS was fetched again or is due to be.
        if (now() < known.token.expiresAtMs && known.fetchedAt === cache.uat && keys?.fresh === true)
          return { outcome: 'verified', token: known.token };
        remembered?.delete(token);
      }
      const resolver = keysNow();
      if (resolver === undefined) return unavailable;
      if (!isPromise(resolver)) return check(token, resolver);
      return resolver.then((ready) => (ready === undefined ? unavailable : check(token, ready)));
    },
    async warm() {
      const resolver = await keysNow();
      if (resolver === undefined) return false;
      // jose fetches the JWKS on its first use; reload() fetches it now.
      return resolver.reload().then(
        () => true,
        () => false,
      );
    },
  };
}
