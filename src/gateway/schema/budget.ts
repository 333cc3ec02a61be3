/**
 * `budget: Budget`: the caller's cost budget (docs/contract.md, Cost), per sliding window of the scope
 * that applies to its API key: limit, spend, reservations in flight, what is left, and when spend
 * leaves the window. Null where no budget applies. Calls nothing upstream (it reads the budget store:
 * memory, or one Redis round trip).
 */
import { isPromise } from '../../shared/is-promise.js';
import type { BudgetWindowStatus } from '../cost/cost-budget.js';
import { builder } from './builder.js';
import { fieldTable } from './field-table.js';

interface BudgetShape {
  scope: string;
  windows: BudgetWindowStatus[];
}

const BudgetWindow = builder.objectRef<BudgetWindowStatus>('BudgetWindow').implement({
  description:
    'One sliding window of a budget. Spend and reservations are US dollars as the upstreams bill them (gpu_cost_usd, the inference cost).',
  fields: (t) => ({
    window: t.exposeString('window', {
      description: 'The window as the settings write it, e.g. "1h", "24h", "30d".',
    }),
    windowSeconds: t.exposeInt('windowSeconds', { description: 'Length of the window in seconds.' }),
    ...fieldTable(
      {
        limitUsd: 'The most this API key may spend in any such window, in US dollars.',
        spentUsd: 'What operations of this API key that ended cost in the window, in US dollars.',
        reservedUsd: 'Estimates reserved by operations of this API key still in flight, in US dollars.',
        remainingUsd: 'limitUsd − spentUsd − reservedUsd (at least 0): what the next operations may reserve.',
      },
      (name, description) => t.exposeFloat(name, { description }),
    ),
    ...fieldTable(
      {
        resetSeconds:
          'Seconds until everything now in the window has left it (the whole limit is back); 0 when it is empty.',
        refillSeconds:
          'Seconds until the oldest spend or reservation in the window leaves it (some budget comes back); 0 when it is empty.',
      },
      (name, description) => t.exposeInt(name, { description }),
    ),
  }),
});

const Budget = builder.objectRef<BudgetShape>('Budget').implement({
  description: "The caller's cost budget: an operation runs only when its estimate fits every window.",
  fields: (t) => ({
    scope: t.exposeString('scope', {
      description:
        'The scope of the settings that applies: "key" (this API key\'s own), "tier:free", "tier:pro", "tier:enterprise", "anonymous" or "default".',
    }),
    windows: t.field({
      type: [BudgetWindow],
      description: 'Shortest window first.',
      resolve: (budget) => budget.windows,
    }),
  }),
});

const shapeOf = (windows: BudgetWindowStatus[] | undefined): BudgetShape | null =>
  windows === undefined || windows.length === 0 ? null : { scope: windows[0]?.scope ?? 'default', windows };

builder.queryField('budget', (t) =>
  t.field({
    type: Budget,
    nullable: true,
    description:
      "The caller's cost budget (by its API key, or the one of callers without a key); null when no budget applies. Calls nothing upstream.",
    cost: 0,
    resolve: (_root, _args, context) => {
      const status = context.budgetStatus(context.operation.caller);
      return isPromise(status) ? status.then(shapeOf) : shapeOf(status);
    },
  }),
);
