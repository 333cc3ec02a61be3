/**
 * The null-check service's calls as logical upstream requests: `POST /api/v1/check` and its v2
 * successor `POST /api/v2/null-or-not` (the same body; the answer adds a philosophical analysis).
 *
 * Undefined vs null: `hasValue: false` sends a body WITHOUT the `value` key, `value: null` sends
 * `"value": null`. JSON.stringify drops `undefined` entries, which is exactly "key absent".
 *
 * Deterministic calls (a value sent, temperature 0, the default model, null-x-4o or null-x-opus: the
 * reference services answer those by strict equality) get a share key, so identical calls in flight
 * share one upstream call and, with RESPONSE_CACHE, plain boolean answers are reused.
 */
import type { Operation } from '../operation/operation.js';
import type { ModelCall } from '../operation/operation-plan.js';
import { type AnswerFacts, callModel, type Dispatch, type HttpForm, type StatusHints } from './dispatch.js';
import { parseNullCheckResponse, parseNullCheckV2Response } from './response-schemas.js';
import { errorFromFailure } from './status-mapping.js';
import type { NullCheckRequest, NullCheckResponse } from './types.js';

/** The service's default model (its documented default). */
export const DEFAULT_NULL_MODEL = 'null-x-4o';

const DETERMINISTIC_MODELS = new Set([undefined, DEFAULT_NULL_MODEL, 'null-x-opus']);

/** The v2 endpoint: where the service's /openapi.json lists it, calls start there (`auto`). */
export const NULL_CHECK_V2 = { method: 'post', path: '/api/v2/null-or-not' } as const;

export interface NullCheckClient {
  check(request: NullCheckRequest, operation: Operation | undefined): Promise<NullCheckResponse>;
}

/** A value of `undefined` under `hasValue: true` cannot be sent either: it counts as no value. */
function sendsValue(request: NullCheckRequest): boolean {
  return request.hasValue && request.value !== undefined;
}

const facts = (answer: NullCheckResponse): AnswerFacts => ({
  costUsd: answer.gpuCostUsd,
  sponsor: answer.sponsoredBy,
  model: answer.model,
});

/** The share key of a deterministic check, or undefined. */
export function nullCheckShareKey(request: NullCheckRequest): string | undefined {
  const temperature = request.temperature;
  if (!sendsValue(request) || !DETERMINISTIC_MODELS.has(request.model)) return undefined;
  if (temperature !== undefined && temperature !== 0) return undefined;
  // Omitted model/temperature/strictMode stay apart from explicit ones (never normalized to defaults).
  return `check\n${JSON.stringify([request.value, request.model ?? null, temperature ?? null, request.strictMode ?? null])}`;
}

/** The pricing of a check that names no model: one frozen object, not one per call. */
const DEFAULT_CHECK_PRICING: ModelCall = Object.freeze({
  upstream: 'null-check',
  kind: 'check',
  model: DEFAULT_NULL_MODEL,
});

/** A check as the cost estimate prices it: by its model (the service default when omitted). */
export function checkPricing(model: string | undefined): ModelCall {
  if (model === undefined) return DEFAULT_CHECK_PRICING;
  return { upstream: 'null-check', kind: 'check', model };
}

/** The status hints of a check (read only, by status-mapping.ts): two constants, not one per call. */
const HAD_VALUE: StatusHints = Object.freeze({ hadValue: true });
const HAD_NO_VALUE: StatusHints = Object.freeze({ hadValue: false });

const keepBoolean = (answer: NullCheckResponse) => answer.answer.kind === 'boolean';

export function createNullCheckClient(dispatch: Dispatch): NullCheckClient {
  return {
    async check(request, operation) {
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
        throw errorFromFailure('invalid-request', 'null-check', {
          cause,
          detail: 'value is not JSON-serializable',
        });
      }
      const hints = sendsValue(request) ? HAD_VALUE : HAD_NO_VALUE;
      const v1: HttpForm<NullCheckResponse> = {
        endpoint: 'check',
        version: 'v1',
        method: 'POST',
        path: '/api/v1/check',
        body,
        // A check is a pure read with no side effect on the service: safe to repeat.
        retry: 'idempotent',
        decode: parseNullCheckResponse,
        facts,
        hints,
      };
      const v2: HttpForm<NullCheckResponse> = {
        ...v1,
        endpoint: 'null-or-not',
        version: 'v2',
        path: NULL_CHECK_V2.path,
        decode: parseNullCheckV2Response,
      };
      return callModel(dispatch, {
        forms: { v1, v2 },
        shareKey: nullCheckShareKey(request),
        cacheable: keepBoolean,
        operation,
        pricing: checkPricing(request.model),
        // Strictly null: an omitted value (undefined) is not (docs/contract.md, Schema).
        truth: {
          question: 'null',
          actuallyNull: sendsValue(request) && request.value === null,
          temperature: request.temperature,
        },
      });
    },
  };
}
