/**
 * What the gateway remembers about one GraphQL operation while it runs: enough for its log line, its
 * metrics, its span and its `extensions.sponsoredBy`. One instance per operation, nothing per field.
 */
import type { Span } from './tracing.js';

/** One logical upstream call of an operation, as its log line shows it. */
export interface UpstreamCallRecord {
  upstream: string;
  endpoint: string;
  /** HTTP status of the answer; null when there was none (timeout, refused, open circuit). */
  status: number | null;
  durationMs: number;
  /** The contract error code when the call failed. */
  code?: string;
}

export class OperationRecord {
  /** performance.now() when the operation's parameters were parsed. */
  readonly start: number;
  name: string | null;
  type = 'query';
  requestId: string | undefined = undefined;
  /** True once execution started (false: the operation failed parsing or validation). */
  executed = false;
  calls: UpstreamCallRecord[] | undefined = undefined;
  /** Distinct sponsor messages of this operation's upstream answers, in arrival order. */
  sponsors: string[] | undefined = undefined;
  gpuCostUsd = 0;
  span: Span | undefined;

  constructor(start: number, name: string | null, span: Span | undefined) {
    this.start = start;
    this.name = name;
    this.span = span;
  }

  addCall(call: UpstreamCallRecord): void {
    if (this.calls === undefined) this.calls = [call];
    else this.calls.push(call);
  }

  addSponsor(message: string): void {
    if (this.sponsors === undefined) this.sponsors = [message];
    else if (!this.sponsors.includes(message)) this.sponsors.push(message);
  }
}
