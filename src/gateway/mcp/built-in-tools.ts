/**
 * The built-in tools (contract §13): the project's own operations, one per root field, each named by
 * its operation name in snake_case (toolNameOf). Their documents are generated from the schema, so a
 * field added to an answer is in the tool the day it is in the schema: every argument of the root
 * field is a variable of the same name and type, and the selection is every field of the answer
 * (every member of a union or interface, with `__typename`; nested objects in full).
 */
import {
  type DocumentNode,
  type FieldNode,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  getNamedType,
  isAbstractType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  type ListTypeNode,
  type NamedTypeNode,
  type OperationDefinitionNode,
  OperationTypeNode,
  parse,
  print,
  type SelectionNode,
  type SelectionSetNode,
  type TypeNode,
  type VariableDefinitionNode,
} from 'graphql';
import { toolNameOf } from './tool-schemas.js';

/** One built-in tool: which root field it runs, under which operation name. */
export interface BuiltInToolSpec {
  /** The operation's name; the tool's name is `toolNameOf(operationName)`. */
  readonly operationName: string;
  /** The root field of Query the operation selects. */
  readonly rootField: string;
  /**
   * The arguments in the order §13 lists them (an agent reads the first ones first); any other
   * argument of the root field follows, as the schema has them.
   */
  readonly arguments?: readonly string[];
}

/** The built-in tools of §13, in the order `tools/list` shows them. */
export const BUILT_IN_TOOL_SPECS: readonly BuiltInToolSpec[] = [
  {
    operationName: 'IsNull', // is_null
    rootField: 'isNull',
    arguments: ['value', 'model', 'temperature', 'strictMode', 'minAccuracy'],
  },
  {
    operationName: 'PiDigits', // pi_digits
    rootField: 'pi',
    arguments: ['digits', 'model', 'temperature', 'sponsored', 'minAccuracy'],
  },
  { operationName: 'PiInference', rootField: 'inference', arguments: ['input'] }, // pi_inference
  { operationName: 'Health', rootField: 'health' }, // health
  { operationName: 'Budget', rootField: 'budget' }, // budget
  { operationName: 'ModelScores', rootField: 'models' }, // model_scores
];

export interface BuiltInTool extends BuiltInToolSpec {
  /** The tool's name (`is_null`, ...). */
  readonly name: string;
  /** The operation as text, as a client would send it. */
  readonly source: string;
  /** `source` parsed (with locations, for errors). */
  readonly document: DocumentNode;
  /** The document's one operation. */
  readonly operation: OperationDefinitionNode;
}

/** The built-in tools' operations, generated from `schema`. Throws when a root field is missing. */
export function builtInTools(schema: GraphQLSchema): BuiltInTool[] {
  return BUILT_IN_TOOL_SPECS.map((spec) => {
    const source = rootFieldOperation(schema, spec.operationName, spec.rootField, spec.arguments);
    const document = parse(source);
    const operation = document.definitions[0] as OperationDefinitionNode;
    return { ...spec, name: toolNameOf(spec.operationName), source, document, operation };
  });
}

/**
 * A query that runs one root field with each of its arguments as a variable of the same name and
 * type (omitted variable: omitted argument, so `isNull`'s omitted `value` stays undefined), selecting
 * everything of its answer.
 */
export function rootFieldOperation(
  schema: GraphQLSchema,
  operationName: string,
  rootField: string,
  /** Arguments to list first, in this order. */
  leading: readonly string[] = [],
): string {
  const query = schema.getQueryType();
  const field = query?.getFields()[rootField];
  if (query == null || field === undefined) throw new TypeError(`the schema has no Query.${rootField}`);
  const rank = (name: string) => {
    const index = leading.indexOf(name);
    return index === -1 ? leading.length : index;
  };
  const args = [...field.args].sort((a, b) => rank(a.name) - rank(b.name)); // stable: the rest keep their order
  const variableDefinitions: VariableDefinitionNode[] = args.map((arg) => ({
    kind: Kind.VARIABLE_DEFINITION,
    variable: { kind: Kind.VARIABLE, name: name(arg.name) },
    type: typeNode(arg.type),
  }));
  const selection: FieldNode = {
    kind: Kind.FIELD,
    name: name(rootField),
    arguments: args.map((arg) => ({
      kind: Kind.ARGUMENT,
      name: name(arg.name),
      value: { kind: Kind.VARIABLE, name: name(arg.name) },
    })),
    selectionSet: fullSelection(schema, field.type),
  };
  return print({
    kind: Kind.DOCUMENT,
    definitions: [
      {
        kind: Kind.OPERATION_DEFINITION,
        operation: OperationTypeNode.QUERY,
        name: name(operationName),
        variableDefinitions,
        selectionSet: { kind: Kind.SELECTION_SET, selections: [selection] },
      },
    ],
  });
}

/**
 * Every field of `type` (undefined for a scalar or an enum, which have no selection): `__typename`
 * and one inline fragment per possible type of a union or interface; nested objects in full.
 * Skipped: deprecated fields, fields with a required argument (nothing to pass), and a field that
 * would re-enter a type already being selected (a cycle has no full selection).
 */
export function fullSelection(schema: GraphQLSchema, type: GraphQLOutputType): SelectionSetNode | undefined {
  return selectionOf(schema, type, new Set());
}

function selectionOf(
  schema: GraphQLSchema,
  type: GraphQLOutputType,
  path: ReadonlySet<string>,
): SelectionSetNode | undefined {
  const named = getNamedType(type);
  if (isLeafType(named)) return undefined;
  const inside = new Set(path).add(named.name);
  if (isObjectType(named)) return selectionSet(objectFields(schema, named, inside));
  const fragments: SelectionNode[] = [{ kind: Kind.FIELD, name: name('__typename') }];
  if (isAbstractType(named)) {
    for (const member of schema.getPossibleTypes(named)) {
      const fields = objectFields(schema, member, new Set(inside).add(member.name));
      if (fields.length === 0) continue;
      fragments.push({
        kind: Kind.INLINE_FRAGMENT,
        typeCondition: { kind: Kind.NAMED_TYPE, name: name(member.name) },
        selectionSet: selectionSet(fields),
      });
    }
  }
  return selectionSet(fragments);
}

function objectFields(
  schema: GraphQLSchema,
  type: GraphQLObjectType,
  path: ReadonlySet<string>,
): FieldNode[] {
  const fields: FieldNode[] = [];
  for (const field of Object.values(type.getFields())) {
    if (!selectable(field, path)) continue;
    const selection = selectionOf(schema, field.type, path);
    fields.push({
      kind: Kind.FIELD,
      name: name(field.name),
      ...(selection ? { selectionSet: selection } : {}),
    });
  }
  return fields;
}

function selectable(field: GraphQLField<unknown, unknown>, path: ReadonlySet<string>): boolean {
  if (field.deprecationReason != null) return false;
  if (field.args.some((arg) => isNonNullType(arg.type) && arg.defaultValue === undefined)) return false;
  return !path.has(getNamedType(field.type).name);
}

/** A selection set; `__typename` alone when there is nothing else to select (never empty). */
function selectionSet(selections: SelectionNode[]): SelectionSetNode {
  return {
    kind: Kind.SELECTION_SET,
    selections: selections.length > 0 ? selections : [{ kind: Kind.FIELD, name: name('__typename') }],
  };
}

function typeNode(type: GraphQLInputType): TypeNode {
  if (isNonNullType(type))
    return { kind: Kind.NON_NULL_TYPE, type: typeNode(type.ofType) as NullableTypeNode };
  if (isListType(type)) return { kind: Kind.LIST_TYPE, type: typeNode(type.ofType) };
  return { kind: Kind.NAMED_TYPE, name: name(type.name) };
}

type NullableTypeNode = NamedTypeNode | ListTypeNode;

function name(value: string) {
  return { kind: Kind.NAME, value } as const;
}
