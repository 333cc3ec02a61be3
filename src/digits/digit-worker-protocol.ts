/** Messages between the digit engine and its worker thread, and the constants they name. */

/** The constants the engine computes (digit-engine.ts exports it with the engine). */
export type Constant = 'pi' | 'e';

export interface DigitWorkerRequest {
  id: number;
  constant: Constant;
  decimals: number;
}

export type DigitWorkerResponse =
  | { id: number; ok: true; digits: string; elapsedMs: number }
  | { id: number; ok: false; message: string };
