/** Log lines captured in memory, with the project's redaction paths, for tests that read them. */
import { type Logger, pino } from 'pino';
import { REDACT_PATHS } from '../../src/shared/logger.js';

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;

/** A pino logger at `level` writing its JSON lines into `lines` (synchronously). */
export function capturedLogger(level = 'debug'): {
  logger: Logger;
  lines: LogLine[];
  raw: string[];
  text: () => string;
} {
  const lines: LogLine[] = [];
  const raw: string[] = [];
  const logger = pino(
    { level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
    {
      write(line: string) {
        raw.push(line);
        lines.push(JSON.parse(line) as LogLine);
      },
    },
  );
  return { logger, lines, raw, text: () => raw.join('') };
}

/** How many captured lines have this level and message. */
export const count = (lines: LogLine[], level: number, msg: string) =>
  lines.filter((line) => line.level === level && line.msg === msg).length;
