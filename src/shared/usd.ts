/**
 * US dollar amounts of the gateway (reported costs, estimates, budgets) are sums of binary fractions:
 * `0.1 + 0.2` is `0.30000000000000004`. Rounded once where they are shown or compared, to a millionth
 * of a cent, far below any price the services quote and far above the float noise.
 */
export const roundUsd = (usd: number): number => Math.round(usd * 1e8) / 1e8;
