/**
 * gateway_redis_commands_total{purpose} (observability/redis-commands.ts) and which purpose each of
 * the shared state's Redis operations counts under (shared-state/redis-link.ts `purposeOf`).
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createRedisCommandCounter, REDIS_PURPOSES } from '../../src/gateway/observability/redis-commands.js';
import { purposeOf } from '../../src/gateway/shared-state/redis-link.js';

describe('gateway_redis_commands_total', () => {
  it('shows every purpose from the start, and what was counted', async () => {
    const registry = new Registry();
    const count = createRedisCommandCounter(registry);
    count('flight');
    count('budget', 3);
    const text = await registry.metrics();
    for (const purpose of REDIS_PURPOSES)
      expect(text).toContain(`gateway_redis_commands_total{purpose="${purpose}"}`);
    expect(text).toContain('gateway_redis_commands_total{purpose="flight"} 1');
    expect(text).toContain('gateway_redis_commands_total{purpose="budget"} 3');
    expect(text).toContain('gateway_redis_commands_total{purpose="cache"} 0');
  });

  it('counts each operation under its store; a connection error is no command', () => {
    expect(purposeOf('flight_claim')).toBe('flight');
    expect(purposeOf('flight_settle')).toBe('flight');
    expect(purposeOf('budget_reserve')).toBe('budget');
    expect(purposeOf('budget_window')).toBe('budget');
    expect(purposeOf('cache_get')).toBe('cache');
    expect(purposeOf('documents_set')).toBe('documents');
    expect(purposeOf('scores_write')).toBe('scores');
    expect(purposeOf('probe')).toBe('health');
    expect(purposeOf('info')).toBe('health');
    expect(purposeOf('replicas')).toBe('health');
    expect(purposeOf('connection')).toBeUndefined();
  });
});
