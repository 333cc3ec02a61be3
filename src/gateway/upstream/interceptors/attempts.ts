/**
 * One HTTP attempt, observed: the innermost layer, right above the transport (below retry and the
 * circuit breaker), so it sees each attempt once, answered or failed, as undici's interceptors see a
 * dispatch. It times the attempt and tells `onAttempt` what happened (the observer: the request
 * metrics, the operation's count of answered attempts, failure logs). A throwing `onAttempt` is
 * ignored: observing must not turn an answer into a failure.
 */
import type { UpstreamCallError, UpstreamName } from '../../errors.js';
import type { Dispatch, EndpointName, Interceptor, UpstreamAnswer, UpstreamRequest } from '../dispatch.js';

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

export function observeAttempts(onAttempt: (event: ExchangeEvent) => void): Interceptor {
  return (next: Dispatch) => {
    const report = (
      request: UpstreamRequest,
      start: number,
      answer: UpstreamAnswer | undefined,
      error: UpstreamCallError | undefined,
    ) => {
      try {
        onAttempt({
          upstream: request.upstream,
          endpoint: request.form.endpoint,
          // Every failure after the status line arrived carries its status (status-mapping.ts).
          statusCode: answer?.statusCode ?? error?.statusCode ?? null,
          durationMs: performance.now() - start,
          attempt: request.attempt ?? 1,
          request,
          error,
        });
      } catch {
        // A metrics callback must not turn an answer into a failure.
      }
    };
    return function attempt<T>(request: UpstreamRequest<T>): Promise<UpstreamAnswer<T>> {
      const start = performance.now();
      return next(request).then(
        (answer) => {
          report(request as UpstreamRequest, start, answer as UpstreamAnswer, undefined);
          return answer;
        },
        (error: unknown) => {
          // The transport throws only UpstreamCallError.
          report(request as UpstreamRequest, start, undefined, error as UpstreamCallError);
          throw error;
        },
      );
    };
  };
}
