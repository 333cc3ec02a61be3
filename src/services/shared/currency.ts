/** Currency strings of the services' bodies: `$1,234,567.89` (health) and `$0.0042` (inference cost). */

const dollars = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' });

/** `$1,234,567.89`: grouped, two decimals. */
export function formatDollars(amount: number): string {
  return dollars.format(amount);
}

/** `$0.0042`: four decimals, no grouping, so that small per-call costs stay visible. */
export function formatCost(amount: number): string {
  return `$${amount.toFixed(4)}`;
}

/** Rounds a dollar amount to `decimals` places (cost fields are numbers, not strings). */
export function roundUsd(amount: number, decimals = 6): number {
  const factor = 10 ** decimals;
  return Math.round(amount * factor) / factor;
}
