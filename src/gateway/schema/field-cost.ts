/**
 * The `@cost(weight:)` of a root field in the subgraph schema (subgraph.graphql, contract §14): what
 * the field's upstream calls cost at its default arguments (the service's default model; pi and
 * inference at 3 digits), priced by the table the estimate of X-Max-Cost-Usd starts from, in units
 * of 0.0001 USD rounded up (cost/price-table.ts). Read from the field's own `upstream` extension, so
 * the weight and the estimate cannot price a field differently; 0 for a field that calls no model.
 */
import { costWeight } from '../cost/price-table.js';
import type { UpstreamFieldExtension } from '../operation/operation-plan.js';

export const fieldCost = (upstream: UpstreamFieldExtension | undefined): number =>
  costWeight(upstream?.models?.({}) ?? []);
