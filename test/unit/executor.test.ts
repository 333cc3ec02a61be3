/**
 * The pipeline's executor runs graphql-js's `execute` the first time a document runs and graphql-jit's
 * compiled query after: every run must give the same result, errors included (their message,
 * locations, path, extensions and order), variables that do not coerce must fail with graphql-js's
 * words, and its counts must say which executor ran (so a change that never compiles fails here).
 */
import { type DocumentNode, type ExecutionResult, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { createExecutor, type Executor } from '../../src/gateway/request/executor.js';
import { withRequestErrorCodes } from '../../src/gateway/request/request-error-codes.js';
import { schema } from '../../src/gateway/schema/index.js';
import { errorFromFailure } from '../../src/gateway/upstream/status-mapping.js';
import type { NullCheckResponse } from '../../src/gateway/upstream/types.js';
import { nullVerdict } from '../support/upstream-bodies.js';

const QUERY = `query IsNull($value: JSON, $strictMode: Boolean) {
  isNull(value: $value, strictMode: $strictMode) {
    __typename
    ... on NullVerdict { isNull actuallyNull correct confidence modelName }
  }
}`;

/** A context whose null-check loader answers, or fails as an upstream would. */
const contextFor = (answer: () => Promise<NullCheckResponse>) => ({
  operation: { apiKey: undefined },
  loaders: { nullCheck: { load: answer } },
  digits: {},
  limits: { maxDigits: 1000, maxCompareDigits: 1000, maxJsonDepth: 32, maxJsonBytes: 65536 },
});

/** A fresh executor and a parsed document, run by name. */
function prepare(): {
  executor: Executor;
  execute: (context: unknown, variables: Record<string, unknown>) => ReturnType<Executor['run']>;
} {
  const executor = createExecutor({ schema });
  const document: DocumentNode = parse(QUERY);
  return { executor, execute: (context, variables) => executor.run(document, 'IsNull', context, variables) };
}

/** The result as a client receives it. */
const wire = async (result: ExecutionResult | Promise<ExecutionResult>) => JSON.stringify(await result);

describe('the executor: interpreted first, compiled after, the same results', () => {
  it('answers alike on every run, with graphql-js once and graphql-jit after', async () => {
    const ready = prepare();
    const runs: string[] = [];
    for (let i = 0; i < 3; i++)
      runs.push(
        await wire(
          ready.execute(
            contextFor(async () => nullVerdict),
            { value: 'x' },
          ),
        ),
      );
    expect(JSON.parse(runs[0] as string).data.isNull).toMatchObject({ isNull: false, actuallyNull: false });
    expect(runs[1]).toBe(runs[0]);
    expect(runs[2]).toBe(runs[0]);
    expect(ready.executor.counts).toEqual({ 'graphql-js': 1, 'graphql-jit': 2 });
  });

  it('gives the same field errors: message, locations, path, code, errors before data', async () => {
    const ready = prepare();
    const failing = contextFor(async () => {
      throw errorFromFailure('connection', 'null-check');
    });
    const runs: string[] = [];
    for (let i = 0; i < 3; i++) runs.push(await wire(ready.execute(failing, { value: 'x' })));
    const first = JSON.parse(runs[0] as string);
    expect(Object.keys(first)).toEqual(['errors', 'data']);
    expect(first.errors[0].locations).toEqual([{ line: 2, column: 3 }]);
    expect(first.errors[0].path).toEqual(['isNull']);
    expect(first.errors[0].extensions.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(runs[1]).toBe(runs[0]);
    expect(runs[2]).toBe(runs[0]);
  });

  it('refuses variables that do not coerce with graphql-js words, compiled or not', async () => {
    const ready = prepare();
    const context = contextFor(async () => nullVerdict);
    const runs: string[] = [];
    // The pipeline's finish step makes them request errors (request-error-codes.ts), once.
    for (let i = 0; i < 3; i++)
      runs.push(await wire(withRequestErrorCodes(await ready.execute(context, { strictMode: 'yes' }), true)));
    const first = JSON.parse(runs[0] as string);
    expect(first.errors[0].message).toBe(
      'Variable "$strictMode" got invalid value "yes"; Boolean cannot represent a non boolean value: "yes"',
    );
    // A request error, raised before any field ran: HTTP 400 (the draft's 422), whichever executor saw it.
    expect(first.errors[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      http: { status: 400, draftStatus: 422 },
    });
    expect(runs[1]).toBe(runs[0]);
    expect(runs[2]).toBe(runs[0]);
  });
});
