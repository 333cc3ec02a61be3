/**
 * What a call is expected to cost before the gateway has seen any: the prices the reference services
 * publish (src/services/README.md), per model. Replaced per model by the running mean of observed
 * costs as soon as there are observations (cost-model.ts). A copy, not an import: the gateway knows
 * the services only over HTTP.
 */
import type { ModelCall } from '../operation/operation-plan.js';

/** null-x models: a flat price per check (opus about ten times 4o, as its spec says). */
const CHECK_USD: Record<string, number> = {
  'null-x-4o': 0.0042,
  'null-x-mini': 0.0006,
  'null-x-opus': 0.042,
};

/** pi-x models: a base price plus a price per decimal place (GET /pi). */
const PI_USD: Record<string, { base: number; perDigit: number; perToken: number }> = {
  'pi-x-4o': { base: 0.0031, perDigit: 0.000002, perToken: 0.00002 },
  'pi-x-mini': { base: 0.0004, perDigit: 0.0000003, perToken: 0.000004 },
  'pi-x-opus-almost-correct': { base: 0.031, perDigit: 0.00002, perToken: 0.0002 },
};

/** A model the table does not know is priced as the dearest one of its service: an estimate must not be low. */
const DEAREST_CHECK = 'null-x-opus';
const DEAREST_PI = 'pi-x-opus-almost-correct';

/** The table's price of one call, in US dollars. */
export function listPrice(call: ModelCall): number {
  const digits = call.digits ?? 3;
  switch (call.kind) {
    case 'check':
      return CHECK_USD[call.model] ?? (CHECK_USD[DEAREST_CHECK] as number);
    case 'pi': {
      const price = PI_USD[call.model] ?? (PI_USD[DEAREST_PI] as { base: number; perDigit: number });
      return price.base + price.perDigit * digits;
    }
    case 'inference': {
      const price = PI_USD[call.model] ?? (PI_USD[DEAREST_PI] as { perToken: number });
      // About three digits a token, plus a fixed prompt (the chain of thought, when asked, adds more).
      return (12 + Math.ceil((digits + 2) / 3)) * price.perToken;
    }
  }
}

/**
 * What one `@cost` weight is worth in US dollars: the subgraph's unit (contract §14; FEDERATION=true),
 * so that a router's demand control, which counts in integers, refuses by the same prices.
 */
export const USD_PER_COST_WEIGHT = 0.0001;

/**
 * The `@cost(weight:)` of a field that makes `calls`: their table price in units of
 * USD_PER_COST_WEIGHT, rounded up (a weight must not make a call look cheaper than it is); 0 for none.
 * The dollars are rounded to 1e-12 first: 0.0042 / 0.0001 is 41.99999999999999 in floating point.
 */
export function costWeight(calls: readonly ModelCall[]): number {
  let usd = 0;
  for (const call of calls) usd += listPrice(call);
  return Math.ceil(Math.round(usd * 1e12) / (USD_PER_COST_WEIGHT * 1e12));
}
