/**
 * Who the caller is (docs/contract.md, Authentication): the one module that reads a caller's API key
 * from a request's headers, says whether the caller is anonymous, knows a key's tier and names the
 * caller wherever something is kept for it. Nothing else in the gateway parses these headers or hashes
 * a key.
 *
 * - The key: `Authorization: Bearer <key>` (the scheme in any case), else `X-API-Key: <key>`. An
 *   Authorization header that is there but is not `Bearer <key>` (`Basic …`, a bare key, `Bearer`
 *   alone) is refused with UNAUTHENTICATED (HTTP 401) before anything runs, whatever X-API-Key says:
 *   the reference services answer it so, and falling back to X-API-Key would serve the caller under
 *   another identity than the one its Authorization header meant. An empty header counts as absent.
 * - Anonymous: no key, or the key `free` (both specs' word for the free tier). The key is forwarded as
 *   sent; everywhere else the two are one caller: one shared `anonymous` budget, one caller for shared
 *   calls and cached answers and, for bounds per client (APQ registrations), a client by its address,
 *   as nothing else tells anonymous callers apart.
 * - Tier: from the gateway's own API_KEYS (`key:tier,key:tier`), for the `tier:` scopes of the
 *   budgets. The gateway authenticates nobody: it forwards every key, and the upstreams answer an
 *   unknown one 401.
 * - The one name of a caller with a key: `key:<sha256 hex of the key>` (src/shared/api-key-digest.ts),
 *   as COST_BUDGETS writes it; anonymous callers are `anonymous`. Budget store keys, APQ owners,
 *   shared-call and cache keys and log lines use it; the key itself is in none of them.
 */
import type { GraphQLError } from 'graphql';
import { LRUCache } from 'lru-cache';
import { apiKeyDigest } from '../shared/api-key-digest.js';
import { gatewayError } from './errors.js';

/** The caller tiers API_KEYS names (the services' three; the gateway's own type, it imports none of theirs). */
export type Tier = 'free' | 'pro' | 'enterprise';

/** The key that names the free tier explicitly: an anonymous caller, like no key at all. */
export const FREE_KEY = 'free';

/** How every store and log names the anonymous caller. */
export const ANONYMOUS = 'anonymous';

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

const BEARER = /^\s*bearer\s+(\S+)\s*$/i;

/**
 * The caller's API key from its headers: `Authorization: Bearer <key>`, else `X-API-Key: <key>`;
 * undefined when neither carries one (or only an empty one); the UNAUTHENTICATED refusal when an
 * Authorization header is there and is not `Bearer <key>`.
 */
export function apiKeyOf(
  authorization: string | null | undefined,
  xApiKey: string | null | undefined,
): string | undefined | GraphQLError {
  if (authorization != null && authorization.trim() !== '') {
    const match = BEARER.exec(authorization);
    return match === null ? malformedAuthorization() : match[1];
  }
  const key = xApiKey?.trim();
  return key ? key : undefined;
}

function malformedAuthorization(): GraphQLError {
  // A new error per request: errors gather paths and locations as they travel.
  return gatewayError(
    'UNAUTHENTICATED',
    'The Authorization header must be "Bearer <API key>". Send the key there or in X-API-Key, or neither for the free tier.',
    // RFC 9110: a 401 names the scheme it takes.
    { http: { status: 401, headers: { 'www-authenticate': 'Bearer' } } },
  );
}

/** True for a caller without a key of its own: no key, or the key `free`. */
export function isAnonymous(apiKey: string | undefined): apiKey is undefined | typeof FREE_KEY {
  return apiKey === undefined || apiKey === FREE_KEY;
}

// One digest per key, not per call: shared calls name their caller on every deterministic call.
const callerIds = new LRUCache<string, string>({ max: 10_000 });

/** The caller's name in every store and log: `key:<sha256 hex of the key>`, or `anonymous`. */
export function callerIdOf(apiKey: string | undefined): string {
  if (isAnonymous(apiKey)) return ANONYMOUS;
  let id = callerIds.get(apiKey);
  if (id === undefined) {
    id = `key:${apiKeyDigest(apiKey)}`;
    callerIds.set(apiKey, id);
  }
  return id;
}

/**
 * Who a caller is for bounds per client (APQ registrations): its key's name (`key:<sha256 hex>`), or
 * `ip:<address>` for an anonymous caller, `free` included, since no key tells anonymous callers apart.
 */
export function clientOf(apiKey: string | undefined, address: string | undefined): string {
  return isAnonymous(apiKey) ? `ip:${address ?? 'unknown'}` : callerIdOf(apiKey);
}
