/**
 * The one Pothos schema builder. Types and root fields live beside it (src/gateway/schema), one feature per file.
 *
 * Its plugins make one code base two schemas (index.ts): the public schema (schema.graphql) and the
 * Federation 2 subgraph (subgraph.graphql, FEDERATION=true). Sub-graph keeps what only the subgraph
 * has (the Model entity) out of the public schema; directives and federation add `@key`, `@cost`,
 * `@listSize` and the `_entities`/`_service` fields. None of them wraps a resolver (they act when the
 * schema is built, not per request): the gateway's resolvers are on the hot path of each request, and
 * a benchmark compares the gateway with a raw proxy (docs/performance.md, the FEDERATION row).
 */
import SchemaBuilder from '@pothos/core';
import DirectivePlugin from '@pothos/plugin-directives';
import FederationPlugin, { hasResolvableKey } from '@pothos/plugin-federation';
import SubGraphPlugin from '@pothos/plugin-sub-graph';
import type { GatewayContext } from './context.js';
import type { JsonArgument } from './json-value.js';

/** The two schemas built from this builder: every type is in both unless it says otherwise. */
export type SchemaVariant = 'public' | 'federation';

export interface GatewaySchemaTypes {
  Context: GatewayContext;
  /** Fields are non-null unless they say `nullable: true` (each nullable field is a decision). */
  DefaultFieldNullability: false;
  SubGraphs: SchemaVariant;
  Scalars: {
    /** Input: the parsed, measured argument (limits are checked per request). Output: any JSON value. */
    JSON: { Input: JsonArgument; Output: unknown };
  };
}

export const builder = new SchemaBuilder<GatewaySchemaTypes>({
  plugins: [SubGraphPlugin, DirectivePlugin, FederationPlugin],
  defaultFieldNullability: false,
  subGraphs: {
    defaultForTypes: ['public', 'federation'],
    fieldsInheritFromTypes: true,
    // An entity is reached through `_entities`, not from Query: kept in the schema that has it.
    explicitlyIncludeType: (type) => hasResolvableKey(type),
  },
});
