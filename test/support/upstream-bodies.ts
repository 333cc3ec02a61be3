/** Upstream answers shaped as the specs show them, for the scripted upstream. */

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
