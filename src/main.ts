/**
 * `npm start`: the CLI. Answers `--help`, reads the settings (one line and exit 1 when one is bad),
 * builds the gateway with `createApp` (in front of the embedded services when no upstream URL is set:
 * src/embedded-services.ts) and listens; with WORKERS > 1 it is the cluster primary instead.
 * SIGTERM or SIGINT: stop accepting, answer what was accepted, exit by itself within
 * SHUTDOWN_TIMEOUT_MS plus a few seconds, whatever happens (even with closed stdout and stderr).
 */
// First: stops an unsupported Node with one line before anything else loads.
import './shared/runtime-check.js';
import { type AppConfig, ConfigError, helpText, loadConfig } from './config.js';
import { createLogger, flushLogger, logFormatFor } from './shared/logger.js';
import { armShutdownWatchdog } from './shared/shutdown-watchdog.js';

/**
 * The gateway's modules, loaded only after `--help`, the settings and the signal handlers are dealt
 * with: they take a while to load on a busy machine, and a SIGTERM in that window must still end in a
 * graceful exit, `--help` must answer at once, and a bad setting must fail fast.
 */
async function loadRuntime() {
  const [entry, cluster] = await Promise.all([
    import('./embedded-services.js'),
    import('./gateway/cluster.js'),
  ]);
  return { ...entry, ...cluster };
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${helpText()}\n`);
    return;
  }
  let config: AppConfig;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw error;
  }
  const logger = createLogger({
    level: config.logs.logLevel,
    format: logFormatFor(config.logs.logFormat, config.process.nodeEnv),
  });

  // Installed before anything slow: a signal during the start shuts down as soon as the gateway is up.
  let stop: ((signal: NodeJS.Signals) => void) | undefined;
  let signalledEarly: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    // Whatever happens from here (a hung drain, a blocked main thread), the process ends in time.
    armShutdownWatchdog({
      timeoutMs: config.process.shutdownTimeoutMs,
      onTimeout: () => logger.error('shutdown did not finish in time; exiting'),
    });
    if (stop) stop(signal);
    else signalledEarly ??= signal;
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // pino's base fields already carry pid and hostname.
  logger.info('starting');

  const rt = await loadRuntime();
  if (rt.isClusterPrimary(config)) {
    // WORKERS > 1: this process only forks and supervises gateway workers, with its own signal handling.
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    const code = await rt.runCluster(config, logger).catch((error: unknown) => {
      logger.fatal({ code: (error as { code?: unknown }).code }, `cannot start: ${String(error)}`);
      return 1;
    });
    await flushLogger(logger);
    process.exit(code);
  }

  let app: Awaited<ReturnType<typeof rt.startGateway>>;
  let url: string;
  try {
    app = await rt.startGateway(config, { logger });
    try {
      url = await app.listen();
    } catch (error) {
      // Nothing may keep a process that failed to start alive (e.g. EADDRINUSE).
      await app.close();
      throw error;
    }
  } catch (error) {
    // One clear line (e.g. EADDRINUSE), not a stack trace.
    const message = error instanceof Error ? error.message : String(error);
    logger.fatal({ code: (error as { code?: unknown }).code }, `cannot start: ${message}`);
    await flushLogger(logger);
    process.exitCode = 1;
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    return;
  }

  let stopping = false;
  stop = (signal) => {
    // A service manager may signal the whole process group: the second signal must not cut the drain short.
    if (stopping) return;
    stopping = true;
    logger.info({ reason: signal }, 'shutting down: no new connections, draining');
    app.close().then(
      ({ timedOut, inFlight }) => {
        if (timedOut) logger.warn({ inFlight }, 'shutdown timeout reached; remaining connections closed');
        logger.info('shutdown complete');
        // Every line written before exiting (bounded: a reader that stopped reading cannot hold it).
        flushLogger(logger).then(() => process.exit(0));
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  logger.info({ url }, `gateway listening on ${url}`);
  if (signalledEarly) stop(signalledEarly);
}

await main(process.argv.slice(2));
