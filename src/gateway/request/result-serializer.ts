/**
 * The answer of a prepared operation, serialized by a serializer compiled for that operation
 * (fast-json-stringify with a JSON schema derived from the operation's selections), byte for byte
 * the body Yoga writes (`JSON.stringify` of the result: processRegularResult in pipeline.ts `encode`).
 *
 * Why not graphql-jit's own `stringify` (its `customJSONSerializer` option): it cannot compile an
 * operation that selects a custom scalar (it throws, and the query would then lose graphql-jit too),
 * it drops `extensions`, and for an abstract type it merges the properties of every possible type in
 * the schema's order, which is not the order of the result's keys when two members select the same
 * fields in different orders. The schema here is derived the way graphql-js collects fields, and an
 * operation whose key order cannot be fixed ahead (a union whose members disagree on it, @skip and
 * @include, introspection) gets no serializer: the standard path answers it.
 *
 * A serializer answers only a plain data result, `{ data, extensions? }` in that key order (what the
 * pipeline's finish step returns when no error occurred); anything else (errors, a result without
 * data, Yoga's internal `extensions.http`) returns undefined and the standard path serializes it.
 * Values of custom scalars (JSON) and the extensions go through `JSON.stringify` as in Yoga's body.
 * A value a schema type cannot write as JSON.stringify does (a non-finite Float, which GraphQL never
 * returns) makes the serializer throw or differ only where graphql-js would have raised a field
 * error, and a result with errors never reaches it.
 */
import fastJson from 'fast-json-stringify';
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  getNamedType,
  getNullableType,
  getOperationAST,
  isAbstractType,
  isEnumType,
  isListType,
  isObjectType,
  isScalarType,
  Kind,
  type SelectionSetNode,
} from 'graphql';

/** A result's body, or undefined: this result is not one the serializer writes exactly. */
export type ResultSerializer = (result: unknown) => string | undefined;

/** A JSON schema as fast-json-stringify reads it (the subset derived here). */
interface JsonSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  nullable?: boolean;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
}

/** The JSON type of graphql-js's built-in scalars (their serialize returns exactly that type). */
const BUILT_IN: Record<string, JsonSchema['type']> = {
  Int: 'integer',
  Float: 'number',
  String: 'string',
  ID: 'string',
  Boolean: 'boolean',
};

/** Raised while deriving: the operation's answer has no key order known ahead. */
class NotSerializable extends Error {}

/**
 * The JSON schema of the answer's `data` for one operation, with properties in the order graphql-js
 * writes them; throws NotSerializable when that order is not fixed ahead.
 */
function dataSchemaOf(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | undefined,
): JsonSchema {
  const operation = getOperationAST(document, operationName);
  if (operation === null || operation === undefined) throw new NotSerializable('no operation');
  const root = schema.getRootType(operation.operation);
  if (root === undefined || root === null) throw new NotSerializable('no root type');
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);

  const applies = (condition: string | undefined, type: GraphQLObjectType): boolean => {
    if (condition === undefined || condition === type.name) return true;
    const conditionType = schema.getType(condition);
    return (
      conditionType !== undefined && isAbstractType(conditionType) && schema.isSubType(conditionType, type)
    );
  };

  /** graphql-js's collectFields: response names in first-seen order, the field nodes of each. */
  const collect = (
    type: GraphQLObjectType,
    selectionSet: SelectionSetNode,
    fields: Map<string, FieldNode[]>,
    visited: Set<string>,
  ): void => {
    for (const selection of selectionSet.selections) {
      // @skip and @include decide at run time which keys exist, and so their order.
      for (const directive of selection.directives ?? [])
        if (directive.name.value === 'skip' || directive.name.value === 'include')
          throw new NotSerializable('conditional selection');
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const nodes = fields.get(key);
        if (nodes === undefined) fields.set(key, [selection]);
        else nodes.push(selection);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (applies(selection.typeCondition?.name.value, type))
          collect(type, selection.selectionSet, fields, visited);
      } else {
        const name = selection.name.value;
        if (visited.has(name)) continue;
        visited.add(name);
        const fragment = fragments.get(name);
        if (fragment === undefined) throw new NotSerializable('unknown fragment');
        if (applies(fragment.typeCondition.name.value, type))
          collect(type, fragment.selectionSet, fields, visited);
      }
    }
  };

  /** The properties of an object type's value, in the result's order. */
  const propertiesOf = (
    type: GraphQLObjectType,
    selectionSets: ReadonlyArray<SelectionSetNode | undefined>,
  ): Array<[string, JsonSchema]> => {
    // One set of visited fragments for all the field nodes of a key, as graphql-js's collectSubfields.
    const fields = new Map<string, FieldNode[]>();
    const visited = new Set<string>();
    for (const selectionSet of selectionSets)
      if (selectionSet !== undefined) collect(type, selectionSet, fields, visited);
    const properties: Array<[string, JsonSchema]> = [];
    for (const [key, fieldNodes] of fields) {
      const name = (fieldNodes[0] as FieldNode).name.value;
      if (name === '__typename') {
        properties.push([key, { type: 'string' }]);
        continue;
      }
      const field = type.getFields()[name];
      if (field === undefined) throw new NotSerializable(`introspection or unknown field ${name}`);
      properties.push([key, schemaOf(field.type, fieldNodes)]);
    }
    return properties;
  };

  const objectSchema = (properties: Array<[string, JsonSchema]>): JsonSchema => ({
    type: 'object',
    nullable: true,
    properties: Object.fromEntries(properties),
  });

  /**
   * An abstract type's value is one of its possible types' objects, each with its own keys: one
   * schema holds them all (a member's object lacks the others' keys, which are then not written)
   * when one order of all the keys keeps every member's order, and a key shared by two members has
   * the same schema in both.
   */
  const abstractSchema = (members: readonly GraphQLObjectType[], nodes: readonly FieldNode[]): JsonSchema => {
    const order: string[] = [];
    const schemas = new Map<string, JsonSchema>();
    const sequences: string[][] = [];
    for (const member of members) {
      const properties = propertiesOf(
        member,
        nodes.map((node) => node.selectionSet),
      );
      let after = -1;
      for (const [key, property] of properties) {
        const known = schemas.get(key);
        if (known === undefined) {
          schemas.set(key, property);
          order.splice(after + 1, 0, key);
          after += 1;
        } else {
          if (JSON.stringify(known) !== JSON.stringify(property))
            throw new NotSerializable(`${key} differs by type`);
          after = order.indexOf(key);
        }
      }
      sequences.push(properties.map(([key]) => key));
    }
    for (const sequence of sequences) {
      let last = -1;
      for (const key of sequence) {
        const at = order.indexOf(key);
        if (at < last) throw new NotSerializable('members disagree on key order');
        last = at;
      }
    }
    return objectSchema(order.map((key) => [key, schemas.get(key) as JsonSchema]));
  };

  const schemaOf = (type: GraphQLOutputType, nodes: readonly FieldNode[]): JsonSchema => {
    // Every value is written nullable: a null where the type says non-null never reaches a
    // serializer (graphql-js then raised an error), and `null` is what JSON.stringify writes anyway.
    const nullable = getNullableType(type);
    if (isListType(nullable))
      return { type: 'array', nullable: true, items: schemaOf(nullable.ofType as GraphQLOutputType, nodes) };
    const named: GraphQLNamedType = getNamedType(nullable);
    if (isObjectType(named))
      return objectSchema(
        propertiesOf(
          named,
          nodes.map((node) => node.selectionSet),
        ),
      );
    if (isAbstractType(named)) return abstractSchema(schema.getPossibleTypes(named), nodes);
    if (isEnumType(named)) return { type: 'string', nullable: true };
    if (isScalarType(named)) {
      const json = BUILT_IN[named.name];
      // A custom scalar (JSON) is any value: fast-json-stringify writes it with JSON.stringify.
      return json === undefined ? {} : { type: json, nullable: true };
    }
    throw new NotSerializable(`unhandled type ${String(named)}`);
  };

  return objectSchema(propertiesOf(root, [operation.selectionSet]));
}

/** The compiled `data` writer of one operation, or undefined when its key order is not fixed ahead. */
export function compileDataSerializer(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | undefined,
): ((data: unknown) => string) | undefined {
  let dataSchema: JsonSchema;
  try {
    dataSchema = dataSchemaOf(schema, document, operationName);
  } catch (error) {
    if (error instanceof NotSerializable) return undefined;
    throw error;
  }
  return fastJson(dataSchema) as (data: unknown) => string;
}

/**
 * Whether `result` is a plain data result: `{ data, extensions? }` in that key order, data an object,
 * no `extensions.http` (Yoga takes that internal extension out of the body). Yoga writes such a
 * result with `JSON.stringify` as it is, with status 200.
 */
export function isPlainDataResult(result: unknown): result is { data: object; extensions?: object } {
  if (typeof result !== 'object' || result === null) return false;
  let index = 0;
  for (const key in result) {
    if (index === 0 ? key !== 'data' : index > 1 || key !== 'extensions') return false;
    index++;
  }
  const { data, extensions } = result as { data?: unknown; extensions?: unknown };
  if (typeof data !== 'object' || data === null) return false;
  return (
    extensions === undefined ||
    (typeof extensions === 'object' && extensions !== null && !('http' in extensions))
  );
}

/** The body of a plain data result, its data written with `writeData`; undefined for any other result. */
export function serializeResult(result: unknown, writeData: (data: unknown) => string): string | undefined {
  if (!isPlainDataResult(result)) return undefined;
  const { data, extensions } = result;
  if (extensions === undefined) return `{"data":${writeData(data)}}`;
  return `{"data":${writeData(data)},"extensions":${JSON.stringify(extensions)}}`;
}

export interface ResultSerializerOptions {
  schema: GraphQLSchema;
  document: DocumentNode;
  operationName: string | undefined;
  /**
   * Results written by the standard path before the serializer is compiled: compiling costs more
   * than serializing many answers, so an operation sent once never pays for it. @default 1
   */
  compileAfter?: number;
}

/**
 * The serializer of one prepared operation: compiled lazily (after `compileAfter` results), then
 * used for every plain data result; undefined for a result it does not write (the standard path's).
 */
export function createResultSerializer(options: ResultSerializerOptions): ResultSerializer {
  let waiting = options.compileAfter ?? 1;
  let writeData: ((data: unknown) => string) | undefined | null = null;
  return (result) => {
    if (writeData === null) {
      if (waiting > 0) {
        waiting--;
        return undefined;
      }
      writeData = compileDataSerializer(options.schema, options.document, options.operationName);
    }
    if (writeData === undefined) return undefined;
    return serializeResult(result, writeData);
  };
}
