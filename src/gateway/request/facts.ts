/**
 * Step 1 of the request pipeline: what the gateway reads from a request's headers, once, the same
 * way on both lanes (node's headers on the fast path, Fetch headers on Yoga's): the request id, the
 * caller's API key (read by identity.ts), the cost cap and the media type its answer is encoded with.
 * What the facts are (`RequestFacts`) is operation/request-facts.ts's: the report and tracing read them
 * too, below the request layer.
 */
import { randomFillSync } from 'node:crypto';
import { gatewayError } from '../errors.js';
import { apiKeyOf } from '../identity.js';
import type { HeaderReader, RequestFacts } from '../operation/request-facts.js';
import { negotiateMediaType } from './media-type.js';

/** The facts of a request, from its headers. */
export function requestFactsOf(header: HeaderReader, address: string | undefined): RequestFacts {
  const key = apiKeyOf(header('authorization'), header('x-api-key'));
  return {
    requestId: requestIdOf(header('x-request-id')),
    apiKey: typeof key === 'string' ? key : undefined,
    authRefusal: typeof key === 'object' ? key : undefined,
    address,
    header,
    maxCost: maxCostOf(header(MAX_COST_HEADER)),
    mediaType: negotiateMediaType(header('accept')),
    acceptEncoding: header('accept-encoding') ?? undefined,
    fallback: fallbackOf(header('x-budget-fallback')),
  };
}

const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** The caller's `x-request-id` when sane (1 to 128 of [A-Za-z0-9._-]), else a new UUID. */
export function requestIdOf(given: string | null | undefined): string {
  return given != null && SANE_REQUEST_ID.test(given) ? given : randomRequestId();
}

/** UUIDs' worth of random bytes drawn at a time (node's `randomUUID` buffers 128 too). */
const UUIDS_PER_FILL = 128;
const randomPool = Buffer.alloc(16 * UUIDS_PER_FILL);
let poolOffset = randomPool.length;
/** The 36 characters of the UUID being written (reused: only the string made from it is new). */
const uuidText = Buffer.alloc(36);
const HEX = Buffer.from('0123456789abcdef', 'latin1');
/** Where each of the 16 bytes' two hex digits go in the text (the dashes sit at 8, 13, 18 and 23). */
const UUID_DIGIT_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
uuidText.fill(0x2d); // '-'

/**
 * A random (version 4) UUID in its canonical lower-case text, as `crypto.randomUUID()` makes it, from
 * the same kind of pool of random bytes (crypto's `randomFillSync`). Node builds its text by
 * concatenating 20 strings (about 0.5 KB per id); this writes the 36 characters into one buffer and
 * makes one flat string of it.
 */
export function randomRequestId(): string {
  if (poolOffset === randomPool.length) {
    randomFillSync(randomPool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += 16;
  for (let i = 0; i < 16; i++) {
    let byte = randomPool[at + i] as number;
    if (i === 6)
      byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // variant 10xx (RFC 9562)
    const to = UUID_DIGIT_AT[i] as number;
    uuidText[to] = HEX[byte >> 4] as number;
    uuidText[to + 1] = HEX[byte & 0x0f] as number;
  }
  return uuidText.toString('latin1');
}

/** The largest cap X-Max-Cost-Usd accepts, in dollars: a larger one is a mistake, not a budget. */
export const MAX_COST_CAP_USD = 1_000_000;
const DOLLARS = /^\d{1,7}(\.\d{1,12})?$/;

/** The header's name, as clients send it. */
export const MAX_COST_HEADER = 'x-max-cost-usd';

/**
 * The caller's cost cap from `X-Max-Cost-Usd: <dollars>`: undefined when absent; a GraphQL error
 * (BAD_USER_INPUT) when it is not a plain non-negative decimal number up to MAX_COST_CAP_USD.
 */
export function maxCostOf(
  header: string | null | undefined,
): number | undefined | ReturnType<typeof gatewayError> {
  if (header == null) return undefined;
  const text = header.trim();
  const value = DOLLARS.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(value) || value < 0 || value > MAX_COST_CAP_USD) {
    return gatewayError(
      'BAD_USER_INPUT',
      `X-Max-Cost-Usd must be a number of US dollars from 0 to ${MAX_COST_CAP_USD}, such as 0.05.`,
      { http: { status: 400 } },
    );
  }
  return value;
}

/** `X-Budget-Fallback`: `cheaper-model` asks for it, `none` declines it; anything else is ignored. */
function fallbackOf(header: string | null | undefined): boolean | undefined {
  const value = header?.trim().toLowerCase();
  return value === 'cheaper-model' ? true : value === 'none' ? false : undefined;
}
