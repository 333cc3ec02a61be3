/**
 * A prepared operation runs graphql-js's `execute` the first time and graphql-jit's compiled query
 * after: every run must give the same result, errors included (their message, locations, path,
 * extensions and order), and variables that do not coerce must fail with graphql-js's words.
 */
import { type ExecutionResult, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import {
  createPreparedOperations,
  type PreparedOperation,
} from '../../src/gateway/fast-path/prepared-operations.js';
import { planOperation } from '../../src/gateway/operation-plan.js';
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

function prepare(): PreparedOperation {
  const prepared = createPreparedOperations({
    schema,
    validate: (document) => validate(schema, document),
    plan: (document, name) => planOperation(schema, document, name),
    maxTokens: 10_000,
    maxUpstreamCalls: 10,
  });
  const ready = prepared.get(QUERY, 'IsNull');
  if (ready === 'yoga') throw new Error('the test document must be valid');
  return ready;
}

/** The result as a client receives it. */
const wire = async (result: ExecutionResult | Promise<ExecutionResult>) => JSON.stringify(await result);

describe('prepared operations: interpreted first, compiled after, the same results', () => {
  it('answers alike on every run', async () => {
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
    for (let i = 0; i < 3; i++) runs.push(await wire(ready.execute(context, { strictMode: 'yes' })));
    expect(JSON.parse(runs[0] as string).errors[0].message).toBe(
      'Variable "$strictMode" got invalid value "yes"; Boolean cannot represent a non boolean value: "yes"',
    );
    expect(runs[1]).toBe(runs[0]);
    expect(runs[2]).toBe(runs[0]);
  });
});
