/**
 * The limits on what one operation may ask (the `limits` settings group), refused before anything
 * runs with a coded error:
 * - MAX_TOKENS: graphql-js's own token limit in the parser, and a clear error for documents nested so
 *   deeply that the recursive-descent parser runs out of stack before reaching it;
 * - MAX_DEPTH, MAX_ALIASES, MAX_DIRECTIVES: graphql-armor's rules, reported as ordinary validation
 *   errors (GRAPHQL_VALIDATION_FAILED, HTTP 400, every exceeded limit listed);
 * - INTROSPECTION=false: `__schema` and `__type` refused.
 * (MAX_UPSTREAM_CALLS is judged at admission, by the request pipeline.)
 *
 * These are all of the gateway's own validation rules. `createDocumentValidator` validates a document
 * with exactly what the gateway's Yoga applies (graphql-js's rules, these, Yoga's own), for what is
 * validated outside a request: the fast path's prepared documents and the trusted-documents manifest.
 */
import { EnvelopArmor } from '@escape.tech/graphql-armor';
import { useDeferStream } from '@graphql-yoga/plugin-defer-stream';
import type { ASTVisitor, DocumentNode, GraphQLError, GraphQLSchema, ValidationContext } from 'graphql';
import { createGraphQLError, createYoga, type Plugin } from 'graphql-yoga';
import type { GroupValues } from '../../shared/settings.js';
import { gatewayError } from '../errors.js';
import type { limitSettings } from '../settings.js';

export interface OperationLimitsPluginOptions {
  limits: GroupValues<typeof limitSettings>;
  introspection: boolean;
  /** Field suggestions ("Did you mean ...?") give the schema away: hidden in production. */
  hideSuggestions: boolean;
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
  };
}

/**
 * Every plugin of the gateway that adds to validation (or to the schema validation runs against):
 * Yoga's defer-stream plugin (the @defer and @stream directives and their rules) and the limits
 * above. The gateway's Yoga (yoga.ts) and `createDocumentValidator` both use this list.
 */
export function validationPlugins(options: OperationLimitsPluginOptions): Plugin[] {
  return [useDeferStream() as Plugin, useOperationLimits(options)];
}

/**
 * Validation with the gateway's full rule set, outside a request: a Yoga of its validation plugins
 * alone (never listening) gives `getEnveloped().validate`, the same function the gateway's Yoga runs.
 */
export function createDocumentValidator(
  schema: GraphQLSchema,
  options: OperationLimitsPluginOptions,
): (document: DocumentNode) => readonly GraphQLError[] {
  const enveloped = createYoga({ schema, logging: false, plugins: validationPlugins(options) }).getEnveloped(
    {},
  );
  return (document) => enveloped.validate(enveloped.schema, document) as readonly GraphQLError[];
}
