/**
 * What the input and output schemas of a tool share (tool-schemas.ts, tool-output-schema.ts): the
 * options, the scalars, null, and descriptions.
 */
import {
  type GraphQLEnumType,
  type GraphQLInputType,
  type GraphQLLeafType,
  type GraphQLNamedType,
  type GraphQLOutputType,
  getNamedType,
  isEnumType,
  isSpecifiedScalarType,
} from 'graphql';

/** A JSON Schema (draft 2020-12 subset the MCP SDK accepts) as a plain object. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/** Schemas are built mutable, then handed out as {@link JsonSchema}. */
export type Schema = Record<string, unknown>;

export interface ToolSchemaOptions {
  /**
   * JSON Schemas of custom scalars by name, for both directions. A custom scalar not listed (`JSON`
   * included) admits any value (`{}`, with the scalar's description).
   * @default {}
   */
  scalars?: Readonly<Record<string, JsonSchema>>;
  /**
   * GraphQL descriptions as `description` (enum values' included, listed in their enum's). Off, the
   * schemas are smaller (an agent's context pays for every byte of `tools/list`).
   * @default true
   */
  descriptions?: boolean;
}

/** Every JSON type but null (`integer` is in `number`). */
const ANY_BUT_NULL = ['object', 'array', 'string', 'number', 'boolean'] as const;

/** `schema`, null admitted too. */
export function orNull(schema: Schema): Schema {
  const { type } = schema;
  if (
    Array.isArray(type) &&
    type.length === ANY_BUT_NULL.length &&
    ANY_BUT_NULL.every((t) => type.includes(t))
  ) {
    delete schema.type; // any value at all: `{}` says it best
    return schema;
  }
  if (typeof type === 'string') schema.type = [type, 'null'];
  else if (Array.isArray(type)) {
    if (!type.includes('null')) schema.type = [...type, 'null'];
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(null)) schema.enum = [...schema.enum, null];
  if (type === undefined) {
    if (Array.isArray(schema.anyOf)) schema.anyOf = [...schema.anyOf, { type: 'null' }];
    else if (schema.$ref !== undefined || schema.const !== undefined || schema.not !== undefined) {
      return { anyOf: [schema, { type: 'null' }] };
    }
    // `{}` (any value) admits null already.
  }
  return schema;
}

/** A scalar's schema; ID is a string on output and, as GraphQL coerces it, a string or an integer on input. */
export function scalar(name: string, direction: 'input' | 'output', options: ToolSchemaOptions): Schema {
  const custom = options.scalars?.[name];
  if (custom !== undefined) return structuredClone(custom) as Schema;
  switch (name) {
    case 'Int':
      return direction === 'input'
        ? { type: 'integer', minimum: -2147483648, maximum: 2147483647 }
        : { type: 'integer' };
    case 'Float':
      return { type: 'number' };
    case 'String':
      return { type: 'string' };
    case 'Boolean':
      return { type: 'boolean' };
    case 'ID':
      return direction === 'input' ? { type: ['string', 'integer'] } : { type: 'string' };
    default:
      // JSON and any scalar without a given schema: any value (but null, until orNull says so).
      return { type: [...ANY_BUT_NULL] };
  }
}

/** A leaf type's schema: an enum's value names, or the scalar's ({@link scalar}). */
export function leafSchema(
  type: GraphQLLeafType,
  direction: 'input' | 'output',
  options: ToolSchemaOptions,
): Schema {
  if (isEnumType(type)) return { type: 'string', enum: type.getValues().map((v) => v.name) };
  return scalar(type.name, direction, options);
}

/**
 * Sets `description` on the schema of a usage of `type` (a field, an input field, a variable): the
 * usage's own text, else the type's (the built-in scalars' say nothing); none with `descriptions:
 * false`. And `deprecated` for a deprecated usage.
 */
export function annotate(
  target: Schema,
  type: GraphQLInputType | GraphQLOutputType,
  usage: { description?: string | null | undefined; deprecationReason?: string | null | undefined },
  options: ToolSchemaOptions,
): void {
  if (options.descriptions !== false) {
    const text = descriptionOf(getNamedType(type), usage.description);
    if (text !== undefined) target.description = text;
  }
  if (usage.deprecationReason != null) target.deprecated = true;
}

/** A usage's description, else the type's, with an enum's values and what each means. */
export function descriptionOf(type: GraphQLNamedType, own: string | null | undefined): string | undefined {
  const base = own || (isSpecifiedScalarType(type) ? undefined : type.description) || undefined;
  if (!isEnumType(type)) return base;
  const values = enumValuesText(type);
  if (values === undefined) return base;
  return base === undefined ? values : `${base}\n${values}`;
}

function enumValuesText(type: GraphQLEnumType): string | undefined {
  const values = type.getValues();
  if (!values.some((v) => v.description)) return undefined;
  return values.map((v) => (v.description ? `- ${v.name}: ${v.description}` : `- ${v.name}`)).join('\n');
}
