/**
 * Decimal places of a digits string: `"3.14"` → 2, `"3"` → 0. What the pi-digits service's `precision`
 * is by definition (the gateway counts it when an answer leaves it out), and how the digit engine
 * compares what it has computed.
 */
export function decimalsOf(digits: string): number {
  const point = digits.indexOf('.');
  return point < 0 ? 0 : digits.length - point - 1;
}
