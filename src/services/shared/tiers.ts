/** The three caller tiers of both services (free, pro, enterprise). */
export type Tier = 'free' | 'pro' | 'enterprise';

export const TIERS: readonly Tier[] = ['free', 'pro', 'enterprise'];

export function isTier(value: string): value is Tier {
  return (TIERS as readonly string[]).includes(value);
}

/** Requests per minute per key and tier; 0 means unlimited. */
export type TierRateLimits = Record<Tier, number>;
