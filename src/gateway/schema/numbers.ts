/**
 * Upstream numbers on their way into GraphQL `Int` / `Float`.
 *
 * Why: graphql-js refuses a non-integer or >32-bit value for `Int` with an error on the field, and the
 * upstream's metadata (timings, counts) is not worth losing a whole verdict over.
 */
const INT_MAX = 2_147_483_647;

/** A 32-bit integer (rounded), or null when the upstream value cannot be one. */
export function intOrNull(value: number | null | undefined): number | null {
  if (value == null || !Number.isFinite(value)) return null;
  const n = Math.round(value);
  return n > INT_MAX || n < -INT_MAX - 1 ? null : n;
}

/** A finite number, or null. */
export function floatOrNull(value: number | null | undefined): number | null {
  return value != null && Number.isFinite(value) ? value : null;
}
