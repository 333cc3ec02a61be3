/**
 * The metrics of budget shares (shared-state/budget-shares.ts; docs/contract.md, More than one
 * machine): what this replica's shares hold, read when /metrics is scraped, and how many top-ups Redis
 * granted. Registered only with a Redis URL: in memory mode there are no shares.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface BudgetShareMetrics {
  /** A share top-up Redis granted. */
  refilled(): void;
  /** Where the held figure is read at each scrape (the budget store). */
  setHeldSource(read: () => number): void;
}

export function createBudgetShareMetrics(registry: Registry): BudgetShareMetrics {
  let held: () => number = () => 0;
  new Gauge({
    name: 'gateway_budget_shares_held_usd',
    help: 'US dollars of budget this replica holds as shares taken from Redis (booked there as reserved).',
    registers: [registry],
    collect() {
      this.set(held());
    },
  });
  const refills = new Counter({
    name: 'gateway_budget_share_refills_total',
    help: 'Budget shares taken or topped up from Redis by this replica.',
    registers: [registry],
  });
  return {
    refilled: () => refills.inc(),
    setHeldSource(read) {
      held = read;
    },
  };
}
