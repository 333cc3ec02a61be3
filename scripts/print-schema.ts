/**
 * Prints the Pothos schema to schema.graphql at the repository root (sorted, so the diff of a schema
 * change shows only what changed), and the Federation 2 subgraph's SDL to subgraph.graphql (exactly
 * what `_service { sdl }` answers with FEDERATION=true: a router composes it). `--check` exits 1 when
 * a committed file is stale instead.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { graphqlSync, lexicographicSortSchema, printSchema } from 'graphql';
import { schema, subgraphSchema } from '../src/gateway/schema/index.js';

export const SCHEMA_FILE = fileURLToPath(new URL('../schema.graphql', import.meta.url));
export const SUBGRAPH_FILE = fileURLToPath(new URL('../subgraph.graphql', import.meta.url));

/** The SDL exactly as schema.graphql must contain it. */
export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}

/** The SDL exactly as subgraph.graphql must contain it: the subgraph's own `_service { sdl }`. */
export function printedSubgraph(): string {
  const result = graphqlSync({ schema: subgraphSchema(), source: '{ _service { sdl } }' });
  const sdl = (result.data as { _service?: { sdl?: unknown } } | null | undefined)?._service?.sdl;
  if (typeof sdl !== 'string') throw new Error(`_service { sdl } failed: ${JSON.stringify(result.errors)}`);
  return `${sdl}\n`;
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  for (const [file, name, sdl] of [
    [SCHEMA_FILE, 'schema.graphql', printedSchema()],
    [SUBGRAPH_FILE, 'subgraph.graphql', printedSubgraph()],
  ] as const) {
    if (process.argv.includes('--check')) {
      let current = '';
      try {
        current = readFileSync(file, 'utf8');
      } catch {
        // missing counts as stale
      }
      if (current !== sdl) {
        process.stderr.write(`${name} is stale: run \`npm run schema:print\`\n`);
        process.exitCode = 1;
      }
    } else {
      writeFileSync(file, sdl);
      process.stdout.write(`wrote ${file}\n`);
    }
  }
}
