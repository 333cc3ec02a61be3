/**
 * A share script whose reply is lost (shared-state/budget-shares.ts), on a real redis-server: Redis
 * ran it (it wrote back the share's spend, removed the old lease and booked a new one) but the
 * replica never heard, as when a Sentinel primary is killed between running a command (and
 * replicating it) and sending its reply, or when the reply comes after the timeout. The replica's
 * next script must find the lease that run left and count every dollar once: nothing reserved is
 * left behind to lapse later at its whole amount, and no spend is dropped.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { BUDGET_SCRIPTS } from '../../src/gateway/shared-state/budget-scripts.js';
import { type BudgetShares, createBudgetShares } from '../../src/gateway/shared-state/budget-shares.js';
import { budgetRedisKeys } from '../../src/gateway/shared-state/redis-keys.js';
import {
  createRedisLink,
  type RedisLink,
  type ScriptCall,
} from '../../src/gateway/shared-state/redis-link.js';
import type { BudgetWindowSpec } from '../../src/gateway/shared-state/types.js';
import { ESTIMATE, inRedis as inPrefix, silent, useRedisServer, windowOf } from '../support/budget-stores.js';
import { type RedisServer, requireRedisServer } from '../support/redis-server.js';
import { until } from '../support/waits.js';

requireRedisServer('budget-share-replies');

const round = (usd: number) => Math.round(usd * 1e10) / 1e10;

describe('a share script that ran without its reply reaching the replica', () => {
  let server: RedisServer;
  let raw: Redis;
  const prefix = `replies-${randomUUID().slice(0, 8)}:`;
  useRedisServer((started, client) => {
    server = started;
    raw = client;
  }, []);

  const inRedis = (key: string) => inPrefix(raw, prefix, key);

  /**
   * Shares on a link of their own, whose next share scripts fail as `lost.next` says: 'ran' (Redis
   * ran it, its answer never arrives: the socket closed, or it came after the timeout) or 'unsent'
   * (it never reached Redis).
   */
  function lossyShares(link: RedisLink) {
    const real = link.script('sharedStateBudgetShare', undefined, BUDGET_SCRIPTS.share);
    const lost: { next: Array<'ran' | 'unsent'>; count: number } = { next: [], count: 0 };
    const script: ScriptCall = async (...keysAndArgs) => {
      const failure = lost.next.shift();
      if (failure === undefined) return real(...keysAndArgs);
      if (failure === 'ran') await real(...keysAndArgs);
      lost.count++;
      throw new Error('Connection is closed.');
    };
    const shares = createBudgetShares(script, {
      link,
      timeoutMs: 1000,
      keysOf: (budgetKey: string, windows: readonly BudgetWindowSpec[]) => {
        const keys = budgetRedisKeys(
          prefix,
          budgetKey,
          windows.map((spec) => spec.ms),
        );
        return [keys.lease, ...keys.windows];
      },
      token: randomUUID().slice(0, 8),
      lapsedIn: () => {},
      maxKeys: 100,
    });
    return { shares, lost };
  }

  /**
   * Up to `count` operations admitted against the share at once (no refill awaited) and settled at
   * ESTIMATE each; answers how many were.
   */
  function spend(shares: BudgetShares, key: string, count: number): number {
    for (let i = 0; i < count; i++) {
      const held = shares.admit(key, windowOf(100), ESTIMATE, Date.now(), 60_000);
      if (held === undefined || held instanceof Promise || !held.ok) return i;
      expect(held.shared, 'admitted against the share').toBe(true);
      expect(shares.settle(held.lease, ESTIMATE)).toBe(true);
    }
    return count;
  }

  it('its spend and its new lease are found by the next script: every dollar counted once, nothing left reserved', async () => {
    const link = createRedisLink({ url: server.url, keyPrefix: prefix, timeoutMs: 1000, logger: silent });
    try {
      expect(await link.connected(5000)).toBe(true);
      const { shares, lost } = lossyShares(link);
      const key = `lost-${randomUUID()}`;
      // Two contacts within SHARE_IDLE_MS: the replica takes a share.
      shares.contact(key, windowOf(100), ESTIMATE, 100, 1);
      shares.contact(key, windowOf(100), ESTIMATE, 100, 1);
      expect(await until(() => shares.heldUsd() >= 4 * ESTIMATE)).toBe(true);
      const before = spend(shares, key, 3);
      expect(before).toBe(3);
      // The next script (the write-back of that spend) runs in Redis; its reply is lost.
      lost.next = ['ran'];
      shares.flushNow();
      expect(await until(() => lost.count === 1)).toBe(true);
      // Admissions go on against what the replica still holds, then everything is written back.
      const after = spend(shares, key, 2);
      expect(after).toBeGreaterThan(0);
      await shares.close();
      expect(await inRedis(key)).toEqual({ spent: round((before + after) * ESTIMATE), reserved: 0 });
    } finally {
      await link.close();
    }
  });

  it('a first take, two write-backs in a row and one that never reached Redis, all unheard of: still every dollar once, nothing left reserved', async () => {
    const link = createRedisLink({ url: server.url, keyPrefix: prefix, timeoutMs: 1000, logger: silent });
    try {
      expect(await link.connected(5000)).toBe(true);
      const { shares, lost } = lossyShares(link);
      const key = `lost-more-${randomUUID()}`;
      // The first take runs unheard of: the replica holds nothing, and its next script finds the lease.
      lost.next = ['ran'];
      shares.contact(key, windowOf(100), ESTIMATE, 100, 1);
      shares.contact(key, windowOf(100), ESTIMATE, 100, 1);
      expect(await until(() => shares.heldUsd() >= 4 * ESTIMATE)).toBe(true);
      expect(lost.count).toBe(1);
      let spent = spend(shares, key, 3);
      expect(spent).toBe(3);
      lost.next = ['ran', 'ran', 'unsent'];
      for (let failed = 2; failed <= 4; failed++) {
        shares.flushNow();
        expect(await until(() => lost.count === failed)).toBe(true);
        spent += spend(shares, key, 1);
      }
      await shares.close();
      expect(lost.next).toEqual([]);
      expect(await inRedis(key)).toEqual({ spent: round(spent * ESTIMATE), reserved: 0 });
    } finally {
      await link.close();
    }
  });
});
