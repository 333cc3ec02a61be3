/**
 * WORKERS > 1: the primary process of a node:cluster gateway. It forks WORKERS gateway processes that
 * share the port, each given `workerEnv` besides the primary's environment: the process entry starts
 * the embedded reference services once (src/embedded-services.ts) and passes their URLs there, so no
 * worker starts services of its own. Each worker is a complete gateway (its own pools, breakers,
 * cache, metrics).
 *
 * Lifecycle: the primary reports the gateway listening once every worker listens; a worker that
 * fails before listening (a bad port, say) stops the whole start with exit code 1; a worker that dies
 * later is replaced (at most once a second). SIGTERM/SIGINT: every worker is asked to shut down (each
 * drains its own in-flight requests, SHUTDOWN_TIMEOUT_MS), then `onStopped` runs (the entry stops
 * the services) and the primary exits. A signal sent to the whole process group reaches the workers
 * too; their shutdown is idempotent.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from '../shared/logger.js';
import { armShutdownWatchdog } from '../shared/shutdown-watchdog.js';
import type { GatewayConfig } from './settings.js';

/** How long after a worker's death it is replaced, at the earliest. */
const RESPAWN_DELAY_MS = 1000;

export interface ClusterPrimaryOptions {
  /** Environment variables each worker gets besides the primary's (the upstream URLs in use). @default none */
  workerEnv?: Record<string, string> | undefined;
  /** Run once every worker has exited, before the primary reports its shutdown complete. @default nothing */
  onStopped?: (() => Promise<void>) | undefined;
}

/**
 * Runs the primary until it is told to stop. Resolves with the process exit code.
 * Call only when `cluster.isPrimary` and `config.server.workers > 1`.
 */
export async function runClusterPrimary(
  config: Pick<GatewayConfig, 'process' | 'server'>,
  logger: Logger,
  options: ClusterPrimaryOptions = {},
): Promise<number> {
  const env = options.workerEnv ?? {};

  let stopping = false;
  let started = false;
  const workers = new Set<Worker>();
  let resolveExit!: (code: number) => void;
  const exited = new Promise<number>((resolve) => {
    resolveExit = resolve;
  });

  const fork = (): Worker => {
    const worker = cluster.fork(env);
    workers.add(worker);
    worker.once('exit', (code, signal) => {
      workers.delete(worker);
      if (stopping) {
        if (workers.size === 0) resolveExit(0);
        return;
      }
      if (!started) {
        // A worker that cannot start (bad port, bad setting) will not start on a retry either.
        logger.fatal({ code, signal }, 'a gateway worker failed to start; stopping');
        void stop('worker failed to start', 1);
        return;
      }
      logger.error({ workerPid: worker.process.pid, code, signal }, 'gateway worker died; replacing it');
      setTimeout(() => {
        if (!stopping) fork();
      }, RESPAWN_DELAY_MS).unref();
    });
    return worker;
  };

  let resolveFinished!: (code: number) => void;
  const finished = new Promise<number>((resolve) => {
    resolveFinished = resolve;
  });
  const stop = async (reason: string, code = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason, workers: workers.size }, 'stopping gateway workers');
    if (workers.size === 0) resolveExit(code);
    for (const worker of workers) worker.process.kill('SIGTERM');
    // Each worker bounds its own drain; this bounds the wait for all of them.
    const force = setTimeout(() => {
      for (const worker of workers) worker.process.kill('SIGKILL');
    }, config.process.shutdownTimeoutMs + 5000);
    force.unref();
    await exited;
    clearTimeout(force);
    await options.onStopped?.();
    logger.info('shutdown complete');
    resolveFinished(code);
  };

  const onSignal = (signal: NodeJS.Signals) => {
    // The primary too ends in time whatever happens (its workers are killed first, at the same bound).
    armShutdownWatchdog({ timeoutMs: config.process.shutdownTimeoutMs, marginMs: 8000 });
    void stop(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const listening = Array.from(
    { length: config.server.workers },
    () => new Promise<void>((resolve) => fork().once('listening', () => resolve())),
  );
  await Promise.race([Promise.all(listening), exited]);
  if (!stopping) {
    started = true;
    logger.info(
      { workers: config.server.workers, port: config.server.port },
      `gateway listening with ${config.server.workers} workers`,
    );
  }
  return finished;
}

/** True in a process that should run the cluster primary instead of a gateway. */
export function isClusterPrimary(config: Pick<GatewayConfig, 'server'>): boolean {
  return config.server.workers > 1 && cluster.isPrimary;
}
