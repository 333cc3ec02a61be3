/**
 * The compiled serializer of a prepared operation (src/gateway/request/result-serializer.ts) against
 * the standard encode step (Yoga's processRegularResult, JSON.stringify of the result): status,
 * headers and body equal byte for byte, for every operation of test/operations and a table of
 * documents (aliases, merged fields, fragments on every union member), on results made by graphql-js
 * and by graphql-jit from seeded random values (strings with escapes, U+2028/2029, lone surrogates,
 * `</script>`, numbers at the edges, JSON scalar values), with the extensions the operation report
 * writes, and on results the serializer must leave to the standard path (errors, `extensions.http`).
 * The fast path's own answers against Yoga's: integration/fast-path-equivalence.test.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import {
  buildSchema,
  type DocumentNode,
  type ExecutionResult,
  execute,
  GraphQLError,
  type GraphQLFieldResolver,
  type GraphQLOutputType,
  getNamedType,
  getNullableType,
  isAbstractType,
  isEnumType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  parse,
  printSchema,
  validate,
} from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';
import { describe, expect, it } from 'vitest';
import { createRequestPipeline, type RequestPipelineOptions } from '../../src/gateway/request/pipeline.js';
import {
  compileDataSerializer,
  createResultSerializer,
  type ResultSerializer,
} from '../../src/gateway/request/result-serializer.js';
import { schema as gatewaySchema } from '../../src/gateway/schema/index.js';

/** The gateway's schema without its resolvers: every field resolves to seeded random values below. */
const schema = buildSchema(printSchema(gatewaySchema));

/** mulberry32: a small seeded generator, so a failure repeats. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRINGS = [
  '',
  'a',
  'null-x-4o',
  'quote " and backslash \\ inside',
  'line\nbreak\ttab\r\u0000\u001f\u007f',
  'separators \u2028 and \u2029',
  'lone high \ud800 surrogate',
  'lone low \udfff surrogate',
  'pair 😀 and 𝜋 π ∞ é',
  '</script><script>alert(1)</script>',
  "<!-- & ' > <",
  'x'.repeat(41),
  'y'.repeat(42),
  `${'z'.repeat(60)}"\\`,
  `long ${'w'.repeat(6000)}`,
  `long with escape ${'v'.repeat(6000)}\n`,
];
const FLOATS = [
  0,
  -0,
  1,
  -1,
  0.5,
  0.1 + 0.2,
  1e21,
  1e-7,
  5e-324,
  Number.MAX_VALUE,
  -1.7976931348623157e308,
  123456.789,
];
const INTS = [0, 1, -1, 2147483647, -2147483648, 42];

function valueMaker(rand: () => number) {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(rand() * items.length)] as T;
  const json = (depth: number): unknown => {
    const kind = Math.floor(rand() * (depth > 2 ? 5 : 7));
    switch (kind) {
      case 0:
        return null;
      case 1:
        return rand() < 0.5;
      case 2:
        return pick(FLOATS);
      case 3:
        return pick(STRINGS);
      case 4:
        return Math.floor(rand() * 1000);
      case 5:
        return Array.from({ length: Math.floor(rand() * 4) }, () => json(depth + 1));
      default: {
        const object: Record<string, unknown> = {};
        for (let i = Math.floor(rand() * 4); i > 0; i--) object[pick(STRINGS).slice(0, 12)] = json(depth + 1);
        return object;
      }
    }
  };
  const leaf = (type: GraphQLOutputType): unknown => {
    const named = getNamedType(type);
    if (isEnumType(named)) return pick(named.getValues()).value;
    switch (named.name) {
      case 'Int':
        return pick(INTS);
      case 'Float':
        return pick(FLOATS);
      case 'String':
      case 'ID':
        return pick(STRINGS);
      case 'Boolean':
        return rand() < 0.5;
      default:
        return json(0);
    }
  };
  const randomValue = (type: GraphQLOutputType, depth: number): unknown => {
    if (!isNonNullType(type) && rand() < 0.15) return null;
    const nullable = getNullableType(type) as GraphQLOutputType;
    if (isListType(nullable))
      return Array.from({ length: depth > 3 ? 0 : Math.floor(rand() * 3) }, () =>
        randomValue(nullable.ofType as GraphQLOutputType, depth + 1),
      );
    if (isObjectType(nullable) || isAbstractType(nullable)) return {};
    return leaf(nullable);
  };
  return { randomValue };
}

/** Resolvers for every field of the schema and type resolvers for every abstract type, drawing from `rand`. */
function installResolvers(rand: () => number, failures: { rate: number }): void {
  const { randomValue } = valueMaker(rand);
  const resolve: GraphQLFieldResolver<unknown, unknown> = (_source, _args, _context, info) => {
    if (rand() < failures.rate) throw new Error('a field failed');
    return randomValue(info.returnType, info.path.key === undefined ? 0 : pathDepth(info.path));
  };
  for (const type of Object.values(schema.getTypeMap())) {
    if (type.name.startsWith('__')) continue;
    if (isObjectType(type)) for (const field of Object.values(type.getFields())) field.resolve = resolve;
    if (isAbstractType(type)) {
      const members = schema.getPossibleTypes(type);
      type.resolveType = () => (members[Math.floor(rand() * members.length)] as { name: string }).name;
    }
  }
}
const pathDepth = (path: { prev: unknown } | undefined): number => {
  let depth = 0;
  for (let at = path; at !== undefined; at = at.prev as typeof path) depth++;
  return depth;
};

/** The standard encode step and the one with a serializer: the pipeline's own `encode`. */
const pipeline = createRequestPipeline({} as unknown as RequestPipelineOptions);

const operationsDir = new URL('../operations/', import.meta.url);
const operationFiles = readdirSync(operationsDir).filter((file) => file.endsWith('.graphql'));

/** Documents beyond test/operations: the shapes a client can write. */
const CRAFTED: Record<string, string> = {
  aliasesAndMerging: `query Q($v: JSON) {
    second: isNull(value: $v) { __typename ... on NullCheck { correct model } }
    first: isNull(value: $v) { ... on NullCheck { model correct confidence } __typename }
    health { status pi { reachable } pi { status reachable } }
    again: health { nullCheck { status } }
  }`,
  everyMemberOwnOrder: `query Q($v: JSON) {
    isNull(value: $v) {
      ... on NullVerdict { isNull model __typename }
      ... on MaybeVerdict { answer model __typename }
      ... on ExistentialVerdict { musing raw model __typename }
    }
  }`,
  nestedFragments: `
    fragment A on NullCheck { correct ...B }
    fragment B on NullCheck { model confidence }
    query Q($v: JSON) { isNull(value: $v) { __typename ...A ...B ... on NullCheck { ...A modelName } } }`,
  anonymous: `{ health { status nullCheck { reachable latencyMs } } }`,
  fastPathTable: `query IsNull($value: JSON) { isNull(value: $value) { __typename ... on NullCheck { actuallyNull correct confidence model modelName sponsoredBy } ... on NullVerdict { isNull } ... on MaybeVerdict { answer } ... on ExistentialVerdict { musing raw } } }`,
};

interface Prepared {
  name: string;
  document: DocumentNode;
  operationName: string | undefined;
}
const prepared: Prepared[] = [];
// The files share fragments (models.graphql spreads pi.graphql's), as codegen reads them: one document.
const operationsDocument = parse(
  operationFiles.map((file) => readFileSync(new URL(file, operationsDir), 'utf8')).join('\n'),
);
for (const definition of operationsDocument.definitions)
  if (definition.kind === Kind.OPERATION_DEFINITION && definition.operation === 'query')
    prepared.push({
      name: `test/operations ${definition.name?.value}`,
      document: operationsDocument,
      operationName: definition.name?.value,
    });
for (const [name, text] of Object.entries(CRAFTED)) {
  const document = parse(text);
  const operation = document.definitions.find(
    (definition) => definition.kind === Kind.OPERATION_DEFINITION,
  ) as OperationDefinitionNode;
  prepared.push({ name, document, operationName: operation.name?.value });
}

/** The extensions as the operation report writes them (operation-report.ts), drawn at random. */
function extensionsOf(rand: () => number): Record<string, unknown> | undefined {
  const extensions: Record<string, unknown> = {};
  if (rand() < 0.3) extensions.sponsoredBy = ['Acme "Null" Corp \u2028', 'Pi </script> Ltd'];
  if (rand() < 0.4) extensions.cache = { hits: Math.floor(rand() * 3), misses: Math.floor(rand() * 3) };
  if (rand() < 0.7) {
    const cost: Record<string, unknown> = { gpuCostUsd: 0.0042, upstreamCalls: 1, cacheHits: 0 };
    if (rand() < 0.5) cost.estimatedCostUsd = 0.1 + 0.2;
    if (rand() < 0.3) cost.fallbacks = [{ from: 'NULL_X_4O', to: 'NULL_MINI', reason: 'budget' }];
    if (rand() < 0.3) cost.routing = [{ field: 'pi', model: 'pi-1', accuracyLowerBound: 0.97 }];
    extensions.cost = cost;
  }
  return Object.keys(extensions).length === 0 ? undefined : extensions;
}

const MEDIA_TYPES = ['application/json', 'application/graphql-response+json'] as const;

/** Encodes `result` both ways; returns whether the serializer wrote it. */
function compare(result: ExecutionResult, serialize: ResultSerializer): boolean {
  const mediaType = MEDIA_TYPES[result.errors === undefined ? 0 : 1];
  const standard = pipeline.encode(result, mediaType);
  const fast = pipeline.encode(result, mediaType, serialize);
  expect(fast).toEqual(standard);
  expect(fast.body).toBe(standard.body);
  return serialize(result) !== undefined;
}

/** `serialize` compiled at once (no waiting for a second result). */
const compiledSerializer = (p: Prepared): ResultSerializer =>
  createResultSerializer({ schema, document: p.document, operationName: p.operationName, compileAfter: 0 });

describe('result serializer', () => {
  it('covers every query of test/operations and validates the crafted documents', () => {
    expect(prepared.length).toBeGreaterThanOrEqual(operationFiles.length + Object.keys(CRAFTED).length);
    for (const p of prepared) expect(validate(schema, p.document), p.name).toEqual([]);
  });

  it('compiles a serializer for every operation of test/operations', () => {
    for (const p of prepared)
      expect(compileDataSerializer(schema, p.document, p.operationName), p.name).toBeDefined();
  });

  it('writes what Yoga writes, for graphql-js and graphql-jit results of seeded random values', async () => {
    const rand = random(35);
    const failures = { rate: 0 };
    installResolvers(rand, failures);
    const members = new Set<string>();
    let written = 0;
    let fallenBack = 0;
    for (const p of prepared) {
      const serialize = compiledSerializer(p);
      const jit = compileQuery(schema, p.document, p.operationName);
      if (!isCompiledQuery(jit)) throw new Error(`${p.name}: graphql-jit cannot compile it`);
      for (let round = 0; round < 120; round++) {
        // A few rounds with failing fields: results with errors, left to the standard path.
        failures.rate = round % 10 === 9 ? 0.2 : 0;
        const variables = { value: 'x', input: { prompt: 'p' }, digits: 5, minAccuracy: 0.5 };
        const results = [
          (await execute({
            schema,
            document: p.document,
            operationName: p.operationName,
            variableValues: variables,
          })) as ExecutionResult,
          (await jit.query(undefined, {}, variables)) as ExecutionResult,
        ];
        for (const raw of results) {
          const extensions = extensionsOf(rand);
          const result =
            extensions === undefined ? raw : { ...raw, extensions: { ...raw.extensions, ...extensions } };
          for (const value of Object.values(raw.data ?? {}))
            if (typeof value === 'object' && value !== null && '__typename' in value)
              members.add(String((value as { __typename: unknown }).__typename));
          if (compare(result, serialize)) written++;
          else {
            fallenBack++;
            expect(result.errors, `${p.name}: a data result left to the standard path`).toBeDefined();
          }
        }
      }
    }
    failures.rate = 0;
    // Every union member answered, and both kinds of result seen.
    for (const member of ['NullVerdict', 'MaybeVerdict', 'ExistentialVerdict'])
      expect(members).toContain(member);
    expect(written).toBeGreaterThan(1000);
    expect(fallenBack).toBeGreaterThan(10);
  });

  it('writes a table of hand-made results as Yoga does', () => {
    const p = prepared.find((entry) => entry.name === 'fastPathTable') as Prepared;
    const serialize = compiledSerializer(p);
    const member = (typename: string, own: Record<string, unknown>) => ({
      __typename: typename,
      actuallyNull: true,
      correct: false,
      confidence: 0.25,
      model: 'NULL_X_4O',
      modelName: 'null-x-4o',
      sponsoredBy: null,
      ...own,
    });
    const table: ExecutionResult[] = [
      { data: { isNull: member('NullVerdict', { isNull: true }) } },
      { data: { isNull: member('MaybeVerdict', { answer: 'maybe \u2028 "so"' }) } },
      {
        data: {
          isNull: member('ExistentialVerdict', {
            musing: 'lone \ud83d',
            raw: { a: [1, '</script>', null, { b: -0 }] },
          }),
        },
      },
      { data: { isNull: null } },
      {
        data: { isNull: member('NullVerdict', { isNull: false }) },
        extensions: { cost: { gpuCostUsd: 1e-7, upstreamCalls: 2, cacheHits: 1 } },
      },
      { data: { isNull: member('NullVerdict', { isNull: false }) }, extensions: {} },
    ];
    for (const result of table) expect(compare(result, serialize)).toBe(true);
    // Left to the standard path: errors (even none), Yoga's internal http extension, no data, other keys.
    const error = new GraphQLError('boom', {
      path: ['isNull'],
      extensions: { code: 'UPSTREAM_UNAVAILABLE' },
    });
    const others: ExecutionResult[] = [
      { data: { isNull: null }, errors: [error] },
      { errors: [error] },
      { data: { isNull: null }, errors: [] },
      { data: { isNull: null }, extensions: { http: { status: 201 }, cost: { gpuCostUsd: 0 } } },
      { data: null },
      { extensions: { cost: {} }, data: { isNull: null } } as ExecutionResult,
    ];
    for (const result of others) expect(compare(result, serialize)).toBe(false);
  });

  it('fails the comparison when a serializer writes the wrong order', () => {
    const p = prepared.find((entry) => entry.name === 'fastPathTable') as Prepared;
    // A document selecting the same fields in another order: its serializer must not match.
    const reordered = parse(
      `query IsNull($value: JSON) { isNull(value: $value) { ... on NullCheck { correct actuallyNull confidence model modelName sponsoredBy } __typename ... on NullVerdict { isNull } } }`,
    );
    const wrong = createResultSerializer({
      schema,
      document: reordered,
      operationName: 'IsNull',
      compileAfter: 0,
    });
    const result: ExecutionResult = {
      data: {
        isNull: {
          __typename: 'NullVerdict',
          actuallyNull: true,
          correct: true,
          confidence: 1,
          model: 'M',
          modelName: 'm',
          sponsoredBy: null,
          isNull: true,
        },
      },
    };
    expect(compiledSerializer(p)(result)).toBe(JSON.stringify(result));
    expect(wrong(result)).not.toBe(JSON.stringify(result));
  });

  it('compiles nothing for an operation whose key order is not fixed ahead', () => {
    const none = [
      // Members that order the same keys differently.
      `query Q($v: JSON) { isNull(value: $v) { ... on NullVerdict { model correct } ... on MaybeVerdict { correct model } } }`,
      // @skip and @include decide at run time which keys exist.
      `query Q($v: JSON, $s: Boolean!) { isNull(value: $v) { __typename @skip(if: $s) } }`,
      `query Q($v: JSON) { isNull(value: $v) { ... on NullCheck @include(if: true) { model } } }`,
      // Introspection.
      `{ __schema { queryType { name } } }`,
    ];
    for (const text of none) {
      const document = parse(text);
      expect(validate(schema, document), text).toEqual([]);
      expect(compileDataSerializer(schema, document, undefined), text).toBeUndefined();
    }
  });

  it('leaves the first result of an operation to the standard path, and compiles at the second', () => {
    const p = prepared[0] as Prepared;
    const serialize = createResultSerializer({
      schema,
      document: p.document,
      operationName: p.operationName,
    });
    const result = { data: {} };
    expect(serialize(result)).toBeUndefined();
    expect(serialize(result)).toBe('{"data":{}}');
  });
});
