/**
 * X-Max-Cost-Usd and COST_BUDGET_USD_PER_HOUR on Yoga's path: an operation over the caller's cap or
 * budget is refused with BUDGET_EXCEEDED before any upstream call. The decision is cost-control.ts's,
 * shared with the fast path.
 */
import type { DocumentNode, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { CostControl } from '../cost/cost-control.js';
import type { Operation } from '../operation.js';
import type { OperationPlan } from '../operation-plan.js';

export interface CostControlPluginOptions {
  control: CostControl;
  plan: (document: DocumentNode, operationName: string | null | undefined) => OperationPlan;
}

export function useCostControl(options: CostControlPluginOptions): Plugin {
  const { control, plan } = options;
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const operation = (args.contextValue as { operation?: Operation }).operation;
      if (operation === undefined) return;
      const variables = (args.variableValues ?? undefined) as Record<string, unknown> | undefined;
      const verdict = control.admit(operation, plan(args.document, args.operationName), variables);
      if (verdict === undefined) return;
      const refuse = (refusal: GraphQLError) => {
        operation.rejected = true;
        setResultAndStopExecution({ errors: [refusal] });
      };
      if (verdict instanceof Promise) {
        return verdict.then((refusal) => {
          if (refusal !== undefined) refuse(refusal);
        });
      }
      refuse(verdict);
    },
  };
}
