/**
 * `npm run services`: the two reference services on NULL_PORT and PI_PORT (docs/contract.md), without
 * the gateway. Bad configuration: one line on stderr, exit 1. SIGTERM/SIGINT: stop accepting, answer
 * what was accepted, exit by itself (forced after SHUTDOWN_TIMEOUT_MS).
 */
// First: stops an unsupported Node with one line before anything else loads.
import '../shared/runtime-check.js';
import { sharedDigitEngine } from '../digits/digit-engine.js';
import { createLogger, logFormatFor } from '../shared/logger.js';
import { ConfigError, loadSettings, type SettingsValues } from '../shared/settings.js';
import { armShutdownWatchdog } from '../shared/shutdown-watchdog.js';
import {
  servicesHelpText,
  servicesOptionsFromSettings,
  servicesCliSettings as settings,
} from './settings.js';
import { startServices } from './start-services.js';

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(`${servicesHelpText()}\n`);
    return;
  }
  let config: SettingsValues<typeof settings>;
  try {
    config = loadSettings(settings);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const logger = createLogger({
    level: config.logs.logLevel,
    format: logFormatFor(config.logs.logFormat, config.process.nodeEnv),
  });
  const running = await startServices({
    ...servicesOptionsFromSettings(config),
    host: config.process.host,
    nullPort: config.services.nullPort,
    piPort: config.services.piPort,
    logger,
    logRequests: config.logs.logLevel === 'debug' || config.logs.logLevel === 'trace',
  });
  logger.info({ url: running.nullCheckUrl }, `null-check service listening on ${running.nullCheckUrl}`);
  logger.info({ url: running.piDigitsUrl }, `pi-digits service listening on ${running.piDigitsUrl}`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    // The timer below needs a free main thread; the watchdog does not.
    armShutdownWatchdog({ timeoutMs: config.process.shutdownTimeoutMs });
    logger.info({ signal }, 'shutting down: no new connections, finishing accepted requests');
    // Forced exit if in-flight requests take too long; unref'd so it never keeps the process alive.
    setTimeout(() => {
      logger.warn('shutdown timeout reached, exiting');
      process.exit(1);
    }, config.process.shutdownTimeoutMs).unref();
    running
      .close()
      .then(() => sharedDigitEngine().close())
      .then(() => logger.info('stopped'))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'error while shutting down');
        process.exitCode = 1;
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  // Startup failure (e.g. port in use): one line, no stack.
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`services failed to start: ${message}\n`);
  process.exit(1);
});
