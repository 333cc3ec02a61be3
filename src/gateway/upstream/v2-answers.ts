/**
 * Answers of the upstreams' v2 endpoints, decoded into the same seam shapes as v1, so the schema
 * never knows which version answered:
 * - null-check `POST /api/v2/null-or-not`: the v1 answer plus `philosophical_analysis`;
 * - pi-digits `POST /api/v1/inference` serving `pi`: the inference answer as a pi answer. Fields the
 *   inference answer lacks are null, never invented (its `cost` string is the cost of the call).
 */
import { z } from 'zod';
import { parseInferenceResponse, parseNullCheckResponse, ResponseShapeError } from './response-schemas.js';
import type { NullCheckResponse, PhilosophicalAnalysis, PiResponse } from './types.js';

/** Known fields: a wrong type is a bad answer; a missing one is null (never invented). */
const analysisSchema = z.looseObject({
  school: z.string().nullish(),
  certainty: z.number().nullish(),
  argument: z.string().nullish(),
  references: z.array(z.string()).nullish(),
  verdict_stability: z.string().nullish(),
  depth: z.number().int().nullish(),
});

/** Validates a `POST /api/v2/null-or-not` answer. */
export function parseNullCheckV2Response(json: unknown): NullCheckResponse {
  const answer = parseNullCheckResponse(json);
  const raw = (json as Record<string, unknown>).philosophical_analysis;
  let philosophicalAnalysis: PhilosophicalAnalysis | null = null;
  if (raw !== undefined && raw !== null) {
    if (typeof raw !== 'object' || Array.isArray(raw))
      throw new ResponseShapeError('field philosophical_analysis: expected an object');
    const parsed = analysisSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ResponseShapeError(
        `field philosophical_analysis.${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`,
      );
    }
    const a = parsed.data;
    philosophicalAnalysis = {
      school: a.school ?? null,
      certainty: a.certainty ?? null,
      argument: a.argument ?? null,
      references: a.references ?? null,
      verdictStability: a.verdict_stability ?? null,
      depth: a.depth ?? null,
      raw: raw as Record<string, unknown>,
    };
  }
  return { ...answer, philosophicalAnalysis };
}

const optionalNumber = (value: unknown, field: string): number | null => {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isFinite(value))
    throw new ResponseShapeError(`field ${field}: expected a number`);
  return value;
};
const optionalText = (value: unknown, field: string): string | null => {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new ResponseShapeError(`field ${field}: expected a string`);
  return value;
};

/** Validates a `POST /api/v1/inference` answer that serves `pi` (v2.0). */
export function parsePiFromInference(json: unknown): PiResponse {
  const inference = parseInferenceResponse(json);
  const body = json as Record<string, unknown>;
  return {
    digits: inference.digits,
    precision: inference.precision,
    confidence: optionalNumber(body.confidence, 'confidence'),
    model: inference.model,
    inferenceTimeMs: optionalNumber(body.inference_time_ms, 'inference_time_ms'),
    gpuCostUsd: optionalNumber(body.gpu_cost_usd, 'gpu_cost_usd'),
    costUsd: inference.costUsd,
    sponsoredBy: optionalText(body.sponsored_by, 'sponsored_by'),
    disclaimer: optionalText(body.disclaimer, 'disclaimer'),
    constantMarker: inference.constantMarker,
    raw: json,
  };
}
