/**
 * An MCP tool's name and JSON Schemas, derived from its GraphQL operation (contract §13): one
 * function for every tool, built-in or from the trusted-documents manifest, so a tool never
 * promises what its operation does not do.
 *
 * - `inputSchema` accepts exactly what GraphQL's variable coercion accepts (graphql-js
 *   `getVariableValues`, the oracle of test/unit/mcp-tool-schemas.test.ts): an argument it refuses
 *   is a `BAD_USER_INPUT` result before anything runs, and one it accepts is never refused by the
 *   operation's variables for its shape. Hence: Int is an integer within 32 bits; ID is a string or
 *   an integer (GraphQL turns `7` into `"7"`); a list also accepts one item (GraphQL's input
 *   coercion wraps it: `[Int]` takes `5` as `[5]`); a `@oneOf` input object takes exactly one
 *   non-null field; a non-null `JSON` any value but null. The one deliberate difference: an
 *   argument that is not a variable of the operation is refused (`additionalProperties: false`),
 *   where GraphQL ignores a variable nobody declared: an agent that misspells an argument is told.
 * - `outputSchema` describes `structuredContent`, the operation's `data`: the selection as run
 *   (fragments resolved, aliases as keys, `__typename` as a `const`, a union or interface as
 *   `anyOf` of one object per possible type, the fields they share written once beside it). Every
 *   selected key is `required` (present, possibly null) unless `@skip`/`@include` with a variable or
 *   `@defer` may leave it out. The MCP SDK's client validates `structuredContent`
 *   against it on every result, an error result's included, so by default every field also admits
 *   null (a field that failed is null, and null propagation blanks its parents).
 *
 * The schemas are plain JSON Schema valid under draft-07 (the SDK's ajv) and 2020-12 (the default
 * dialect of MCP 2025-11-25): no `$schema`, `type` lists for nullability, `$defs` only for a
 * recursive input object.
 */
import {
  astFromValue,
  type DocumentNode,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLSchema,
  getNamedType,
  isInputObjectType,
  isInputType,
  isListType,
  isNonNullType,
  Kind,
  type OperationDefinitionNode,
  TypeInfo,
  typeFromAST,
  valueFromASTUntyped,
  visit,
  visitWithTypeInfo,
} from 'graphql';
import {
  annotate,
  type JsonSchema,
  leafSchema,
  orNull,
  type Schema,
  type ToolSchemaOptions,
} from './tool-schema-parts.js';

export { type ToolOutputSchemaOptions, toolOutputSchema } from './tool-output-schema.js';
export type { JsonSchema, ToolSchemaOptions } from './tool-schema-parts.js';

/** Built-in tool names: snake_case of an operation name (`PiDigits` → `pi_digits`, `isNull` → `is_null`, `HTTPHealth` → `http_health`). */
export function toolNameOf(operationName: string): string {
  return operationName
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase();
}

/** The tool's inputSchema: `{ type: 'object', properties, required?, additionalProperties: false }` from the operation's variable definitions. */
export function toolInputSchema(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  /** The operation's document: variables used inside its fragments take their descriptions there too. */
  document?: DocumentNode,
  options: ToolSchemaOptions = {},
): JsonSchema {
  const build = inputSchemas(options);
  const usages = options.descriptions === false ? new Map() : variableUsages(schema, operation, document);
  const properties: Schema = {};
  const required: string[] = [];
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    const type = typeFromAST(schema, definition.type);
    if (!isInputType(type)) throw new TypeError(`variable $${name}: not an input type of the schema`);
    const property = build.input(type);
    annotate(property, type, { description: usages.get(name) }, options);
    if (definition.defaultValue !== undefined) {
      property.default = valueFromASTUntyped(definition.defaultValue);
    } else if (isNonNullType(type)) {
      required.push(name);
    }
    properties[name] = property;
  }
  const result: Schema = { type: 'object', properties };
  if (required.length > 0) result.required = required;
  result.additionalProperties = false;
  const defs = build.definitions();
  if (defs !== undefined) result.$defs = defs;
  return result;
}

/**
 * Where each variable is used, for its description: the argument or input field it is passed as,
 * a root field's argument first (the tool's arguments are usually its root field's).
 */
function variableUsages(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  document: DocumentNode | undefined,
): Map<string, string> {
  const root = schema.getRootType(operation.operation);
  const rootUsages = new Map<string, string>();
  const otherUsages = new Map<string, string>();
  const typeInfo = new TypeInfo(schema);
  const record = (name: string, description: string | null | undefined, atRoot: boolean) => {
    if (!description) return;
    const usages = atRoot ? rootUsages : otherUsages;
    if (!usages.has(name)) usages.set(name, description);
  };
  const visitor = visitWithTypeInfo(typeInfo, {
    Argument(node) {
      if (node.value.kind !== Kind.VARIABLE) return;
      const atRoot = root !== undefined && root !== null && typeInfo.getParentType() === root;
      record(node.value.name.value, typeInfo.getArgument()?.description, atRoot);
    },
    ObjectField(node) {
      if (node.value.kind !== Kind.VARIABLE) return;
      const parent = getNamedType(typeInfo.getParentInputType());
      if (isInputObjectType(parent)) {
        record(node.value.name.value, parent.getFields()[node.name.value]?.description, false);
      }
    },
  });
  visit(operation, visitor);
  for (const definition of document?.definitions ?? []) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) visit(definition, visitor);
  }
  for (const [name, description] of otherUsages) if (!rootUsages.has(name)) rootUsages.set(name, description);
  return rootUsages;
}

/** Input schemas of one tool; a recursive input object is written once, in `$defs`. */
function inputSchemas(options: ToolSchemaOptions) {
  const building = new Set<string>();
  const recursive = new Set<string>();
  const defs = new Map<string, Schema>();
  const seen = new Map<string, GraphQLInputObjectType>();
  const describing = options.descriptions !== false;

  /** A value of `type`, null included unless it is non-null. */
  function input(type: GraphQLInputType): Schema {
    return isNonNullType(type) ? present(type.ofType) : orNull(present(type));
  }

  /** A value of a nullable `type` that is not null. */
  function present(type: GraphQLInputType): Schema {
    if (isNonNullType(type)) return present(type.ofType);
    if (isListType(type)) {
      // GraphQL's input coercion takes one item for a list of one (`[Int]` takes `5` as `[5]`),
      // but never a null one (`[Int]!` refuses null).
      return { anyOf: [{ type: 'array', items: input(type.ofType) }, present(type.ofType)] };
    }
    if (isInputObjectType(type)) {
      seen.set(type.name, type);
      if (building.has(type.name)) {
        recursive.add(type.name);
        return { $ref: `#/$defs/${type.name}` };
      }
      return inputObject(type);
    }
    return leafSchema(type, 'input', options);
  }

  function inputObject(type: GraphQLInputObjectType): Schema {
    building.add(type.name);
    const properties: Schema = {};
    const required: string[] = [];
    for (const field of Object.values(type.getFields())) {
      // A @oneOf field is nullable in the SDL but its one value may not be null.
      const property = type.isOneOf ? present(field.type) : input(field.type);
      annotate(property, field.type, field, options);
      const fallback =
        field.defaultValue === undefined ? undefined : jsonValue(field.defaultValue, field.type);
      if (fallback !== undefined) property.default = fallback;
      else if (isNonNullType(field.type) && field.defaultValue === undefined) required.push(field.name);
      properties[field.name] = property;
    }
    building.delete(type.name);
    const result: Schema = { type: 'object', title: type.name, properties };
    if (required.length > 0) result.required = required;
    if (type.isOneOf) {
      result.minProperties = 1;
      result.maxProperties = 1;
    }
    result.additionalProperties = false;
    return result;
  }

  /** The recursive input objects met, each written once: its references to itself are `$ref`s. */
  function definitions(): Schema | undefined {
    // Writing one may meet another (a cycle through several types): until none is left.
    for (
      let pending = [...recursive];
      pending.length > 0;
      pending = [...recursive].filter((n) => !defs.has(n))
    ) {
      for (const name of pending) {
        const type = seen.get(name) as GraphQLInputObjectType;
        const body = inputObject(type);
        if (describing && type.description) body.description = type.description;
        defs.set(name, body);
      }
    }
    return defs.size === 0 ? undefined : Object.fromEntries(defs);
  }

  return { input, definitions };
}

/** A GraphQL input value (internal, as a schema's default value is) as JSON; undefined when it has none. */
function jsonValue(value: unknown, type: GraphQLInputType): unknown {
  try {
    const ast = astFromValue(value, type);
    return ast == null ? undefined : valueFromASTUntyped(ast);
  } catch {
    return undefined; // a custom scalar that cannot serialize its own default: no `default`, not a crash
  }
}
