/**
 * A tool's outputSchema (contract §13): the JSON Schema of `structuredContent`, the operation's
 * `data`, following the selection as GraphQL runs it. See tool-schemas.ts.
 */
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  isAbstractType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  SchemaMetaFieldDef,
  type SelectionSetNode,
  TypeMetaFieldDef,
} from 'graphql';
import {
  annotate,
  type JsonSchema,
  leafSchema,
  orNull,
  type Schema,
  type ToolSchemaOptions,
} from './tool-schema-parts.js';

export interface ToolOutputSchemaOptions extends ToolSchemaOptions {
  /**
   * Which fields admit null. `every-field`: all of them, non-null ones too, because an error result's
   * `structuredContent` is whatever data survived and the SDK's client validates it anyway.
   * `as-graphql`: only nullable ones (what a GraphQL response can hold; the tests use it to check the
   * gateway's answers are exactly that).
   * @default 'every-field'
   */
  nulls?: 'every-field' | 'as-graphql';
  /**
   * `additionalProperties: false` on every object: the selection and nothing else. Off by default, as
   * an agent gains nothing from it; the tests turn it on to check that the selection was followed.
   * @default false
   */
  closed?: boolean;
}

/** The tool's outputSchema: describes `structuredContent` (= the operation's `data`), following the selection (fragments of `document` resolved, `__typename`, aliases, unions/interfaces as anyOf of members' selections with __typename const). Every field admits null (a field that failed is null, an error result's structuredContent included), while still naming the types. */
export function toolOutputSchema(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  options: ToolOutputSchemaOptions = {},
): JsonSchema {
  const root = schema.getRootType(operation.operation);
  if (root == null) throw new TypeError(`the schema has no ${operation.operation} type`);
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  const everyFieldNullable = options.nulls !== 'as-graphql';

  /** The data of an object of `type` under these selection sets (GraphQL's CollectFields). */
  function object(type: GraphQLObjectType, selectionSets: readonly SelectionSetNode[]): Schema {
    const fields = collectFields(schema, fragments, type, selectionSets);
    const properties: Schema = {};
    const required: string[] = [];
    for (const [key, { nodes, always }] of fields) {
      properties[key] = field(type, nodes);
      if (always) required.push(key);
    }
    const result: Schema = { type: 'object', title: type.name, properties };
    if (required.length > 0) result.required = required;
    if (options.closed) result.additionalProperties = false;
    return result;
  }

  function field(parent: GraphQLObjectType, nodes: readonly FieldNode[]): Schema {
    const name = (nodes[0] as FieldNode).name.value;
    // Never null, even where every field admits null: it names the member of a union.
    if (name === '__typename') return { type: 'string', const: parent.name };
    const definition = fieldDefinition(schema, parent, name);
    if (definition === undefined) return {}; // not in the schema: the operation does not validate anyway
    const selectionSets = nodes.flatMap((node) => (node.selectionSet ? [node.selectionSet] : []));
    const result = value(definition.type, selectionSets);
    annotate(result, definition.type, definition, options);
    return result;
  }

  function value(type: GraphQLOutputType, selectionSets: readonly SelectionSetNode[]): Schema {
    if (isNonNullType(type)) {
      const inner = present(type.ofType, selectionSets);
      return everyFieldNullable ? orNull(inner) : inner;
    }
    return orNull(present(type, selectionSets));
  }

  function present(type: GraphQLOutputType, selectionSets: readonly SelectionSetNode[]): Schema {
    if (isNonNullType(type)) return present(type.ofType, selectionSets);
    if (isListType(type)) return { type: 'array', items: value(type.ofType, selectionSets) };
    if (isObjectType(type)) return object(type, selectionSets);
    if (isAbstractType(type)) {
      const members = new Map<string, Schema>();
      for (const member of schema.getPossibleTypes(type)) {
        const shape = object(member, selectionSets);
        // Members that look alike (no __typename, no fragment on them) are one alternative.
        const { title: _title, ...untitled } = shape;
        const key = JSON.stringify(untitled);
        if (!members.has(key)) members.set(key, shape);
        else delete (members.get(key) as Schema).title;
      }
      if (members.size === 0) return { not: {} }; // no possible type: only null
      if (members.size === 1) return [...members.values()][0] as Schema;
      return options.closed ? { anyOf: [...members.values()] } : factored([...members.values()]);
    }
    return leafSchema(type, 'output', options);
  }

  const result = object(root, [operation.selectionSet]);
  delete result.title;
  return result;
}

/**
 * Alternatives with the fields they share written once: `{ type: 'object', properties: <shared>,
 * anyOf: [<each member's own>] }`. The members of a union or interface usually share most of their
 * selection (an interface's fields), and an agent reads `tools/list` whole: the is_null tool's
 * output schema is less than half as long so. Not with `closed`: `additionalProperties` cannot see
 * the properties of an `anyOf` beside it.
 */
function factored(alternatives: readonly Schema[]): Schema {
  const [first, ...others] = alternatives as [Schema, ...Schema[]];
  const propertiesOf = (alternative: Schema) => alternative.properties as Schema;
  const requiredOf = (alternative: Schema) => (alternative.required as string[] | undefined) ?? [];
  const shared: Schema = {};
  for (const [key, property] of Object.entries(propertiesOf(first))) {
    const text = JSON.stringify(property);
    const required = requiredOf(first).includes(key);
    const same = (other: Schema) =>
      JSON.stringify(propertiesOf(other)[key]) === text && requiredOf(other).includes(key) === required;
    if (others.every(same)) shared[key] = property;
  }
  if (Object.keys(shared).length === 0) return { anyOf: alternatives };
  const own = alternatives.map((alternative) => {
    // No `type` here: the object around says it, and null (a nullable field) passes `properties`.
    const result: Schema = {};
    if (alternative.title !== undefined) result.title = alternative.title;
    result.properties = Object.fromEntries(
      Object.entries(propertiesOf(alternative)).filter(([k]) => !(k in shared)),
    );
    const required = requiredOf(alternative).filter((key) => !(key in shared));
    if (required.length > 0) result.required = required;
    return result;
  });
  const result: Schema = { type: 'object', properties: shared };
  const required = requiredOf(first).filter((key) => key in shared);
  if (required.length > 0) result.required = required;
  result.anyOf = own;
  return result;
}

function fieldDefinition(
  schema: GraphQLSchema,
  parent: GraphQLObjectType,
  name: string,
): GraphQLField<unknown, unknown> | undefined {
  if (parent === schema.getQueryType()) {
    if (name === SchemaMetaFieldDef.name) return SchemaMetaFieldDef;
    if (name === TypeMetaFieldDef.name) return TypeMetaFieldDef;
  }
  return parent.getFields()[name];
}

interface CollectedField {
  nodes: FieldNode[];
  /** Whether the key is always in the data: false when every occurrence depends on a variable (`@skip`/`@include`) or is deferred. */
  always: boolean;
}

/** GraphQL's CollectFields for one runtime type, over several selection sets (a field selected more than once). */
function collectFields(
  schema: GraphQLSchema,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  type: GraphQLObjectType,
  selectionSets: readonly SelectionSetNode[],
): Map<string, CollectedField> {
  const fields = new Map<string, CollectedField>();
  const applies = (condition: string | undefined): boolean => {
    if (condition === undefined) return true;
    const conditionType = schema.getType(condition);
    if (conditionType === type) return true;
    return (
      conditionType !== undefined && isAbstractType(conditionType) && schema.isSubType(conditionType, type)
    );
  };
  const walk = (selectionSet: SelectionSetNode, always: boolean, visited: Set<string>): void => {
    for (const selection of selectionSet.selections) {
      const inclusion = included(selection);
      if (inclusion === 'never') continue;
      const here = always && inclusion === 'always';
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const entry = fields.get(key);
        if (entry === undefined) fields.set(key, { nodes: [selection], always: here });
        else {
          entry.nodes.push(selection);
          entry.always ||= here;
        }
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (applies(selection.typeCondition?.name.value)) walk(selection.selectionSet, here, visited);
      } else {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (fragment === undefined || visited.has(name) || !applies(fragment.typeCondition.name.value))
          continue;
        walk(fragment.selectionSet, here, new Set(visited).add(name));
      }
    }
  };
  for (const selectionSet of selectionSets) walk(selectionSet, true, new Set());
  return fields;
}

/** `@skip`/`@include` (and `@defer`, whose fields are not in the first answer) of a selection. */
function included(selection: SelectionSetNode['selections'][number]): 'always' | 'sometimes' | 'never' {
  let inclusion: 'always' | 'sometimes' = 'always';
  for (const directive of selection.directives ?? []) {
    const name = directive.name.value;
    if (name !== 'skip' && name !== 'include' && name !== 'defer') continue;
    const condition = directive.arguments?.find((argument) => argument.name.value === 'if')?.value;
    if (name === 'defer') {
      if (condition?.kind !== Kind.BOOLEAN || condition.value) inclusion = 'sometimes';
    } else if (condition?.kind === Kind.BOOLEAN) {
      if (condition.value === (name === 'skip')) return 'never';
    } else {
      inclusion = 'sometimes';
    }
  }
  return inclusion;
}
