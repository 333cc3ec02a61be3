/** Upstream answers shaped as the specs show them, for the scripted upstream. */
import type { NullCheckResponse } from '../../src/gateway/upstream/types.js';
import type { ScriptedUpstream } from '../fixtures/scripted-upstream.js';

export const nullBody = (extra: Record<string, unknown> = {}) => ({
  is_null: true,
  confidence: 0.93,
  model: 'null-x-4o',
  inference_time_ms: 7,
  gpu_cost_usd: 0.0012,
  experts_consulted: 2,
  sponsored_by: null,
  disclaimer: 'May differ from strict equality.',
  ...extra,
});

export const piBody = (extra: Record<string, unknown> = {}) => ({
  digits: '3.141',
  precision: 3,
  confidence: 0.99,
  model: 'pi-x-4o',
  inference_time_ms: 20,
  gpu_cost_usd: 0.01,
  sponsored_by: null,
  disclaimer: 'Digits may differ from actual pi.',
  ...extra,
});

export const nullHealth = {
  status: 'ok',
  null_detectable: true,
  undefined_detectable: false,
  cluster_status: 'warm',
  philosophy_consultant: null,
  monthly_burn: '$1',
};

export const piHealth = { status: 'ok', pi_available: true, gpu_cluster: 'nominal', monthly_burn_rate: '$2' };

/**
 * Every field of a check answer but `is_null`, each set (a sponsor too): for tests that read each field
 * back. Add the `is_null` the test is about.
 */
export const nullMeta = Object.freeze({
  confidence: 0.97,
  model: 'null-x-4o',
  inference_time_ms: 12,
  gpu_cost_usd: 0.0021,
  experts_consulted: 2,
  sponsored_by: 'NullCorp',
  disclaimer: 'May differ from strict equality.',
});

/** A pi answer of 5 places with every field set (a sponsor too): for tests that read each field back. */
export const piAnswer = Object.freeze({
  digits: '3.14159',
  precision: 5,
  confidence: 0.99,
  model: 'pi-x-4o',
  inference_time_ms: 40,
  gpu_cost_usd: 0.3,
  sponsored_by: 'PiCorp',
  disclaimer: 'Digits may differ from actual pi.',
});

/**
 * Scripts the spec answers above: the check and its health on `nullUp`, pi and its health on `piUp`
 * under `piPrefix` (one upstream can serve both: `routeSpecAnswers(up, up, '/pi')`). A test re-scripts
 * the routes it is about afterwards.
 */
export function routeSpecAnswers(
  nullUp: ScriptedUpstream,
  piUp: ScriptedUpstream = nullUp,
  piPrefix = '',
): void {
  nullUp.route('POST', '/api/v1/check', { body: nullBody() });
  nullUp.route('GET', '/api/v1/health', { body: nullHealth });
  piUp.route('GET', `${piPrefix}/api/v1/pi`, { body: piBody() });
  piUp.route('GET', `${piPrefix}/api/v1/health`, { body: piHealth });
}

/**
 * Scripts the spec answers on one upstream (pi under `/pi`), and its check so that a string value
 * whose gate is in `holds` is answered only once that gate opens: the call stays in flight for as
 * long as a test needs (single flight across replicas). Each check costs `usd`.
 */
export function routeHeldChecks(
  upstream: ScriptedUpstream,
  holds: ReadonlyMap<string, Promise<void>>,
  usd: number,
): void {
  routeSpecAnswers(upstream, upstream, '/pi');
  upstream.route('POST', '/api/v1/check', (req) => {
    const value = (req.body as { value?: unknown }).value;
    return {
      holdUntil: typeof value === 'string' ? holds.get(value) : undefined,
      body: nullBody({ is_null: value === null, gpu_cost_usd: usd }),
    };
  });
}

/**
 * A decoded null-check answer (what the client hands the schema), for tests and measurements that
 * run the schema without an upstream.
 */
export const nullVerdict: NullCheckResponse = {
  answer: { kind: 'boolean', isNull: false },
  confidence: 0.9502,
  model: 'null-x-4o',
  inferenceTimeMs: 3,
  gpuCostUsd: 0.0042,
  expertsConsulted: 1,
  sponsoredBy: null,
  disclaimer: null,
  raw: {},
};
