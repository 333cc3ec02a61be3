/**
 * Bounded waits: every wait in a test ends by itself (a bound for hangs, never a timing assertion).
 * And gates: what must still be in flight when the test looks is held until the test opens its gate,
 * never merely slow.
 */

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

/**
 * The call's outcome, or LATE when it took more than `ms`: a bound for a hang or a stall, so `ms` is
 * seconds, well beyond what a busy machine's scheduling adds (no default: each caller says what it bounds).
 */
export async function within<T>(call: T | Promise<T>, ms: number): Promise<T | typeof LATE> {
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

export interface Gate {
  /** Settles once `open()` is called. */
  readonly opened: Promise<void>;
  open(): void;
}

/**
 * A gate the test opens: what waits on `opened` (a scripted upstream's held answer, say) goes on when
 * the test has seen what it waited for, not after a delay taken as long enough. Opening twice is harmless.
 */
export function gate(): Gate {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}
