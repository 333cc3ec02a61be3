/**
 * subgraph.graphql (contract §14): the printed subgraph SDL (a stale file fails here), its `@link`, the
 * public schema inside it unchanged, the Model entity only there, and the `@cost` weights equal to the
 * price table's prices at the default arguments (a table changed without the weights fails here).
 * The subgraph served and composed: integration/federation-subgraph.test.ts, federation-router.test.ts.
 */
import { readFileSync } from 'node:fs';
import {
  type ConstDirectiveNode,
  type FieldDefinitionNode,
  isObjectType,
  Kind,
  type ObjectTypeDefinitionNode,
  parse,
  printType,
  type SchemaExtensionNode,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { printedSubgraph, SUBGRAPH_FILE } from '../../scripts/print-schema.js';
import { listPrice } from '../../src/gateway/cost/price-table.js';
import type { ModelCall } from '../../src/gateway/operation/operation-plan.js';
import { schema, subgraphSchema } from '../../src/gateway/schema/index.js';

const committed = readFileSync(SUBGRAPH_FILE, 'utf8');
const document = parse(committed);

const objectType = (name: string) =>
  document.definitions.find(
    (d): d is ObjectTypeDefinitionNode => d.kind === Kind.OBJECT_TYPE_DEFINITION && d.name.value === name,
  );
const directive = (node: { directives?: readonly ConstDirectiveNode[] | undefined }, name: string) =>
  node.directives?.find((d) => d.name.value === name);
const intArgument = (node: ConstDirectiveNode | undefined, name: string): number | undefined => {
  const value = node?.arguments?.find((a) => a.name.value === name)?.value;
  return value?.kind === Kind.INT ? Number(value.value) : undefined;
};
const isList = (field: FieldDefinitionNode) =>
  (field.type.kind === Kind.NON_NULL_TYPE ? field.type.type : field.type).kind === Kind.LIST_TYPE;

/**
 * What each root field calls at its default arguments, written out here (not read from the code): the
 * service's default model, pi and inference at the default 3 digits; nothing for the free fields.
 */
const DEFAULT_CALLS: Record<string, ModelCall[]> = {
  isNull: [{ upstream: 'null-check', kind: 'check', model: 'null-x-4o' }],
  pi: [{ upstream: 'pi-digits', kind: 'pi', model: 'pi-x-4o', digits: 3 }],
  inference: [{ upstream: 'pi-digits', kind: 'inference', model: 'pi-x-4o', digits: 3 }],
  health: [],
  budget: [],
  models: [],
};
/** One weight is 0.0001 USD, rounded up (a millionth of a weight of float noise forgiven). */
const weightOf = (calls: ModelCall[]) =>
  Math.ceil(Math.max(0, calls.reduce((usd, call) => usd + listPrice(call), 0) / 0.0001 - 1e-6));

describe('subgraph.graphql', () => {
  it('is up to date with the subgraph schema (npm run schema:print)', () => {
    expect(committed).toBe(printedSubgraph());
  });

  it('links federation v2.9 and imports @key, @cost and @listSize', () => {
    const extension = document.definitions.find(
      (d): d is SchemaExtensionNode => d.kind === Kind.SCHEMA_EXTENSION,
    );
    const link = extension && directive(extension, 'link');
    const argument = (name: string) => link?.arguments?.find((a) => a.name.value === name)?.value;
    expect(argument('url')).toMatchObject({ value: 'https://specs.apollo.dev/federation/v2.9' });
    const imports = argument('import');
    expect(imports?.kind === Kind.LIST ? imports.values.map((v) => 'value' in v && v.value) : []).toEqual([
      '@cost',
      '@key',
      '@listSize',
    ]);
  });

  it('holds the public schema unchanged, and the Model entity keyed by name only in the subgraph', () => {
    const sub = subgraphSchema();
    for (const type of Object.values(schema.getTypeMap())) {
      if (type.name.startsWith('__') || type.name === 'Query') continue;
      const there = sub.getType(type.name);
      expect(there && printType(there), type.name).toBe(printType(type));
    }
    const query = schema.getQueryType();
    const subQuery = sub.getQueryType();
    for (const [name, field] of Object.entries(query?.getFields() ?? {}))
      expect(String(subQuery?.getFields()[name]?.type), name).toBe(String(field.type));
    expect(Object.keys(subQuery?.getFields() ?? {}).sort()).toEqual(
      [...Object.keys(query?.getFields() ?? {}), '_entities', '_service'].sort(),
    );
    expect(schema.getType('Model')).toBeUndefined();
    const model = sub.getType('Model');
    expect(isObjectType(model) && Object.keys(model.getFields()).sort()).toEqual([
      'bands',
      'costWeight',
      'name',
      'priceUsd',
      'service',
    ]);
    const key = directive(objectType('Model') ?? {}, 'key');
    expect(key?.arguments?.[0]).toMatchObject({ name: { value: 'fields' }, value: { value: 'name' } });
  });

  it('weighs every root field by the price table at its default arguments: 1 = 0.0001 USD, rounded up', () => {
    const fields = objectType('Query')?.fields ?? [];
    expect(fields.map((f) => f.name.value).sort()).toEqual(Object.keys(DEFAULT_CALLS).sort());
    // The fields the estimate prices are exactly those with calls here.
    const priced = Object.values(schema.getQueryType()?.getFields() ?? {})
      .filter((f) => (f.extensions as { upstream?: { models?: unknown } }).upstream?.models !== undefined)
      .map((f) => f.name);
    expect(priced.sort()).toEqual(
      Object.keys(DEFAULT_CALLS)
        .filter((name) => (DEFAULT_CALLS[name] ?? []).length > 0)
        .sort(),
    );
    const weights = Object.fromEntries(
      fields.map((f) => [f.name.value, intArgument(directive(f, 'cost'), 'weight')]),
    );
    const expected = Object.fromEntries(
      Object.entries(DEFAULT_CALLS).map(([name, calls]) => [name, weightOf(calls)]),
    );
    expect(weights).toEqual(expected);
    // As the table stands: 0.0042, 0.003106 and 0.00028 USD.
    expect(weights).toMatchObject({ isNull: 42, pi: 32, inference: 3, health: 0 });
  });

  it('sizes the lists a root field or the entity returns (@listSize)', () => {
    const sized = (type: string) =>
      (objectType(type)?.fields ?? [])
        .filter(isList)
        .map((f) => [f.name.value, intArgument(directive(f, 'listSize'), 'assumedSize')]);
    // 6 models × 3 temperature bands; a model's 3 bands.
    expect(sized('Query')).toEqual([['models', 18]]);
    expect(sized('Model')).toEqual([['bands', 3]]);
  });
});
