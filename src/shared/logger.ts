/**
 * The one logger (pino): JSON lines on stdout in production, pretty in development.
 *
 * Why redact paths as well as discipline: API keys travel in headers, and a future log call that
 * dumps a request must still not print them.
 */
import { type Logger, pino } from 'pino';

export type { Logger };

export interface LoggerOptions {
  /** @default 'info' */
  level?: string;
  /** @default 'json' */
  format?: 'json' | 'pretty';
}

/** Header names and paths whose values never reach a log line. */
export const REDACT_PATHS = [
  'apiKey',
  '*.apiKey',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.headers.authorization',
  '*.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
];

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const redact = { paths: REDACT_PATHS, censor: '[redacted]' };
  if (options.format === 'pretty') {
    return pino({
      level,
      redact,
      transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } },
    });
  }
  return pino({ level, redact });
}
