/**
 * Each service's models, dearest first (the price table's order): routing by quality (router.ts)
 * ranks them, and the fallback to a cheaper model (cost/fallback.ts) steps down them.
 */
import type { UpstreamName } from '../errors.js';

export const SERVICE_MODELS: Record<UpstreamName, readonly string[]> = {
  'null-check': ['null-x-opus', 'null-x-4o', 'null-x-mini'],
  'pi-digits': ['pi-x-opus-almost-correct', 'pi-x-4o', 'pi-x-mini'],
};
