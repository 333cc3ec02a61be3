/**
 * Whether a value that may come at once or later (a memory store's answer, or Redis'; a resolver's
 * result) is the later kind. Code that serves both without an `await` stays synchronous for the
 * immediate one: an `await` of a plain value still costs a microtask turn on a hot path.
 *
 * Any thenable counts, as for `await`: what a library hands back need not be a native Promise.
 */
export const isPromise = <T>(value: T | Promise<T>): value is Promise<T> =>
  typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
