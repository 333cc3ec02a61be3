/**
 * The pi-digits service over HTTP: GET /api/v1/pi, POST /api/v1/inference, GET /api/v1/health.
 *
 * GET /pi is a read and is retried as such; POST /inference costs the caller money, so it is
 * retried only when the connection was refused (the request provably never reached the service).
 */
import { parseInferenceResponse, parsePiHealth, parsePiResponse } from './response-schemas.js';
import type {
  CallOptions,
  HealthProbe,
  InferenceRequest,
  InferenceResponse,
  PiDigitsClient,
  PiHealthBody,
  PiRequest,
  PiResponse,
} from './types.js';
import { type EndpointSpec, UpstreamCaller, type UpstreamCallerOptions } from './upstream-caller.js';
import type { BreakerState } from './upstream-resilience.js';

export type PiDigitsHttpClientOptions = Omit<UpstreamCallerOptions<PiHealthBody>, 'upstream' | 'parseHealth'>;

const PI: EndpointSpec<PiRequest, PiResponse> = {
  endpoint: 'pi',
  method: 'GET',
  retry: 'idempotent',
  parse: parsePiResponse,
};

const INFERENCE: EndpointSpec<InferenceRequest, InferenceResponse> = {
  endpoint: 'inference',
  method: 'POST',
  retry: 'unsent-only',
  parse: parseInferenceResponse,
  hints: (request) => ({ waiverSigned: request.liabilityWaiverSigned }),
};

/** `/pi` plus the query of the fields that are set (omitted ones take the upstream defaults). */
function piPath(request: PiRequest): string {
  let query = '';
  if (request.digits !== undefined) query += `&digits=${request.digits}`;
  if (request.model !== undefined) query += `&model=${encodeURIComponent(request.model)}`;
  if (request.temperature !== undefined) query += `&temperature=${request.temperature}`;
  if (request.sponsored !== undefined) query += `&sponsored=${request.sponsored}`;
  return query.length === 0 ? '/pi' : `/pi?${query.slice(1)}`;
}

export class PiDigitsHttpClient implements PiDigitsClient {
  readonly #caller: UpstreamCaller<PiHealthBody>;

  constructor(options: PiDigitsHttpClientOptions) {
    this.#caller = new UpstreamCaller({ ...options, upstream: 'pi-digits', parseHealth: parsePiHealth });
  }

  pi(request: PiRequest, options?: CallOptions): Promise<PiResponse> {
    return this.#caller.call(PI, request, piPath(request), undefined, options);
  }

  inference(request: InferenceRequest, options?: CallOptions): Promise<InferenceResponse> {
    const body = JSON.stringify({
      desired_digits: request.desiredDigits,
      model: request.model,
      temperature: request.temperature,
      use_chain_of_thought: request.useChainOfThought,
      liability_waiver_signed: request.liabilityWaiverSigned,
    });
    return this.#caller.call(INFERENCE, request, '/inference', body, options);
  }

  health(options?: CallOptions): Promise<HealthProbe<PiHealthBody>> {
    return this.#caller.probe(options);
  }

  breakerState(): BreakerState {
    return this.#caller.breakerState();
  }

  close(): Promise<void> {
    return this.#caller.close();
  }
}
