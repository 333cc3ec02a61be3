/**
 * A digit request outside what the engine serves: a negative, fractional or non-number count of
 * decimals, more than the engine's maximum, or an unknown constant. A RangeError, so callers that only
 * know the documented contract (`instanceof RangeError`) still map it to a 4xx.
 */
export class DigitsRangeError extends RangeError {
  readonly code = 'DIGITS_OUT_OF_RANGE';
  readonly statusCode = 400;
  readonly body: { error: { status: number; code: string; message: string } };

  constructor(message: string) {
    super(message);
    this.name = 'DigitsRangeError';
    this.body = { error: { status: this.statusCode, code: this.code, message } };
  }
}
