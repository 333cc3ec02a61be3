/**
 * One HTTP attempt, observed: the innermost layer, right above the transport (below retry and the
 * circuit breaker), so it sees each attempt once, answered or failed, as undici's interceptors see a
 * dispatch. It times the attempt and tells `onAttempt` what happened (the observer: the request
 * metrics, the operation's count of answered attempts, failure logs). A throwing `onAttempt` is
 * ignored: observing must not turn an answer into a failure.
 */
import type { UpstreamCallError, UpstreamName } from '../../errors.js';
import type {
  AnswerHandler,
  Dispatch,
  EndpointName,
  Interceptor,
  UpstreamAnswer,
  UpstreamRequest,
} from '../dispatch.js';

/** One finished HTTP attempt. */
export interface ExchangeEvent {
  upstream: UpstreamName;
  endpoint: EndpointName;
  /** HTTP status; null when there was no answer (timeout, refused, reset). */
  statusCode: number | null;
  durationMs: number;
  /** 1 for a call's first attempt. */
  attempt: number;
  request: UpstreamRequest;
  /** Undefined: answered 2xx with a body that fits. */
  error?: UpstreamCallError | undefined;
}

/** One attempt on its way: times it and reports it, then passes the outcome up unchanged. */
class ObservedAttempt<T> implements AnswerHandler<T> {
  private readonly start = performance.now();

  constructor(
    private readonly request: UpstreamRequest<T>,
    private readonly handler: AnswerHandler<T>,
    private readonly onAttempt: (event: ExchangeEvent) => void,
  ) {}

  private report(answer: UpstreamAnswer<T> | undefined, error: UpstreamCallError | undefined): void {
    const request = this.request as UpstreamRequest;
    try {
      this.onAttempt({
        upstream: request.upstream,
        endpoint: request.form.endpoint,
        // Every failure after the status line arrived carries its status (status-mapping.ts).
        statusCode: answer?.statusCode ?? error?.statusCode ?? null,
        durationMs: performance.now() - this.start,
        attempt: request.attempt ?? 1,
        request,
        error,
      });
    } catch {
      // A metrics callback must not turn an answer into a failure.
    }
  }

  onAnswer(answer: UpstreamAnswer<T>): void {
    this.report(answer, undefined);
    this.handler.onAnswer(answer);
  }

  onError(error: unknown): void {
    // The transport fails only with UpstreamCallError.
    this.report(undefined, error as UpstreamCallError);
    this.handler.onError(error);
  }
}

export function observeAttempts(onAttempt: (event: ExchangeEvent) => void): Interceptor {
  return (next: Dispatch) =>
    function attempt<T>(request: UpstreamRequest<T>, handler: AnswerHandler<T>): void {
      next(request, new ObservedAttempt(request, handler, onAttempt));
    };
}
