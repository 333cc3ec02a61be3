/**
 * The Federation 2 subgraph schema (contract §14, FEDERATION=true): every type and root field of the
 * public schema, the Model entity, `_service { sdl }` and `_entities`, with an `@link` to federation
 * v2.9 importing `@key`, `@cost` and `@listSize` (the version that brought the cost directives).
 *
 * `_entities` answers each representation on its own: one whose `__typename` is not an entity of this
 * subgraph (or that is not an object) is a BAD_USER_INPUT error at its index, and the others still
 * resolve; Apollo's resolver would fail the whole list with an uncoded error, which Yoga masks.
 */

import { hasResolvableKey } from '@pothos/plugin-federation';
import { type GraphQLFieldResolver, type GraphQLSchema, isObjectType } from 'graphql';
import { builder } from './builder.js';
import type { GatewayContext } from './context.js';
import { badUserInput } from './errors.js';

/** The federation version linked (the cost directives came with v2.9). */
export const FEDERATION_LINK = 'https://specs.apollo.dev/federation/v2.9';

type EntitiesResolver = GraphQLFieldResolver<unknown, GatewayContext, { representations: unknown[] }>;

/** `_entities`'s resolver, made to answer a representation that is not one of `entities` with a coded error. */
function perRepresentation(resolve: EntitiesResolver, entities: ReadonlySet<string>): EntitiesResolver {
  return (root, args, context, info) =>
    args.representations.map((representation) => {
      const typename =
        typeof representation === 'object' && representation !== null
          ? (representation as { __typename?: unknown }).__typename
          : undefined;
      if (typeof typename !== 'string' || !entities.has(typename))
        return badUserInput(
          `a representation's __typename must name an entity of this subgraph (${[...entities].join(', ')}), got ${JSON.stringify(typename ?? null)}`,
        );
      return (resolve(root, { representations: [representation] }, context, info) as unknown[])[0];
    });
}

export function buildSubgraphSchema(): GraphQLSchema {
  const schema = builder.toSubGraphSchema({
    subGraph: 'federation',
    linkUrl: FEDERATION_LINK,
    federationDirectives: ['@cost', '@key', '@listSize'],
  });
  const entities = new Set(
    Object.values(schema.getTypeMap())
      .filter((type) => isObjectType(type) && hasResolvableKey(type))
      .map((type) => type.name),
  );
  const field = schema.getQueryType()?.getFields()._entities;
  if (field?.resolve === undefined) throw new Error('the subgraph schema has no _entities field');
  field.resolve = perRepresentation(field.resolve as EntitiesResolver, entities);
  return schema;
}
