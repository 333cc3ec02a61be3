/**
 * The abort handle of one upstream attempt, in the EventEmitter shape undici accepts as `signal`
 * (`on`/`once`/`removeListener`, `aborted`, `reason`); the transport's dispatch handler
 * (exchange-handler.ts) listens to it the same way.
 *
 * Why not an AbortController: an AbortSignal with a listener costs more, in allocation and in the GC's
 * bookkeeping of signals with listeners; `test/bench/attempt-signal-bench.ts` measures it (per
 * attempt, with the listener, the sweep entry and the operation's watcher). On Node 20.20 an
 * AbortController per attempt cost ~6.6 µs more per attempt than this object, and ~9.6 µs more CPU
 * per request through undici's `dispatch`. Node 24.21 narrowed the gap without closing it (2026-11-26,
 * three runs on a shared, busy 2-core machine): ~1.5–2.6 µs more per attempt, ~1.4–3.7 µs more CPU per
 * request; `AbortSignal.any([operation, AbortSignal.timeout(ms)])`, the idiomatic form, ~6–8 µs more
 * (a timer, weak references and a finalization entry per attempt). Re-measure on a Node upgrade.
 *
 * This object holds at most the one listener undici attaches. It is also the attempt's entry in the
 * deadline sweep and its listener on the operation's cancellation, so an attempt makes no closure,
 * timer or AbortController at all.
 */
export class AttemptSignal {
  aborted = false;
  reason: unknown = undefined;
  #listener: (() => void) | undefined = undefined;

  /**
   * @param at When the attempt must end (`Date.now()` ms): the deadline sweep calls `fire()` then.
   * @param timeoutReason The abort reason of that end (the attempt's own timeout, or the operation's deadline).
   */
  constructor(
    readonly at: number,
    private readonly timeoutReason: unknown,
  ) {}

  /** The deadline sweep's call: the attempt ran out of time. */
  fire(): void {
    this.abort(this.timeoutReason);
  }

  on(_event: 'abort', listener: () => void): this {
    this.#listener = listener;
    return this;
  }

  once(event: 'abort', listener: () => void): this {
    return this.on(event, listener);
  }

  removeListener(_event: 'abort', listener: () => void): this {
    if (this.#listener === listener) this.#listener = undefined;
    return this;
  }

  off(event: 'abort', listener: () => void): this {
    return this.removeListener(event, listener);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listener = this.#listener;
    this.#listener = undefined;
    listener?.();
  }
}
