/**
 * The README's configuration table, generated from the settings in src/config.ts (one source of truth).
 * `npm run config:table` rewrites the block between the config-table markers of README.md;
 * test/unit/readme-config.test.ts fails when it is stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { replaceConfigTable } from '../src/readme-config.js';

const path = new URL('../README.md', import.meta.url);
writeFileSync(path, replaceConfigTable(readFileSync(path, 'utf8')));
process.stdout.write('README.md configuration table updated\n');
