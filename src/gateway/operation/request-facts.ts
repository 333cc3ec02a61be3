/**
 * What the gateway reads from a request's headers (request/facts.ts reads them, once, on either lane),
 * as types only: the pipeline, the operation report and tracing all read the facts, and this is the
 * layer below all of them.
 */
import type { GraphQLError } from 'graphql';

/** The JSON media types a result is encoded with (request/media-type.ts negotiates them). */
export type JsonMediaType = 'application/json' | 'application/graphql-response+json';

/** A request's facts, read once from its headers; never written after. */
export interface RequestFacts {
  /** The caller's `x-request-id` when sane, else a new UUID: on the answer, the upstream calls, the log line. */
  readonly requestId: string;
  /** X-Max-Cost-Usd: the cap in dollars, undefined when absent, or the refusal of a malformed one. */
  readonly maxCost: number | GraphQLError | undefined;
  /** The JSON media type the answer is encoded with; undefined: none acceptable (media-type.ts). */
  readonly mediaType: JsonMediaType | undefined;
  /** Accept-Encoding, for compression. */
  readonly acceptEncoding: string | undefined;
  /**
   * X-Budget-Fallback: true for `cheaper-model`, false for `none`, undefined when absent (the
   * COST_BUDGET_FALLBACK setting decides).
   */
  readonly fallback: boolean | undefined;
  /** The client's address (the socket's peer), for bounds per client without an API key. */
  readonly address: string | undefined;
  /**
   * The request's headers, for what only some steps read, when they read it: the credential, which
   * the pipeline's `begin` hands to identity.ts; the caller's `traceparent` when the gateway exports
   * its own traces (observability/tracing.ts).
   */
  readonly header: HeaderReader;
}

/** A request's header, by lower-case name: node's headers and Fetch headers both give one. */
export type HeaderReader = (name: string) => string | null | undefined;
