/** Helpers of the shared-state tests: a logger captured in memory, bounded waits, bounded calls. */
import { type Logger, pino } from 'pino';
import type { Registry } from 'prom-client';

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** A pino logger writing its JSON lines into `lines` (synchronously). */
export function capturedLogger(): { logger: Logger; lines: LogLine[]; raw: string[] } {
  const lines: LogLine[] = [];
  const raw: string[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write(line: string) {
        raw.push(line);
        lines.push(JSON.parse(line) as LogLine);
      },
    },
  );
  return { logger, lines, raw };
}

export const WARN = 40;
export const INFO = 30;

export const count = (lines: LogLine[], level: number, msg: string) =>
  lines.filter((line) => line.level === level && line.msg === msg).length;

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

/** The call's outcome, or LATE when it took more than `ms` (a bound for hangs, not a timing assertion). */
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

/** The value of a counter or gauge for the given labels (0 when absent). */
export async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) return Number.NaN;
  const { values } = await metric.get();
  const match = values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return match?.value ?? 0;
}
