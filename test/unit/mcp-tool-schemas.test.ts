/**
 * src/gateway/mcp/tool-schemas.ts and built-in-tools.ts on their own: tool names; input schemas on
 * every GraphQL input kind, checked against graphql-js's own variable coercion (the oracle: the
 * schema, compiled by ajv, accepts exactly what `getVariableValues` accepts); output schemas on
 * every selection form; both on the gateway's schema for the built-in tools and a manifest's
 * operation. Real answers of a running gateway against the output schemas:
 * test/integration/mcp-output-schemas.test.ts.
 */
import { Ajv, type Options } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import {
  buildSchema,
  type DocumentNode,
  type GraphQLSchema,
  getVariableValues,
  type OperationDefinitionNode,
  parse,
  validate,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { BUILT_IN_TOOL_SPECS, builtInTools, fullSelection } from '../../src/gateway/mcp/built-in-tools.js';
import {
  type JsonSchema,
  type ToolOutputSchemaOptions,
  toolInputSchema,
  toolNameOf,
  toolOutputSchema,
} from '../../src/gateway/mcp/tool-schemas.js';
import { schema as gatewaySchema } from '../../src/gateway/schema/index.js';

/** The MCP SDK's own ajv (draft-07, its options), and a strict draft 2020-12 one (MCP 2025-11-25's dialect). */
const sdkOptions: Options = { strict: false, validateFormats: true, validateSchema: false, allErrors: true };
const validators = {
  sdk: new Ajv(sdkOptions),
  strict2020: new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true }),
};

/** Compiles with both ajvs (the strict one refuses unknown keywords) and checks they agree on `data`. */
function accepts(schema: JsonSchema, data: unknown): boolean {
  const sdk = validators.sdk.compile(schema)(data);
  const strict = validators.strict2020.compile(schema)(data);
  expect(strict, `draft-07 and 2020-12 agree on ${JSON.stringify(data)}`).toBe(sdk);
  return sdk;
}

function operationOf(document: DocumentNode, name?: string): OperationDefinitionNode {
  const operation = document.definitions.find(
    (d): d is OperationDefinitionNode =>
      d.kind === 'OperationDefinition' && (name === undefined || d.name?.value === name),
  );
  if (operation === undefined) throw new Error(`no operation ${name ?? ''}`);
  return operation;
}

function inputSchemaOf(schema: GraphQLSchema, source: string): JsonSchema {
  const document = parse(source);
  return toolInputSchema(schema, operationOf(document), document);
}

function outputSchemaOf(
  schema: GraphQLSchema,
  source: string,
  options?: ToolOutputSchemaOptions,
): JsonSchema {
  const document = parse(source);
  return toolOutputSchema(schema, document, operationOf(document), options);
}

const testSchema = buildSchema(`
  "Any JSON value."
  scalar JSON
  "An instant, ISO 8601."
  scalar Date

  "A colour."
  enum Color {
    "Like blood."
    RED
    GREEN @deprecated(reason: "gone")
    BLUE
  }

  "A point on the grid."
  input Point {
    "Across."
    x: Int!
    "Up; 0 when omitted."
    y: Int! = 0
    label: String
    tags: [String!]
    color: Color = BLUE
    legacy: Int @deprecated(reason: "unused")
  }

  input Options { verbose: Boolean, depth: Int = 2 }

  "A tree of values."
  input Tree { value: Int!, children: [Tree!] }

  input Ping { pong: Pong }
  input Pong { ping: Ping, n: Int }

  input Pick @oneOf { id: ID, name: String }

  interface Named { name: String! }
  type Cat implements Named { name: String!, lives: Int!, owner: Person }
  type Dog implements Named { name: String!, good: Boolean, tags: [[String!]] }
  type Person implements Named { name: String!, pets: [Named!]!, born: Date, data: JSON, favourite: Color }
  type Rock { weight: Float }
  union Thing = Cat | Dog | Rock

  type Query {
    "Finds things."
    things(
      "How many at most."
      first: Int
      near: Point
      color: Color
      filter: JSON
    ): [Thing!]!
    named(id: ID!): Named
    person(options: Options, tree: Tree, pick: Pick, points: [[Point]]): Person!
    echo(value: JSON, date: Date, ping: Ping): String
  }
`);

describe('toolNameOf', () => {
  it.each([
    ['PiDigits', 'pi_digits'],
    ['isNull', 'is_null'],
    ['HTTPHealth', 'http_health'],
    ['Health', 'health'],
    ['ModelScores', 'model_scores'],
    ['PiInference', 'pi_inference'],
    ['piV2Digits', 'pi_v2_digits'],
    ['already_snake', 'already_snake'],
    ['GetHTTP2Health', 'get_http2_health'],
  ])('%s → %s', (operationName, tool) => {
    expect(toolNameOf(operationName)).toBe(tool);
    expect(tool).toMatch(/^[a-z0-9_]{1,128}$/); // MCP's tool name characters
  });
});

describe('toolInputSchema: every input kind', () => {
  it('scalars, enums, non-null, defaults and the JSON scalar', () => {
    const schema = inputSchemaOf(
      testSchema,
      `query($first: Int, $id: ID!, $f: Float = 1.5, $color: Color!, $filter: JSON, $flag: Boolean! = true,
              $s: String, $date: Date) {
        things(first: $first, color: $color, filter: $filter) { __typename }
        named(id: $id) { name }
        echo(date: $date)
      }`,
    );
    expect(schema).toMatchObject({
      type: 'object',
      required: ['id', 'color'],
      additionalProperties: false,
      properties: {
        first: {
          type: ['integer', 'null'],
          minimum: -2147483648,
          maximum: 2147483647,
          description: 'How many at most.',
        },
        id: { type: ['string', 'integer'] },
        f: { type: ['number', 'null'], default: 1.5 },
        color: {
          type: 'string',
          enum: ['RED', 'GREEN', 'BLUE'],
          description: 'A colour.\n- RED: Like blood.\n- GREEN\n- BLUE',
        },
        filter: { description: 'Any JSON value.' },
        flag: { type: 'boolean', default: true },
        s: { type: ['string', 'null'] },
        date: { description: 'An instant, ISO 8601.' },
      },
    });
    const properties = schema.properties as Record<string, JsonSchema>;
    expect(Object.keys(properties.filter as object)).toEqual(['description']); // any value, null included
    expect(properties.s).not.toHaveProperty('description'); // the built-in scalars' own texts say nothing here
  });

  it('input objects: nested properties, required fields without defaults, defaults, closed', () => {
    const schema = inputSchemaOf(testSchema, 'query($near: Point!) { things(near: $near) { __typename } }');
    expect(schema.properties).toEqual({
      near: {
        type: 'object',
        title: 'Point',
        description: 'A point on the grid.',
        properties: {
          x: { type: 'integer', minimum: -2147483648, maximum: 2147483647, description: 'Across.' },
          y: {
            type: 'integer',
            minimum: -2147483648,
            maximum: 2147483647,
            description: 'Up; 0 when omitted.',
            default: 0,
          },
          label: { type: ['string', 'null'] },
          tags: {
            anyOf: [{ type: 'array', items: { type: 'string' } }, { type: 'string' }, { type: 'null' }],
          },
          color: {
            type: ['string', 'null'],
            enum: ['RED', 'GREEN', 'BLUE', null],
            description: 'A colour.\n- RED: Like blood.\n- GREEN\n- BLUE',
            default: 'BLUE',
          },
          legacy: { type: ['integer', 'null'], minimum: -2147483648, maximum: 2147483647, deprecated: true },
        },
        required: ['x'],
        additionalProperties: false,
      },
    });
  });

  it('lists and nested lists take one item as GraphQL does', () => {
    const schema = inputSchemaOf(
      testSchema,
      'query($points: [[Point]]) { person(points: $points) { name } }',
    );
    const points = (schema.properties as Record<string, JsonSchema>).points as JsonSchema;
    expect(accepts(points, [[{ x: 1 }], [null]])).toBe(true);
    expect(accepts(points, [{ x: 1 }])).toBe(true); // [[{x:1}]]
    expect(accepts(points, { x: 1 })).toBe(true); // [[{x:1}]]
    expect(accepts(points, [[{ y: 1 }]])).toBe(false);
  });

  it('a recursive input object is written once in $defs', () => {
    const schema = inputSchemaOf(
      testSchema,
      'query($tree: Tree, $ping: Ping) { person(tree: $tree) { name } echo(ping: $ping) }',
    );
    expect(Object.keys(schema.$defs as object).sort()).toEqual(['Ping', 'Tree']);
    const deep = {
      value: 1,
      children: [
        { value: 2, children: [{ value: 3 }] },
        { value: 4, children: [] },
      ],
    };
    expect(accepts(schema, { tree: deep })).toBe(true);
    expect(
      accepts(schema, { tree: { value: 1, children: [{ value: 2, children: [{ value: 'x' }] }] } }),
    ).toBe(false);
    expect(accepts(schema, { ping: { pong: { ping: { pong: { n: 1 } } } } })).toBe(true);
    expect(accepts(schema, { ping: { pong: { ping: { pong: { n: 'x' } } } } })).toBe(false);
  });

  it('descriptions: a root argument, else an input field the variable fills, else the type', () => {
    const schema = inputSchemaOf(
      testSchema,
      `query($n: Int, $first: Int, $near: Point) {
        things(first: $first, near: { x: $n }) { __typename }
        other: things(near: $near) { __typename }
      }`,
    );
    expect(schema.properties).toMatchObject({
      n: { description: 'Across.' },
      first: { description: 'How many at most.' },
      near: { description: 'A point on the grid.' },
    });
    const document = parse(
      'query($first: Int) { ...F } fragment F on Query { things(first: $first) { __typename } }',
    );
    expect(toolInputSchema(testSchema, operationOf(document), document).properties).toMatchObject({
      first: { description: 'How many at most.' },
    });
    const plain = toolInputSchema(testSchema, operationOf(document), document, { descriptions: false });
    expect(JSON.stringify(plain)).not.toContain('description');
  });

  it('an operation without variables takes an empty object and nothing else', () => {
    const schema = inputSchemaOf(testSchema, '{ things { __typename } }');
    expect(schema).toEqual({ type: 'object', properties: {}, additionalProperties: false });
    expect(accepts(schema, {})).toBe(true);
    expect(accepts(schema, { extra: 1 })).toBe(false);
  });

  it('custom scalars take the schema given for them', () => {
    const document = parse('query($date: Date!) { echo(date: $date) }');
    const schema = toolInputSchema(testSchema, operationOf(document), document, {
      scalars: { Date: { type: 'string', format: 'date-time' } },
    });
    expect(schema.properties).toEqual({
      date: { type: 'string', format: 'date-time', description: 'An instant, ISO 8601.' },
    });
  });
});

/**
 * Sample values for every variable type below; `undefined` stands for the argument left out.
 * Chosen to sit on each rule's edges: 32-bit bounds, 1.0 vs 1.5, an integer ID, single items for
 * lists, nulls inside and outside lists, missing and unknown fields, @oneOf with 0, 1 and 2 keys.
 */
const SAMPLES: unknown[] = [
  undefined,
  null,
  0,
  1,
  -1,
  1.5,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31),
  -(2 ** 31) - 1,
  1e20,
  true,
  false,
  '',
  'x',
  '7',
  'RED',
  'GREEN',
  'red',
  [],
  [1],
  [1, 2],
  [null],
  [1, null],
  ['RED', 'BLUE'],
  [[1], [2, 3]],
  [[1], null],
  [[null]],
  [[1], 2],
  [{ x: 1 }],
  [[{ x: 1 }], [null]],
  {},
  { x: 1 },
  { x: 1, y: 2, label: 'a', tags: ['t'], color: 'RED' },
  { x: 1, tags: 't' },
  { x: 1, tags: [null] },
  { x: null },
  { y: 2 },
  { x: 1, z: 3 },
  { x: 1.5 },
  { x: 1, color: 'PURPLE' },
  { verbose: true },
  { verbose: null, depth: null },
  { depth: 'deep' },
  { value: 1 },
  { value: 1, children: [{ value: 2, children: [{ value: 3 }] }] },
  { value: 1, children: { value: 2 } },
  { value: 1, children: [{ value: '2' }] },
  { value: 1, children: [null] },
  { id: '1' },
  { id: 1 },
  { id: 1.5 },
  { name: 'n' },
  { id: '1', name: 'n' },
  { id: null },
  { a: [1, { b: null }] },
];

const VARIABLE_TYPES = [
  'Int',
  'Int!',
  'Float',
  'Float!',
  'String',
  'String!',
  'Boolean',
  'Boolean!',
  'ID',
  'ID!',
  'Color',
  'Color!',
  'JSON',
  'JSON!',
  'Point',
  'Point!',
  'Options',
  'Tree',
  'Pick',
  'Pick!',
  '[Int]',
  '[Int!]',
  '[Int]!',
  '[Int!]!',
  '[[Int]]',
  '[[Int!]!]',
  '[Color!]',
  '[Point]',
  '[[Point]]',
  '[JSON]',
  'Int = 3',
  'Int! = 3',
  'Color! = RED',
  'Point = { x: 1 }',
  '[Int] = [1, 2]',
];

describe('toolInputSchema accepts exactly what GraphQL variable coercion accepts', () => {
  it.each(VARIABLE_TYPES)('$v: %s', (type) => {
    const document = parse(`query($v: ${type}) { __typename }`);
    const operation = operationOf(document);
    const schema = toolInputSchema(testSchema, operation, document);
    for (const value of SAMPLES) {
      const args = value === undefined ? {} : { v: value };
      const graphql = getVariableValues(testSchema, operation.variableDefinitions ?? [], args);
      expect(accepts(schema, args), `${type} with ${JSON.stringify(value)}`).toBe(
        graphql.errors === undefined,
      );
    }
  });

  const inferenceSamples = [
    { desiredDigits: 5, liabilityWaiverSigned: true },
    {
      desiredDigits: 5,
      liabilityWaiverSigned: false,
      model: 'PI_X_MINI',
      temperature: 1,
      useChainOfThought: null,
    },
    { desiredDigits: 5, liabilityWaiverSigned: true, minAccuracy: 0.9, model: null },
    { desiredDigits: 5 },
    { desiredDigits: '5', liabilityWaiverSigned: true },
    { desiredDigits: 5, liabilityWaiverSigned: 'yes' },
    { desiredDigits: 5, liabilityWaiverSigned: true, model: 'pi-x-mini' },
    { desiredDigits: 5, liabilityWaiverSigned: true, digits: 5 },
  ];
  it.each([
    'JSON',
    'JSON!',
    'NullModel',
    'PiModel!',
    'InferenceInput',
    'InferenceInput!',
    '[InferenceInput!]',
    'Float',
    'Int',
  ])('on the gateway schema, $v: %s', (type) => {
    const document = parse(`query($v: ${type}) { __typename }`);
    const operation = operationOf(document);
    const schema = toolInputSchema(gatewaySchema, operation, document);
    for (const value of [...SAMPLES, 'NULL_X_MINI', 'PI_X_4O', 'null-x-4o', ...inferenceSamples]) {
      const args = value === undefined ? {} : { v: value };
      const graphql = getVariableValues(gatewaySchema, operation.variableDefinitions ?? [], args);
      expect(accepts(schema, args), `${type} with ${JSON.stringify(value)}`).toBe(
        graphql.errors === undefined,
      );
    }
  });

  it('on the gateway schema: the built-in tools, and values an agent may send', () => {
    const samples: Record<string, Record<string, unknown>[]> = {
      is_null: [{}, { value: null }, { value: { a: [1, 'x'] } }, { model: 'NULL_X_MINI', temperature: 0.5 }],
      pi_digits: [{ digits: 3 }, { digits: '3' }, { digits: 2.5 }, { model: 'pi-x-4o' }, { sponsored: 1 }],
      pi_inference: [
        {},
        { input: { desiredDigits: 5, liabilityWaiverSigned: true } },
        { input: { desiredDigits: 5 } },
        { input: { desiredDigits: 5, liabilityWaiverSigned: true, model: 'PI_X_MINI', minAccuracy: 0.9 } },
        { input: { desiredDigits: 5, liabilityWaiverSigned: true, extra: 1 } },
        { input: null },
      ],
      health: [{}, { verbose: true }],
      budget: [{}],
      model_scores: [{}, { service: 'pi-digits' }],
    };
    for (const tool of builtInTools(gatewaySchema)) {
      const schema = toolInputSchema(gatewaySchema, tool.operation, tool.document);
      for (const args of samples[tool.name] ?? []) {
        const variables = tool.operation.variableDefinitions ?? [];
        const graphql = getVariableValues(gatewaySchema, variables, args);
        // The one difference: GraphQL ignores a variable nobody declared; the tool refuses the argument.
        const declared = Object.keys(args).every((key) =>
          variables.some((v) => v.variable.name.value === key),
        );
        expect(accepts(schema, args), `${tool.name} ${JSON.stringify(args)}`).toBe(
          declared && graphql.errors === undefined,
        );
      }
    }
  });
});

describe('toolInputSchema on the gateway schema', () => {
  it('the built-in tools take the arguments of §13', () => {
    const tools = Object.fromEntries(builtInTools(gatewaySchema).map((tool) => [tool.name, tool]));
    const argumentsOf = (name: string) => {
      const tool = tools[name];
      if (tool === undefined) throw new Error(`no tool ${name}`);
      return toolInputSchema(gatewaySchema, tool.operation, tool.document);
    };
    expect(Object.keys(tools)).toEqual([
      'is_null',
      'pi_digits',
      'pi_inference',
      'health',
      'budget',
      'model_scores',
    ]);
    const isNull = argumentsOf('is_null');
    expect(Object.keys(isNull.properties as object)).toEqual([
      'value',
      'model',
      'temperature',
      'strictMode',
      'minAccuracy',
    ]);
    expect(isNull).not.toHaveProperty('required');
    expect(isNull.properties).toMatchObject({
      value: { description: 'The value to check, any JSON. Omitted = undefined; `null` = null.' },
      model: { type: ['string', 'null'], enum: ['NULL_X_4O', 'NULL_X_MINI', 'NULL_X_OPUS', null] },
      temperature: { type: ['number', 'null'] },
      strictMode: { type: ['boolean', 'null'] },
      minAccuracy: { type: ['number', 'null'] },
    });
    expect((isNull.properties as Record<string, JsonSchema>).model?.description).toContain(
      '- NULL_X_MINI: `null-x-mini`: faster, less accurate.',
    );
    expect(Object.keys(argumentsOf('pi_digits').properties as object)).toEqual([
      'digits',
      'model',
      'temperature',
      'sponsored',
      'minAccuracy',
    ]);
    const inference = argumentsOf('pi_inference');
    expect(inference.required).toEqual(['input']);
    expect(inference.properties).toMatchObject({
      input: {
        type: 'object',
        required: ['desiredDigits', 'liabilityWaiverSigned'],
        additionalProperties: false,
        description: 'What to infer, and the signed waiver.',
      },
    });
    for (const name of ['health', 'budget', 'model_scores']) {
      expect(argumentsOf(name)).toEqual({ type: 'object', properties: {}, additionalProperties: false });
    }
  });

  it("a manifest's named query", () => {
    const document = parse(`
      query PiDigits($digits: Int! = 3, $model: PiModel, $temperature: Float) {
        pi(digits: $digits, model: $model, temperature: $temperature, sponsored: true) {
          __typename
          ... on ConstantDigits { digits correctDigits }
        }
      }`);
    const operation = operationOf(document);
    expect(toolNameOf(operation.name?.value ?? '')).toBe('pi_digits');
    const schema = toolInputSchema(gatewaySchema, operation, document);
    expect(schema).not.toHaveProperty('required');
    expect(schema.properties).toMatchObject({
      digits: { type: 'integer', default: 3, description: expect.stringContaining('Decimal places wanted') },
      model: { enum: ['PI_X_4O', 'PI_X_MINI', 'PI_X_OPUS_ALMOST_CORRECT', null] },
    });
    expect(accepts(schema, { digits: 5, model: 'PI_X_MINI' })).toBe(true);
    expect(accepts(schema, { digits: null })).toBe(false);
    expect(accepts(schema, { sponsored: false })).toBe(false);
  });
});

describe('toolOutputSchema: the selection as GraphQL runs it', () => {
  const source = `
    query Things($withOwner: Boolean!) {
      __typename
      all: things {
        __typename
        ... on Named { name }
        ... on Cat { lives owner @include(if: $withOwner) { name } }
        ...DogFields
      }
      person { ... on Person { pets { __typename name } born data favourite } name }
      skipped: named(id: 2) @skip(if: true) { name }
      kept: named(id: 3) @include(if: true) { name }
    }
    fragment DogFields on Dog { good tags }`;
  const cat = { __typename: 'Cat', name: 'Tom', lives: 9, owner: { name: 'Ann' } };
  const rootValue = {
    things: [cat, { __typename: 'Dog', name: 'Rex', good: true, tags: [['a'], []] }, { __typename: 'Rock' }],
    person: { name: 'Ann', pets: [cat], born: '2020-01-01', data: { any: [1, null] }, favourite: 'RED' },
    named: { __typename: 'Dog', name: 'Rex' },
  };
  const run = async (variables: Record<string, unknown>) => {
    const { graphql } = await import('graphql');
    const result = await graphql({ schema: testSchema, source, rootValue, variableValues: variables });
    expect(result.errors).toBeUndefined();
    return result.data;
  };

  it('keys by alias, required unless a variable decides, __typename as const, unions as anyOf', () => {
    const schema = outputSchemaOf(testSchema, source, { descriptions: false });
    expect(schema.required).toEqual(['__typename', 'all', 'person', 'kept']);
    const properties = schema.properties as Record<string, JsonSchema>;
    expect(properties.__typename).toEqual({ type: 'string', const: 'Query' });
    expect(properties).not.toHaveProperty('skipped');
    const alternatives = (properties.all as { items: JsonSchema }).items.anyOf as JsonSchema[];
    expect(alternatives.at(-1)).toEqual({ type: 'null' });
    const members = alternatives.slice(0, -1).map((m) => ({
      title: m.title,
      keys: Object.keys(m.properties as object),
      required: m.required,
    }));
    expect(members).toEqual([
      {
        title: 'Cat',
        keys: ['__typename', 'name', 'lives', 'owner'],
        required: ['__typename', 'name', 'lives'],
      },
      {
        title: 'Dog',
        keys: ['__typename', 'name', 'good', 'tags'],
        required: ['__typename', 'name', 'good', 'tags'],
      },
      { title: 'Rock', keys: ['__typename'], required: ['__typename'] },
    ]);
  });

  it.each([
    ['every-field', {}],
    ['as-graphql', { nulls: 'as-graphql' }],
    ['closed, as-graphql', { nulls: 'as-graphql', closed: true }],
  ] as const)('admits what graphql-js answers (%s)', async (_name, options) => {
    const schema = outputSchemaOf(testSchema, source, options);
    expect(accepts(schema, await run({ withOwner: true }))).toBe(true);
    expect(accepts(schema, await run({ withOwner: false }))).toBe(true);
  });

  it('every field admits null by default; as-graphql only the nullable ones', () => {
    const failed = {
      __typename: 'Query',
      all: [{ __typename: 'Cat', name: null, lives: null }],
      person: null,
      kept: null,
    };
    expect(accepts(outputSchemaOf(testSchema, source), failed)).toBe(true);
    expect(accepts(outputSchemaOf(testSchema, source, { nulls: 'as-graphql' }), failed)).toBe(false);
    expect(accepts(outputSchemaOf(testSchema, source), { ...failed, all: null })).toBe(true);
  });

  it('still names the types: a wrong value, a wrong member, a missing key', () => {
    const schema = outputSchemaOf(testSchema, source);
    const good = { __typename: 'Query', all: [], person: null, kept: null };
    expect(accepts(schema, good)).toBe(true);
    expect(accepts(schema, { ...good, all: [{ __typename: 'Cat', name: 7, lives: 1 }] })).toBe(false);
    expect(accepts(schema, { ...good, all: [{ __typename: 'Cow' }] })).toBe(false);
    expect(accepts(schema, { ...good, all: [{ __typename: 'Dog', name: 'Rex', good: true }] })).toBe(false);
    expect(
      accepts(schema, { ...good, person: { name: 'A', pets: [], born: 1, data: 1, favourite: 'PINK' } }),
    ).toBe(false);
    const { kept: _kept, ...withoutKept } = good;
    expect(accepts(schema, withoutKept)).toBe(false);
  });

  it('the fields members share are written once beside their anyOf (not when closed)', () => {
    const source = '{ named(id: 1) { __typename name ... on Cat { lives } ... on Person { born } } }';
    const named = (
      outputSchemaOf(testSchema, source, { descriptions: false }).properties as Record<string, JsonSchema>
    ).named;
    expect(named).toEqual({
      type: ['object', 'null'],
      properties: { name: { type: ['string', 'null'] } },
      required: ['name'],
      anyOf: [
        {
          title: 'Cat',
          properties: { __typename: { type: 'string', const: 'Cat' }, lives: { type: ['integer', 'null'] } },
          required: ['__typename', 'lives'],
        },
        {
          title: 'Dog',
          properties: { __typename: { type: 'string', const: 'Dog' } },
          required: ['__typename'],
        },
        {
          title: 'Person',
          properties: { __typename: { type: 'string', const: 'Person' }, born: {} },
          required: ['__typename', 'born'],
        },
      ],
    });
    const schema = outputSchemaOf(testSchema, source);
    expect(accepts(schema, { named: null })).toBe(true);
    expect(accepts(schema, { named: { __typename: 'Cat', name: 'Tom', lives: 9 } })).toBe(true);
    expect(accepts(schema, { named: { __typename: 'Cat', name: 'Tom' } })).toBe(false);
    expect(accepts(schema, { named: { __typename: 'Dog', name: 1 } })).toBe(false);
    expect(accepts(schema, { named: { __typename: 'Cow', name: 'x' } })).toBe(false);
    const closed = (outputSchemaOf(testSchema, source, { closed: true }).properties as { named: JsonSchema })
      .named;
    expect(
      (closed.anyOf as JsonSchema[]).slice(0, -1).map((member) => Object.keys(member.properties as object)),
    ).toEqual([
      ['__typename', 'name', 'lives'],
      ['__typename', 'name'],
      ['__typename', 'name', 'born'],
    ]);
  });

  it('members that look alike are one alternative; closed refuses what was not selected', () => {
    const schema = outputSchemaOf(testSchema, '{ named(id: 1) { name } }', { closed: true });
    expect((schema.properties as Record<string, JsonSchema>).named).toEqual({
      type: ['object', 'null'],
      properties: { name: { type: ['string', 'null'] } },
      required: ['name'],
      additionalProperties: false,
    });
    expect(accepts(schema, { named: { name: 'x', lives: 9 } })).toBe(false);
  });

  it('descriptions of fields and enum values, and introspection fields', async () => {
    const schema = outputSchemaOf(testSchema, '{ things(first: 1) { __typename } person { favourite } }');
    expect((schema.properties as Record<string, JsonSchema>).things?.description).toBe('Finds things.');
    expect(JSON.stringify(schema)).toContain('- RED: Like blood.');
    const introspection =
      '{ __schema { queryType { name } types { name kind } } __type(name: "Cat") { name fields { name } } }';
    const { graphql } = await import('graphql');
    const result = await graphql({ schema: testSchema, source: introspection });
    expect(
      accepts(outputSchemaOf(testSchema, introspection, { nulls: 'as-graphql', closed: true }), result.data),
    ).toBe(true);
  });
});

describe('the built-in tools', () => {
  const tools = builtInTools(gatewaySchema);

  it('are the six of §13, each a valid operation of the gateway schema', () => {
    expect(tools.map((tool) => tool.name)).toEqual(
      BUILT_IN_TOOL_SPECS.map((spec) => toolNameOf(spec.operationName)),
    );
    expect(tools.map((tool) => tool.name)).toEqual([
      'is_null',
      'pi_digits',
      'pi_inference',
      'health',
      'budget',
      'model_scores',
    ]);
    for (const tool of tools) {
      expect(validate(gatewaySchema, tool.document), tool.name).toEqual([]);
      expect(tool.operation.name?.value).toBe(tool.operationName);
    }
  });

  it("select every field of their root field's answer (every member, with __typename)", () => {
    const objectsSeen = new Set<string>();
    /** Every object schema with a title has exactly the fields of that GraphQL type. */
    const check = (schema: unknown): void => {
      if (typeof schema !== 'object' || schema === null) return;
      const s = schema as Record<string, unknown>;
      if (typeof s.title === 'string' && s.properties !== undefined) {
        const type = gatewaySchema.getType(s.title) as { getFields(): Record<string, unknown> };
        const keys = Object.keys(s.properties as object).filter((key) => key !== '__typename');
        expect(keys.sort(), s.title).toEqual(Object.keys(type.getFields()).sort());
        objectsSeen.add(s.title);
      }
      for (const value of Object.values(s)) {
        if (Array.isArray(value)) value.forEach(check);
        else check(value);
      }
    };
    for (const tool of tools) {
      // closed: each member whole (not factored), so that its keys can be read off.
      const schema = toolOutputSchema(gatewaySchema, tool.document, tool.operation, { closed: true });
      expect(Object.keys(schema.properties as object)).toEqual([tool.rootField]);
      check(schema);
    }
    for (const union of ['NullCheckResult', 'PiResult', 'InferenceResult']) {
      const members = gatewaySchema.getPossibleTypes(gatewaySchema.getType(union) as never);
      for (const member of members) expect(objectsSeen, member.name).toContain(member.name);
    }
    for (const name of [
      'PhilosophicalAnalysis',
      'Health',
      'NullCheckHealth',
      'PiHealth',
      'Budget',
      'BudgetWindow',
      'ModelScore',
    ]) {
      expect(objectsSeen).toContain(name);
    }
  });

  it('fullSelection: nothing for a leaf, and a cycle is cut where it re-enters a type', async () => {
    const { print, GraphQLString } = await import('graphql');
    expect(fullSelection(testSchema, GraphQLString)).toBeUndefined();
    const person = fullSelection(testSchema, testSchema.getType('Person') as never);
    const text = print(person as never);
    expect(text).toContain('... on Cat');
    expect(text).not.toContain('owner'); // Cat.owner is a Person: inside Person, not again
    expect(validate(testSchema, parse(`{ person ${text} }`))).toEqual([]);
  });
});
