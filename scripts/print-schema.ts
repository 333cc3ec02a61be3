/**
 * Prints the Pothos schema to schema.graphql at the repository root (sorted, so the diff of a schema
 * change shows only what changed). `--check` exits 1 when the committed file is stale instead.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { lexicographicSortSchema, printSchema } from 'graphql';
import { schema } from '../src/gateway/schema/index.js';

export const SCHEMA_FILE = fileURLToPath(new URL('../schema.graphql', import.meta.url));

/** The SDL exactly as schema.graphql must contain it. */
export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const sdl = printedSchema();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(SCHEMA_FILE, 'utf8');
    } catch {
      // missing counts as stale
    }
    if (current !== sdl) {
      process.stderr.write('schema.graphql is stale: run `npm run schema:print`\n');
      process.exitCode = 1;
    }
  } else {
    writeFileSync(SCHEMA_FILE, sdl);
    process.stdout.write(`wrote ${SCHEMA_FILE}\n`);
  }
}
