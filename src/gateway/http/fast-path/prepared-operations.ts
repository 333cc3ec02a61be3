/**
 * What the fast path knows about a document before any request runs it, computed once per query text
 * and operation name and kept in a bounded LRU: the parsed document, the validation verdict (the
 * schema's rules and every plugin's, through Yoga's `getEnveloped`; documents that differ only in
 * their literals share most of it: document-shapes.ts) and the operation's plan (upstream calls, for
 * MAX_UPSTREAM_CALLS and the cost estimate, both judged by the pipeline's admission).
 *
 * A document that fails parsing or validation is not the common case: the verdict is 'yoga', and
 * Yoga's handler answers it, so its errors are exactly Yoga's. Parsing uses graphql-js directly (with
 * the token limit), never through Yoga's parse cache: a syntax error must not be cached there without
 * the code Yoga's own parse path gives it. Execution is the pipeline's (request/executor.ts).
 *
 * A new document of a learnt shape whose literals can be lifted (document-shapes.ts `lift`) is not
 * parsed nor kept per text: it runs as the shape's prepared operation, with its literals as variables.
 */
import { type DocumentNode, type GraphQLSchema, getOperationAST, parse } from 'graphql';
import { LRUCache } from 'lru-cache';
import type { OperationPlan } from '../../operation/operation-plan.js';
import { usesIncrementalDelivery } from '../../request/executor.js';
import { createDocumentShapes, type LiftedDocument } from './document-shapes.js';

export interface PreparedOperation {
  document: DocumentNode;
  operationName: string | undefined;
  plan: OperationPlan;
  /**
   * Set when the request's document runs as its shape's operation (document-shapes.ts `lift`):
   * `document` is then the shape's, the variables to run it with are `lifted.variables`, and its
   * result's errors point into the request's document once `lifted.relocate` has moved them.
   */
  lifted?: LiftedDocument;
}

export type Verdict = PreparedOperation | 'yoga';

export interface PreparedOperationsOptions {
  schema: GraphQLSchema;
  /** Validation with every rule Yoga applies (its `getEnveloped().validate`). */
  validate: (document: DocumentNode) => readonly unknown[];
  plan: (document: DocumentNode, operationName: string | null | undefined) => OperationPlan;
  maxTokens: number;
  /** Most query text kept, in characters. @default 8 Mi */
  maxChars?: number;
}

export interface PreparedOperations {
  /** `variables`: the request's, to which a lifted document's literals are added. */
  get(query: string, operationName: string | undefined, variables?: Record<string, unknown>): Verdict;
  readonly size: number;
  /** Documents run as their shape's operation, not cached by text (document-shapes.ts `lift`). */
  readonly lifted: number;
}

export function createPreparedOperations(options: PreparedOperationsOptions): PreparedOperations {
  const { maxTokens } = options;
  // Documents that differ only in their literals are validated once (document-shapes.ts).
  const shapes = createDocumentShapes({
    schema: options.schema,
    validate: options.validate,
    maxTokens,
  });
  // Per query text, the verdict per operation name: two names never share a verdict.
  const cache = new LRUCache<string, Map<string, Verdict>>({
    max: 2000,
    maxSize: options.maxChars ?? 8 * 1024 * 1024,
    sizeCalculation: (_value, query) => Math.max(1, query.length),
  });

  const prepare = (query: string, operationName: string | undefined): Verdict => {
    let document: DocumentNode;
    try {
      document = parse(query, { maxTokens });
    } catch {
      return 'yoga';
    }
    const operation = getOperationAST(document, operationName);
    if (operation === null || operation === undefined || operation.operation !== 'query') return 'yoga';
    // Incremental delivery streams its parts: Yoga's lane (request/executor.ts).
    if (usesIncrementalDelivery(document) || !shapes.valid(query, document)) return 'yoga';
    return { document, operationName, plan: options.plan(document, operationName) };
  };

  /**
   * Per lifted document of a shape, its prepared operation (or 'yoga': it cannot be one): the plan of
   * the shape's operation, whose distinct upstream calls are those of every document of the shape
   * only when no two of its upstream fields share a name (`a: pi(digits: 2) b: pi(digits: 2)` is one
   * call, with 2 and 3 two; lifted, always two): otherwise its documents are prepared one by one.
   */
  let liftedCount = 0;
  const liftedOperations = new WeakMap<DocumentNode, Map<string, PreparedOperation | 'yoga'>>();
  const liftedOperation = (
    document: DocumentNode,
    operationName: string | undefined,
  ): PreparedOperation | 'yoga' => {
    let byName = liftedOperations.get(document);
    if (byName === undefined) {
      byName = new Map();
      liftedOperations.set(document, byName);
    }
    let prepared = byName.get(operationName ?? '');
    if (prepared === undefined) {
      prepared = 'yoga';
      const operation = getOperationAST(document, operationName);
      if (operation?.operation === 'query' && !usesIncrementalDelivery(document)) {
        const plan = options.plan(document, operationName);
        const names = new Set(plan.fields.map((field) => field.node.name.value));
        if (names.size === plan.fields.length) prepared = { document, operationName, plan };
      }
      // A lifted document is one operation's (document-shapes.ts): two names at most (none, its own).
      byName.set(operationName ?? '', prepared);
    }
    return prepared;
  };

  return {
    get(query, operationName, variables) {
      let byName = cache.get(query);
      const name = operationName ?? '';
      let verdict = byName?.get(name);
      if (verdict !== undefined) return verdict;
      // A new document of a lifted shape: nothing parsed, validated, planned or kept per text.
      const lifted = shapes.lift(query, operationName, variables);
      if (lifted !== undefined) {
        const prepared = liftedOperation(lifted.document, operationName);
        if (prepared !== 'yoga') {
          liftedCount++;
          return { ...prepared, lifted };
        }
      }
      verdict = prepare(query, operationName);
      if (byName === undefined) {
        byName = new Map();
        cache.set(query, byName);
      }
      if (byName.size < 16) byName.set(name, verdict);
      return verdict;
    },
    get size() {
      return cache.size;
    },
    get lifted() {
      return liftedCount;
    },
  };
}
