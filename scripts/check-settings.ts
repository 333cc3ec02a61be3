/**
 * Validates the settings of `npm start` (`gateway`) or `npm run services` (`services`) from the
 * environment, starting nothing. scripts/start.mjs runs it (through tsx, from the sources) before a
 * build, so a bad setting is answered at once instead of after the compiler. Exit 1 with the CLI's own
 * one-line error; exit 0 and no output when valid.
 */
import { loadConfig } from '../src/config.js';
import { servicesCliSettings } from '../src/services/settings.js';
import { ConfigError, loadSettings } from '../src/shared/settings.js';

const target = process.argv[2];
try {
  if (target === 'gateway') loadConfig(process.env);
  else if (target === 'services') loadSettings(servicesCliSettings, process.env);
  else throw new Error(`usage: check-settings.ts gateway|services (got ${String(target)})`);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exitCode = 1;
}
