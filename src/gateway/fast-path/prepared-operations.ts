/**
 * What the fast path knows about a document before any request runs it, computed once per query text
 * and operation name and kept in a bounded LRU: the parsed document, the validation verdict (the
 * schema's rules and every plugin's, through Yoga's `getEnveloped`; documents that differ only in
 * their literals share most of it: document-shapes.ts), the limits verdict and the operation's plan
 * (upstream calls, for MAX_UPSTREAM_CALLS and the cost estimate).
 *
 * A document that fails any of these is not the common case: the verdict is 'yoga', and Yoga's
 * handler answers it, so its errors are exactly Yoga's. Parsing uses graphql-js directly (with the
 * token limit), never through Yoga's parse cache: a syntax error must not be cached there without
 * the code Yoga's own parse path gives it.
 *
 * Execution: a document seen a second time is compiled with graphql-jit (the executor Mercurius and
 * envelop's `useGraphQlJit` use), which runs the same resolvers as graphql-js's `execute` at about a
 * fifth of its cost per operation (docs/performance.md). The first run of a document uses `execute`:
 * compiling costs more than one execution, and a document sent once (distinct literals) would pay it
 * for nothing. A document graphql-jit cannot compile keeps `execute`.
 */
import {
  type DocumentNode,
  type ExecutionResult,
  execute,
  GraphQLError,
  type GraphQLSchema,
  getOperationAST,
  getVariableValues,
  parse,
} from 'graphql';
import { type CompiledQuery, compileQuery, isCompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';
import type { OperationPlan } from '../operation-plan.js';
import { createDocumentShapes } from './document-shapes.js';

export interface PreparedOperation {
  document: DocumentNode;
  operationName: string | undefined;
  plan: OperationPlan;
  /** Runs the operation: graphql-js's `execute` at first, graphql-jit's compiled query once it repeats. */
  execute(
    contextValue: unknown,
    variables: Record<string, unknown> | undefined,
  ): ExecutionResult | Promise<ExecutionResult>;
}

export type Verdict = PreparedOperation | 'yoga';

export interface PreparedOperationsOptions {
  schema: GraphQLSchema;
  /** Validation with every rule Yoga applies (its `getEnveloped().validate`). */
  validate: (document: DocumentNode) => readonly unknown[];
  plan: (document: DocumentNode, operationName: string | null | undefined) => OperationPlan;
  maxTokens: number;
  maxUpstreamCalls: number;
  /** Most query text kept, in characters. @default 8 Mi */
  maxChars?: number;
}

export interface PreparedOperations {
  get(query: string, operationName: string | undefined): Verdict;
  readonly size: number;
}

type Run = PreparedOperation['execute'];

/** `execute` for the first run; the compiled query (or `execute` again, if it cannot compile) after. */
function firstRun(schema: GraphQLSchema, document: DocumentNode, operationName: string | undefined): Run {
  const interpreted: Run = (contextValue, variableValues) =>
    execute({ schema, document, contextValue, variableValues, operationName }) as
      | ExecutionResult
      | Promise<ExecutionResult>;
  let run: Run = (contextValue, variables) => {
    // Compiled at the second run, not the first: a document sent once never pays for it.
    run = (context, vars) => {
      run = compiled(schema, document, operationName, interpreted) ?? interpreted;
      return run(context, vars);
    };
    return interpreted(contextValue, variables);
  };
  return (contextValue, variables) => run(contextValue, variables);
}

function compiled(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | undefined,
  interpreted: Run,
): Run | undefined {
  const operation = getOperationAST(document, operationName);
  if (operation === null || operation === undefined) return undefined;
  const variableDefinitions = operation.variableDefinitions ?? [];
  let query: CompiledQuery;
  try {
    const made = compileQuery(schema, document, operationName, { disablingCapturingStackErrors: true });
    if (!isCompiledQuery(made)) return undefined;
    query = made;
  } catch {
    return undefined;
  }
  const located = locator(document);
  return (contextValue, variables) => {
    const result = query.query(undefined, contextValue, variables ?? {}) as
      | ExecutionResult
      | Promise<ExecutionResult>;
    // Errors without data: the variables did not coerce, and nothing ran. graphql-jit words some of
    // those errors differently (and loses the scalars' own messages, such as the JSON depth limit):
    // graphql-js coerces them again, for the words Yoga's path gives.
    if (!isPromise(result) && result.data === undefined && result.errors !== undefined) {
      const coerced = getVariableValues(schema, variableDefinitions, variables ?? {}, { maxErrors: 50 });
      if (coerced.errors !== undefined) return { errors: coerced.errors };
      // graphql-js accepts what graphql-jit refused: nothing ran yet, so graphql-js runs it all.
      return interpreted(contextValue, variables);
    }
    return isPromise(result) ? result.then(located) : located(result);
  };
}

const isPromise = <T>(value: T | Promise<T>): value is Promise<T> =>
  typeof (value as { then?: unknown } | null)?.then === 'function';

/**
 * graphql-jit's field errors as graphql-js makes them (`locatedError`): a real `GraphQLError` with
 * the thrown error as `originalError` (its extensions, its masking) and the same locations, and
 * `errors` before `data`, as graphql-js orders a result: the bytes on the wire stay Yoga's.
 */
function locator(document: DocumentNode): (result: ExecutionResult) => ExecutionResult {
  const source = document.loc?.source;
  let lineStarts: number[] | undefined;
  const positionOf = (body: string, location: { line: number; column: number }) => {
    if (lineStarts === undefined) {
      lineStarts = [0];
      for (let i = 0; i < body.length; i++) if (body.charCodeAt(i) === 10) lineStarts.push(i + 1);
    }
    return (lineStarts[location.line - 1] ?? 0) + location.column - 1;
  };
  return (result) => {
    const errors = result.errors;
    if (errors === undefined || errors.length === 0) return result;
    return {
      errors: errors.map((error) => {
        const original = error.originalError ?? undefined;
        if (original instanceof GraphQLError && Array.isArray(original.path)) return original;
        return new GraphQLError(original?.message ?? error.message, {
          source,
          positions:
            source === undefined ? undefined : (error.locations ?? []).map((l) => positionOf(source.body, l)),
          path: error.path,
          originalError: original,
        });
      }),
      data: result.data,
      ...(result.extensions === undefined ? {} : { extensions: result.extensions }),
    };
  };
}

export function createPreparedOperations(options: PreparedOperationsOptions): PreparedOperations {
  const { maxTokens, maxUpstreamCalls } = options;
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
    if (!shapes.valid(query, document)) return 'yoga';
    const plan = options.plan(document, operationName);
    if (plan.calls > maxUpstreamCalls) return 'yoga';
    return { document, operationName, plan, execute: firstRun(options.schema, document, operationName) };
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
