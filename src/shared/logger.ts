/**
 * The one logger (pino): JSON lines for machines, one short line per event for people
 * (pretty-log.ts), written by sinks that never block or end the process (log-sinks.ts).
 *
 * Why redact paths as well as discipline: API keys travel in headers, and a future log call that
 * dumps a request must still not print them.
 */
import { isatty } from 'node:tty';
import { type Logger, pino } from 'pino';
import { fdSink, type LogStream, streamSink } from './log-sinks.js';
import { loadPinoPretty, messageFormat, prettySink } from './pretty-log.js';

export type { Logger, LogStream };

export type LogFormat = 'json' | 'pretty';

export interface LoggerOptions {
  /** @default 'info' */
  level?: string;
  /** @default 'json' */
  format?: LogFormat;
  /** A file descriptor or a stream. @default 1 (standard output) */
  destination?: number | LogStream;
  /**
   * Colour pretty lines.
   * @default true only when the destination is a terminal and NO_COLOR is unset or empty
   */
  colorize?: boolean;
}

/**
 * The objects a log line may carry a request's headers or a key in (the first segment of a path): the
 * request itself, an upstream call, an error, options and settings, Redis' details.
 */
export const REDACT_CONTAINERS = [
  'req',
  'request',
  'res',
  'response',
  'upstream',
  'call',
  'err',
  'error',
  'options',
  'config',
  'settings',
  'redis',
  'client',
] as const;

/**
 * Header names and paths whose values never reach a log line: at the top of a line and one level into
 * each of REDACT_CONTAINERS.
 *
 * Why named containers and not a leading wildcard (`*.apiKey`): pino applies a wildcard-first path to
 * every top-level value of every line, and @pinojs/redact 0.4 parses each such path again for each
 * value, primitives included: three wildcard paths cost the operation line 4 µs of its ~40 and 17 KB
 * (docs/architecture.md, Copies that stay; measured with `npm run bench:ab`). Named first segments cost
 * a line nothing unless it has that key. A line that dumps another object names it here first.
 */
export const REDACT_PATHS = [
  'apiKey',
  'headers.authorization',
  'headers["x-api-key"]',
  ...REDACT_CONTAINERS.flatMap((container) => [
    `${container}.apiKey`,
    `${container}.headers.authorization`,
    `${container}.headers["x-api-key"]`,
  ]),
];

/**
 * The log format of both CLIs: LOG_FORMAT when set; otherwise JSON in production and whenever standard
 * output is not a terminal (a file, a pipe, a log collector), pretty on a terminal.
 */
export function logFormatFor(
  setting: LogFormat | undefined,
  nodeEnv: string,
  isTerminal: boolean = isatty(1),
): LogFormat {
  if (setting !== undefined) return setting;
  return nodeEnv !== 'production' && isTerminal ? 'pretty' : 'json';
}

function isTerminal(destination: number | LogStream): boolean {
  return typeof destination === 'number' ? isatty(destination) : destination.isTTY === true;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const redact = { paths: REDACT_PATHS, censor: '[redacted]' };
  const destination = options.destination ?? 1;
  const raw = typeof destination === 'number' ? fdSink(destination) : streamSink(destination);
  if (options.format !== 'pretty') {
    return pino({ level, redact }, raw);
  }

  const pinoPretty = loadPinoPretty();
  if (pinoPretty === undefined) {
    const logger = pino({ level, redact }, raw);
    logger.warn(
      'LOG_FORMAT=pretty needs pino-pretty, a development dependency not installed here: JSON instead',
    );
    return logger;
  }
  const noColor = process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '';
  const colorize = options.colorize ?? (isTerminal(destination) && !noColor);
  // Whole objects (every upstream call, error stacks) only when the operator asked for detail.
  const full = level === 'debug' || level === 'trace';
  const prettify = pinoPretty.prettyFactory({
    colorize,
    singleLine: true,
    hideObject: true,
    errorLikeObjectKeys: [],
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    messageFormat: messageFormat(full),
  });
  return pino({ level, redact }, prettySink(raw, prettify));
}

/**
 * Resolves once every line logged so far is written, or after `maxWaitMs` (a reader that stopped
 * reading must not hold a shutdown). For a graceful exit: `await flushLogger(logger); process.exit()`.
 */
export function flushLogger(logger: Logger, maxWaitMs = 2000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, maxWaitMs);
    timer.unref();
    try {
      logger.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}
