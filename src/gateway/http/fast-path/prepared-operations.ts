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
 */
import { type DocumentNode, type GraphQLSchema, getOperationAST, parse } from 'graphql';
import { LRUCache } from 'lru-cache';
import type { OperationPlan } from '../../operation/operation-plan.js';
import { usesIncrementalDelivery } from '../../request/executor.js';
import { createDocumentShapes } from './document-shapes.js';

export interface PreparedOperation {
  document: DocumentNode;
  operationName: string | undefined;
  plan: OperationPlan;
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
  get(query: string, operationName: string | undefined): Verdict;
  readonly size: number;
}

export function createPreparedOperations(options: PreparedOperationsOptions): PreparedOperations {
  const { maxTokens } = options;
  // Documents that differ only in their literals are validated once (document-shapes.ts).
  const shapes = createDocumentShapes({ schema: options.schema, validate: options.validate });
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

  return {
    get(query, operationName) {
      let byName = cache.get(query);
      const name = operationName ?? '';
      let verdict = byName?.get(name);
      if (verdict !== undefined) return verdict;
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
  };
}
