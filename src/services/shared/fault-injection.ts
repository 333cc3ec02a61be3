/**
 * Fault injection for tests and demos (src/services/README.md): added latency and a share of 500 and 503
 * answers, all off by default. The services answer 500/503 only through here.
 *
 * Why a generator of its own: turning faults on must not shift the model's random stream, or a
 * seed would no longer reproduce the answers of a run with faults off.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { createSeededRandom } from './seeded-random.js';

export interface FaultInjectionOptions {
  /** Latency added to every answer (except /openapi.json), in milliseconds. @default 0 */
  latencyMs?: number;
  /** Share (0..1) of model requests answered 500. @default 0 */
  rate500?: number;
  /** Share (0..1) of model requests answered 503; at 1 the health endpoint answers 503 too. @default 0 */
  rate503?: number;
  /** Seed of the fault dice (derived from the service seed). @default 42 */
  seed?: number;
}

export interface FaultInjector {
  /** Whether any fault is configured (health then reports `degraded`). */
  readonly active: boolean;
  /** Every request fails with 503: the service is down, health included. */
  readonly down: boolean;
  /** Every model request fails (500 or 503): nothing can be answered. */
  readonly unusable: boolean;
  readonly latencyMs: number;
  /** Waits the configured latency (resolves at once when none). */
  delay(): Promise<void>;
  /** Rolls the dice for one model request: the status to fail with, or undefined to answer. */
  roll(): 500 | 503 | undefined;
}

export function createFaultInjector(options: FaultInjectionOptions = {}): FaultInjector {
  const latencyMs = Math.max(0, options.latencyMs ?? 0);
  const rate500 = clampRate(options.rate500);
  const rate503 = clampRate(options.rate503);
  // Offset so that the fault dice and the model dice never walk the same stream.
  const random = createSeededRandom(((options.seed ?? 42) ^ 0x5bd1e995) >>> 0);
  return {
    active: latencyMs > 0 || rate500 > 0 || rate503 > 0,
    down: rate503 >= 1,
    unusable: rate500 + rate503 >= 1,
    latencyMs,
    delay: () => (latencyMs > 0 ? sleep(latencyMs) : Promise.resolve()),
    roll: () => {
      if (rate500 === 0 && rate503 === 0) return undefined;
      const r = random.next();
      if (r < rate503) return 503;
      if (r < rate503 + rate500) return 500;
      return undefined;
    },
  };
}

function clampRate(rate: number | undefined): number {
  if (rate === undefined || Number.isNaN(rate)) return 0;
  return Math.min(1, Math.max(0, rate));
}

/** A health body's free-text cluster state: `nominal`, or what fault injection is doing. */
export function clusterState(faults: FaultInjector, nominal: string): string {
  return faults.active
    ? 'degraded: fault injection is on (added latency and/or injected 500/503 answers)'
    : nominal;
}
