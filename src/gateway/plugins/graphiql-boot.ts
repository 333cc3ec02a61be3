/**
 * The JavaScript of GraphiQL's boot script (graphiql-boot.browser.ts, browser code), which
 * use-graphiql.ts serves as `<endpoint>/assets/boot.js`.
 *
 * In dist/ (`npm run build`, `npm start`) tsc has compiled it beside this module (tsconfig.browser.json,
 * the second half of the build): it is read as it is, and production needs no TypeScript (typescript
 * is a development dependency). From the sources (tsx, vitest) there is only the .ts file: it is
 * transpiled here, with the compiler options of tsconfig.browser.json, so that development serves what
 * production serves. That path needs no build step of its own and cannot serve a stale file; it costs
 * loading typescript once, on the first GraphiQL request of the process.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** The boot script (graphiql-boot.browser.ts), compiled beside this module by the build. */
const BOOT_COMPILED = new URL('./graphiql-boot.browser.js', import.meta.url);
const BOOT_SOURCE = new URL('./graphiql-boot.browser.ts', import.meta.url);

/** The boot script's JavaScript: the compiled file when there is one, else its source transpiled. */
export async function bootScriptSource(): Promise<string> {
  try {
    return await readFile(BOOT_COMPILED, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const source = await readFile(BOOT_SOURCE, 'utf8').catch((error: unknown) => {
    throw new Error(
      `GraphiQL's boot script is missing: no ${fileURLToPath(BOOT_COMPILED)} (npm run build compiles it), and no source`,
      { cause: error },
    );
  });
  const ts = (await import('typescript')).default;
  const configPath = fileURLToPath(new URL('../../../tsconfig.browser.json', import.meta.url));
  const config = ts.getParsedCommandLineOfConfigFile(configPath, undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  });
  if (config === undefined) throw new Error(`cannot read ${configPath}`);
  return ts.transpileModule(source, { compilerOptions: config.options, fileName: fileURLToPath(BOOT_SOURCE) })
    .outputText;
}
