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
 *
 * Lifting (`lift`): a learnt shape also holds each of its operations (up to four) with its
 * literals lifted into hidden variables (`Lifting`), so that a new document of the shape is only
 * tokenized (graphql-js's Lexer, the parser's own), its literals read from the tokens and given as
 * those variables, and the shape's operation runs, its plan and compiled query made once per shape
 * (prepared-operations.ts).
 * What keeps the answer the document's own:
 * - the same checks as `valid` (the leaf check on each literal, other operations' too; overlap-sensitive
 *   shapes not lifted);
 * - each literal's value is its type's `parseLiteral` of the node the parser would make, the value
 *   graphql-js's `valueFromAST` passes to the resolver; as a variable, `parseValue` coerces it again,
 *   so it is lifted only when `parseValue` returns the very same value (else, as for a Float of 1e999,
 *   whose `parseValue` refuses Infinity, the document takes the standard path);
 * - errors located in the shape's text are moved into the document's (`relocate`): the two texts
 *   differ only inside literal tokens, so positions map by token, and lines and columns are the
 *   document's own (a block string over several lines moves everything after it);
 * - literals that cannot be variables (default values of variables; the tokens of a list or object that
 *   is one JSON literal) must be written as in the shape's document, else the standard path.
 * test/integration/literal-lifting-equivalence.test.ts compares lifted answers with Yoga's, byte for byte.
 */
import {
  type DocumentNode,
  type ExecutionResult,
  GraphQLError,
  type GraphQLInputType,
  type GraphQLLeafType,
  type GraphQLSchema,
  getNamedType,
  getNullableType,
  isInputObjectType,
  isLeafType,
  isListType,
  Kind,
  Lexer,
  type OperationDefinitionNode,
  OverlappingFieldsCanBeMergedRule,
  parse,
  parseType,
  Source,
  type StringValueNode,
  TokenKind,
  TypeInfo,
  type ValueNode,
  type VariableDefinitionNode,
  type VariableNode,
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
  /**
   * MAX_TOKENS: `lift` reads no further than the parser would (a longer document is no learnt shape's).
   * @default no limit
   */
  maxTokens?: number;
}

export interface DocumentShapes {
  /** Whether `document`, parsed from `query` with its locations, passes every validation rule. */
  valid(query: string, document: DocumentNode): boolean;
  /**
   * `query` as its learnt shape's operation with the literals lifted into variables, without parsing,
   * validating or planning it again; undefined when it is not a document of a lifted shape, or when
   * anything about it could answer differently from the document itself (a literal that does not
   * parse, a place that cannot be lifted written differently): the caller then parses and validates
   * it as any other document.
   */
  lift(
    query: string,
    operationName: string | undefined,
    variables: Record<string, unknown> | undefined,
  ): LiftedDocument | undefined;
}

/**
 * A document run as its shape's operation: the shape's document, whose literals are hidden variables,
 * with this document's literal values added to the request's variables. Its errors point into the
 * shape's document until `relocate` moves them into this one.
 */
export interface LiftedDocument {
  /** The shape's operation (the same object for every document of the shape). */
  readonly document: DocumentNode;
  /** The request's variables and the document's literals, coerced as `parseLiteral` coerces them. */
  readonly variables: Record<string, unknown>;
  /** The result with the locations of its errors moved from the shape's document to this one. */
  relocate(result: ExecutionResult): ExecutionResult;
  /** The literal this document has where the shape's document has hidden variable `name`. */
  literal(name: string): ValueNode | undefined;
}

/** A place where ValuesOfCorrectTypeRule hands a literal to its type's `parseLiteral`. */
interface Leaf {
  /** Keys from the document to the value node (the same in every document of the shape). */
  path: ReadonlyArray<string | number>;
  type: GraphQLLeafType;
  /** The input type of the place (with its non-null and list wrappers). */
  location: GraphQLInputType;
}

/**
 * A literal of a lifted shape: a hidden variable of the place's type; a literal of another operation,
 * which does not run but must pass the leaf check; or text every document repeats.
 */
type Place = { variable: string; type: GraphQLLeafType } | { check: GraphQLLeafType } | { text: string };

/**
 * One operation of a shape with its literals lifted into variables (`$literal0`, … : a prefix no
 * variable of the document starts with), each of the type of its place, so the same value reaches the
 * resolvers whether it was written in the document or given as the variable. Lifted are the literals
 * of the operation and of the fragments that are one token where ValuesOfCorrectTypeRule calls
 * `parseLiteral`; those of other operations are only checked; the rest (default values of the
 * operation's variables, which must be constants; the tokens inside a list or object that is one JSON
 * literal) stay, and a document of the shape is lifted only when it writes them alike.
 */
interface Lifting {
  document: DocumentNode;
  /** The text the shape was learnt from, where the lifted document's locations point. */
  source: Source;
  /** Its literal tokens, in order. */
  literals: readonly Literal[];
  /** Per literal token, in order. */
  places: readonly Place[];
  /** Per hidden variable, its literal token's index. */
  indexOf: ReadonlyMap<string, number>;
}

interface Shape {
  leaves: Leaf[];
  /** OverlappingFieldsCanBeMergedRule compares literal arguments: it runs on each document. */
  overlapSensitive: boolean;
  /**
   * Per operation name, its lifting ('' for the operation run without a name: a document of one
   * operation); undefined: the shape is not lifted (overlap-sensitive, too many operations).
   */
  liftings: Map<string, Lifting> | undefined;
}

/** Operations of one document lifted at most (each holds a copy of the document). */
const MAX_LIFTED_OPERATIONS = 4;

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
  /** The token's value (a string's, unescaped). */
  value: string;
}

/** The document's Int, Float and String tokens, in order (from the parser's own token list). */
function literalsOf(document: DocumentNode): Literal[] {
  const literals: Literal[] = [];
  for (let token = document.loc?.startToken ?? null; token !== null; token = token.next) {
    if (LITERAL_TOKENS.has(token.kind))
      literals.push({ kind: token.kind, start: token.start, end: token.end, value: token.value });
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

const isValueLiteral = (node: ValueNode | undefined): boolean =>
  node !== undefined && (node.kind === Kind.INT || node.kind === Kind.FLOAT || node.kind === Kind.STRING);

/** The shape's lifted operations, by name, from its learnt document (see `Lifting`). */
function liftingsOf(
  query: string,
  document: DocumentNode,
  literals: readonly Literal[],
  leaves: readonly Leaf[],
): Map<string, Lifting> | undefined {
  const operations = document.definitions.filter(
    (definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION,
  );
  if (operations.length > MAX_LIFTED_OPERATIONS) return undefined;
  const liftings = new Map<string, Lifting>();
  for (const operation of operations) {
    // getOperationAST: without a name, the one operation; with one, the operation of that name.
    const name = operations.length === 1 ? '' : operation.name?.value;
    if (name === undefined) continue;
    const lifting = liftingOf(query, document, literals, leaves, operation);
    if (lifting !== undefined) liftings.set(name, lifting);
    if (lifting !== undefined && operations.length === 1 && operation.name !== undefined)
      liftings.set(operation.name.value, lifting);
  }
  return liftings.size === 0 ? undefined : liftings;
}

/** One operation of the shape lifted (see `Lifting`); undefined if it has no literal to lift. */
function liftingOf(
  query: string,
  document: DocumentNode,
  literals: readonly Literal[],
  leaves: readonly Leaf[],
  operation: OperationDefinitionNode,
): Lifting | undefined {
  const source = document.loc?.source;
  if (source === undefined || source.body !== query) return undefined;
  const names: string[] = [];
  visit(document, { Variable: (node) => void names.push(node.name.value) });
  let prefix = 'literal';
  while (names.some((name) => name.startsWith(prefix))) prefix = `_${prefix}`;
  const byStart = new Map<number, number>();
  for (const [i, literal] of literals.entries()) byStart.set(literal.start, i);
  const places: Place[] = literals.map((literal) => ({ text: query.slice(literal.start, literal.end) }));
  const variables = new Map<number, VariableNode>();
  const definitions: VariableDefinitionNode[] = [];
  for (const leaf of leaves) {
    if (leaf.path[0] !== 'definitions') continue;
    const node = nodeAt(document, leaf.path);
    const i = node?.loc === undefined ? undefined : byStart.get(node.loc.start);
    if (!isValueLiteral(node) || node?.loc === undefined || i === undefined) continue;
    const definition = document.definitions[leaf.path[1] as number];
    if (definition !== operation && definition?.kind === Kind.OPERATION_DEFINITION) {
      // Another operation's literal: it does not run, but the document must pass validation.
      places[i] = { check: leaf.type };
      continue;
    }
    // A default value is a constant: no variable there.
    if (definition === operation && leaf.path[2] === 'variableDefinitions') continue;
    const name = `${prefix}${definitions.length}`;
    // The variable takes the literal's place in the document (its location too, for errors there).
    variables.set(node.loc.start, {
      kind: Kind.VARIABLE,
      name: { kind: Kind.NAME, value: name },
      loc: node.loc,
    });
    definitions.push({
      kind: Kind.VARIABLE_DEFINITION,
      variable: { kind: Kind.VARIABLE, name: { kind: Kind.NAME, value: name } },
      type: parseType(String(leaf.location), { noLocation: true }),
    });
    places[i] = { variable: name, type: leaf.type };
  }
  if (definitions.length === 0) return undefined;
  const lift = (node: ValueNode) => (node.loc === undefined ? undefined : variables.get(node.loc.start));
  const lifted = visit(document, {
    IntValue: lift,
    FloatValue: lift,
    StringValue: lift,
    OperationDefinition: {
      leave: (node) =>
        node.loc?.start !== operation.loc?.start
          ? undefined
          : {
              ...node,
              variableDefinitions: [...(node.variableDefinitions ?? []), ...definitions],
            },
    },
  });
  const indexOf = new Map<string, number>();
  for (const [i, place] of places.entries()) if ('variable' in place) indexOf.set(place.variable, i);
  return { document: lifted, source, literals, places, indexOf };
}

/** The value node the parser makes of a literal token (its location aside). */
function literalNode(literal: Literal): ValueNode {
  switch (literal.kind) {
    case TokenKind.INT:
      return { kind: Kind.INT, value: literal.value };
    case TokenKind.FLOAT:
      return { kind: Kind.FLOAT, value: literal.value };
    default:
      return {
        kind: Kind.STRING,
        value: literal.value,
        block: literal.kind === TokenKind.BLOCK_STRING,
      } satisfies StringValueNode;
  }
}

class Lifted implements LiftedDocument {
  constructor(
    private readonly lifting: Lifting,
    private readonly query: string,
    private readonly literals: readonly Literal[],
    readonly variables: Record<string, unknown>,
  ) {}

  get document(): DocumentNode {
    return this.lifting.document;
  }

  literal(name: string): ValueNode | undefined {
    const i = this.lifting.indexOf.get(name);
    const literal = i === undefined ? undefined : this.literals[i];
    return literal === undefined ? undefined : literalNode(literal);
  }

  /**
   * A position in the shape's text, in this document's: the texts differ only inside literal tokens,
   * so a position after the k-th literal is as far past its end in both.
   */
  private position(at: number): number {
    const from = this.lifting.literals;
    let k = 0;
    while (k < from.length && (from[k] as Literal).end <= at) k++;
    if (k === 0) return at;
    return (this.literals[k - 1] as Literal).end + at - (from[k - 1] as Literal).end;
  }

  relocate(result: ExecutionResult): ExecutionResult {
    const errors = result.errors;
    const from = this.lifting.source;
    if (errors === undefined || !errors.some((error) => error.source === from)) return result;
    const source = new Source(this.query);
    const moved = errors.map((error) =>
      error.source !== from || error.positions === undefined
        ? error
        : new GraphQLError(error.message, {
            nodes: error.nodes,
            source,
            positions: error.positions.map((at) => this.position(at)),
            path: error.path,
            originalError: error.originalError,
            extensions: error.extensions,
          }),
    );
    return { ...result, errors: moved };
  }
}

/** The literal tokens of `query` by graphql-js's lexer (the parser's own); undefined if it does not lex. */
function lexLiterals(query: string, maxTokens: number): Literal[] | undefined {
  const literals: Literal[] = [];
  let tokens = 0;
  try {
    const lexer = new Lexer(new Source(query));
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (++tokens > maxTokens) return undefined;
      if (LITERAL_TOKENS.has(token.kind))
        literals.push({ kind: token.kind, start: token.start, end: token.end, value: token.value });
    }
  } catch {
    return undefined;
  }
  return literals;
}

export function createDocumentShapes(options: DocumentShapesOptions): DocumentShapes {
  const { schema } = options;
  const maxTokens = options.maxTokens ?? Number.POSITIVE_INFINITY;
  const shapes = new LRUCache<string, Shape | typeof SEEN_ONCE>({
    max: 1000,
    maxSize: options.maxChars ?? 4 * 1024 * 1024,
    // A learnt shape also holds a path per literal (a few hundred bytes): counted as characters, so
    // that shapes of many literals cannot hold more memory than the bound says.
    // A lifted shape also holds its document (parsed, and its text): counted as its text once more.
    sizeCalculation: (value, key) =>
      Math.max(
        1,
        key.length +
          (value === SEEN_ONCE
            ? 0
            : value.leaves.length * LEAF_CHARS + key.length * new Set(value.liftings?.values()).size),
      ),
  });

  const learn = (query: string, document: DocumentNode, literals: readonly Literal[]): Shape => {
    let overlapSensitive = true;
    try {
      const copy = parse(allDifferent(query, literals));
      overlapSensitive = validate(schema, copy, [OverlappingFieldsCanBeMergedRule]).length > 0;
    } catch {
      // The copy did not parse (it always should): every document of this shape runs the rule.
    }
    const leaves = leavesOf(schema, document);
    // Where literals take part in merging fields, each document's literals decide its validity and
    // which field node's arguments run: such a shape is not lifted.
    const liftings = overlapSensitive ? undefined : liftingsOf(query, document, literals, leaves);
    return { leaves, overlapSensitive, liftings };
  };

  return {
    lift(query, operationName, variables) {
      // An empty name names no operation (getOperationAST), not the one operation.
      if (shapes.size === 0 || operationName === '') return undefined;
      const literals = lexLiterals(query, maxTokens);
      if (literals === undefined || literals.length === 0) return undefined;
      const shape = shapes.get(shapeKey(query, literals));
      // A name no operation of the shape has: getOperationAST finds none (Yoga answers it).
      const lifting =
        shape === undefined || shape === SEEN_ONCE ? undefined : shape.liftings?.get(operationName ?? '');
      if (lifting === undefined) return undefined;
      const values: Record<string, unknown> = { ...variables };
      const places = lifting.places;
      for (let i = 0; i < literals.length; i++) {
        const place = places[i] as Place;
        const literal = literals[i] as Literal;
        if ('text' in place) {
          if (
            literal.end - literal.start !== place.text.length ||
            !query.startsWith(place.text, literal.start)
          )
            return undefined;
          continue;
        }
        // ValuesOfCorrectTypeRule's leaf check, whose value is the argument graphql-js would pass
        // (valueFromAST calls `parseLiteral` so). As a variable, it is coerced by `parseValue`: lifted
        // only when that gives the very same value back (for JSON, the same JsonArgument).
        let value: unknown;
        try {
          if ('check' in place) {
            if (place.check.parseLiteral(literalNode(literal), undefined) === undefined) return undefined;
            continue;
          }
          value = place.type.parseLiteral(literalNode(literal), undefined);
          if (value === undefined || value === null || !Object.is(place.type.parseValue(value), value))
            return undefined;
        } catch {
          return undefined;
        }
        values[place.variable] = value;
      }
      return new Lifted(lifting, query, literals, values);
    },

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
