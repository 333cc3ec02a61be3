/**
 * One HTTP exchange through undici's `Dispatcher.dispatch`, with a handler that collects the body
 * as Buffers and tells its `ExchangeSink` once: the status, the headers and the body text, or the
 * failure. The transport's attempt is the sink: no promise between undici and the layers above.
 *
 * Why not `Pool.request` + `body.text()`: `request` wraps every answer in a Readable stream (its
 * state, events and the async read of `text()`), which a gateway that reads every body whole and at
 * once does not need. `dispatch` with a handler is the interface undici's own interceptors (retry,
 * cache, dedupe) are written against; the parser still enforces the pool's `maxResponseSize` and
 * timeouts. Measured in docs/benchmarks/2026-11-25.md, The morning run.
 *
 * Abort: the attempt's `AbortSignal` aborts the exchange through the handler's controller. undici
 * starts the handler when the request gets a socket; a signal that fired while the request waited
 * for one aborts it then (as `request`'s `signal` option does).
 */
import type { Dispatcher } from 'undici';

export type ResponseHeaders = Record<string, string | string[] | undefined>;

/** Told the outcome of one exchange, once (the transport's attempt). */
export interface ExchangeSink {
  exchanged(statusCode: number, headers: ResponseHeaders, text: string): void;
  /** `statusCode` is set when the status line had arrived (the body broke off). */
  failed(error: unknown, statusCode: number | undefined): void;
}

/** The headers of an exchange whose status line never came: one shared empty object. */
const NO_HEADERS: ResponseHeaders = Object.freeze({});

type Controller = Parameters<NonNullable<Dispatcher.DispatchHandler['onRequestStart']>>[0];

class BodyCollector implements Dispatcher.DispatchHandler {
  private controller: Controller | undefined;
  private statusCode: number | undefined;
  private headers: ResponseHeaders = NO_HEADERS;
  /** Made at the start of each try (undici may start a handler again), not also here. */
  private chunks: Buffer[] | undefined;

  constructor(
    private readonly signal: AbortSignal,
    private readonly sink: ExchangeSink,
  ) {}

  private readonly abort = () => this.controller?.abort(this.signal.reason as Error);

  onRequestStart(controller: Controller): void {
    this.controller = controller;
    this.statusCode = undefined;
    this.chunks = [];
    if (this.signal.aborted) controller.abort(this.signal.reason as Error);
    else this.signal.addEventListener('abort', this.abort);
  }

  onResponseStart(_controller: Controller, statusCode: number, headers: ResponseHeaders): void {
    // 1xx informational answers come before the real one.
    if (statusCode < 200) return;
    this.statusCode = statusCode;
    this.headers = headers;
  }

  onResponseData(_controller: Controller, chunk: Buffer): void {
    (this.chunks as Buffer[]).push(chunk);
  }

  onResponseEnd(): void {
    this.signal.removeEventListener('abort', this.abort);
    const chunks = this.chunks as Buffer[];
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    this.sink.exchanged(this.statusCode as number, this.headers, body.toString('utf8'));
  }

  onResponseError(_controller: Controller, error: Error): void {
    this.signal.removeEventListener('abort', this.abort);
    this.sink.failed(error, this.statusCode);
  }
}

/** Sends `options` through `dispatcher`; `sink` hears the outcome once. */
export function exchangeOnce(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  signal: AbortSignal,
  sink: ExchangeSink,
): void {
  try {
    dispatcher.dispatch(options, new BodyCollector(signal, sink));
  } catch (error) {
    // Invalid options (a header value with control characters) throw synchronously.
    sink.failed(error, undefined);
  }
}
