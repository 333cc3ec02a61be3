/**
 * The last guarantee of a shutdown: once a stop signal has arrived, the process ends at the latest
 * `timeoutMs + marginMs` later, whatever the graceful path is doing.
 *
 * Why a worker thread and not a timer: a timer runs on the main thread's event loop, and the hangs
 * this guards against are exactly the ones where that loop does not turn: a synchronous write to a
 * pipe nobody reads (pino's exit flush once spun on EPIPE forever), an `Atomics.wait`, a runaway
 * computation. A worker has its own thread and loop; when its time is up it sends SIGKILL to its own
 * process, which no state of the main thread can delay. The worker is unref'd, so it never keeps a
 * process alive, and it dies with the process when the graceful path exits first.
 *
 * Why armed on the first signal and not at start: signals reach only the main thread, and a worker
 * for every process's lifetime would cost memory for nothing. If the main thread is already stuck
 * when the signal comes, nothing in JavaScript can run; that is what the non-blocking logger is for.
 */
import { Worker } from 'node:worker_threads';

export interface ShutdownWatchdogOptions {
  /** How long the graceful shutdown may take (SHUTDOWN_TIMEOUT_MS). */
  timeoutMs: number;
  /**
   * Extra time for what follows the drain (closing pools, services, workers).
   * @default 5000
   */
  marginMs?: number;
  /**
   * Runs on the main thread just before the forced exit there (e.g. to log why); errors are ignored.
   * @default none
   */
  onTimeout?: () => void;
}

/** Runs in the worker (CommonJS, plain JavaScript): wait, say why on stderr if it can, then SIGKILL. */
const WATCHDOG_SOURCE = `
const { workerData } = require('node:worker_threads');
const { write } = require('node:fs');
setTimeout(() => {
  let killed = false;
  const kill = () => {
    if (killed) return;
    killed = true;
    process.kill(workerData.pid, 'SIGKILL');
  };
  // Asynchronous and not waited for beyond 200 ms: stderr may be a full pipe or closed.
  const note = Buffer.from('shutdown watchdog: still running ' + workerData.afterMs + ' ms after the stop signal; killing the process\\n');
  try { write(2, note, 0, note.length, null, kill); } catch {}
  setTimeout(kill, 200);
}, workerData.afterMs);
`;

/** The worker waits this much longer than the main-thread timer: the gentler end gets its chance. */
const WORKER_EXTRA_MS = 1000;

/** {@link ShutdownWatchdogOptions.marginMs}'s default. */
export const DEFAULT_SHUTDOWN_MARGIN_MS = 5000;

/**
 * How long after a stop signal the process is gone at the latest: what an orchestrator's grace period
 * (Kubernetes' terminationGracePeriodSeconds, compose's stop_grace_period) must exceed, plus any
 * preStop delay, so that it never kills a process still draining.
 */
export function shutdownBoundMs(timeoutMs: number, marginMs: number = DEFAULT_SHUTDOWN_MARGIN_MS): number {
  return timeoutMs + marginMs + WORKER_EXTRA_MS;
}

let armed = false;

/**
 * Arms the watchdog (idempotent: later calls do nothing). Call it where a stop signal is handled,
 * before anything that could hang.
 */
export function armShutdownWatchdog(options: ShutdownWatchdogOptions): void {
  if (armed) return;
  armed = true;
  const afterMs = options.timeoutMs + (options.marginMs ?? DEFAULT_SHUTDOWN_MARGIN_MS);
  try {
    const worker = new Worker(WATCHDOG_SOURCE, {
      eval: true,
      workerData: { pid: process.pid, afterMs: afterMs + WORKER_EXTRA_MS },
      // Not the parent's loaders (e.g. tsx): the worker runs plain JavaScript and should start fast.
      execArgv: [],
    });
    worker.unref();
    worker.on('error', () => {
      // A worker that cannot start (out of memory, thread limit): the timer below still stands.
    });
  } catch {
    // Same: fall back to the timer.
  }
  // Where the main thread is free, this is the gentler end (exit code 1, exit handlers run).
  setTimeout(() => {
    try {
      options.onTimeout?.();
    } finally {
      process.exit(1);
    }
  }, afterMs).unref();
}
