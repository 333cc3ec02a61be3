/**
 * Step 1 of the request pipeline: what the gateway reads from a request's headers, once, the same
 * way on both lanes (node's headers on the fast path, Fetch headers on Yoga's): the request id, the
 * cost cap and the media type its answer is encoded with. Who the caller is, identity.ts decides from
 * the same headers at the pipeline's `begin`.
 * What the facts are (`RequestFacts`) is operation/request-facts.ts's: the report and tracing read them
 * too, below the request layer.
 */
import { randomUUID } from 'node:crypto';
import { gatewayError } from '../errors.js';
import type { HeaderReader, RequestFacts } from '../operation/request-facts.js';
import { negotiateMediaType } from './media-type.js';

/** The facts of a request, from its headers. */
export function requestFactsOf(header: HeaderReader, address: string | undefined): RequestFacts {
  return {
    requestId: requestIdOf(header('x-request-id')),
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

/**
 * A random (version 4) UUID, node's own. A copy that wrote the text into one buffer saved 0.57 KB
 * per id at CPU 1.01 (noise): allocation alone does not keep a copy (docs/architecture.md, The rule).
 */
export function randomRequestId(): string {
  return randomUUID();
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
