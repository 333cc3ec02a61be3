/**
 * A digit computation could not finish because its worker thread died (crash, out of memory) or the
 * engine was closed while it ran. The engine spawns a fresh worker for the next request, so a retry
 * may succeed.
 */
export class DigitWorkerError extends Error {
  readonly code = 'DIGIT_WORKER_FAILED';
  readonly statusCode = 500;
  readonly body: { error: { status: number; code: string; message: string } };

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DigitWorkerError';
    this.body = { error: { status: this.statusCode, code: this.code, message } };
  }
}
