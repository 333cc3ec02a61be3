/**
 * The architecture as the code has it.
 *
 * Who imports whom, read from the import statements of every .ts file under src/ (TypeScript's own
 * scanner: static, type-only, re-exports and dynamic imports alike): the gateway (src/gateway/) and
 * the reference services (src/services/) reach each other over HTTP only, so neither imports the
 * other, nor the process entry (src/main.ts, src/config.ts, src/embedded-services.ts) that joins
 * them; src/shared/ and src/digits/ are libraries both may use, and import neither.
 *
 * And docs/architecture.md's table says what each folder of the gateway holds: it must name every
 * folder under src/gateway/ and every file directly in it, and nothing that is not there. A folder
 * added, moved or removed without the table following fails here.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const gateway = join(root, 'src/gateway');
const readme = readFileSync(join(root, 'docs/architecture.md'), 'utf8');
const table = readme.slice(readme.indexOf('| where | what | decisions |'));

/** The first cell of each row: the paths it names. */
const rows = table
  .split('\n')
  .filter((line) => line.startsWith('| `'))
  .map((line) => line.split('|')[1] as string);

const src = join(root, 'src');

/** The folders of src/ whose imports are bounded, and the folders each may import from. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  gateway: ['gateway', 'shared', 'digits'],
  services: ['services', 'shared', 'digits'],
  shared: ['shared'],
  digits: ['digits', 'shared'],
};

/** Every .ts file below `dir`. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts'))
    .map((path) => join(dir, path));
}

/** The first folder of src/ a path lies in (`gateway`, `services`, …), or its file name at src/'s top. */
const areaOf = (path: string) => relative(src, path).split(sep)[0] as string;

/**
 * The imports of `file` (its text given) that leave what its folder may import: each as
 * `<file> -> <specifier>`. Only relative specifiers can reach another folder of src/; packages and
 * node: builtins are not checked.
 */
function crossingsOf(file: string, text: string): string[] {
  const allowed = MAY_IMPORT[areaOf(file)];
  if (allowed === undefined) return [];
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map(({ fileName }) => fileName)
    .filter((specifier) => specifier.startsWith('.'))
    .filter((specifier) => {
      const target = resolve(dirname(file), specifier);
      return !target.startsWith(src + sep) || !allowed.includes(areaOf(target));
    })
    .map((specifier) => `${relative(root, file)} -> ${specifier}`);
}

describe('imports between the gateway, the reference services and the libraries', () => {
  it('the check sees every form of import, type-only and dynamic ones included', () => {
    const file = join(src, 'gateway/request/example.ts');
    const text = [
      "import { a } from '../../services/shared/api-keys.js';",
      "import type { B } from '../../config.js';",
      "export { c } from '../../services/settings.js';",
      "const d = await import('../../embedded-services.js');",
      "import { e } from '../../shared/logger.js';",
      "import { f } from '../cost/budget-policy.js';",
      "import { g } from 'graphql';",
    ].join('\n');
    expect(crossingsOf(file, text)).toEqual([
      'src/gateway/request/example.ts -> ../../services/shared/api-keys.js',
      'src/gateway/request/example.ts -> ../../config.js',
      'src/gateway/request/example.ts -> ../../services/settings.js',
      'src/gateway/request/example.ts -> ../../embedded-services.js',
    ]);
    expect(crossingsOf(join(src, 'services/x.ts'), "import { h } from '../gateway/identity.js';")).toEqual([
      'src/services/x.ts -> ../gateway/identity.js',
    ]);
  });

  it('src/gateway imports nothing of src/services nor of the process entry, and the reverse; src/shared and src/digits import neither', () => {
    const files = Object.keys(MAY_IMPORT).flatMap((area) => tsFiles(join(src, area)));
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((file) => crossingsOf(file, readFileSync(file, 'utf8')))).toEqual([]);
  });
});

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
