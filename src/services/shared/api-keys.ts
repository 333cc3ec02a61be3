/**
 * Who is calling: the API key from `Authorization: Bearer <key>` or `X-API-Key: <key>`, mapped to a
 * tier. No key, an empty key and the word `free` are the free tier (as both services' specs say); any other key must be
 * known, else 401. The key itself never leaves this file: not in error messages, not in logs, not in
 * rate-limit bucket names (those carry its sha256, the project's one digest of a key, as they may live
 * in a shared Redis).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { apiKeyDigest } from '../../shared/api-key-digest.js';
import { ServiceError } from './service-error.js';
import { isTier, type Tier } from './tiers.js';

/** Keys accepted when `API_KEYS` is unset (documented in the README). */
export const DEMO_API_KEYS: ReadonlyMap<string, Tier> = new Map<string, Tier>([
  ['demo-pro', 'pro'],
  ['demo-enterprise', 'enterprise'],
]);

/** The key that selects the free tier explicitly (as both services' specs say). */
export const FREE_KEY = 'free';

/** The API keys option: `key:tier,key:tier` (the `API_KEYS` format), a map or a plain object. */
export type ApiKeysInput = string | ReadonlyMap<string, Tier> | Readonly<Record<string, Tier>>;

/** Parses `key:tier,key:tier`. Throws a TypeError naming the bad entry's position, never the key. */
export function parseApiKeys(spec: string): Map<string, Tier> {
  const keys = new Map<string, Tier>();
  const entries = spec.split(',').map((entry) => entry.trim());
  entries.forEach((entry, index) => {
    if (entry === '') return;
    const colon = entry.lastIndexOf(':');
    const key = entry.slice(0, colon).trim();
    const tier = entry.slice(colon + 1).trim();
    if (colon <= 0 || key === '' || !isTier(tier)) {
      throw new TypeError(`API keys entry #${index + 1} must be key:tier with tier free|pro|enterprise`);
    }
    keys.set(key, tier);
  });
  return keys;
}

/** Normalizes the option into a map; `undefined` gives the demo keys. */
export function apiKeyMap(input: ApiKeysInput | undefined): ReadonlyMap<string, Tier> {
  if (input === undefined) return DEMO_API_KEYS;
  if (typeof input === 'string') return input.trim() === '' ? DEMO_API_KEYS : parseApiKeys(input);
  if (input instanceof Map) return input;
  return new Map(Object.entries(input as Readonly<Record<string, Tier>>));
}

/** The authenticated caller of one request. */
export interface Caller {
  tier: Tier;
  /**
   * The rate-limit bucket: `key:<hash of the key>` for a known key, `free@<ip>` for free callers
   * without a key of their own (no key and the key `free` share one bucket per client address).
   */
  rateKey: string;
}

/** The bucket name of a known key: its digest, so the key itself is in no store, log or Redis key name. */
export function keyBucket(apiKey: string): string {
  return `key:${apiKeyDigest(apiKey)}`;
}

/** The key carried by a request, or undefined when none (or an empty one) was sent. */
export function apiKeyFromHeaders(headers: IncomingHttpHeaders): string | undefined {
  const authorization = headers.authorization;
  if (authorization !== undefined && authorization.trim() !== '') {
    const match = /^\s*bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match) {
      throw new ServiceError(401, 'UNAUTHENTICATED', 'Authorization header must be "Bearer <api key>"');
    }
    return match[1];
  }
  const header = headers['x-api-key'];
  const apiKey = Array.isArray(header) ? header[0] : header;
  return apiKey === undefined || apiKey.trim() === '' ? undefined : apiKey.trim();
}

/** Resolves callers against a fixed key map. */
export function createCallerResolver(
  input: ApiKeysInput | undefined,
): (headers: IncomingHttpHeaders, ip: string) => Caller {
  // Hashed once here, not per request.
  const callers = new Map<string, Caller>();
  for (const [key, tier] of apiKeyMap(input)) callers.set(key, { tier, rateKey: keyBucket(key) });
  return (headers, ip) => {
    const apiKey = apiKeyFromHeaders(headers);
    // `free` always means the free tier, even if API_KEYS lists it: the specs reserve the word.
    if (apiKey === undefined || apiKey === FREE_KEY) return { tier: 'free', rateKey: `free@${ip}` };
    const caller = callers.get(apiKey);
    if (caller === undefined) throw new ServiceError(401, 'UNAUTHENTICATED', 'unknown API key');
    return caller;
  };
}
