/**
 * operation-plan.ts: what an operation will ask of the upstreams, read from its document before
 * anything runs. MAX_UPSTREAM_CALLS and the X-Max-Cost-Usd estimate both count from the root fields'
 * Pothos extension `upstream`. That no root field calls an upstream without declaring it is checked
 * behaviourally, through a gateway, in test/integration/operation-plan-declared.test.ts.
 */
import { type GraphQLField, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import {
  createPlanner,
  modelCalls,
  planOperation,
  type UpstreamFieldExtension,
} from '../../src/gateway/operation/operation-plan.js';
import { schema } from '../../src/gateway/schema/index.js';
import { DEFAULT_PI_DIGITS } from '../../src/gateway/upstream/pi-digits-client.js';

const calls = (query: string, operationName?: string | null) =>
  planOperation(schema, parse(query), operationName).calls;

/** The `upstream` extension a root field declares (undefined for fields that call no upstream). */
const upstreamOf = (field: GraphQLField<unknown, unknown>) =>
  (field.extensions as { upstream?: UpstreamFieldExtension }).upstream;

describe('planOperation: distinct upstream calls', () => {
  it('counts a root field once per distinct (name, arguments), whatever its aliases', () => {
    expect(calls('{ a: pi { __typename } b: pi { __typename } c: pi(digits: 2) { __typename } }')).toBe(2);
    expect(calls('{ pi { __typename } pi { __typename } }')).toBe(1);
    expect(calls('{ a: isNull(value: 1) { __typename } b: isNull(value: 2) { __typename } }')).toBe(2);
    expect(calls('{ a: isNull { __typename } b: isNull(value: null) { __typename } }')).toBe(2);
  });

  it('does not care about the order of the arguments', () => {
    expect(
      calls(
        '{ a: pi(digits: 2, model: PI_X_MINI) { __typename } b: pi(model: PI_X_MINI, digits: 2) { __typename } }',
      ),
    ).toBe(1);
    expect(
      calls(
        '{ a: isNull(value: {x: 1, y: 2}) { __typename } b: isNull(value: {x: 1, y: 2}) { __typename } }',
      ),
    ).toBe(1);
    // Object fields inside a literal are compared as written: another order is another call (an upper bound).
    expect(
      calls(
        '{ a: isNull(value: {x: 1, y: 2}) { __typename } b: isNull(value: {y: 2, x: 1}) { __typename } }',
      ),
    ).toBe(2);
  });

  it('counts health as two calls (one per upstream), still once however often it is selected', () => {
    expect(calls('{ health { status } }')).toBe(2);
    expect(calls('{ a: health { status } b: health { status } }')).toBe(2);
    expect(calls('{ health { status } pi { __typename } }')).toBe(3);
  });

  it('follows named fragments (each once, even when spread again or recursively) and inline fragments', () => {
    expect(
      calls(`{ health { status } h: health { status } ...F }
        fragment F on Query { isNull(value: 1) { __typename } }`),
    ).toBe(3);
    expect(
      calls(`{ ...F ...F ... on Query { ...G pi(digits: 1) { __typename } } }
        fragment F on Query { pi(digits: 1) { __typename } ...G }
        fragment G on Query { ...F inference(input: {desiredDigits: 1, liabilityWaiverSigned: true}) { __typename } }`),
    ).toBe(2);
    expect(
      calls('{ ... { ... on Query { pi { __typename } } } ... @include(if: true) { health { status } } }'),
    ).toBe(3);
  });

  it('counts only the selected operation; without a name, the first one', () => {
    const doc =
      'query A { pi { __typename } } query B { pi { __typename } pi(digits: 1) { __typename } health { status } }';
    expect(calls(doc, 'A')).toBe(1);
    expect(calls(doc, 'B')).toBe(4);
    expect(calls(doc)).toBe(1);
    expect(calls(doc, 'Nope')).toBe(0);
  });

  it('counts variables by name, not by value (an upper bound that never reads the values)', () => {
    expect(
      calls('query($a: Int, $b: Int) { x: pi(digits: $a) { __typename } y: pi(digits: $b) { __typename } }'),
    ).toBe(2);
    expect(
      calls('query($a: Int) { x: pi(digits: $a) { __typename } y: pi(digits: $a) { __typename } }'),
    ).toBe(1);
  });

  it('counts nothing for fields that call no upstream, and nothing outside queries', () => {
    expect(calls('{ __typename }')).toBe(0);
    expect(calls('{ __schema { queryType { name } } __type(name: "Query") { name } }')).toBe(0);
    expect(calls('{ unknownField pi { __typename } }')).toBe(1);
    expect(calls('mutation { pi { __typename } }')).toBe(0);
    expect(calls('subscription { pi { __typename } }')).toBe(0);
    expect(calls('fragment F on Query { pi { __typename } }')).toBe(0);
  });

  it('lists the distinct upstream-calling fields with their extension', () => {
    const plan = planOperation(
      schema,
      parse('{ a: pi { __typename } b: pi { __typename } health { status } __typename }'),
    );
    expect(plan.fields.map((f) => [f.field.name, f.node.alias?.value ?? null, f.extension.calls])).toEqual([
      ['pi', 'a', 1],
      ['health', null, 2],
    ]);
  });

  it('createPlanner memoizes per document and operation name', () => {
    const plan = createPlanner(schema);
    const document = parse('query A { pi { __typename } } query B { health { status } }');
    const a = plan(document, 'A');
    expect(plan(document, 'A')).toBe(a);
    expect(a.calls).toBe(1);
    expect(plan(document, 'B').calls).toBe(2);
    // Another document with the same text is planned on its own (and counts the same).
    const again = plan(parse('query A { pi { __typename } } query B { health { status } }'), 'A');
    expect(again).not.toBe(a);
    expect(again.calls).toBe(1);
  });
});

describe('modelCalls: the models of the cost estimate, from arguments and variables', () => {
  const models = (query: string, variables?: Record<string, unknown>, operationName?: string) =>
    modelCalls(planOperation(schema, parse(query), operationName), variables);

  it('reads literal arguments (enum values as the upstream strings)', () => {
    expect(
      models(`{
        isNull(value: 1, model: NULL_X_OPUS) { __typename }
        pi(digits: 40, model: PI_X_MINI) { __typename }
        inference(input: {desiredDigits: 7, model: PI_X_OPUS_ALMOST_CORRECT, liabilityWaiverSigned: true}) { __typename }
      }`),
    ).toEqual([
      { upstream: 'null-check', kind: 'check', model: 'null-x-opus' },
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-mini', digits: 40 },
      { upstream: 'pi-digits', kind: 'inference', model: 'pi-x-opus-almost-correct', digits: 7 },
    ]);
  });

  it("uses the services' defaults for omitted arguments", () => {
    expect(
      models(
        '{ isNull { __typename } pi { __typename } inference(input: {desiredDigits: 2, liabilityWaiverSigned: true}) { __typename } }',
      ),
    ).toEqual([
      { upstream: 'null-check', kind: 'check', model: 'null-x-4o' },
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: DEFAULT_PI_DIGITS },
      { upstream: 'pi-digits', kind: 'inference', model: 'pi-x-4o', digits: 2 },
    ]);
  });

  it('reads variables, and their defaults when a variable is not given', () => {
    const query = `query Q($d: Int = 11, $m: PiModel, $n: NullModel = NULL_X_MINI, $in: InferenceInput!) {
      pi(digits: $d, model: $m) { __typename }
      isNull(value: 1, model: $n) { __typename }
      inference(input: $in) { __typename }
    }`;
    expect(
      models(query, {
        d: 500,
        m: 'PI_X_OPUS_ALMOST_CORRECT',
        n: 'NULL_X_OPUS',
        in: { desiredDigits: 9, model: 'PI_X_MINI', liabilityWaiverSigned: true },
      }),
    ).toEqual([
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-opus-almost-correct', digits: 500 },
      { upstream: 'null-check', kind: 'check', model: 'null-x-opus' },
      { upstream: 'pi-digits', kind: 'inference', model: 'pi-x-mini', digits: 9 },
    ]);
    expect(models(query, { in: { desiredDigits: 4, liabilityWaiverSigned: false } })).toEqual([
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 11 },
      { upstream: 'null-check', kind: 'check', model: 'null-x-mini' },
      { upstream: 'pi-digits', kind: 'inference', model: 'pi-x-4o', digits: 4 },
    ]);
    // No variables object at all: the same as none given.
    expect(models('query($d: Int = 6) { pi(digits: $d) { __typename } }')).toEqual([
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 6 },
    ]);
  });

  it("falls back to the fields' defaults when the variables do not coerce (the operation fails anyway)", () => {
    expect(models('query($d: Int) { pi(digits: $d) { __typename } }', { d: 'many' })).toEqual([
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: DEFAULT_PI_DIGITS },
    ]);
    expect(models('query($in: InferenceInput!) { inference(input: $in) { __typename } }', {})).toEqual([
      { upstream: 'pi-digits', kind: 'inference', model: 'pi-x-4o', digits: undefined },
    ]);
  });

  it('prices each distinct call once, and health not at all', () => {
    expect(
      models('{ a: pi(digits: 5) { __typename } b: pi(digits: 5) { __typename } health { status } }'),
    ).toEqual([{ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 5 }]);
    expect(models('{ health { status } }')).toEqual([]);
  });

  it('reads only the priced variables: a new isNull value needs no coercion, a new model does', () => {
    const plan = planOperation(
      schema,
      parse(
        'query Q($v: JSON, $m: NullModel, $d: Int) { isNull(value: $v, model: $m) { __typename } pi(digits: $d) { __typename } }',
      ),
    );
    expect(plan.pricedVariables).toEqual(['m', 'd']);
    // A value that would not coerce as JSON (a function) is never looked at.
    expect(modelCalls(plan, { v: () => 1, m: 'NULL_X_MINI', d: 4 })).toEqual([
      { upstream: 'null-check', kind: 'check', model: 'null-x-mini' },
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 4 },
    ]);
  });

  it('`pricedBy` (and `routedReads`, priced where minAccuracy may be) of every model-calling root field lists every argument its `models` reads', () => {
    const root = schema.getQueryType();
    const checked: string[] = [];
    for (const field of Object.values(root?.getFields() ?? {})) {
      const extension = upstreamOf(field);
      if (extension?.models === undefined) continue;
      const read = new Set<string>();
      const args = new Proxy(
        {},
        {
          get: (_target, name) => {
            read.add(String(name));
            return undefined;
          },
        },
      );
      extension.models(args);
      const priced = [...(extension.pricedBy ?? []), ...(extension.routedReads ?? [])];
      expect({ field: field.name, read: [...read].filter((n) => !priced.includes(n)) }).toEqual({
        field: field.name,
        read: [],
      });
      checked.push(field.name);
    }
    expect(checked.sort()).toEqual(['inference', 'isNull', 'pi']);
  });

  it('follows the selected operation only', () => {
    const doc = 'query A { isNull(value: 1) { __typename } } query B { pi(digits: 1) { __typename } }';
    expect(models(doc, undefined, 'B')).toEqual([
      { upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 1 },
    ]);
  });
});

describe('the `upstream` extension of the root fields', () => {
  it("the schema has the contract's model-backed root fields, each declaring its calls", () => {
    const rootFields = Object.values(schema.getQueryType()?.getFields() ?? {});
    expect(rootFields.map((f) => f.name)).toEqual(
      expect.arrayContaining(['isNull', 'pi', 'inference', 'health']),
    );
    for (const name of ['isNull', 'pi', 'inference']) {
      const extension = upstreamOf(
        schema.getQueryType()?.getFields()[name] as GraphQLField<unknown, unknown>,
      );
      expect(extension?.calls, name).toBe(1);
      expect(typeof extension?.models, name).toBe('function');
    }
    expect(upstreamOf(schema.getQueryType()?.getFields().health as GraphQLField<unknown, unknown>)).toEqual({
      calls: 2,
    });
  });
});

describe('routing by minAccuracy in the plan', () => {
  const plan = (doc: string) => planOperation(schema, parse(doc));

  it('prices the temperature only where a field may ask for minAccuracy', () => {
    // A distinct temperature per request must not make a distinct estimate per request.
    const plain = plan('query P($t: Float, $d: Int) { pi(digits: $d, temperature: $t) { __typename } }');
    expect(plain.routable).toBe(false);
    expect(plain.pricedVariables).toEqual(['d']);
    const routed = plan(
      'query P($t: Float, $m: Float) { pi(minAccuracy: $m, temperature: $t) { __typename } }',
    );
    expect(routed.routable).toBe(true);
    expect(routed.pricedVariables).toEqual(['t', 'm']);
  });

  it('looks for minAccuracy inside the inference input: a literal without it never routes, a variable may', () => {
    expect(
      plan('{ inference(input: { desiredDigits: 3, liabilityWaiverSigned: true }) { __typename } }').routable,
    ).toBe(false);
    expect(
      plan(
        '{ inference(input: { desiredDigits: 3, minAccuracy: 0.9, liabilityWaiverSigned: true }) { __typename } }',
      ).routable,
    ).toBe(true);
    expect(plan('query I($i: InferenceInput!) { inference(input: $i) { __typename } }').routable).toBe(true);
    expect(plan('{ isNull(value: 1) { __typename } health { status } }').routable).toBe(false);
  });

  it('gives a routed call its route, and none beside a model or out of range', () => {
    const calls = (doc: string, variables?: Record<string, unknown>) => modelCalls(plan(doc), variables);
    expect(calls('{ isNull(value: 1, minAccuracy: 0.9, temperature: 0.5) { __typename } }')).toEqual([
      {
        upstream: 'null-check',
        kind: 'check',
        model: 'null-x-4o',
        route: { minAccuracy: 0.9, temperature: 0.5 },
      },
    ]);
    expect(calls('{ isNull(value: 1, model: NULL_X_MINI, minAccuracy: 0.9) { __typename } }')[0]?.route).toBe(
      undefined,
    );
    expect(calls('{ pi(minAccuracy: 1.5) { __typename } }')[0]?.route).toBe(undefined);
  });
});
