/**
 * Step "execute" of the request pipeline: one executor for both lanes. A document runs with
 * graphql-js's `execute` the first time and, from its second run on, as a query compiled by
 * graphql-jit (the executor Mercurius and envelop's `useGraphQlJit` use), which runs the same
 * resolvers at about a fifth of the cost per operation (docs/performance.md). Compiling costs more
 * than one execution, so a document sent once (distinct literals) never pays for it; a document
 * graphql-jit cannot compile keeps `execute`.
 *
 * Compiled queries are kept per parsed document (a WeakMap keyed by the DocumentNode: the fast path's
 * prepared operations and Yoga's parse cache hand the same node for the same text), so they live as
 * long as their document is cached and no longer.
 *
 * Both executors answer alike: errors raised before any field ran (variables that do not coerce) in
 * graphql-js's words, a result without data (the pipeline's finish step makes them request errors:
 * request-error-codes.ts); field errors are graphql-js's located errors.
 * `counts` says which executor ran how many operations (gateway_executions_total).
 */
import {
  BREAK,
  type DocumentNode,
  type ExecutionResult,
  execute,
  GraphQLError,
  type GraphQLSchema,
  getOperationAST,
  getVariableValues,
  visit,
} from 'graphql';
import { type CompiledQuery, compileQuery, isCompiledQuery } from 'graphql-jit';
import { isPromise } from '../../shared/is-promise.js';

export interface ExecutorOptions {
  schema: GraphQLSchema;
}

export type Execution = ExecutionResult | Promise<ExecutionResult>;

export interface Executor {
  /** Runs the named operation of `document` (validated) with this context and these variables. */
  run(
    document: DocumentNode,
    operationName: string | null | undefined,
    contextValue: unknown,
    variables: Record<string, unknown> | null | undefined,
  ): Execution;
  /** Operations run so far, by executor. */
  readonly counts: Readonly<Record<ExecutorName, number>>;
}

/** Which executor ran an operation (the `executor` label of gateway_executions_total). */
export type ExecutorName = 'graphql-js' | 'graphql-jit';

type Run = (contextValue: unknown, variables: Record<string, unknown> | undefined) => Execution;

const incremental = new WeakMap<DocumentNode, boolean>();

/**
 * Whether a document asks for incremental delivery (@defer, @stream): such a document is executed by
 * Yoga's own executor (@graphql-tools/executor, through the defer-stream plugin), which streams its
 * parts; neither graphql-js 16 nor graphql-jit can. Its lane is Yoga's.
 */
export function usesIncrementalDelivery(document: DocumentNode): boolean {
  let uses = incremental.get(document);
  if (uses === undefined) {
    uses = false;
    visit(document, {
      Directive(node) {
        if (node.name.value === 'defer' || node.name.value === 'stream') {
          uses = true;
          return BREAK;
        }
        return undefined;
      },
    });
    incremental.set(document, uses);
  }
  return uses;
}

/**
 * graphql-jit's field errors as graphql-js makes them (`locatedError`): a real `GraphQLError` with
 * the thrown error as `originalError` (its extensions, its masking) and the same locations, and
 * `errors` before `data`, as graphql-js orders a result: the bytes on the wire do not depend on
 * which executor ran.
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

export function createExecutor(options: ExecutorOptions): Executor {
  const { schema } = options;
  const counts: Record<ExecutorName, number> = { 'graphql-js': 0, 'graphql-jit': 0 };
  /** Per document, its runner per operation name. */
  const runners = new WeakMap<DocumentNode, Map<string, Run>>();

  const compiled = (
    document: DocumentNode,
    operationName: string | undefined,
    interpreted: Run,
  ): Run | undefined => {
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
      counts['graphql-jit']++;
      const result = query.query(undefined, contextValue, variables ?? {}) as Execution;
      // Errors without data: the variables did not coerce, and nothing ran. graphql-jit words some of
      // those errors differently (and loses the scalars' own messages, such as the JSON depth limit):
      // graphql-js coerces them again, for graphql-js's words.
      if (!isPromise(result) && result.data === undefined && result.errors !== undefined) {
        counts['graphql-jit']--;
        const coerced = getVariableValues(schema, variableDefinitions, variables ?? {}, { maxErrors: 50 });
        if (coerced.errors !== undefined) {
          counts['graphql-js']++;
          return { errors: coerced.errors };
        }
        // graphql-js accepts what graphql-jit refused: nothing ran yet, so graphql-js runs it all.
        return interpreted(contextValue, variables);
      }
      return isPromise(result) ? result.then(located) : located(result);
    };
  };

  /** `execute` for the first run; the compiled query (or `execute` again, if it cannot compile) after. */
  const runnerOf = (document: DocumentNode, operationName: string | undefined): Run => {
    const interpreted: Run = (contextValue, variableValues) => {
      counts['graphql-js']++;
      return execute({ schema, document, contextValue, variableValues, operationName }) as Execution;
    };
    let run: Run = (contextValue, variables) => {
      // Compiled at the second run, not the first: a document sent once never pays for it.
      run = (context, vars) => {
        run = compiled(document, operationName, interpreted) ?? interpreted;
        return run(context, vars);
      };
      return interpreted(contextValue, variables);
    };
    return (contextValue, variables) => run(contextValue, variables);
  };

  return {
    counts,
    run(document, operationName, contextValue, variables) {
      const name = operationName ?? undefined;
      let byName = runners.get(document);
      if (byName === undefined) {
        byName = new Map();
        runners.set(document, byName);
      }
      let run = byName.get(name ?? '');
      if (run === undefined) {
        run = runnerOf(document, name);
        // A document names few operations; a client sending many names for one text gets fresh runners.
        if (byName.size < 16) byName.set(name ?? '', run);
      }
      return run(contextValue, variables ?? undefined);
    },
  };
}
