/**
 * The one digest of a caller's API key in the project: the lower-case hex SHA-256 of the key's UTF-8
 * bytes, the `<sha256 hex of the key>` of COST_BUDGETS's `key:` scopes (docs/contract.md, Cost).
 * Wherever a key must name something that outlives the request (a budget, a bound per client, a
 * shared call, a rate-limit bucket, a log line), it is named by this digest, never by the key: stores
 * and logs can be read by people who must not learn the keys. The gateway (src/gateway/identity.ts)
 * and the reference services (their rate-limit buckets) both use it, so an operator computes one
 * digest (`printf %s "$KEY" | sha256sum`) to find a key anywhere.
 */
import { hash } from 'node:crypto';

/** The SHA-256 of `apiKey`, 64 lower-case hex digits. */
export function apiKeyDigest(apiKey: string): string {
  return hash('sha256', apiKey, 'hex');
}
