/**
 * The architecture as the code has it.
 *
 * Who imports whom, read from the import statements of every .ts file under src/ (TypeScript's own
 * scanner: static, type-only, re-exports and dynamic imports alike): the gateway (src/gateway/) and
 * the reference services (src/services/) reach each other over HTTP only, so neither imports the
 * other, nor the process entry (src/main.ts, src/config.ts, src/embedded-services.ts) that joins
 * them; src/shared/ and src/digits/ are libraries both may use, and import neither.
 *
 * The gateway's layers (`LAYERS`, the one declaration of their order; docs/architecture.md describes
 * it and must list the same): a file imports from its own layer and the layers below, never from one
 * above, type-only imports included; every file of the gateway is in a layer. And no file imports
 * itself back through others (a circle between files, in any folder of src/: Tarjan's strongly
 * connected components over the file graph).
 *
 * And docs/architecture.md's table says what each folder of the gateway holds: it must name every
 * folder under src/gateway/ and every file directly in it, and nothing that is not there. A folder
 * added, moved or removed without the table following fails here.
 *
 * ARCHITECTURE_ROOT=<a checkout> runs the same checks on another tree (how the checks were shown to
 * fail on the tree before the layers were put in order).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = process.env.ARCHITECTURE_ROOT ?? fileURLToPath(new URL('../..', import.meta.url));
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

/**
 * The gateway's layers, low → high. Each names folders (ending in `/`) and files, relative to src/; a
 * file is in the layer of the longest name that holds it (so `gateway/http/fast-path/` is a layer
 * below the rest of `gateway/http/`). A file may import from its own layer and those below it.
 */
const LAYERS: ReadonlyArray<readonly string[]> = [
  ['shared/'],
  ['digits/'],
  [
    'gateway/errors.ts',
    'gateway/token-verifier.ts',
    'gateway/identity.ts',
    'gateway/redaction.ts',
    'gateway/budget-settings.ts',
    'gateway/settings.ts',
  ],
  ['gateway/operation/'],
  ['gateway/upstream/'],
  ['gateway/observability/'],
  ['gateway/shared-state/'],
  ['gateway/models/'],
  ['gateway/cost/'],
  ['gateway/schema/'],
  ['gateway/request/'],
  ['gateway/delivery/'],
  ['gateway/plugins/'],
  ['gateway/http/fast-path/'],
  ['gateway/http/'],
  ['gateway/mcp/'],
  ['gateway/app.ts', 'gateway/cluster.ts'],
];

/** A path of src/ (`gateway/cost/fallback.ts`) as the layers name it. */
const srcPath = (path: string) => relative(src, path).split(sep).join('/');

/** The layer `path` (absolute) is in (its index in LAYERS, and the name that holds it); undefined: none. */
function layerOf(path: string): { layer: number; name: string } | undefined {
  const at = srcPath(path);
  let found: { layer: number; name: string } | undefined;
  LAYERS.forEach((names, layer) => {
    for (const name of names)
      if ((name.endsWith('/') ? at.startsWith(name) : at === name) && name.length > (found?.name.length ?? 0))
        found = { layer, name };
  });
  return found;
}

/** What `file` (its text given) imports from src/: each specifier and the file it names (`.js` is the `.ts` file). */
function importsOf(file: string, text: string): Array<{ specifier: string; target: string }> {
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map(({ fileName }) => fileName)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => ({ specifier, target: resolve(dirname(file), specifier).replace(/\.js$/, '.ts') }));
}

/**
 * The imports of `file` (its text given) that run against the layer order, each as
 * `<file> -> <specifier> (<its layer> is below <the target's>)`.
 */
function upwardImportsOf(file: string, text: string): string[] {
  const from = layerOf(file);
  if (from === undefined) return [];
  return importsOf(file, text).flatMap(({ specifier, target }) => {
    const to = layerOf(target);
    return to === undefined || to.layer <= from.layer
      ? []
      : [`${relative(root, file)} -> ${specifier} (${from.name} is below ${to.name})`];
  });
}

/**
 * The circles of a graph (file → the files it imports): its strongly connected components of more
 * than one file, and the files that import themselves, each sorted (Tarjan's algorithm).
 */
function circlesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (node: string) => {
    const at = index.size;
    index.set(node, at);
    low.set(node, at);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) as number, index.get(next) as number));
      }
    }
    if (low.get(node) !== at) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || graph.get(node)?.includes(node)) circles.push(component.sort());
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return circles;
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

describe("the gateway's layers, and no circle between files", () => {
  it('the check sees imports against the order (type-only, re-exports, dynamic, import types) and allows its own layer and those below', () => {
    const file = join(src, 'gateway/models/router.ts');
    const text = [
      "import { a } from '../cost/fallback.js';",
      "import type { B } from '../schema/context.js';",
      "export { c } from '../http/fast-path/fast-path.js';",
      "const d = await import('../app.js');",
      "type J = import('../request/pipeline.js').RequestState;",
      "import { e } from './scoreboard.js';",
      "import type { F } from '../observability/metrics.js';",
      "import { g } from '../errors.js';",
      "import { h } from '../../shared/logger.js';",
      "import { i } from 'graphql';",
    ].join('\n');
    expect(upwardImportsOf(file, text)).toEqual([
      'src/gateway/models/router.ts -> ../cost/fallback.js (gateway/models/ is below gateway/cost/)',
      'src/gateway/models/router.ts -> ../schema/context.js (gateway/models/ is below gateway/schema/)',
      'src/gateway/models/router.ts -> ../http/fast-path/fast-path.js (gateway/models/ is below gateway/http/fast-path/)',
      'src/gateway/models/router.ts -> ../app.js (gateway/models/ is below gateway/app.ts)',
      'src/gateway/models/router.ts -> ../request/pipeline.js (gateway/models/ is below gateway/request/)',
    ]);
    // A folder named as a layer of its own is below the rest of its parent folder.
    const fastPath = join(src, 'gateway/http/fast-path/x.ts');
    expect(upwardImportsOf(fastPath, "import type { Y } from '../yoga.js';")).toEqual([
      'src/gateway/http/fast-path/x.ts -> ../yoga.js (gateway/http/fast-path/ is below gateway/http/)',
    ]);
    expect(
      upwardImportsOf(join(src, 'gateway/http/server.ts'), "import { y } from './fast-path/x.js';"),
    ).toEqual([]);
    expect(
      upwardImportsOf(join(src, 'gateway/settings.ts'), "import { p } from './cost/budget-policy.js';"),
    ).toEqual([
      'src/gateway/settings.ts -> ./cost/budget-policy.js (gateway/settings.ts is below gateway/cost/)',
    ]);
  });

  it('the check finds every circle (two files, three, a file importing itself) and none in a diamond', () => {
    const graph = new Map<string, string[]>([
      ['a', ['b']],
      ['b', ['a', 'c']],
      ['c', ['d']],
      ['d', ['e']],
      ['e', ['c']],
      ['f', ['f']],
      ['g', ['h', 'i']],
      ['h', ['j']],
      ['i', ['j']],
      ['j', []],
    ]);
    expect(circlesOf(graph)).toEqual([['c', 'd', 'e'], ['a', 'b'], ['f']]);
    const diamond = new Map([
      ['g', ['h', 'i']],
      ['h', ['j']],
      ['i', ['j']],
    ]);
    expect(circlesOf(diamond)).toEqual([]);
  });

  const files = tsFiles(src);
  const texts = new Map(files.map((file) => [file, readFileSync(file, 'utf8')]));

  it('every file of the gateway is in a layer', () => {
    const ofGateway = files.filter((file) => file.startsWith(gateway + sep));
    expect(ofGateway.length).toBeGreaterThan(50);
    expect(
      ofGateway.filter((file) => layerOf(file) === undefined).map((file) => relative(root, file)),
    ).toEqual([]);
  });

  it('no import runs against the layer order, type-only imports included', () => {
    expect(files.flatMap((file) => upwardImportsOf(file, texts.get(file) as string))).toEqual([]);
  });

  it('no file imports itself back through others', () => {
    const graph = new Map(
      files.map((file) => [
        relative(root, file),
        importsOf(file, texts.get(file) as string).map(({ target }) => relative(root, target)),
      ]),
    );
    expect(circlesOf(graph)).toEqual([]);
  });

  it('docs/architecture.md lists the same layers, in the same order', () => {
    const section = readme.slice(readme.indexOf('\n## Layers'));
    const listed = section
      .slice(0, section.indexOf('\n\n', section.indexOf('\n1. ')))
      .split('\n')
      .filter((line) => /^\d+\. /.test(line))
      .map((line) => [...line.matchAll(/`src\/([^`]+)`/g)].map((m) => m[1]));
    expect(listed).toEqual(LAYERS.map((names) => [...names]));
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
