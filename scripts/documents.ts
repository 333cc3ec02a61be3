/**
 * `npm run documents -- <manifest>`: every trusted document's price. For each entry of a
 * trusted-documents manifest (TRUSTED_DOCUMENTS, e.g. generated/client/persisted-documents.json):
 * its id, its operation(s), the upstream calls it can make (from the same planner the gateway's
 * limits and cost checks use), and its estimated cost at the current price table, as a range where
 * its variables change it (every enum value, Int from 1 to MAX_DIGITS, both Booleans; literal
 * arguments are what they are).
 *
 * A manifest that does not load (not JSON, a wrong hash, an invalid document) is one line on stderr
 * and exit code 1, as at the gateway's start.
 */
import {
  type DocumentNode,
  type GraphQLInputType,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  Kind,
  parse,
  typeFromAST,
  validate,
} from 'graphql';
import { loadConfig } from '../src/config.js';
import { listPrice } from '../src/gateway/cost/price-table.js';
import { modelCalls, planOperation } from '../src/gateway/operation/operation-plan.js';
import { loadManifest } from '../src/gateway/request/trusted-documents.js';
import { schema } from '../src/gateway/schema/index.js';

/** At most this many combinations of variable values are priced per operation. */
const MAX_COMBINATIONS = 4096;

/** Candidate values of one input type: the extremes that move a price, and every enum value. */
function candidates(type: GraphQLInputType, maxDigits: number, depth = 0): unknown[] {
  if (isNonNullType(type)) return candidates(type.ofType, maxDigits, depth);
  if (isListType(type)) return [candidates(type.ofType, maxDigits, depth).slice(0, 1)];
  const named = getNamedType(type);
  if (isEnumType(named)) return named.getValues().map((v) => v.name);
  if (isInputObjectType(named)) {
    if (depth > 3) return [{}];
    let objects: Array<Record<string, unknown>> = [{}];
    for (const field of Object.values(named.getFields())) {
      const values = candidates(field.type, maxDigits, depth + 1);
      objects = objects.flatMap((o) => values.map((v) => ({ ...o, [field.name]: v })));
      if (objects.length > MAX_COMBINATIONS) objects = objects.slice(0, MAX_COMBINATIONS);
    }
    return objects;
  }
  switch (named.name) {
    case 'Int':
      return [1, maxDigits];
    case 'Boolean':
      return [false, true];
    case 'Float':
      return [0];
    case 'String':
    case 'ID':
      return ['x'];
    default:
      return [null];
  }
}

const usd = (value: number) => (value === 0 ? '$0' : `$${value.toFixed(value < 0.01 ? 6 : 4)}`);

function describe(document: DocumentNode, maxDigits: number): string[] {
  const lines: string[] = [];
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    const name = definition.name?.value ?? '(anonymous)';
    const plan = planOperation(schema, document, definition.name?.value);
    const fields = plan.fields.map((f) => f.field.name);
    let combinations: Array<Record<string, unknown>> = [{}];
    for (const variable of definition.variableDefinitions ?? []) {
      const type = typeFromAST(schema, variable.type as never) as GraphQLInputType | undefined;
      const values = type === undefined ? [null] : candidates(type, maxDigits);
      combinations = combinations.flatMap((c) =>
        values.map((v) => ({ ...c, [variable.variable.name.value]: v })),
      );
      if (combinations.length > MAX_COMBINATIONS) combinations = combinations.slice(0, MAX_COMBINATIONS);
    }
    let low = Number.POSITIVE_INFINITY;
    let high = 0;
    for (const variables of combinations) {
      const total = modelCalls(plan, variables).reduce((sum, call) => sum + listPrice(call), 0);
      low = Math.min(low, total);
      high = Math.max(high, total);
    }
    if (!Number.isFinite(low)) low = 0;
    const price = low === high ? usd(low) : `${usd(low)} to ${usd(high)}`;
    lines.push(
      `  ${name}: ${plan.calls} upstream call${plan.calls === 1 ? '' : 's'} at most` +
        `${fields.length > 0 ? ` (${[...new Set(fields)].join(', ')})` : ''}; estimated ${price}`,
    );
  }
  return lines;
}

function main(argv: string[]): number {
  const file = argv[0];
  if (file === undefined || file === '--help' || file === '-h') {
    process.stdout.write('usage: npm run documents -- <trusted-documents manifest.json>\n');
    return file === undefined ? 1 : 0;
  }
  const maxDigits = loadConfig(process.env).limits.maxDigits;
  let manifest: ReadonlyMap<string, string>;
  try {
    manifest = loadManifest(file, (document) => validate(schema, document));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 1;
  }
  process.stdout.write(
    `${manifest.size} trusted document${manifest.size === 1 ? '' : 's'} in ${file}; prices from the table (src/gateway/cost/price-table.ts), MAX_DIGITS=${maxDigits}\n`,
  );
  for (const [id, text] of manifest) {
    process.stdout.write(`sha256:${id}\n`);
    for (const line of describe(parse(text), maxDigits)) process.stdout.write(`${line}\n`);
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
