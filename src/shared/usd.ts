/** Dollars summed from binary fractions, rounded to a millionth of a cent (so a cap of 0.0042 admits 0.0042). */
export const roundUsd = (usd: number): number => Math.round(usd * 1e8) / 1e8;
