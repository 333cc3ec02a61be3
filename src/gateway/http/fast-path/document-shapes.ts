/**
 * Validation by document shape: a client that writes its values into the document (`isNull(value:
 * "a")`, then `"b"`, …) sends a new document each time, and graphql-js 16 validates each one in
 * ~300 µs (every rule walks the document with its own TypeInfo visitor: docs/performance.md). The
 * documents differ only in their literals, and almost nothing in validation depends on them.
 *
 * The shape of a document is its text with every Int, Float, String and block-string token replaced
 * by a marker of its kind; names (enum values, `true`, `false`, `null`), variables, lists, objects,
 * fields, fragments, directives, aliases and comments are all kept. The first two valid documents of a
 * shape are validated with every rule (the shape is learnt at the second); after that, another
 * document of the shape passes exactly when the two checks that read literal values pass on it:
 *
 * - ValuesOfCorrectTypeRule's leaf check: at each place where the rule hands a literal to its leaf
 *   type's `parseLiteral` (found once per shape, with graphql-js's TypeInfo), the new literal parses.
 *   Every other part of that rule (required and unknown input fields, null at a non-null place, oneOf)
 *   reads only names and structure, which the shape fixes.
 * - OverlappingFieldsCanBeMergedRule compares the printed arguments of fields merged under one
 *   response name: it runs again on each document, unless the shape's literals never take part in a
 *   comparison, which is proven once per shape by running it on a copy whose literals are all made
 *   different from each other (a compared pair with a literal on either side would then conflict).
 *
 * Every other rule this gateway applies (graphql-js's specified rules, graphql-armor's depth, alias
 * and directive limits, the introspection switch: use-operation-limits.ts) reads names and structure
 * only; the token limit is the parser's, and a literal is one token whatever its value. A new rule
 * that reads literal values must be added to the per-document checks here.
 * test/unit/document-shapes-differential.test.ts checks every verdict by shape against that full
 * validation (`createDocumentValidator`) on generated documents.
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
import { LRUCache } from 'lru-cache';

export interface DocumentShapesOptions {
  schema: GraphQLSchema;
  /** Validation with every rule (Yoga's `getEnveloped().validate`); returns the errors. */
  validate: (document: DocumentNode) => readonly unknown[];
  /** Most shape text kept, in characters (each learnt literal place counted as 128). @default 4 Mi */
  maxChars?: number;
}

export interface DocumentShapes {
  /** Whether `document`, parsed from `query` with its locations, passes every validation rule. */
  valid(query: string, document: DocumentNode): boolean;
}

/** A place where ValuesOfCorrectTypeRule hands a literal to its type's `parseLiteral`. */
interface Leaf {
  /** Keys from the document to the value node (the same in every document of the shape). */
  path: ReadonlyArray<string | number>;
  type: GraphQLLeafType;
}

interface Shape {
  leaves: Leaf[];
  /** OverlappingFieldsCanBeMergedRule compares literal arguments: it runs on each document. */
  overlapSensitive: boolean;
}

/** What one recorded literal place weighs in the shapes' size bound, in characters. */
const LEAF_CHARS = 128;

/** A shape with one valid document so far: not learnt yet. */
const SEEN_ONCE = 'seen once';

const LITERAL_TOKENS = new Set<string>([
  TokenKind.INT,
  TokenKind.FLOAT,
  TokenKind.STRING,
  TokenKind.BLOCK_STRING,
]);

interface Literal {
  kind: string;
  start: number;
  end: number;
}

/** The document's Int, Float and String tokens, in order (from the parser's own token list). */
function literalsOf(document: DocumentNode): Literal[] {
  const literals: Literal[] = [];
  for (let token = document.loc?.startToken ?? null; token !== null; token = token.next) {
    if (LITERAL_TOKENS.has(token.kind))
      literals.push({ kind: token.kind, start: token.start, end: token.end });
  }
  return literals;
}

/**
 * The text with each literal replaced by a marker: `\0`, the token kind, `\0`. graphql-js 16 accepts
 * `\0` in comments and in strings (any Unicode scalar value is a SourceCharacter there), so a marker's
 * text can also be a comment's text; two parsed documents still share a key only when they are equal
 * but for their literals (of the same kinds, at the same places). Where their keys would first be read
 * differently, one document has a literal and the other a comment's `\0`; up to that place the lexer
 * has read the same tokens in both (literal tokens aside, whose values decide nothing about where the
 * next token starts), so it is between tokens in both, and `\0` between tokens is a syntax error.
 * A `\0` inside a string or block string is part of the literal, replaced with it.
 */
function shapeKey(query: string, literals: readonly Literal[]): string {
  let key = '';
  let last = 0;
  for (const literal of literals) {
    key += `${query.slice(last, literal.start)}\0${literal.kind}\0`;
    last = literal.end;
  }
  return key + query.slice(last);
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

/** Where ValuesOfCorrectTypeRule would call `parseLiteral` on a node holding a literal token. */
function leavesOf(schema: GraphQLSchema, document: DocumentNode): Leaf[] {
  const leaves: Leaf[] = [];
  const typeInfo = new TypeInfo(schema);
  const record = (path: ReadonlyArray<string | number>, location: GraphQLInputType | undefined | null) => {
    if (location == null) return;
    const type = getNamedType(location);
    if (isLeafType(type)) leaves.push({ path: [...path], type });
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

function nodeAt(document: DocumentNode, path: ReadonlyArray<string | number>): ValueNode | undefined {
  let node: unknown = document;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return node as ValueNode | undefined;
}

/** ValuesOfCorrectTypeRule's leaf check: `parseLiteral` neither throws nor returns undefined. */
function parses(leaf: Leaf, node: ValueNode | undefined): boolean {
  if (node === undefined || node.kind === Kind.VARIABLE) return false;
  try {
    return leaf.type.parseLiteral(node, undefined) !== undefined;
  } catch {
    return false;
  }
}

export function createDocumentShapes(options: DocumentShapesOptions): DocumentShapes {
  const { schema } = options;
  const shapes = new LRUCache<string, Shape | typeof SEEN_ONCE>({
    max: 1000,
    maxSize: options.maxChars ?? 4 * 1024 * 1024,
    // A learnt shape also holds a path per literal (a few hundred bytes): counted as characters, so
    // that shapes of many literals cannot hold more memory than the bound says.
    sizeCalculation: (value, key) =>
      Math.max(1, key.length + (value === SEEN_ONCE ? 0 : value.leaves.length * LEAF_CHARS)),
  });

  const learn = (query: string, document: DocumentNode, literals: readonly Literal[]): Shape => {
    let overlapSensitive = true;
    try {
      const copy = parse(allDifferent(query, literals));
      overlapSensitive = validate(schema, copy, [OverlappingFieldsCanBeMergedRule]).length > 0;
    } catch {
      // The copy did not parse (it always should): every document of this shape runs the rule.
    }
    return { leaves: leavesOf(schema, document), overlapSensitive };
  };

  return {
    valid(query, document) {
      const literals = literalsOf(document);
      // Without literals the shape is the document: the caller's cache by text already covers it.
      if (literals.length === 0) return options.validate(document).length === 0;
      const key = shapeKey(query, literals);
      const shape = shapes.get(key);
      if (shape === undefined || shape === SEEN_ONCE) {
        if (options.validate(document).length > 0) return false;
        // Learnt at its second valid document: a shape that never repeats (a client or an attacker
        // sending ever new documents) costs what validation alone costs, plus its key.
        shapes.set(key, shape === undefined ? SEEN_ONCE : learn(query, document, literals));
        return true;
      }
      for (const leaf of shape.leaves) if (!parses(leaf, nodeAt(document, leaf.path))) return false;
      return (
        !shape.overlapSensitive || validate(schema, document, [OverlappingFieldsCanBeMergedRule]).length === 0
      );
    },
  };
}
