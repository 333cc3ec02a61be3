/** Bounded waits: every wait in a test ends by itself (a bound for hangs, never a timing assertion). */

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` every `stepMs`, at most `tries` times; whether it came true. */
export async function until(
  check: () => boolean | Promise<boolean>,
  tries = 100,
  stepMs = 50,
): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return true;
    await sleep(stepMs);
  }
  return false;
}

export const LATE = Symbol('late');

/** The call's outcome, or LATE when it took more than `ms`. */
export async function within<T>(call: T | Promise<T>, ms = 500): Promise<T | typeof LATE> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof LATE>((resolve) => {
    timer = setTimeout(() => resolve(LATE), ms);
  });
  try {
    return await Promise.race([Promise.resolve(call), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The call's outcome, or `fallback` when it took more than `ms`. */
export async function withinOr<T, F>(call: T | Promise<T>, ms: number, fallback: F): Promise<T | F> {
  const outcome = await within(call, ms);
  return outcome === LATE ? fallback : outcome;
}
