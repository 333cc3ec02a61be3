/**
 * The one logger (pino): JSON lines for machines, one short line per event for people
 * (pretty-log.ts), written by sinks that never block or end the process (log-sinks.ts).
 *
 * Why redact paths as well as discipline: API keys travel in headers, and a future log call that
 * dumps a request must still not print them.
 */
import { isatty } from 'node:tty';
import { type Logger, pino } from 'pino';
import { fdSink, type LogStream, type Sink, streamSink } from './log-sinks.js';
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

/** JSON loggers made by createLogger, and their children: the sink their lines go to (fixedLineWriter). */
const jsonSinks = new WeakMap<Logger, Sink>();

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const redact = { paths: REDACT_PATHS, censor: '[redacted]' };
  const destination = options.destination ?? 1;
  const raw = typeof destination === 'number' ? fdSink(destination) : streamSink(destination);
  if (options.format !== 'pretty') {
    const logger = pino({ level, redact, onChild: (child) => jsonSinks.set(child, raw) }, raw);
    jsonSinks.set(logger, raw);
    return logger;
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
 * Writes `logger[level](fields, message)`'s line (see fixedLineWriter). False when it did not: a
 * string with an escape pino may write otherwise (a lone surrogate); then log through pino.
 */
export type FixedLineWriter = (level: 'info' | 'warn', fields: Readonly<Record<string, unknown>>) => boolean;

/**
 * A writer of one frequent line, byte for byte the line `logger[level](fields, message)` writes, for a
 * JSON logger made by createLogger (or a child of one); undefined for any other logger (pretty lines, a
 * pino made elsewhere), which then logs through pino.
 *
 * Why: pino builds a line by concatenating each key and value in turn (some 60 short strings, 2.1 KB
 * allocated for the operation line of every request); one JSON.stringify of the fields builds them in
 * one piece (docs/benchmarks/2026-11-27-round3.md, stall). It applies to plain JSON values only
 * (strings, finite numbers, arrays of them), to which pino applies no serializer and, in a logger
 * without redaction paths for them, no redaction: the caller's to ensure. pino serializes a string as
 * JSON.stringify does (pino does so on Node ≥ 25; before, the same bytes for any string without lone
 * surrogates, which the writer leaves to pino); the chindings (pid, hostname, a child's bindings) are the logger's own, read through
 * `pino.symbols` (pino's documented access for custom serialization); the level check stays the caller's.
 */
export function fixedLineWriter(logger: Logger, message: string): FixedLineWriter | undefined {
  const sink = jsonSinks.get(logger);
  if (sink === undefined) return undefined;
  const chindings = (logger as unknown as Record<symbol, unknown>)[pino.symbols.chindingsSym];
  if (typeof chindings !== 'string') return undefined;
  const head = {
    info: `{"level":${logger.levels.values.info},"time":`,
    warn: `{"level":${logger.levels.values.warn},"time":`,
  };
  const tail = `,"msg":${JSON.stringify(message)}}\n`;
  return (level, fields) => {
    const body = JSON.stringify(fields);
    // `\u` escapes: lone surrogates (which pino on Node < 25 writes raw) or control characters.
    if (body.includes('\\u')) return false;
    sink.write(
      body.length === 2
        ? head[level] + Date.now() + chindings + tail
        : `${head[level]}${Date.now()}${chindings},${body.slice(1, -1)}${tail}`,
    );
    return true;
  };
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
