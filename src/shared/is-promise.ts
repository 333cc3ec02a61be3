/** Whether a value is a thenable: the request path stays synchronous until something must wait. */
export const isPromise = <T>(value: T | Promise<T>): value is Promise<T> =>
  typeof (value as { then?: unknown } | null)?.then === 'function';
