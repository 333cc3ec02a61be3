/**
 * Which media type a GraphQL result is answered with, from the request's `Accept`, by the rules of
 * RFC 9110 (q-values, specificity, then the client's order) as the `negotiator` package implements
 * them, for both request lanes: the fast path asks before it takes a request, Yoga's lane through
 * its result processor (plugins/use-request-pipeline.ts). No Accept (or an empty one) is `*∕*`, and
 * `*∕*` is `application/json`, the type every GraphQL-over-HTTP client understands. Only UTF-8 is
 * served: a charset other than utf-8 does not match.
 *
 * Undefined: none of the JSON types is acceptable; the lane then leaves the result to Yoga's own
 * processors (text/event-stream, multipart/mixed) or to its 406.
 *
 * A pure function of the header: its answers are memoized in a bounded map, which any Accept value
 * may enter (a full map is cleared), so no value sent by one client decides what another gets.
 */
import Negotiator from 'negotiator';
import type { JsonMediaType } from '../operation/request-facts.js';

const OFFERED = ['application/json; charset=utf-8', 'application/graphql-response+json; charset=utf-8'];
const MAX_REMEMBERED = 256;
const remembered = new Map<string, JsonMediaType | null>();

export function negotiateMediaType(accept: string | null | undefined): JsonMediaType | undefined {
  const header = accept == null || accept.trim() === '' ? '*/*' : accept;
  let chosen = remembered.get(header);
  if (chosen === undefined) {
    const offered = new Negotiator({ headers: { accept: header } }).mediaType(OFFERED);
    chosen = offered === undefined ? null : (offered.slice(0, offered.indexOf(';')) as JsonMediaType);
    if (remembered.size >= MAX_REMEMBERED) remembered.clear();
    remembered.set(header, chosen);
  }
  return chosen ?? undefined;
}
