/** Messages between the digit engine and its worker thread. */
import type { Constant } from './digit-engine.js';

export interface DigitWorkerRequest {
  id: number;
  constant: Constant;
  decimals: number;
}

export type DigitWorkerResponse =
  | { id: number; ok: true; digits: string; elapsedMs: number }
  | { id: number; ok: false; message: string };
