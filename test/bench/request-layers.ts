/**
 * `npm run bench:layers`: what the GraphQL layers of one request cost, each in isolation, in one
 * process (no network): parsing the request's JSON, the prepared-operation lookup, and for a new
 * document its parse, validation (every rule Yoga applies: graphql-js's and graphql-armor's) and plan;
 * execution by graphql-js and by graphql-jit (resolvers answered at once by a stub loader, so only the
 * executor is measured); and serialising the answer. For every document of test/operations.
 *
 * Run it on a quiet machine; each figure is the median of 5 rounds of `--iterations` calls (default
 * 5000) after a warm-up. The figures are per request, in µs.
 */
import { readFile } from 'node:fs/promises';
import { type DocumentNode, execute, getOperationAST, parse, validate } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';
import { loadConfig } from '../../src/config.js';
import { createDigitEngine } from '../../src/digits/digit-engine.js';
import { createApp } from '../../src/gateway/app.js';
import { planOperation } from '../../src/gateway/operation/operation-plan.js';
import { schema } from '../../src/gateway/schema/index.js';
import type { PiResponse } from '../../src/gateway/upstream/types.js';
import { createLogger } from '../../src/shared/logger.js';
import { nullVerdict } from '../support/upstream-bodies.js';

const argument = (name: string, fallback: number) => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(process.argv[index + 1]);
};
const ITERATIONS = argument('iterations', 5000);

/** Median over 5 rounds of µs per call; `fn` may return a promise (awaited). */
async function measure(fn: () => unknown): Promise<number> {
  for (let i = 0; i < Math.min(ITERATIONS, 1000); i++) await fn();
  const rounds: number[] = [];
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < ITERATIONS; i++) {
      const value = fn();
      if (value instanceof Promise) await value;
    }
    rounds.push(Number(process.hrtime.bigint() - start) / 1000 / ITERATIONS);
  }
  rounds.sort((a, b) => a - b);
  return rounds[2] as number;
}

async function main(): Promise<void> {
  // Upstreams that are never called: only the schema, Yoga's rules and the planner are used.
  const config = loadConfig({
    NODE_ENV: 'production',
    NULL_BASE_URL: 'http://127.0.0.1:9',
    PI_BASE_URL: 'http://127.0.0.1:9',
    NULL_API_VERSION: 'v1',
    PI_API_VERSION: 'v1',
  });
  const digits = createDigitEngine({ useWorker: false });
  const app = await createApp(config, {
    logger: createLogger({ level: 'silent' }),
    digits,
    defaultMetrics: false,
  });
  const enveloped = app.yoga.getEnveloped({});
  const piAnswer = (digitsWanted: number): PiResponse =>
    ({
      digits: `3.${'1415926535'.repeat(Math.ceil(digitsWanted / 10)).slice(0, digitsWanted)}`,
      precision: digitsWanted,
      confidence: 0.99,
      model: 'pi-1',
      inferenceTimeMs: 3,
      gpuCostUsd: 0.01,
      sponsoredBy: null,
      disclaimer: null,
      raw: {},
    }) as unknown as PiResponse;
  const context = () => ({
    operation: { apiKey: undefined },
    loaders: {
      nullCheck: { load: async () => nullVerdict },
      pi: { load: async (request: { digits: number }) => piAnswer(request.digits) },
    },
    digits,
    limits: { maxDigits: 10_000, maxCompareDigits: 10_000, maxJsonDepth: 32, maxJsonBytes: 65_536 },
  });

  const cases: Array<{ file: string; name: string; variables: Record<string, unknown> }> = [
    { file: 'is-null.graphql', name: 'IsNull', variables: { value: 'bench-1' } },
    { file: 'pi.graphql', name: 'Pi', variables: { digits: 10 } },
  ];
  const rows: string[][] = [];
  for (const c of cases) {
    const text = await readFile(new URL(`../operations/${c.file}`, import.meta.url), 'utf8');
    const body = JSON.stringify({ query: text, operationName: c.name, variables: c.variables });
    const document: DocumentNode = parse(text);
    if (getOperationAST(document, c.name) === null) throw new Error(`${c.name} not in ${c.file}`);
    const errors = enveloped.validate(enveloped.schema, document);
    if (errors.length > 0) throw new Error(`${c.name}: ${errors[0]?.message}`);
    const compiled = compileQuery(schema, document, c.name);
    if (!isCompiledQuery(compiled)) throw new Error(`${c.name}: graphql-jit cannot compile it`);
    const interpreted = await execute({
      schema,
      document,
      contextValue: context(),
      variableValues: c.variables,
      operationName: c.name,
    });
    const jitted = await compiled.query(undefined, context(), c.variables);
    if (JSON.stringify(jitted.data) !== JSON.stringify(interpreted.data) || interpreted.errors !== undefined)
      throw new Error(`${c.name}: graphql-jit and graphql-js disagree`);
    // The fast path keys prepared operations by query text: a Map lookup stands for its LRU lookup.
    const byText = new Map([[text, document]]);
    const figures = {
      'request JSON.parse': await measure(() => JSON.parse(body)),
      'lookup by text (Map)': await measure(() => byText.get(text)),
      parse: await measure(() => parse(text)),
      // Yoga caches verdicts per document: a new document each call, less its parse, is the real cost.
      'validate (Yoga rules)':
        (await measure(() => enveloped.validate(enveloped.schema, parse(text)))) -
        (await measure(() => parse(text))),
      'validate (graphql-js rules only)':
        (await measure(() => validate(schema, parse(text)))) - (await measure(() => parse(text))),
      plan: await measure(() => planOperation(schema, document, c.name)),
      'execute graphql-js': await measure(() =>
        execute({
          schema,
          document,
          contextValue: context(),
          variableValues: c.variables,
          operationName: c.name,
        }),
      ),
      'execute graphql-jit': await measure(() => compiled.query(undefined, context(), c.variables)),
      'JSON.stringify answer': await measure(() => JSON.stringify(interpreted)),
    };
    for (const [layer, us] of Object.entries(figures)) rows.push([c.name, layer, us.toFixed(1)]);
  }
  await app.close();
  console.log(`node ${process.version}, ${ITERATIONS} calls x 5 rounds, median round, µs per call`);
  console.log('| operation | layer | µs |\n|---|---|---|');
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
}

await main();
