/**
 * The abort handle of one upstream attempt, in the EventEmitter shape undici accepts as `signal`
 * (`on`/`once`/`removeListener`, `aborted`, `reason`); the transport's dispatch handler
 * (exchange-handler.ts) listens to it the same way.
 *
 * Why not an AbortController: on Node 20, creating an AbortSignal and attaching a listener to it
 * costs ~20 µs per request (measured; the GC bookkeeping of signals with listeners), which was the
 * largest single overhead of the transport against a bare `Pool.request`. This object costs
 * nanoseconds and holds at most the one listener undici attaches. The same object is the attempt's
 * entry in the deadline sweep and its listener on the operation's cancellation, so an attempt makes no
 * closure, timer or AbortController at all.
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
