/**
 * The one logger (pino): JSON lines for machines, one short line per event for people.
 *
 * Why redact paths as well as discipline: API keys travel in headers, and a future log call that
 * dumps a request must still not print them.
 *
 * Why a destination of our own instead of pino's default (sonic-boom): logging must never block or
 * end a process. sonic-boom's exit-time `flushSync` retries a write that failed with anything but
 * EAGAIN forever, so a process whose standard output was closed (EPIPE) hung at `process.exit`
 * instead of exiting. The sink below writes asynchronously (the main thread never waits for a slow
 * reader), turns itself off at the first write error (EPIPE, EBADF, ...), and at exit tries the
 * queued lines once, synchronously, without retrying.
 *
 * Why pino-pretty as a function in this thread (not a transport worker): one thread less to start
 * and to stop at shutdown, and the same sink (and its error handling) for both formats.
 */
import { write as fsWrite, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isatty } from 'node:tty';
import { type DestinationStream, type Logger, pino } from 'pino';

export type { Logger };

export type LogFormat = 'json' | 'pretty';

/** What the logger writes to besides a file descriptor (tests give a stream). */
export interface LogStream {
  write(chunk: string, callback?: (error?: Error | null) => void): unknown;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  /** A TTY stream gets coloured pretty lines. */
  isTTY?: boolean;
}

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

// --- the sink --------------------------------------------------------------------------------------

/** What pino writes to. `flush` is what `logger.flush(cb)` calls. */
interface Sink extends DestinationStream {
  flush(callback?: (error?: Error) => void): void;
}

/** Queued bytes beyond which new lines are dropped instead of growing memory without bound. */
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;
/** Wait before retrying a write the descriptor refused for now (EAGAIN: the reader is behind). */
const RETRY_MS = 20;

/**
 * Lines to a file descriptor, written asynchronously (the thread pool does the `write`), one write in
 * flight at a time, in order. The first error other than EAGAIN turns the sink into a no-op.
 */
class FdSink implements Sink {
  private queue: string[] = [];
  private queuedBytes = 0;
  private writing = false;
  private broken = false;
  private idle: Array<() => void> = [];

  constructor(private readonly fd: number) {}

  write(chunk: string): boolean {
    if (this.broken) return true;
    if (this.queuedBytes + chunk.length > MAX_QUEUED_BYTES) return true; // dropped: never block
    this.queue.push(chunk);
    this.queuedBytes += chunk.length;
    if (!this.writing) this.pump();
    return true;
  }

  /** Calls back once every line logged so far is written (or can never be). */
  flush(callback?: (error?: Error) => void): void {
    if (callback === undefined) return;
    if (!this.writing && this.queue.length === 0) callback();
    else this.idle.push(() => callback());
  }

  /** At exit: what is still queued, synchronously, once. Never retries, never throws. */
  flushSync(): void {
    if (this.broken || this.queue.length === 0) return;
    let buffer = Buffer.from(this.queue.join(''));
    this.queue = [];
    this.queuedBytes = 0;
    try {
      // Partial writes continue; a bounded number of them, so even a trickling reader cannot hold it.
      for (let i = 0; i < 64 && buffer.length > 0; i++) buffer = buffer.subarray(writeSync(this.fd, buffer));
    } catch {
      this.broken = true;
    }
  }

  private pump(): void {
    if (this.broken || this.queue.length === 0) {
      this.writing = false;
      const waiting = this.idle;
      this.idle = [];
      for (const done of waiting) done();
      return;
    }
    this.writing = true;
    const buffer = Buffer.from(this.queue.join(''));
    this.queue = [];
    this.queuedBytes = 0;
    this.send(buffer);
  }

  private send(buffer: Buffer): void {
    fsWrite(this.fd, buffer, 0, buffer.length, null, (error, written) => {
      if (error) {
        if (error.code === 'EAGAIN') {
          // Unref'd: a stalled reader must not keep an otherwise finished process alive.
          setTimeout(() => this.send(buffer), RETRY_MS).unref();
          return;
        }
        this.breakDown(error);
        this.pump();
        return;
      }
      if (written < buffer.length) this.send(buffer.subarray(written));
      else this.pump();
    });
  }

  /** Logging stops for good: the reader is gone (EPIPE) or the descriptor is unusable. */
  private breakDown(error: NodeJS.ErrnoException): void {
    this.broken = true;
    this.queue = [];
    this.queuedBytes = 0;
    if (this.fd !== 2) {
      // One best-effort notice where someone may still be reading; asynchronous, errors ignored.
      const note = Buffer.from(`logging stopped: cannot write to descriptor ${this.fd} (${error.code})\n`);
      fsWrite(2, note, 0, note.length, null, () => {});
    }
  }
}

/** One sink per descriptor, shared by every logger on it (ordered lines), flushed once at exit. */
const fdSinks = new Map<number, FdSink>();

function fdSink(fd: number): FdSink {
  let sink = fdSinks.get(fd);
  if (sink === undefined) {
    sink = new FdSink(fd);
    fdSinks.set(fd, sink);
    if (fdSinks.size === 1)
      process.once('exit', () => {
        for (const s of fdSinks.values()) s.flushSync();
      });
  }
  return sink;
}

/** A stream destination (tests, embedding): the first error turns it into a no-op. */
function streamSink(stream: LogStream): Sink {
  let broken = false;
  stream.on?.('error', () => {
    broken = true;
  });
  return {
    write(chunk: string) {
      if (!broken) {
        try {
          stream.write(chunk);
        } catch {
          broken = true;
        }
      }
      return true;
    },
    flush(callback) {
      if (callback === undefined) return;
      if (broken) callback();
      else stream.write('', () => callback());
    },
  };
}

// --- pretty ----------------------------------------------------------------------------------------

type Colors = { gray(text: string): string };
type Prettify = (log: Record<string, unknown>) => string;
interface PinoPrettyModule {
  prettyFactory(options: Record<string, unknown>): Prettify;
}

/** Fields shown first, in this order, when a line has them; the rest follow in logged order. */
const FIRST_FIELDS = [
  'operation',
  'outcome',
  'durationMs',
  'requestId',
  'errorCodes',
  'gpuCostUsd',
  'upstream',
  'endpoint',
  'status',
  'code',
  'url',
  'signal',
  'reason',
];
/** Shown by pino-pretty itself (time, level), or noise on a developer's screen (pid, hostname). */
const SKIPPED_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname']);
const PLAIN_TEXT = /^[\w.:/@+-]+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: escaping control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const MAX_COMPACT = 80;

/** Text from log data, with control characters escaped: nothing logged may drive the terminal. */
function safeText(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function compactJson(value: unknown, full: boolean): string {
  const json = safeText(JSON.stringify(value) ?? String(value));
  return full || json.length <= MAX_COMPACT ? json : `${json.slice(0, MAX_COMPACT - 1)}…`;
}

/** `upstreamCalls` of the operation line: `[null-check 200 12ms, pi-digits 503 5ms UPSTREAM_UNAVAILABLE]`. */
function compactCalls(calls: unknown[]): string {
  const shown = calls.slice(0, 4).map((call) => {
    if (call === null || typeof call !== 'object') return compactJson(call, false);
    const c = call as Record<string, unknown>;
    const parts = [
      c.upstream,
      c.status ?? 'no answer',
      typeof c.durationMs === 'number' ? `${c.durationMs}ms` : c.durationMs,
      c.code,
    ];
    return safeText(parts.filter((p) => p !== undefined).join(' '));
  });
  if (calls.length > shown.length) shown.push(`+${calls.length - shown.length} more`);
  return `[${shown.join(', ')}]`;
}

/** Longest text field shown whole below debug (an upstream's error body can be megabytes). */
const MAX_TEXT = 200;

function valueText(key: string, value: unknown, full: boolean): string {
  if (typeof value === 'string') {
    const text = full || value.length <= MAX_TEXT ? value : `${value.slice(0, MAX_TEXT)}…`;
    return PLAIN_TEXT.test(text) ? text : safeText(JSON.stringify(text));
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (!full && key === 'upstreamCalls' && Array.isArray(value)) return compactCalls(value);
  if (value !== null && typeof value === 'object' && 'message' in value && !full) {
    // An error: its type and message; the stack only at debug (or in JSON).
    const error = value as { type?: unknown; message?: unknown };
    return safeText(JSON.stringify(`${String(error.type ?? 'Error')}: ${String(error.message)}`));
  }
  if (Array.isArray(value) && value.every((v) => typeof v === 'string' && PLAIN_TEXT.test(v)))
    return value.join(',');
  return compactJson(value, full);
}

/** The message, then `key=value` for every field, the important ones first. */
function messageFormat(full: boolean) {
  return (log: Record<string, unknown>, messageKey: string, _level: string, extras: { colors: Colors }) => {
    const message = log[messageKey];
    const parts = [typeof message === 'string' ? safeText(message) : ''];
    const keys = Object.keys(log).filter((k) => k !== messageKey && !SKIPPED_FIELDS.has(k));
    keys.sort((a, b) => rank(a) - rank(b));
    for (const key of keys) {
      const value = log[key];
      // Skipped when the message already shows it (`listening on <url>` with `url`); short values are
      // always shown, since a word like `ok` may be in a message by chance.
      const echoed = typeof value === 'string' && value.length >= 8 && parts[0]?.includes(value);
      if (value === undefined || echoed) continue;
      parts.push(`${extras.colors.gray(`${key}=`)}${valueText(key, value, full)}`);
    }
    return parts.join(' ');
  };
}

function rank(key: string): number {
  const i = FIRST_FIELDS.indexOf(key);
  return i < 0 ? FIRST_FIELDS.length : i;
}

/** pino-pretty is a development dependency: absent from a production install. */
function loadPinoPretty(): PinoPrettyModule | undefined {
  try {
    return createRequire(import.meta.url)('pino-pretty') as PinoPrettyModule;
  } catch {
    return undefined;
  }
}

/** A sink that turns each JSON line into one pretty line before writing it to `out`. */
function prettySink(out: Sink, prettify: Prettify): Sink {
  return {
    write(chunk: string) {
      let line: string;
      try {
        const log = JSON.parse(chunk) as Record<string, unknown>;
        // pino-pretty prints a top-level error's stack on extra lines: keep it a field like any other.
        if (log.type === 'Error') log.type = 'error';
        line = prettify(log);
      } catch {
        line = chunk;
      }
      return out.write(line.endsWith('\n') ? line : `${line}\n`);
    },
    flush: (callback) => out.flush(callback),
  };
}

// --- the logger ------------------------------------------------------------------------------------

function isTerminal(destination: number | LogStream): boolean {
  return typeof destination === 'number' ? isatty(destination) : destination.isTTY === true;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? 'info';
  const redact = { paths: REDACT_PATHS, censor: '[redacted]' };
  const destination = options.destination ?? 1;
  const raw = typeof destination === 'number' ? fdSink(destination) : streamSink(destination);
  if (options.format !== 'pretty') return pino({ level, redact }, raw);

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
