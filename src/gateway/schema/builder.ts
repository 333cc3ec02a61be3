/**
 * The one Pothos schema builder. Types and root fields live beside it (src/gateway/schema), one feature per file.
 *
 * Why no Pothos plugins: every plugin wraps every resolver, and the gateway's resolvers are on the
 * hot path of each request (a benchmark compares the gateway with a raw proxy).
 */
import SchemaBuilder from '@pothos/core';
import type { GatewayContext } from './context.js';
import type { JsonArgument } from './json-value.js';

export interface GatewaySchemaTypes {
  Context: GatewayContext;
  /** Fields are non-null unless they say `nullable: true` (each nullable field is a decision). */
  DefaultFieldNullability: false;
  Scalars: {
    /** Input: the parsed, measured argument (limits are checked per request). Output: any JSON value. */
    JSON: { Input: JsonArgument; Output: unknown };
  };
}

export const builder = new SchemaBuilder<GatewaySchemaTypes>({ defaultFieldNullability: false });
