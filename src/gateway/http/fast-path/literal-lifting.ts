/**
 * Lifting: a learnt shape (document-shapes.ts) also holds each of its operations (up to four) with its
 * literals lifted into hidden variables (`Lifting`), so that a new document of the shape is only
 * tokenized (graphql-js's Lexer, the parser's own: shape-key.ts), its literals read from the tokens
 * and given as those variables (`liftedValues`), and the shape's operation runs, its plan and compiled
 * query made once per shape (prepared-operations.ts).
 *
 * What keeps the answer the document's own:
 * - the same checks as validation by shape (the leaf check on each literal, other operations' too:
 *   shape-proofs.ts; overlap-sensitive shapes are not lifted);
 * - each literal's value is its type's `parseLiteral` of the node the parser would make, the value
 *   graphql-js's `valueFromAST` passes to the resolver; as a variable, `parseValue` coerces it again,
 *   so it is lifted only when `parseValue` returns the very same value (else, as for a Float of 1e999,
 *   whose `parseValue` refuses Infinity, the document takes the standard path);
 * - errors located in the shape's text are moved into the document's (`relocate`: error-relocation.ts);
 * - literals that cannot be variables (default values of variables; the tokens of a list or object
 *   that is one JSON literal) must be written as in the shape's document, else the standard path.
 *
 * Proven on graphql 16 (16.15.0; document-shapes.ts `PROVEN_ON_GRAPHQL_MAJOR`): that `valueFromAST`
 * gives a literal's `parseLiteral` to the resolver, and a variable's `parseValue`, is that major's
 * execution. test/integration/literal-lifting-equivalence.test.ts compares lifted answers with
 * Yoga's, byte for byte; run it again on a new major.
 */
import {
  type DocumentNode,
  type ExecutionResult,
  type GraphQLLeafType,
  Kind,
  type OperationDefinitionNode,
  parseType,
  type Source,
  type ValueNode,
  type VariableDefinitionNode,
  type VariableNode,
  visit,
} from 'graphql';
import { relocateErrors } from './error-relocation.js';
import { type Literal, literalNode } from './shape-key.js';
import { type Leaf, nodeAt } from './shape-proofs.js';

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
export interface Lifting {
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

/** Operations of one document lifted at most (each holds a copy of the document). */
const MAX_LIFTED_OPERATIONS = 4;

const isValueLiteral = (node: ValueNode | undefined): boolean =>
  node !== undefined && (node.kind === Kind.INT || node.kind === Kind.FLOAT || node.kind === Kind.STRING);

/** The shape's lifted operations, by name, from its learnt document (see `Lifting`). */
export function liftingsOf(
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

/**
 * The request's variables with the document's literals (`literals`, its tokens) as `lifting`'s hidden
 * variables; undefined when anything about the document could answer differently from the document
 * itself (a literal that does not parse, one whose `parseValue` is not the same value, a place that
 * cannot be lifted written differently).
 */
export function liftedValues(
  lifting: Lifting,
  query: string,
  literals: readonly Literal[],
  variables: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  const values: Record<string, unknown> = { ...variables };
  const places = lifting.places;
  for (let i = 0; i < literals.length; i++) {
    const place = places[i] as Place;
    const literal = literals[i] as Literal;
    if ('text' in place) {
      if (literal.end - literal.start !== place.text.length || !query.startsWith(place.text, literal.start))
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
  return values;
}

/** A document of a lifted shape, run as the shape's operation (see `LiftedDocument`). */
export class Lifted implements LiftedDocument {
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

  relocate(result: ExecutionResult): ExecutionResult {
    return relocateErrors(result, this.lifting, this.query, this.literals);
  }
}
