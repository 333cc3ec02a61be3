/**
 * What a shape's validation rests on (document-shapes.ts): the first two valid documents of a shape
 * are validated with every rule (the shape is learnt at the second); after that, another document of
 * the shape passes exactly when the two checks that read literal values pass on it:
 *
 * - ValuesOfCorrectTypeRule's leaf check: at each place where the rule hands a literal to its leaf
 *   type's `parseLiteral` (found once per shape, with graphql-js's TypeInfo: `leavesOf`), the new
 *   literal parses (`parses`). Every other part of that rule (required and unknown input fields, null
 *   at a non-null place, oneOf) reads only names and structure, which the shape fixes.
 * - OverlappingFieldsCanBeMergedRule compares the printed arguments of fields merged under one
 *   response name: it runs again on each document, unless the shape's literals never take part in a
 *   comparison, which is proven once per shape by running it on a copy whose literals are all made
 *   different from each other (`overlapSensitive`: a compared pair with a literal on either side
 *   would then conflict).
 *
 * Every other rule this gateway applies (graphql-js's specified rules, graphql-armor's depth, alias
 * and directive limits, the introspection switch: use-operation-limits.ts) reads names and structure
 * only; the token limit is the parser's, and a literal is one token whatever its value. A new rule
 * that reads literal values must be added to the per-document checks here.
 *
 * Proven on graphql 16 (16.15.0; document-shapes.ts `PROVEN_ON_GRAPHQL_MAJOR`): which node
 * ValuesOfCorrectTypeRule hands to `parseLiteral`, and that OverlappingFieldsCanBeMergedRule compares
 * printed arguments, are that major's behaviour, not its documented API.
 * test/unit/document-shapes-differential.test.ts checks every verdict by shape against the full
 * validation (`createDocumentValidator`) on generated documents; run it again on a new major.
 */
import {
  type DocumentNode,
  type GraphQLInputType,
  type GraphQLLeafType,
  type GraphQLSchema,
  getNamedType,
  getNullableType,
  isInputObjectType,
  isLeafType,
  isListType,
  Kind,
  OverlappingFieldsCanBeMergedRule,
  parse,
  TokenKind,
  TypeInfo,
  type ValueNode,
  validate,
  visit,
  visitWithTypeInfo,
} from 'graphql';
import type { Literal } from './shape-key.js';

/** A place where ValuesOfCorrectTypeRule hands a literal to its type's `parseLiteral`. */
export interface Leaf {
  /** Keys from the document to the value node (the same in every document of the shape). */
  path: ReadonlyArray<string | number>;
  type: GraphQLLeafType;
  /** The input type of the place (with its non-null and list wrappers). */
  location: GraphQLInputType;
}

/** The same text with every literal a different value of its own kind. */
function allDifferent(query: string, literals: readonly Literal[]): string {
  let text = '';
  let last = 0;
  literals.forEach((literal, i) => {
    const value =
      literal.kind === TokenKind.INT
        ? `${1_000_000 + i}`
        : literal.kind === TokenKind.FLOAT
          ? `${1_000_000 + i}.5`
          : `"${i}"`;
    text += query.slice(last, literal.start) + value;
    last = literal.end;
  });
  return text + query.slice(last);
}

/**
 * Whether OverlappingFieldsCanBeMergedRule may compare the shape's literals, so that it must run on
 * each document: proven false by a copy of the (valid) document whose literals all differ passing it.
 */
export function overlapSensitive(
  schema: GraphQLSchema,
  query: string,
  literals: readonly Literal[],
): boolean {
  try {
    const copy = parse(allDifferent(query, literals));
    return validate(schema, copy, [OverlappingFieldsCanBeMergedRule]).length > 0;
  } catch {
    // The copy did not parse (it always should): every document of this shape runs the rule.
    return true;
  }
}

/** Whether `document` passes OverlappingFieldsCanBeMergedRule (an overlap-sensitive shape's document). */
export function mergesFields(schema: GraphQLSchema, document: DocumentNode): boolean {
  return validate(schema, document, [OverlappingFieldsCanBeMergedRule]).length === 0;
}

/** Where ValuesOfCorrectTypeRule would call `parseLiteral` on a node holding a literal token. */
export function leavesOf(schema: GraphQLSchema, document: DocumentNode): Leaf[] {
  const leaves: Leaf[] = [];
  const typeInfo = new TypeInfo(schema);
  const record = (path: ReadonlyArray<string | number>, location: GraphQLInputType | undefined | null) => {
    if (location == null) return;
    const type = getNamedType(location);
    if (isLeafType(type)) leaves.push({ path: [...path], type, location });
  };
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      // The rule's own choice of node (ValuesOfCorrectTypeRule): a list or an object at a place whose
      // type is not a list or an input object is one literal of a leaf type (a JSON value, say).
      ListValue(_node, _key, _parent, path) {
        if (!isListType(getNullableType(typeInfo.getParentInputType()))) {
          record(path, typeInfo.getInputType());
          return false;
        }
        return undefined;
      },
      ObjectValue(_node, _key, _parent, path) {
        if (!isInputObjectType(getNamedType(typeInfo.getInputType()))) {
          record(path, typeInfo.getInputType());
          return false;
        }
        return undefined;
      },
      IntValue: (_node, _key, _parent, path) => record(path, typeInfo.getInputType()),
      FloatValue: (_node, _key, _parent, path) => record(path, typeInfo.getInputType()),
      StringValue: (_node, _key, _parent, path) => record(path, typeInfo.getInputType()),
    }),
  );
  return leaves;
}

/** The node at `path` of `document` (a leaf's place in another document of the shape). */
export function nodeAt(document: DocumentNode, path: ReadonlyArray<string | number>): ValueNode | undefined {
  let node: unknown = document;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return node as ValueNode | undefined;
}

/** ValuesOfCorrectTypeRule's leaf check: `parseLiteral` neither throws nor returns undefined. */
export function parses(leaf: Leaf, node: ValueNode | undefined): boolean {
  if (node === undefined || node.kind === Kind.VARIABLE) return false;
  try {
    return leaf.type.parseLiteral(node, undefined) !== undefined;
  } catch {
    return false;
  }
}
