/**
 * docs/architecture.md's table says what each folder of the gateway holds: it must name every
 * folder under src/gateway/ and every file directly in it, and nothing that is not there. A folder
 * added, moved or removed without the table following fails here.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const gateway = join(root, 'src/gateway');
const readme = readFileSync(join(root, 'docs/architecture.md'), 'utf8');
const table = readme.slice(
  readme.indexOf('| where | what | decisions |'),
  readme.indexOf('### Libraries, and why'),
);

/** The first cell of each row: the paths it names. */
const rows = table
  .split('\n')
  .filter((line) => line.startsWith('| `'))
  .map((line) => line.split('|')[1] as string);

describe("docs/architecture.md's table", () => {
  const entries = readdirSync(gateway);
  const folders = entries.filter((e) => statSync(join(gateway, e)).isDirectory()).sort();
  const files = entries.filter((e) => e.endsWith('.ts')).sort();

  it('names every folder of src/gateway/, one row each, and no folder that is not there', () => {
    const named = rows.flatMap((cell) => [...cell.matchAll(/`src\/gateway\/([a-z-]+)\/`/g)].map((m) => m[1]));
    expect([...new Set(named)].sort()).toEqual(folders);
  });

  it('names every file directly in src/gateway/, and no file that is not there', () => {
    const top = rows.find((cell) => cell.includes('`src/gateway/` ('));
    const named = [...(top ?? '').matchAll(/`([a-z-]+\.ts)`/g)].map((m) => m[1]);
    expect(named.sort()).toEqual(files);
  });

  it('names only paths that exist', () => {
    for (const cell of rows)
      for (const [, path] of cell.matchAll(/`((?:src|scripts)\/[^`]*)`/g))
        expect(statSync(join(root, path as string), { throwIfNoEntry: false }), path).toBeDefined();
  });
});
