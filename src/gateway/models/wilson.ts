/**
 * The lower bound of the Wilson score interval (Wilson, 1927) of a proportion: what a model's
 * accuracy is at least, with 95 % confidence, given `correct` right answers out of `answers`. Unlike
 * the plain ratio it is honest about small samples (3 out of 3 is a lower bound of 0.44, not 1.0),
 * and unlike the normal approximation it stays within 0..1 near 0 and 1, where good models live.
 */

/** The two-sided 95 % quantile of the standard normal distribution. */
export const Z_95 = 1.959963984540054;

/** The Wilson lower bound of `correct` out of `answers` (0 when there are no answers). */
export function wilsonLowerBound(correct: number, answers: number, z: number = Z_95): number {
  if (answers <= 0) return 0;
  const p = Math.min(Math.max(correct / answers, 0), 1);
  const z2 = z * z;
  const centre = p + z2 / (2 * answers);
  const spread = z * Math.sqrt((p * (1 - p)) / answers + z2 / (4 * answers * answers));
  return Math.max(0, (centre - spread) / (1 + z2 / answers));
}
