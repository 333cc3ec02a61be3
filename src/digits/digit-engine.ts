/**
 * The digit engine: exact decimal digits of pi and e for the reference pi service and the gateway.
 *
 * Design, and why:
 * - Exact, never a table: pi by the Chudnovsky series, e by sum 1/k!, both by binary splitting on
 *   BigInt (`compute-pi.ts`, `compute-e.ts`). Guard digits are computed and checked, so a returned
 *   digit is never a rounding artefact.
 * - Digits never change, so the engine keeps only the LONGEST prefix computed so far per constant and
 *   answers every shorter request by slicing it (a V8 slice is O(1)). A request never recomputes a
 *   shorter prefix; when it must compute, it computes a little ahead (1.25x the cached length) so that
 *   creeping requests (1000, 1001, 1002...) do not each start a computation.
 * - Concurrent requests are coalesced: a request waits for a running computation that is at least as
 *   long instead of starting its own; a longer request starts a longer computation, which then
 *   supersedes the cache for everybody.
 * - A million digits take a second or two of pure CPU, so computations at or above `inlineBelow`
 *   decimals run in a worker thread and the event loop keeps serving; small ones (a few ms) run inline,
 *   which also keeps them from queueing behind a big computation in the worker.
 * - The worker is unref'd while idle (it never keeps a process alive) and replaced after a crash: the
 *   calls it was serving reject with a `DigitWorkerError`, the next call spawns a new worker.
 * - The worker file sits next to this one: `.js` in dist/, `.ts` under tsx and vitest, where a tiny
 *   bootstrap registers tsx in the worker first (see `typeScriptBootstrap`).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { decimalsOf } from '../shared/decimals.js';
import { computeE } from './compute-e.js';
import { computePi } from './compute-pi.js';
import { DigitWorkerError } from './digit-worker-error.js';
import type { Constant, DigitWorkerRequest, DigitWorkerResponse } from './digit-worker-protocol.js';
import { DigitsRangeError } from './digits-range-error.js';

export { computeE } from './compute-e.js';
export { computePi } from './compute-pi.js';
export { DigitWorkerError } from './digit-worker-error.js';
export type { Constant } from './digit-worker-protocol.js';
export { DigitsRangeError } from './digits-range-error.js';

/** The most decimals an engine serves unless told otherwise (the shared engine's limit). */
export const DEFAULT_MAX_DIGITS = 1_000_000;

/** Where a computation ran; reported to `onCompute`. */
export type ComputeLocation = 'inline' | 'worker';

export interface ComputeEvent {
  constant: Constant;
  /** Decimals being computed (may exceed the request: the engine computes a little ahead). */
  decimals: number;
  where: ComputeLocation;
}

export interface DigitEngineOptions {
  /** Largest number of decimals served; larger requests reject with a RangeError. @default DEFAULT_MAX_DIGITS */
  maxDigits?: number;
  /** Run big computations in a worker thread. @default true */
  useWorker?: boolean;
  /** Below this many decimals compute inline on the calling thread (fast enough not to stall). @default 5000 */
  inlineBelow?: number;
  /** Called whenever a computation starts (for metrics and tests). @default undefined */
  onCompute?: (event: ComputeEvent) => void;
  /** The worker's entry file; only tests replace it. @default the `digit-worker` next to this file */
  workerUrl?: URL;
}

export interface DigitEngine {
  /**
   * The constant truncated (not rounded) to `decimals` decimal places: digits('pi', 0) === '3',
   * digits('pi', 2) === '3.14', digits('e', 3) === '2.718'. Rejects with RangeError for
   * negative/non-integer/over maxDigits.
   */
  digits(constant: Constant, decimals: number): Promise<string>;
  /** Synchronous: the answer if that many decimals are already cached, else undefined (never computes). */
  peek(constant: Constant, decimals: number): string | undefined;
  /** Terminates the worker. */
  close(): Promise<void>;
}

/** Requests up to this many decimals compute at least this many: it costs about a millisecond. */
const MIN_COMPUTE = 1000;
/** How far ahead of the cached prefix a new computation goes. */
const GROWTH = 1.25;

interface Pending {
  resolve: (digits: string) => void;
  reject: (error: Error) => void;
}

/** One worker thread, spawned lazily, replaced after a crash. */
class DigitWorkerClient {
  readonly #url: URL;
  #worker: Worker | undefined;
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();

  constructor(url: URL) {
    this.#url = url;
  }

  compute(constant: Constant, decimals: number): Promise<string> {
    const worker = this.#worker ?? this.#spawn();
    const id = this.#nextId++;
    return new Promise<string>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      // Keep the process alive while somebody waits for an answer, not while idle.
      worker.ref();
      const request: DigitWorkerRequest = { id, constant, decimals };
      worker.postMessage(request);
    });
  }

  async close(): Promise<void> {
    const worker = this.#worker;
    if (worker === undefined) return;
    this.#fail(worker, new DigitWorkerError('the digit engine was closed while computing'));
    await worker.terminate();
  }

  #spawn(): Worker {
    const worker = this.#url.pathname.endsWith('.ts')
      ? new Worker(typeScriptBootstrap(this.#url), { eval: true, name: 'digit-engine' })
      : new Worker(this.#url, { name: 'digit-engine' });
    worker.unref();
    worker.on('message', (response: DigitWorkerResponse) => {
      const pending = this.#pending.get(response.id);
      if (pending === undefined) return;
      this.#pending.delete(response.id);
      if (this.#pending.size === 0) worker.unref();
      if (response.ok) pending.resolve(response.digits);
      else pending.reject(new DigitWorkerError(`digit computation failed: ${response.message}`));
    });
    worker.on('error', (error) => {
      this.#fail(worker, new DigitWorkerError(`digit worker crashed: ${error.message}`, { cause: error }));
    });
    worker.on('exit', (code) => {
      this.#fail(worker, new DigitWorkerError(`digit worker exited unexpectedly (code ${code})`));
    });
    this.#worker = worker;
    return worker;
  }

  /** Forget `worker` (the next call spawns a new one) and reject everything it was serving. */
  #fail(worker: Worker, error: DigitWorkerError): void {
    if (this.#worker !== worker) return;
    this.#worker = undefined;
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) p.reject(error);
    // After an 'error' event the thread may still be shutting down: make sure it goes.
    void worker.terminate().catch(() => {});
  }
}

interface Computation {
  decimals: number;
  promise: Promise<string>;
}

interface ConstantState {
  /** The longest prefix computed so far, e.g. '3.14159'. */
  longest: string | undefined;
  /** Decimals in `longest` (-1 when nothing is cached). */
  longestDecimals: number;
  /** Worker computations in flight. */
  running: Set<Computation>;
}

const compute: Record<Constant, (decimals: number) => string> = { pi: computePi, e: computeE };

function slice(value: string, decimals: number): string {
  return decimals === 0 ? value.slice(0, 1) : value.slice(0, 2 + decimals);
}

/**
 * Source of a worker that registers tsx and then imports the TypeScript worker at `url`. Needed under
 * tsx and vitest: on Node 20, `--import tsx` in a worker's execArgv registers its hooks too late for the
 * worker's own entry file ("Unknown file extension .ts"); registering through tsx's API and importing
 * afterwards works. Never used in dist/, where the worker is plain JavaScript.
 */
function typeScriptBootstrap(url: URL): string {
  // tsx/esm/api's ESM entry, read from tsx's own exports map (require.resolve would give the CJS one).
  const packageJsonPath = createRequire(import.meta.url).resolve('tsx/package.json');
  const manifest = JSON.parse(readFileSync(packageJsonPath, 'utf8')) as {
    exports: Record<string, { import: { default: string } }>;
  };
  const api = new URL(manifest.exports['./esm/api']!.import.default, pathToFileURL(packageJsonPath)).href;
  return `import(${JSON.stringify(api)}).then((tsx) => {
    tsx.register();
    return import(${JSON.stringify(url.href)});
  });`;
}

function defaultWorkerUrl(): URL {
  // `.ts` when this module runs from source (tsx, vitest), `.js` in dist/.
  const extension = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  return new URL(`./digit-worker.${extension}`, import.meta.url);
}

export function createDigitEngine(options: DigitEngineOptions = {}): DigitEngine {
  const maxDigits = options.maxDigits ?? DEFAULT_MAX_DIGITS;
  const useWorker = options.useWorker ?? true;
  const inlineBelow = options.inlineBelow ?? 5000;
  const onCompute = options.onCompute;
  if (!Number.isSafeInteger(maxDigits) || maxDigits < 0) {
    throw new RangeError(`maxDigits must be a non-negative integer, got ${maxDigits}`);
  }
  if (!(inlineBelow >= 0)) throw new RangeError(`inlineBelow must be >= 0, got ${inlineBelow}`);

  const worker = useWorker ? new DigitWorkerClient(options.workerUrl ?? defaultWorkerUrl()) : undefined;
  const states: Record<Constant, ConstantState> = {
    pi: { longest: undefined, longestDecimals: -1, running: new Set() },
    e: { longest: undefined, longestDecimals: -1, running: new Set() },
  };

  function validate(constant: unknown, decimals: unknown): asserts decimals is number {
    if (constant !== 'pi' && constant !== 'e') {
      throw new DigitsRangeError(`unknown constant ${JSON.stringify(constant)}: expected "pi" or "e"`);
    }
    if (typeof decimals !== 'number' || !Number.isInteger(decimals) || decimals < 0) {
      throw new DigitsRangeError(`decimals must be a non-negative integer, got ${String(decimals)}`);
    }
    if (decimals > maxDigits) {
      throw new DigitsRangeError(`decimals must be at most ${maxDigits}, got ${decimals}`);
    }
  }

  function remember(state: ConstantState, value: string): void {
    const decimals = decimalsOf(value);
    if (decimals > state.longestDecimals) {
      state.longest = value;
      state.longestDecimals = decimals;
    }
  }

  function peek(constant: Constant, decimals: number): string | undefined {
    if ((constant !== 'pi' && constant !== 'e') || !Number.isInteger(decimals) || decimals < 0)
      return undefined;
    const state = states[constant];
    if (state.longest === undefined || decimals > state.longestDecimals) return undefined;
    return slice(state.longest, decimals);
  }

  async function digits(constant: Constant, decimals: number): Promise<string> {
    validate(constant, decimals);
    const state = states[constant];
    const cached = peek(constant, decimals);
    if (cached !== undefined) return cached;

    // How far to compute: a little ahead of everything known or coming, never past the maximum.
    let known = state.longestDecimals;
    for (const c of state.running) known = Math.max(known, c.decimals);
    const ahead = Math.min(maxDigits, Math.max(MIN_COMPUTE, Math.ceil(known * GROWTH)));

    if (worker === undefined || decimals < inlineBelow) {
      // Inline: small enough not to stall the event loop, and it must not queue behind a big job.
      const target =
        worker === undefined
          ? Math.max(decimals, ahead)
          : Math.max(decimals, Math.min(ahead, inlineBelow - 1));
      onCompute?.({ constant, decimals: target, where: 'inline' });
      const value = compute[constant](target);
      remember(state, value);
      return slice(value, decimals);
    }

    let covering: Computation | undefined;
    for (const c of state.running) {
      if (c.decimals >= decimals && (covering === undefined || c.decimals < covering.decimals)) covering = c;
    }
    if (covering === undefined) {
      const target = Math.max(decimals, ahead);
      onCompute?.({ constant, decimals: target, where: 'worker' });
      const computation: Computation = { decimals: target, promise: worker.compute(constant, target) };
      covering = computation;
      state.running.add(computation);
      computation.promise.then(
        (value) => {
          state.running.delete(computation);
          remember(state, value);
        },
        () => state.running.delete(computation),
      );
    }
    // At least `decimals` long; a crash rejects here with a DigitWorkerError saying why.
    return slice(await covering.promise, decimals);
  }

  return {
    digits,
    peek,
    close: async () => {
      await worker?.close();
    },
  };
}

let shared: DigitEngine | undefined;

/** A process-wide shared engine (lazy); the embedded services and the gateway share its cache. */
export function sharedDigitEngine(): DigitEngine {
  shared ??= createDigitEngine();
  return shared;
}
