/**
 * The CLI and the only place that listens: read the configuration, start the embedded reference
 * services when no upstream URLs are given, serve the gateway, and shut down gracefully.
 */
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { type AppConfig, ConfigError, helpText, loadConfig } from './config.js';
import type { RunningServices } from './services/start-services.js';
import { createLogger, flushLogger, type Logger, logFormatFor } from './shared/logger.js';
import { armShutdownWatchdog } from './shared/shutdown-watchdog.js';

/**
 * The gateway's modules, loaded only after `--help`, the configuration and the signal handlers are
 * dealt with: they take seconds to load on a busy machine, and a SIGTERM in that window must still
 * end in a graceful exit, `--help` must answer at once, and a bad setting must fail fast.
 */
async function loadRuntime() {
  const [digits, cluster, server, observability, services, servicesSettings, upstream, yoga] =
    await Promise.all([
      import('./digits/digit-engine.js'),
      import('./gateway/http/cluster-primary.js'),
      import('./gateway/http/gateway-server.js'),
      import('./gateway/observability/create-observability.js'),
      import('./services/start-services.js'),
      import('./services/settings.js'),
      import('./gateway/upstream/create-upstream-clients.js'),
      import('./gateway/yoga.js'),
    ]);
  return {
    ...digits,
    ...cluster,
    ...server,
    ...observability,
    ...services,
    ...servicesSettings,
    ...upstream,
    ...yoga,
  };
}
type Runtime = Awaited<ReturnType<typeof loadRuntime>>;

/** A started gateway: what `main` and the tests that run it as a process need to stop it. */
interface RunningGateway {
  url: string;
  server: Server;
  /** Stop accepting, let in-flight requests finish (up to the configured timeout), release everything. */
  shutdown(reason: string): Promise<void>;
}

/** Starts everything the configuration asks for. Throws ConfigError-free errors only on real faults. */
async function startGateway(rt: Runtime, config: AppConfig, logger: Logger): Promise<RunningGateway> {
  let services: RunningServices | undefined;
  let nullBaseUrl = config.upstreams.nullBaseUrl;
  let piBaseUrl = config.upstreams.piBaseUrl;
  if (nullBaseUrl === undefined || piBaseUrl === undefined) {
    // The embedded default: both reference services in this process, on free loopback ports.
    services = await rt.startServices({
      ...rt.servicesOptionsFromSettings(config),
      host: '127.0.0.1',
      nullPort: 0,
      piPort: 0,
    });
    nullBaseUrl ??= services.nullCheckUrl;
    piBaseUrl ??= services.piDigitsUrl;
    logger.info(
      {
        nullCheck: config.upstreams.nullBaseUrl ? 'external' : 'embedded',
        piDigits: config.upstreams.piBaseUrl ? 'external' : 'embedded',
      },
      'embedded reference services started',
    );
  }

  const digits = rt.sharedDigitEngine();
  // Created before the clients: their per-attempt `onCall` reports feed this gateway's metrics.
  const observability = rt.createObservability({ config, logger });
  const clients = rt.createUpstreamClients({
    nullBaseUrl,
    piBaseUrl,
    authHeader: config.upstreams.authHeader,
    timeoutMs: config.upstreams.timeoutMs,
    connections: config.upstreams.connections,
    healthTimeoutMs: config.upstreams.healthTimeoutMs,
    breakerThreshold: config.resilience.breakerThreshold,
    breakerHalfOpenAfterMs: config.resilience.breakerHalfOpenAfterMs,
    retryMaxAttempts: config.resilience.retryMaxAttempts,
    logger,
    onCall: observability.onCall,
  });
  const yoga = rt.createGateway({ clients, digits, config, logger, observability });

  // GraphQL POSTs with a JSON body take the lean adapter over the same Yoga instance (src/http/).
  const server = rt.createGatewayServer({ yoga, config, logger });

  // Track sockets and in-flight requests so shutdown can drain exactly what was accepted.
  const sockets = new Set<Socket>();
  const unanswered = new Set<ServerResponse>();
  let inFlight = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (_req, res) => {
    inFlight++;
    // Once shutting down, every answer closes its connection (Node does not do that by itself after
    // close()): the client's next request opens a new connection, which is refused, instead of
    // keeping a kept-alive socket, and so the drain, busy until the timeout.
    if (closing) res.setHeader('connection', 'close');
    else unanswered.add(res);
    res.once('close', () => {
      unanswered.delete(res);
      inFlight--;
      if (inFlight === 0) drained?.();
    });
  });

  const listen = (host: string) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.server.port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  try {
    try {
      await listen(config.process.host);
    } catch (error) {
      // '::' (the default) needs IPv6; a host without it still gets a gateway on every IPv4 address.
      if (config.process.host !== '::' || (error as NodeJS.ErrnoException).code !== 'EAFNOSUPPORT')
        throw error;
      await listen('0.0.0.0');
    }
  } catch (error) {
    // Nothing may keep a process that failed to start alive (e.g. EADDRINUSE): the embedded services
    // are listening already.
    await Promise.allSettled([clients.close(), services?.close(), digits.close()]);
    throw error;
  }
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.server.port;
  const shownHost =
    config.process.host === '::' || config.process.host === '0.0.0.0' ? 'localhost' : config.process.host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}/graphql`;

  let shuttingDown: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> => {
    // A service manager may signal the whole process group (npm and node both get it): the second
    // signal must not cut the drain short, so shutdown is idempotent.
    shuttingDown ??= (async () => {
      logger.info({ reason, inFlight }, 'shutting down: no new connections, draining in-flight requests');
      closing = true;
      for (const res of unanswered) if (!res.headersSent) res.setHeader('connection', 'close');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Answers from now on carry `connection: close` (see the 'request' listener); sockets that
      // are idle, or become idle between requests, are closed by the sweep.
      const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
      const allDone =
        inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => (drained = resolve));
      const timedOut = await Promise.race([
        allDone.then(() => false),
        new Promise<boolean>((resolve) =>
          setTimeout(() => resolve(true), config.process.shutdownTimeoutMs).unref(),
        ),
      ]);
      clearInterval(idleSweep);
      if (timedOut) logger.warn({ inFlight }, 'shutdown timeout reached; closing remaining connections');
      server.closeAllConnections();
      for (const socket of sockets) socket.destroy();
      await closed;
      await clients.close();
      if (services) await services.close();
      await digits.close();
      logger.info('shutdown complete');
    })();
    return shuttingDown;
  };

  return { url, server, shutdown };
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

  // Installed before anything slow: a signal during the start (loading modules, starting the embedded
  // services) shuts down gracefully as soon as the gateway is up, instead of killing it mid-start.
  let gateway: RunningGateway | undefined;
  let signalledEarly: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    // Whatever happens from here (a hung drain, a blocked main thread), the process ends in time.
    armShutdownWatchdog({
      timeoutMs: config.process.shutdownTimeoutMs,
      onTimeout: () => logger.error('shutdown did not finish in time; exiting'),
    });
    // `gateway` is set only after `stop` below exists.
    if (gateway) stop(gateway, signal);
    else signalledEarly ??= signal;
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  logger.info({ pid: process.pid }, 'starting');

  const rt = await loadRuntime();
  if (rt.isClusterPrimary(config)) {
    // WORKERS > 1: this process only forks and supervises gateway workers (src/http/cluster-primary.ts),
    // which installs its own signal handling.
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    const code = await rt.runClusterPrimary(config, logger).catch((error: unknown) => {
      logger.fatal({ code: (error as { code?: unknown }).code }, `cannot start: ${String(error)}`);
      return 1;
    });
    logger.flush?.();
    process.exit(code);
  }

  const stop = (running: RunningGateway, signal: NodeJS.Signals) => {
    // The drain is bounded by SHUTDOWN_TIMEOUT_MS; the watchdog armed in onSignal bounds the rest.
    running.shutdown(signal).then(
      // Every line written before exiting (bounded: a reader that stopped reading cannot hold it).
      () => flushLogger(logger).then(() => process.exit(0)),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };

  try {
    gateway = await startGateway(rt, config, logger);
  } catch (error) {
    // One clear line (e.g. EADDRINUSE), not a stack trace.
    const message = error instanceof Error ? error.message : String(error);
    logger.fatal({ code: (error as { code?: unknown }).code }, `cannot start: ${message}`);
    logger.flush?.();
    process.exitCode = 1;
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    return;
  }
  logger.info({ url: gateway.url }, `gateway listening on ${gateway.url}`);
  if (signalledEarly) stop(gateway, signalledEarly);
}

await main(process.argv.slice(2));
