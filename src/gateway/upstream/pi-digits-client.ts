/**
 * The pi-digits service's calls as logical upstream requests: `GET /api/v1/pi` (with its v2.0
 * successor, `POST /api/v1/inference` with the operator's waiver) and `POST /api/v1/inference`.
 *
 * GET /pi is a read and is retried as such; POST /inference costs money per call, so it is retried
 * only when the connection was refused (the request provably never reached the service).
 * Deterministic pi calls (temperature 0, the default model or pi-x-4o: the true digits) get a share
 * key, so identical calls in flight share one upstream call and, with RESPONSE_CACHE, are reused.
 *
 * Over v2, pi is served by the inference endpoint, which requires a signed liability waiver: only the
 * gateway's operator can sign it for pi callers (PI_WAIVER_ACCEPTED); without it `piWaiverCheck`
 * refuses v2 before any network, in the API-versions layer that picks the version.
 */
import type { UpstreamCallError } from '../errors.js';
import type { Operation } from '../operation/operation.js';
import type { ModelCall } from '../operation/operation-plan.js';
import { type AnswerFacts, type ApiVersion, callModel, type Dispatch, type HttpForm } from './dispatch.js';
import { parseInferenceResponse, parsePiFromInference, parsePiResponse } from './response-schemas.js';
import { errorFromFailure } from './status-mapping.js';
import type { InferenceRequest, InferenceResponse, PiRequest, PiResponse } from './types.js';

/** The service's default `digits` (its documented default). */
export const DEFAULT_PI_DIGITS = 3;

/** The service's default model (its documented default). */
export const DEFAULT_PI_MODEL = 'pi-x-4o';

const DETERMINISTIC_MODELS = new Set([undefined, DEFAULT_PI_MODEL]);

/** Why pi over v2 fails without PI_WAIVER_ACCEPTED (WAIVER_REQUIRED, no upstream call). */
export const PI_WAIVER_MESSAGE =
  "pi is served here by the pi-digits service's v2 inference endpoint, which requires a signed liability waiver; the gateway's operator accepts it for pi callers with PI_WAIVER_ACCEPTED=true.";

/**
 * The pi-digits `refuse` of the API-versions layer: v2 is refused (WAIVER_REQUIRED, no network)
 * unless the operator accepted the waiver.
 */
export function piWaiverCheck(
  waiverAccepted: boolean,
): (version: ApiVersion) => UpstreamCallError | undefined {
  return (version) =>
    version === 'v2' && !waiverAccepted
      ? errorFromFailure('refused-by-gateway', 'pi-digits', { detail: PI_WAIVER_MESSAGE })
      : undefined;
}

export interface PiDigitsClient {
  pi(request: PiRequest, operation: Operation | undefined): Promise<PiResponse>;
  inference(request: InferenceRequest, operation: Operation | undefined): Promise<InferenceResponse>;
}

const piFacts = (answer: PiResponse): AnswerFacts => ({
  costUsd: answer.gpuCostUsd ?? answer.costUsd ?? null,
  sponsor: answer.sponsoredBy,
  model: answer.model,
});

const inferenceFacts = (answer: InferenceResponse): AnswerFacts => ({
  costUsd: answer.costUsd,
  costText: answer.cost,
  sponsor: null,
  model: answer.model,
});

/** `/api/v1/pi` plus the query of the fields that are set (omitted ones take the upstream defaults). */
function piPath(request: PiRequest): string {
  let query = '';
  if (request.digits !== undefined) query += `&digits=${request.digits}`;
  if (request.model !== undefined) query += `&model=${encodeURIComponent(request.model)}`;
  if (request.temperature !== undefined) query += `&temperature=${request.temperature}`;
  if (request.sponsored !== undefined) query += `&sponsored=${request.sponsored}`;
  return query.length === 0 ? '/api/v1/pi' : `/api/v1/pi?${query.slice(1)}`;
}

/** The share key of a deterministic pi call, or undefined. */
export function piShareKey(request: PiRequest): string | undefined {
  const temperature = request.temperature;
  if (!DETERMINISTIC_MODELS.has(request.model)) return undefined;
  if (temperature !== undefined && temperature !== 0) return undefined;
  return `pi\n${request.digits ?? ''}\n${request.model ?? ''}\n${temperature ?? ''}\n${request.sponsored ?? ''}`;
}

/** A pi call as the cost estimate prices it: by model and digits (the service defaults when omitted). */
export function piPricing(model: string | undefined, digits: number | undefined): ModelCall {
  return {
    upstream: 'pi-digits',
    kind: 'pi',
    model: model ?? DEFAULT_PI_MODEL,
    digits: digits ?? DEFAULT_PI_DIGITS,
  };
}

/** An inference call as the cost estimate prices it: by model (the service default when omitted) and digits. */
export function inferencePricing(model: string | undefined, digits: number | undefined): ModelCall {
  return { upstream: 'pi-digits', kind: 'inference', model: model ?? DEFAULT_PI_MODEL, digits };
}

const keepAll = () => true;

export function createPiDigitsClient(dispatch: Dispatch): PiDigitsClient {
  return {
    async pi(request, operation) {
      const v1: HttpForm<PiResponse> = {
        endpoint: 'pi',
        version: 'v1',
        method: 'GET',
        path: piPath(request),
        retry: 'idempotent',
        decode: parsePiResponse,
        facts: piFacts,
      };
      // Over v2 the caller's `digits`, model and temperature go to the inference endpoint; the
      // waiver is the operator's (PI_WAIVER_ACCEPTED), checked before this form is ever sent.
      const v2: HttpForm<PiResponse> = {
        endpoint: 'inference',
        version: 'v2',
        method: 'POST',
        path: '/api/v1/inference',
        body: JSON.stringify({
          desired_digits: request.digits ?? DEFAULT_PI_DIGITS,
          model: request.model,
          temperature: request.temperature,
          liability_waiver_signed: true,
        }),
        retry: 'unsent-only',
        decode: parsePiFromInference,
        facts: piFacts,
        hints: { waiverSigned: true },
      };
      return callModel(dispatch, {
        forms: { v1, v2 },
        shareKey: piShareKey(request),
        cacheable: keepAll,
        operation,
        pricing: piPricing(request.model, request.digits),
        truth: {
          question: 'digits',
          requestedDigits: request.digits ?? DEFAULT_PI_DIGITS,
          temperature: request.temperature,
        },
      });
    },

    async inference(request, operation) {
      const form: HttpForm<InferenceResponse> = {
        endpoint: 'inference',
        version: 'v1',
        method: 'POST',
        path: '/api/v1/inference',
        body: JSON.stringify({
          desired_digits: request.desiredDigits,
          model: request.model,
          temperature: request.temperature,
          use_chain_of_thought: request.useChainOfThought,
          liability_waiver_signed: request.liabilityWaiverSigned,
        }),
        retry: 'unsent-only',
        decode: parseInferenceResponse,
        facts: inferenceFacts,
        hints: { waiverSigned: request.liabilityWaiverSigned },
      };
      return callModel(dispatch, {
        forms: { v1: form },
        operation,
        pricing: inferencePricing(request.model, request.desiredDigits),
        truth: {
          question: 'digits',
          requestedDigits: request.desiredDigits,
          temperature: request.temperature,
        },
      });
    },
  };
}
