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
import {
  type DocumentNode,
  type FieldNode,
  type GraphQLSchema,
  getOperationAST,
  parse,
  type ValueNode,
  visit,
} from 'graphql';
import { LRUCache } from 'lru-cache';
import { callKey, type OperationPlan } from '../../operation/operation-plan.js';
import { usesIncrementalDelivery } from '../../request/executor.js';
import { createDocumentShapes } from './document-shapes.js';
import type { LiftedDocument } from './literal-lifting.js';

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

/**
 * The upstream fields of a lifted operation's plan that share their name with another, in groups.
 * Its plan counts each distinct (name, printed arguments) once (MAX_UPSTREAM_CALLS, the estimate), and
 * lifted, two fields of one name with a literal in their arguments are always distinct
 * (`a: pi(digits: $literal0) b: pi(digits: $literal1)`), while in a document they are one call when
 * their literals print alike (`a: pi(digits: 2) b: pi(digits: 2)`).
 */
export function sameNamedFields(plan: OperationPlan): FieldNode[][] {
  const byName = new Map<string, FieldNode[]>();
  for (const { node } of plan.fields) {
    const group = byName.get(node.name.value);
    if (group === undefined) byName.set(node.name.value, [node]);
    else group.push(node);
  }
  return [...byName.values()].filter((group) => group.length > 1);
}

/**
 * Whether, in this lifted document, no two fields of a group print their arguments alike (as
 * operation-plan.ts keys a call), so that the lifted operation's plan is the document's own.
 */
export function distinctCalls(groups: readonly (readonly FieldNode[])[], lifted: LiftedDocument): boolean {
  const literalsOf = (value: ValueNode) =>
    visit(value, { Variable: (variable) => lifted.literal(variable.name.value) });
  for (const group of groups) {
    const keys = new Set<string>();
    for (const node of group) {
      const key = callKey(node, literalsOf);
      if (keys.has(key)) return false;
      keys.add(key);
    }
  }
  return true;
}

/** A lifted operation's prepared operation, and the same-named fields each document must check. */
interface LiftedOperation {
  prepared: PreparedOperation;
  groups: FieldNode[][];
}

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
   * Per lifted document of a shape, its prepared operation (or 'yoga': it cannot be one), with the
   * plan of the shape's operation, which is each document's own plan when its same-named upstream
   * fields are distinct calls (`distinctCalls`); a document where they are not is prepared alone.
   */
  const liftedOperations = new WeakMap<DocumentNode, Map<string, LiftedOperation | 'yoga'>>();
  const liftedOperation = (
    document: DocumentNode,
    operationName: string | undefined,
  ): LiftedOperation | 'yoga' => {
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
        prepared = { prepared: { document, operationName, plan }, groups: sameNamedFields(plan) };
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
        const operation = liftedOperation(lifted.document, operationName);
        if (
          operation !== 'yoga' &&
          (operation.groups.length === 0 || distinctCalls(operation.groups, lifted))
        ) {
          return { ...operation.prepared, lifted };
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
  };
}
