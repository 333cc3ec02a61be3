/**
 * The null-check service over HTTP: POST /api/v1/check and GET /api/v1/health.
 *
 * Undefined vs null: `hasValue: false` sends a body WITHOUT the `value` key, `value: null` sends
 * `"value": null`. The body is one object literal of fixed shape serialized once; JSON.stringify
 * drops the `undefined` entries, which is exactly "key absent".
 */
import { errorFromFailure } from './error-mapping.js';
import { parseNullCheckResponse, parseNullHealth } from './response-schemas.js';
import type {
  CallOptions,
  HealthProbe,
  NullCheckClient,
  NullCheckRequest,
  NullCheckResponse,
  NullHealthBody,
} from './types.js';
import { type EndpointSpec, UpstreamCaller, type UpstreamCallerOptions } from './upstream-caller.js';
import type { BreakerState } from './upstream-resilience.js';

export type NullCheckHttpClientOptions = Omit<
  UpstreamCallerOptions<NullHealthBody>,
  'upstream' | 'parseHealth'
>;

/** A value of `undefined` under `hasValue: true` cannot be sent either: it counts as no value. */
function sendsValue(request: NullCheckRequest): boolean {
  return request.hasValue && request.value !== undefined;
}

const CHECK: EndpointSpec<NullCheckRequest, NullCheckResponse> = {
  endpoint: 'check',
  method: 'POST',
  // A check is a pure read with no side effect on the service: safe to repeat.
  retry: 'idempotent',
  parse: parseNullCheckResponse,
  hints: (request) => ({ hadValue: sendsValue(request) }),
};

export class NullCheckHttpClient implements NullCheckClient {
  readonly #caller: UpstreamCaller<NullHealthBody>;

  constructor(options: NullCheckHttpClientOptions) {
    this.#caller = new UpstreamCaller({ ...options, upstream: 'null-check', parseHealth: parseNullHealth });
  }

  check(request: NullCheckRequest, options?: CallOptions): Promise<NullCheckResponse> {
    let body: string;
    try {
      body = JSON.stringify({
        value: sendsValue(request) ? request.value : undefined,
        model: request.model,
        temperature: request.temperature,
        strict_mode: request.strictMode,
      });
    } catch (cause) {
      // BigInt or a cycle: cannot come from a GraphQL JSON argument, but must not crash either.
      return Promise.reject(
        errorFromFailure('invalid-request', 'null-check', {
          cause,
          detail: 'value is not JSON-serializable',
        }),
      );
    }
    return this.#caller.call(CHECK, request, '/check', body, options);
  }

  health(options?: CallOptions): Promise<HealthProbe<NullHealthBody>> {
    return this.#caller.probe(options);
  }

  breakerState(): BreakerState {
    return this.#caller.breakerState();
  }

  close(): Promise<void> {
    return this.#caller.close();
  }
}
