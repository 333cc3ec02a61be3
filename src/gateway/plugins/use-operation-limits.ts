/**
 * The limits on what one operation may ask (the `limits` settings group), refused before anything
 * runs with a coded error:
 * - MAX_TOKENS: graphql-js's own token limit in the parser, and a clear error for documents nested so
 *   deeply that the recursive-descent parser runs out of stack before reaching it;
 * - MAX_DEPTH, MAX_ALIASES, MAX_DIRECTIVES: graphql-armor's rules, reported as ordinary validation
 *   errors (GRAPHQL_VALIDATION_FAILED, HTTP 400, every exceeded limit listed);
 * - INTROSPECTION=false: `__schema` and `__type` refused;
 * - MAX_UPSTREAM_CALLS: distinct upstream calls, counted from the fields' `upstream` extension.
 *
 * The fast path validates with the same rules (through Yoga's `getEnveloped`) and counts calls with
 * the same planner; a document either limit refuses is answered by Yoga, with these errors.
 */
import { EnvelopArmor } from '@escape.tech/graphql-armor';
import type { ASTVisitor, DocumentNode, GraphQLError, ValidationContext } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { GroupValues } from '../../shared/settings.js';
import { gatewayError } from '../errors.js';
import type { Operation } from '../operation.js';
import type { OperationPlan } from '../operation-plan.js';
import type { limitSettings } from '../settings.js';

export interface OperationLimitsPluginOptions {
  limits: GroupValues<typeof limitSettings>;
  introspection: boolean;
  /** Field suggestions ("Did you mean ...?") give the schema away: hidden in production. */
  hideSuggestions: boolean;
  plan: (document: DocumentNode, operationName: string | null | undefined) => OperationPlan;
}

/**
 * By default armor THROWS from inside validation: no code, a misleading "Syntax Error:" prefix and
 * HTTP 200 without data. Reported through the validation context instead, a rejection is a validation
 * error like any other.
 */
const armorRejection = {
  propagateOnRejection: false,
  onReject: [
    (context: ValidationContext | null, error: GraphQLError): void => {
      context?.reportError(
        gatewayError('GRAPHQL_VALIDATION_FAILED', error.message.replace(/^Syntax Error: /, '')),
      );
    },
  ],
};

/**
 * Own rule rather than graphql-js's NoSchemaIntrospectionCustomRule, which checks types by
 * `instanceof` and so breaks across two copies of graphql-js; the field names are all that matters.
 */
const noIntrospection = (context: ValidationContext): ASTVisitor => ({
  Field(node) {
    const name = node.name.value;
    if (name === '__schema' || name === '__type') {
      context.reportError(
        createGraphQLError(`GraphQL introspection is disabled, but the query contained ${name}.`, {
          nodes: [node],
          extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
        }),
      );
    }
  },
});

type ParseFn = Parameters<NonNullable<Plugin['onParse']>>[0]['parseFn'];

export function useOperationLimits(options: OperationLimitsPluginOptions): Plugin {
  const { limits } = options;
  const armor = new EnvelopArmor({
    maxDepth: { n: limits.maxDepth, ignoreIntrospection: true, ...armorRejection },
    maxAliases: { n: limits.maxAliases, ...armorRejection },
    maxDirectives: { n: limits.maxDirectives, ...armorRejection },
    // Tokens are limited by graphql-js's own parser option (below): no Proxy per token.
    maxTokens: { enabled: false },
    // MAX_UPSTREAM_CALLS is this gateway's real cost measure.
    costLimit: { enabled: false },
    blockFieldSuggestion: { enabled: options.hideSuggestions },
  }).protect();

  // Yoga hands the same parseFn every time; the wrapper is made once per parseFn.
  let wrapped: ParseFn | undefined;
  let wrapping: ParseFn | undefined;

  return {
    onPluginInit({ addPlugin }) {
      for (const plugin of armor.plugins) addPlugin(plugin as Plugin);
    },
    onParse({ parseFn, setParseFn }) {
      if (wrapping !== parseFn || wrapped === undefined) {
        wrapping = parseFn;
        wrapped = (source, parseOptions) => {
          try {
            return parseFn(source, { ...parseOptions, maxTokens: limits.maxTokens });
          } catch (error) {
            if (!(error instanceof RangeError)) throw error;
            // A stack overflow: the stack has unwound by now, and the half-built document is discarded.
            throw gatewayError('BAD_USER_INPUT', 'The document is nested too deeply to parse.');
          }
        };
      }
      setParseFn(wrapped);
    },
    onValidate({ addValidationRule }) {
      if (!options.introspection) addValidationRule(noIntrospection);
    },
    onExecute({ args, setResultAndStopExecution }) {
      const calls = options.plan(args.document, args.operationName).calls;
      const operation = (args.contextValue as { operation?: Operation }).operation;
      // In a batch the limit is the batch's: the calls of its operations admitted before this one count.
      const batch = operation?.batch;
      const before = batch?.upstreamCalls ?? 0;
      if (before + calls <= limits.maxUpstreamCalls) {
        if (batch !== undefined) batch.upstreamCalls = before + calls;
        return;
      }
      if (operation !== undefined) operation.rejected = true;
      const message =
        batch === undefined
          ? `This operation would make ${calls} distinct upstream calls; at most ${limits.maxUpstreamCalls} are allowed (MAX_UPSTREAM_CALLS).`
          : `This operation would make ${calls} distinct upstream calls, after the ${before} of the batch's operations before it; at most ${limits.maxUpstreamCalls} are allowed for the whole batch (MAX_UPSTREAM_CALLS).`;
      setResultAndStopExecution({
        errors: [
          gatewayError(
            'BAD_USER_INPUT',
            message,
            // `spec`: 400 for application/graphql-response+json (a result without data must not be 200),
            // 200 for legacy application/json, as Yoga does for validation errors.
            { upstreamCalls: calls, limit: limits.maxUpstreamCalls, http: { status: 400, spec: true } },
          ),
        ],
      });
    },
  };
}
