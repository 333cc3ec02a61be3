/**
 * Where log lines go. Why a destination of our own instead of pino's default (sonic-boom): logging
 * must never block or end a process. sonic-boom's exit-time `flushSync` retries a write that failed
 * with anything but EAGAIN forever, so a process whose standard output was closed (EPIPE) hung at
 * `process.exit` instead of exiting. The fd sink writes a pipe, a socket or a terminal asynchronously
 * (the main thread never waits for a slow reader; a file or /dev/null has none and is written at
 * once), turns itself off at the first write error (EPIPE, EBADF, ...), and at exit tries the queued
 * lines once, synchronously, without retrying.
 */
import { fstatSync, write as fsWrite, writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import type { DestinationStream } from 'pino';

/** What the logger writes to besides a file descriptor (tests give a stream). */
export interface LogStream {
  write(chunk: string, callback?: (error?: Error | null) => void): unknown;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  /** A TTY stream gets coloured pretty lines. */
  isTTY?: boolean;
}

/** What pino writes to. `flush` is what `logger.flush(cb)` calls. */
export interface Sink extends DestinationStream {
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

  /**
   * Whether a write can never wait on a reader: a regular file or a character device that is not a
   * terminal (/dev/null). Those are written synchronously, in the turn that gathered the lines: the
   * hand-over of each write to the thread pool measured ~10 µs alone, and 0.35-0.7 ms of the main
   * thread's time on a busy machine (docs/benchmarks/2026-11-27-round3.md, stall). A pipe, a socket or
   * a terminal, whose reader may stall, keeps the asynchronous write.
   */
  private readonly neverWaits: boolean;

  constructor(private readonly fd: number) {
    let neverWaits = false;
    try {
      const stat = fstatSync(fd);
      neverWaits = stat.isFile() || (stat.isCharacterDevice() && !isatty(fd));
    } catch {
      // An unusable descriptor: the first write says so (and turns the sink off).
    }
    this.neverWaits = neverWaits;
  }

  write(chunk: string): boolean {
    if (this.broken) return true;
    if (this.queuedBytes + chunk.length > MAX_QUEUED_BYTES) return true; // dropped: never block
    this.queue.push(chunk);
    this.queuedBytes += chunk.length;
    // The first line of an idle turn schedules one write for every line logged until then: a busy
    // gateway logs a line per operation, and one thread-pool `write` each cost more than the line.
    if (!this.writing) {
      this.writing = true;
      setImmediate(this.pumpSoon);
    }
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

  private readonly pumpSoon = () => this.pump();

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
    if (this.neverWaits) this.sendNow(buffer);
    else this.send(buffer);
  }

  /** One synchronous write (partial writes continue), then the next turn's lines. */
  private sendNow(buffer: Buffer): void {
    try {
      let rest = buffer;
      for (let i = 0; i < 64 && rest.length > 0; i++) rest = rest.subarray(writeSync(this.fd, rest));
    } catch (error) {
      this.breakDown(error as NodeJS.ErrnoException);
    }
    this.pump();
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

export function fdSink(fd: number): FdSink {
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
export function streamSink(stream: LogStream): Sink {
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
