/**
 * Validation by document shape (document-shapes.ts): documents that differ only in their literals
 * are validated with every rule once, and each must still get exactly the verdict graphql-js gives it.
 */
import {
  type FieldNode,
  GraphQLError,
  type OperationDefinitionNode,
  parse,
  validate,
  versionInfo,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import {
  createDocumentShapes,
  PROVEN_ON_GRAPHQL_MAJOR,
} from '../../src/gateway/http/fast-path/document-shapes.js';
import { schema } from '../../src/gateway/schema/index.js';

function shapesWithCount() {
  const calls = { full: 0 };
  const shapes = createDocumentShapes({
    schema,
    validate: (document) => {
      calls.full++;
      return validate(schema, document);
    },
  });
  return { shapes, calls };
}

/** The verdict by shape and graphql-js's own, for a document. */
function verdicts(shapes: ReturnType<typeof shapesWithCount>['shapes'], query: string) {
  const document = parse(query);
  return { byShape: shapes.valid(query, document), graphqlJs: validate(schema, document).length === 0 };
}

/** Sequences of documents of one shape: the first valid, then others in any order. */
const SEQUENCES: Array<{ name: string; documents: string[] }> = [
  {
    name: 'an Int argument, then one out of 32-bit range',
    documents: [
      '{ pi(digits: 3) { __typename } }',
      '{ pi(digits: 12) { __typename } }',
      '{ pi(digits: 99999999999) { __typename } }',
      '{ pi(digits: 4) { __typename } }',
    ],
  },
  {
    name: 'JSON numbers, then one JSON cannot hold',
    documents: [
      '{ isNull(value: 1.5) { __typename } }',
      '{ isNull(value: -2.25) { __typename } }',
      '{ isNull(value: 1e999) { __typename } }',
      '{ isNull(value: 3.5) { __typename } }',
    ],
  },
  {
    name: 'a JSON object literal (one leaf of type JSON), then one with a number out of range',
    documents: [
      '{ isNull(value: { a: [1.5, "x"] }) { __typename } }',
      '{ isNull(value: { a: [2.5, "z"] }) { __typename } }',
      '{ isNull(value: { a: [1e999, "y"] }) { __typename } }',
    ],
  },
  {
    name: 'an input object with an Int field, then a value its type refuses',
    documents: [
      '{ inference(input: { desiredDigits: 3, liabilityWaiverSigned: true }) { __typename } }',
      '{ inference(input: { desiredDigits: 5, liabilityWaiverSigned: true }) { __typename } }',
      '{ inference(input: { desiredDigits: 4000000000, liabilityWaiverSigned: true }) { __typename } }',
    ],
  },
  {
    name: 'a Float default value of a variable (graphql-js takes 1e999 as Infinity)',
    documents: [
      'query ($t: Float = 0.5) { pi(digits: 2, temperature: $t) { __typename } }',
      'query ($t: Float = 0.25) { pi(digits: 2, temperature: $t) { __typename } }',
      'query ($t: Float = 1e999) { pi(digits: 2, temperature: $t) { __typename } }',
    ],
  },
  {
    name: 'one response name twice: equal literals merge, different ones conflict',
    documents: [
      '{ a: pi(digits: 2) { __typename } a: pi(digits: 2) { __typename } }',
      '{ a: pi(digits: 7) { __typename } a: pi(digits: 7) { __typename } }',
      '{ a: pi(digits: 2) { __typename } a: pi(digits: 3) { __typename } }',
    ],
  },
  {
    name: 'the same through a fragment spread at the same level',
    documents: [
      '{ a: pi(digits: 2) { __typename } ...F } fragment F on Query { a: pi(digits: 2) { __typename } }',
      '{ a: pi(digits: 5) { __typename } ...F } fragment F on Query { a: pi(digits: 5) { __typename } }',
      '{ a: pi(digits: 2) { __typename } ...F } fragment F on Query { a: pi(digits: 9) { __typename } }',
    ],
  },
  {
    name: 'two operations with one root field each (never merged), literals anywhere',
    documents: [
      'query A { isNull(value: "a") { __typename } } query B { isNull(value: "b") { __typename } }',
      'query A { isNull(value: "c") { __typename } } query B { isNull(value: "d") { __typename } }',
      'query A { isNull(value: "e") { __typename } } query B { isNull(value: 1) { __typename } }',
    ],
  },
];

describe('validation by document shape', () => {
  it('runs on the graphql major its reliance on graphql-js was proven on (another: run the differential and equivalence tests, then change the constant)', () => {
    expect(versionInfo.major).toBe(PROVEN_ON_GRAPHQL_MAJOR);
  });

  it.each(SEQUENCES)('$name: every verdict is graphql-js’s', ({ documents }) => {
    const { shapes } = shapesWithCount();
    for (const query of documents) {
      const { byShape, graphqlJs } = verdicts(shapes, query);
      expect({ query, valid: byShape }).toEqual({ query, valid: graphqlJs });
    }
  });

  it('refuses what graphql-js refuses, in each sequence (the table is not all valid)', () => {
    const refused = SEQUENCES.flatMap((s) => s.documents).filter(
      (query) => validate(schema, parse(query)).length > 0,
    );
    expect(refused.length).toBeGreaterThanOrEqual(6);
  });

  it('runs every rule on the first two documents of a shape, not on every document', () => {
    const { shapes, calls } = shapesWithCount();
    for (let i = 0; i < 50; i++) {
      const query = `query IsNull { isNull(value: "v-${i}", temperature: 0.${i + 1}) { __typename } }`;
      expect(shapes.valid(query, parse(query))).toBe(true);
    }
    // The first two in full (the shape is learnt at the second), none after.
    expect(calls.full).toBe(2);
    // Another shape (an Int where a String was) is validated in full.
    const other = 'query IsNull { isNull(value: 5, temperature: 0.5) { __typename } }';
    expect(shapes.valid(other, parse(other))).toBe(true);
    expect(calls.full).toBe(3);
  });

  it('does not learn from an invalid document: the next one of its shape is validated in full', () => {
    const { shapes, calls } = shapesWithCount();
    const bad = '{ pi(digits: 99999999999) { __typename } }';
    expect(shapes.valid(bad, parse(bad))).toBe(false);
    for (const digits of [3, 4, 5, 6]) {
      const good = `{ pi(digits: ${digits}) { __typename } }`;
      expect(shapes.valid(good, parse(good))).toBe(true);
    }
    // The refused one, then the two valid ones that teach the shape.
    expect(calls.full).toBe(3);
  });

  it('keeps names, variables and comments in the shape: a changed enum value is another shape', () => {
    const { shapes, calls } = shapesWithCount();
    for (const query of [
      '{ isNull(value: "a", model: NULL_X_MINI) { __typename } }',
      '{ isNull(value: "a", model: NOT_A_MODEL) { __typename } }',
      '{ isNull(value: "a", strictMode: true) { __typename } }',
    ]) {
      const { byShape, graphqlJs } = verdicts(shapes, query);
      expect(byShape).toBe(graphqlJs);
    }
    expect(calls.full).toBe(3);
  });

  it('keeps a comment holding `\\0` and a marker’s text as text of the shape (graphql 16 accepts both)', () => {
    const { shapes, calls } = shapesWithCount();
    const documents = [
      // A shape, learnt at its second document; the third is judged by it.
      '{ pi(digits: 3) { __typename } }',
      '{ pi(digits: 4) { __typename } }',
      '{ pi(digits: 99999999999) { __typename } }',
      // An Int's marker text in a comment, before the Int or after the document: other shapes.
      '{ pi(digits: #\0Int\0\n5) { __typename } }',
      '{ pi(digits: #\0Int\0\n99999999999) { __typename } }',
      '{ pi(digits: 6) { __typename } } #\0Int\0',
      // `\0` in a string literal is part of the literal.
      '{ isNull(value: "\0Int\0") { __typename } }',
      '{ isNull(value: """\0""") { __typename } }',
    ];
    for (const query of documents) {
      const { byShape, graphqlJs } = verdicts(shapes, query);
      expect({ query, valid: byShape }).toEqual({ query, valid: graphqlJs });
    }
    // Every document in full but the third.
    expect(calls.full).toBe(documents.length - 1);
  });
});

describe('lifting a document into its shape’s operation', () => {
  /** A shapes instance that has learnt the shape of `template` (two valid documents of it). */
  const learnt = (template: (value: string) => string, first: string, second: string) => {
    const { shapes } = shapesWithCount();
    for (const value of [first, second]) expect(verdicts(shapes, template(value)).byShape).toBe(true);
    return shapes;
  };

  it('lifts a new document of a learnt shape: its literals as variables, coerced by parseLiteral', () => {
    const template = (v: string) => `query Q($d: Float) { pi(digits: ${v}, temperature: $d) { __typename } }`;
    const shapes = learnt(template, '1', '2');
    const lifted = shapes.lift(template('-7'), undefined, { d: 0.5 });
    expect(lifted).toBeDefined();
    expect(Object.values(lifted?.variables ?? {})).toEqual([0.5, -7]);
    // The same shape by name; no other name, and no empty one (getOperationAST finds none).
    expect(shapes.lift(template('3'), 'Q', undefined)).toBeDefined();
    expect(shapes.lift(template('3'), 'P', undefined)).toBeUndefined();
    expect(shapes.lift(template('3'), '', undefined)).toBeUndefined();
    // A literal the leaf check refuses, and another shape: the standard path.
    expect(shapes.lift(template('99999999999'), undefined, undefined)).toBeUndefined();
    expect(shapes.lift(template('"3"'), undefined, undefined)).toBeUndefined();
  });

  it('does not lift what parseValue would coerce otherwise, nor a default value written differently', () => {
    const floats = learnt((v) => `{ pi(digits: 2, temperature: ${v}) { __typename } }`, '0.5', '0.25');
    expect(floats.lift('{ pi(digits: 2, temperature: 0.75) { __typename } }', undefined, {})).toBeDefined();
    // parseLiteral gives Infinity, which parseValue refuses.
    expect(
      floats.lift('{ pi(digits: 2, temperature: 1e999) { __typename } }', undefined, {}),
    ).toBeUndefined();
    const defaults = learnt(
      (v) => `query($d: Int = 2) { pi(digits: $d) { __typename } isNull(value: ${v}) { __typename } }`,
      '"a"',
      '"b"',
    );
    const withDefault = (d: string) =>
      `query($d: Int = ${d}) { pi(digits: $d) { __typename } isNull(value: "c") { __typename } }`;
    expect(defaults.lift(withDefault('2'), undefined, {})).toBeDefined();
    expect(defaults.lift(withDefault('3'), undefined, {})).toBeUndefined();
  });

  it('moves error locations into the document, by token', () => {
    const template = (v: string) => `{\n  a: isNull(value: ${v}) { __typename }\n  b: pi { __typename }\n}`;
    const shapes = learnt(template, '"""x"""', '"""y"""');
    const lifted = shapes.lift(template('"""\n\nlong\n"""'), undefined, {});
    expect(lifted).toBeDefined();
    const operation = lifted?.document.definitions[0] as OperationDefinitionNode;
    const b = operation.selectionSet.selections[1] as FieldNode;
    const error = new GraphQLError('failed', { nodes: [b], path: ['b'] });
    const moved = lifted?.relocate({ errors: [error], data: { b: null } });
    expect(moved?.errors?.[0]?.locations).toEqual([{ line: 6, column: 3 }]);
    expect(JSON.stringify(moved)).toBe(
      '{"errors":[{"message":"failed","locations":[{"line":6,"column":3}],"path":["b"]}],"data":{"b":null}}',
    );
  });
});
