/**
 * The key of a document's shape (document-shapes.ts): its text with every Int, Float, String and
 * block-string token replaced by a marker of its kind; names (enum values, `true`, `false`, `null`),
 * variables, lists, objects, fields, fragments, directives, aliases and comments are all kept. And the
 * literal tokens themselves, read from the parser's token list or, for a document not parsed, by
 * graphql-js's own Lexer.
 *
 * Proven on graphql 16 (16.15.0; document-shapes.ts `PROVEN_ON_GRAPHQL_MAJOR`): that the lexer
 * accepts `\0` in comments and strings and nowhere else, and that a literal's value never decides
 * where the next token starts. test/unit/document-shapes-differential.test.ts pins it (its documents
 * hold NUL and the marker's own text in comments and strings); run it again on a new major.
 */
import {
  type DocumentNode,
  Kind,
  Lexer,
  Source,
  type StringValueNode,
  TokenKind,
  type ValueNode,
} from 'graphql';

const LITERAL_TOKENS = new Set<string>([
  TokenKind.INT,
  TokenKind.FLOAT,
  TokenKind.STRING,
  TokenKind.BLOCK_STRING,
]);

/** A literal token of a document: its kind, where it is in the text, and its value. */
export interface Literal {
  kind: string;
  start: number;
  end: number;
  /** The token's value (a string's, unescaped). */
  value: string;
}

/** The document's Int, Float and String tokens, in order (from the parser's own token list). */
export function literalsOf(document: DocumentNode): Literal[] {
  const literals: Literal[] = [];
  for (let token = document.loc?.startToken ?? null; token !== null; token = token.next) {
    if (LITERAL_TOKENS.has(token.kind))
      literals.push({ kind: token.kind, start: token.start, end: token.end, value: token.value });
  }
  return literals;
}

/** The literal tokens of `query` by graphql-js's lexer (the parser's own); undefined if it does not lex. */
export function lexLiterals(query: string, maxTokens: number): Literal[] | undefined {
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
export function shapeKey(query: string, literals: readonly Literal[]): string {
  let key = '';
  let last = 0;
  for (const literal of literals) {
    key += `${query.slice(last, literal.start)}\0${literal.kind}\0`;
    last = literal.end;
  }
  return key + query.slice(last);
}

/** The value node the parser makes of a literal token (its location aside). */
export function literalNode(literal: Literal): ValueNode {
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
