/** Prints the README's configuration table from the settings in src/config.ts (one source of truth). */
import { markdownTable } from '../src/config.js';

process.stdout.write(`${markdownTable()}\n`);
