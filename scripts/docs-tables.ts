/**
 * The tables the docs show, generated from the code (one source of truth each):
 * - docs/configuration.md's table, from the settings groups (src/config.ts);
 * - docs/contract.md's error codes, from src/gateway/errors.ts.
 * `npm run docs:tables` rewrites both blocks; test/unit/docs-tables.test.ts fails when one is stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { markdownTable } from '../src/config.js';
import { ERROR_CODES } from '../src/gateway/errors.js';

/** `text` with the block between `<!-- name:start -->` and `<!-- name:end -->` replaced by `block`. */
function replaceBlock(text: string, name: string, block: string): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`no ${name} markers`);
  return `${text.slice(0, from + start.length)}\n${block}\n${text.slice(to)}`;
}

/** The error codes as a Markdown table. */
export function errorTable(): string {
  const rows = Object.entries(ERROR_CODES).map(
    ([code, { field, when }]) =>
      `| \`${code}\` | ${field ? 'field' : 'request'} | ${when.replace(/\|/g, '\\|')} |`,
  );
  return ['| code | level | when |', '|---|---|---|', ...rows].join('\n');
}

export const replaceConfigTable = (readme: string) => replaceBlock(readme, 'config-table', markdownTable());
export const replaceErrorTable = (contract: string) => replaceBlock(contract, 'error-codes', errorTable());

export const CONFIGURATION = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));
export const CONTRACT = fileURLToPath(new URL('../docs/contract.md', import.meta.url));

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  writeFileSync(CONFIGURATION, replaceConfigTable(readFileSync(CONFIGURATION, 'utf8')));
  writeFileSync(CONTRACT, replaceErrorTable(readFileSync(CONTRACT, 'utf8')));
  process.stdout.write('docs/configuration.md and docs/contract.md error codes updated\n');
}
