/** Keeps the README's configuration table equal to the settings table in src/config.ts. */
import { markdownTable } from './config.js';

const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';

/** `readme` with the block between the config-table markers replaced by the current table. */
export function replaceConfigTable(readme: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error('README.md has no config-table markers');
  return `${readme.slice(0, start + START.length)}\n${markdownTable()}\n${readme.slice(end)}`;
}
