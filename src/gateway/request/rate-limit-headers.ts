/**
 * Part of the pipeline's encode step: the IETF RateLimit header fields
 * (draft-ietf-httpapi-ratelimit-headers) on every answer to a caller with a budget (docs/contract.md,
 * Cost), so generic tools and a frontend read what is left without a GraphQL query:
 *
 *   RateLimit-Policy: "1h";q=50000;w=3600;qu="usd-micro", "24h";q=500000;w=86400;qu="usd-micro"
 *   RateLimit: "1h";r=38000;t=1200, "24h";r=488000;t=1200
 *
 * One list member per budget window, named as the window is written in COST_BUDGETS. The draft's
 * quota units are integers, so the unit is the millionth of a US dollar (`qu="usd-micro"`): `q` the
 * window's limit, `r` what is left of it (spend and the reservations in flight, this operation's
 * included, deducted), `t` the seconds until some of the window's spend leaves it. Callers without a
 * budget get neither field.
 */
import type { BudgetWindowStatus } from '../cost/cost-budget.js';

const MICRO = 1_000_000;

/** The two header fields for the caller's windows; undefined when no budget applies. */
export function rateLimitHeaders(
  windows: readonly BudgetWindowStatus[] | undefined,
): { 'ratelimit-policy': string; ratelimit: string } | undefined {
  if (windows === undefined || windows.length === 0) return undefined;
  const name = (window: string) => `"${window.replace(/["\\]/g, '')}"`;
  return {
    'ratelimit-policy': windows
      .map((w) => `${name(w.window)};q=${Math.round(w.limitUsd * MICRO)};w=${w.windowSeconds};qu="usd-micro"`)
      .join(', '),
    ratelimit: windows
      .map((w) => `${name(w.window)};r=${Math.floor(w.remainingUsd * MICRO)};t=${Math.ceil(w.refillSeconds)}`)
      .join(', '),
  };
}
