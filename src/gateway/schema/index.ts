/**
 * The gateway schema: each import registers its types and root field on the builder. Two schemas come
 * of them: the public one (schema.graphql) and the Federation 2 subgraph (subgraph.graphql), which adds
 * the Model entity, `_service` and `_entities` (served with FEDERATION=true).
 */
import type { GraphQLSchema } from 'graphql';
import { builder } from './builder.js';
import './query.js';
import './json-scalar.js';
import './models.js';
import './is-null.js';
import './pi.js';
import './inference.js';
import './health.js';
import './budget.js';
import './model-scores.js';
import './model-entity.js';
import { buildSubgraphSchema } from './subgraph.js';

export const schema = builder.toSchema({ subGraph: 'public' });

let subgraph: GraphQLSchema | undefined;
/** The subgraph schema, built at its first use (a few tens of ms that a gateway without FEDERATION never spends). */
export const subgraphSchema = (): GraphQLSchema => {
  subgraph ??= buildSubgraphSchema();
  return subgraph;
};
