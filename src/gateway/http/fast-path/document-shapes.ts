/**
 * Validation by document shape: a client that writes its values into the document (`isNull(value:
 * "a")`, then `"b"`, …) sends a new document each time, and graphql-js 16 validates each one in
 * ~300 µs (every rule walks the document with its own TypeInfo visitor: docs/performance.md). The
 * documents differ only in their literals, and almost nothing in validation depends on them.
 *
 * The shape of a document is its text with every Int, Float, String and block-string token replaced
 * by a marker of its kind (shape-key.ts). The first two valid documents of a shape are validated with
 * every rule (the shape is learnt at the second); after that, another document of the shape passes
 * exactly when the two checks that read literal values pass on it (shape-proofs.ts: why those two, and
 * what the rest of validation reads). A learnt shape also holds its operations with their literals
 * lifted into hidden variables, so that a new document of the shape runs as the shape's operation
 * without being parsed (literal-lifting.ts), its errors moved back into its own text
 * (error-relocation.ts).
 *
 * This file keeps the shapes (a bounded cache by shape key) and answers `valid` and `lift` with them.
 *
 * Proven on graphql 16 (`PROVEN_ON_GRAPHQL_MAJOR`; test/unit/document-shapes.test.ts fails on
 * another major): the four files above rely on how graphql-js 16 lexes, validates and coerces, which
 * its documented API does not promise. test/unit/document-shapes-differential.test.ts checks every
 * verdict by shape against full validation (`createDocumentValidator`) on generated documents, and
 * test/integration/literal-lifting-equivalence.test.ts compares lifted answers with Yoga's, byte for
 * byte: run both again before moving to another major.
 */
import type { DocumentNode, GraphQLSchema } from 'graphql';
import { LRUCache } from 'lru-cache';
import { Lifted, type LiftedDocument, type Lifting, liftedValues, liftingsOf } from './literal-lifting.js';
import { type Literal, lexLiterals, literalsOf, shapeKey } from './shape-key.js';
import { type Leaf, leavesOf, mergesFields, nodeAt, overlapSensitive, parses } from './shape-proofs.js';

/** The major version of graphql-js the shapes' reliance on its behaviour was proven on (see above). */
export const PROVEN_ON_GRAPHQL_MAJOR = 16;

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

/** What one recorded literal place weighs in the shapes' size bound, in characters. */
const LEAF_CHARS = 128;

/** A shape with one valid document so far: not learnt yet. */
const SEEN_ONCE = 'seen once';

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
    const sensitive = overlapSensitive(schema, query, literals);
    const leaves = leavesOf(schema, document);
    // Where literals take part in merging fields, each document's literals decide its validity and
    // which field node's arguments run: such a shape is not lifted.
    const liftings = sensitive ? undefined : liftingsOf(query, document, literals, leaves);
    return { leaves, overlapSensitive: sensitive, liftings };
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
      const values = liftedValues(lifting, query, literals, variables);
      return values === undefined ? undefined : new Lifted(lifting, query, literals, values);
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
      return !shape.overlapSensitive || mergesFields(schema, document);
    },
  };
}
