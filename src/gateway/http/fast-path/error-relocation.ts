/**
 * Errors of a lifted document (literal-lifting.ts) moved into the document the client sent: they are
 * located in the text of the shape's learnt document, whose operation ran; the two texts differ only
 * inside literal tokens, so positions map by token, and lines and columns are the document's own (a
 * block string over several lines moves everything after it).
 *
 * Proven on graphql 16 (16.15.0; document-shapes.ts `PROVEN_ON_GRAPHQL_MAJOR`): a GraphQLError made
 * with a source and positions computes its locations from them, as the executor's errors do.
 * test/integration/literal-lifting-equivalence.test.ts compares lifted answers with Yoga's, byte for
 * byte, located errors included.
 */
import { type ExecutionResult, GraphQLError, Source } from 'graphql';
import type { Literal } from './shape-key.js';

/** Where a result's errors point, and where they are moved to: a text and its literal tokens. */
export interface LocatedText {
  /** The text (a Source, as the errors hold it). */
  readonly source: Source;
  /** Its literal tokens, in order. */
  readonly literals: readonly Literal[];
}

/**
 * A position in `from`'s text, in a text that differs from it only inside literal tokens (`literals`,
 * the same tokens in order): a position after the k-th literal is as far past its end in both.
 */
function position(at: number, from: readonly Literal[], literals: readonly Literal[]): number {
  let k = 0;
  while (k < from.length && (from[k] as Literal).end <= at) k++;
  if (k === 0) return at;
  return (literals[k - 1] as Literal).end + at - (from[k - 1] as Literal).end;
}

/** `result` with the errors located in `from` moved into `query` (whose literal tokens are `literals`). */
export function relocateErrors(
  result: ExecutionResult,
  from: LocatedText,
  query: string,
  literals: readonly Literal[],
): ExecutionResult {
  const errors = result.errors;
  if (errors === undefined || !errors.some((error) => error.source === from.source)) return result;
  const source = new Source(query);
  const moved = errors.map((error) =>
    error.source !== from.source || error.positions === undefined
      ? error
      : new GraphQLError(error.message, {
          nodes: error.nodes,
          source,
          positions: error.positions.map((at) => position(at, from.literals, literals)),
          path: error.path,
          originalError: error.originalError,
          extensions: error.extensions,
        }),
  );
  return { ...result, errors: moved };
}
