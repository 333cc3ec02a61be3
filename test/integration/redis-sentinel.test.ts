/**
 * Sentinel failover under steady traffic (docs/contract.md §9, More than one machine;
 * `REDIS_URL=redis+sentinel://…/<name>`): a primary, one replica and three sentinels on loopback; the
 * primary is killed with SIGKILL while a gateway serves a steady stream of budgeted checks. No request
 * fails, the sentinels promote the replica, the gateway follows it (a log line, a metric), the budget
 * writes land on the new primary (whose eviction policy is checked again), and what the switch lost or
 * counted twice is measured against the bill (printed, and bounded).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callerIdOf } from '../../src/gateway/identity.js';
import { budgetRedisKeys } from '../../src/gateway/shared-state/redis-keys.js';
import {
  burstEnv,
  CHECK_USD,
  type Cost,
  check,
  FIRST_ESTIMATE,
  MAX_ESTIMATE_ERROR,
  useBurstUpstream,
} from '../support/budget-bursts.js';
import { type GqlResult, gql } from '../support/graphql-client.js';
import { capturedLogger } from '../support/logs.js';
import { metricValue } from '../support/metric-values.js';
import { directClient, type RedisSentinelSetup, startRedisSentinel } from '../support/redis-topologies.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { sleep, until } from '../support/waits.js';

/** Clients sending one check after another, each waiting for its answer. */
const WORKERS = 4;
const PREFIX = `sn-${randomUUID().slice(0, 8)}:`;

let sentinel: RedisSentinelSetup;
beforeAll(async () => {
  // The data nodes ask for a password (given in the URL's user-info): it must never reach a log.
  sentinel = await startRedisSentinel({ downAfterMs: 1000, password: 'data-secret-pw-7' });
}, 60_000);
afterAll(() => sentinel?.stop());

const scripted = useScriptedGateways();
const { burst, checks, expectSplitBudget } = useBurstUpstream(scripted);

/** The key's spend and reservations in its hour on the server at `port`. */
async function onServer(
  port: number,
  apiKey: string,
  prefix: string,
  password: string | undefined,
): Promise<{ spent: number; reserved: number }> {
  const client = directClient(port, password);
  try {
    await client.connect();
    const fields = await client.hgetall(
      budgetRedisKeys(prefix, callerIdOf(apiKey), [3_600_000]).windows[0] as string,
    );
    let spent = 0;
    let reserved = 0;
    for (const [name, usd] of Object.entries(fields)) {
      if (name.startsWith('s')) spent += Number(usd);
      else if (name.startsWith('r')) reserved += Number(usd);
    }
    return { spent, reserved };
  } finally {
    client.disconnect();
  }
}

describe('Sentinel: the primary killed under steady traffic', () => {
  it('no request fails, the gateway follows the new primary, and the budget lands there', async () => {
    const logs = capturedLogger('info');
    const g = await scripted.gateway(
      {
        BREAKER_THRESHOLD: '0',
        RETRY_MAX_ATTEMPTS: '1',
        COST_BUDGETS: JSON.stringify({ default: { '1h': 100 } }),
        REDIS_URL: sentinel.url,
        REDIS_KEY_PREFIX: PREFIX,
        // Long enough for a loaded machine: the outage here is the failover, not a slow command.
        REDIS_TIMEOUT_MS: '1000',
      },
      { logger: logs.logger },
    );
    expect(await until(() => g.app.sharedState.status() === 'redis', 400)).toBe(true);
    expect(g.app.sharedState.topology()).toEqual({ budgets: 'sentinel', cache: 'sentinel' });
    const apiKey = `sk-failover-${randomUUID()}`;
    const headers = { 'x-api-key': apiKey };

    const results: GqlResult[] = [];
    let running = true;
    let sent = 0;
    const worker = async (w: number) => {
      // Bounded: stops when told, and at most 5,000 checks per worker whatever happens.
      for (let i = 0; running && i < 5000; i++) {
        sent++;
        results.push(await gql(g.url, check(`w${w}-${i}`), { headers }));
      }
    };
    const workers = Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    try {
      // Traffic on the first primary, then the kill.
      expect(await until(() => results.length >= 40, 400)).toBe(true);
      // The replica about to be promoted may evict: the eviction check must read it after the switch.
      const replica = directClient(sentinel.replica.port, sentinel.password);
      await replica.connect();
      await replica.config('SET', 'maxmemory', '64mb');
      await replica.config('SET', 'maxmemory-policy', 'allkeys-lru');
      replica.disconnect();
      const beforeKill = results.length;
      const killedAt = performance.now();
      await sentinel.primary.kill();
      // The sentinels promote the replica; the gateway finds it.
      expect(
        await until(async () => (await sentinel.primaryPort()) === sentinel.replica.port, 600),
        'the sentinels promoted the replica',
      ).toBe(true);
      const promotedMs = performance.now() - killedAt;
      expect(await until(() => g.app.sharedState.status() === 'redis', 600), 'back on Redis').toBe(true);
      const followedMs = performance.now() - killedAt;
      const duringSwitch = results.length - beforeKill;
      // More traffic on the new primary.
      const after = results.length;
      expect(await until(() => results.length >= after + 40, 400)).toBe(true);
      running = false;
      await workers;

      // Not one request failed: every check answered, none refused.
      const failed = results.filter((r) => r.errors !== undefined || r.data?.isNull == null);
      expect(failed, 'failed requests').toEqual([]);
      expect(results.length).toBe(sent);

      // Followed: one info line naming the new primary, counted in /metrics, and /ready says sentinel.
      const switched = logs.lines.filter((line) => line.msg === 'redis primary switched');
      expect(switched, JSON.stringify(logs.lines.filter((line) => /redis/.test(line.msg)))).toHaveLength(1);
      expect(switched[0]).toMatchObject({
        primary: `127.0.0.1:${sentinel.replica.port}`,
        before: `127.0.0.1:${sentinel.primary.port}`,
        topology: 'sentinel',
      });
      expect(logs.text()).not.toContain('data-secret-pw-7');
      // The eviction check ran again on the new primary, and said so (an error line, the start is long past).
      const evicting = () =>
        logs.lines.filter(
          (line) => line.level === 50 && /may evict keys \(maxmemory-policy allkeys-lru/.test(line.msg),
        );
      expect(await until(() => evicting().length === 1), 'the eviction check read the new primary').toBe(
        true,
      );
      const registry = g.app.metrics.registry;
      expect(await metricValue(registry, 'gateway_redis_topology_changes_total', { role: 'budgets' })).toBe(
        1,
      );
      expect(
        await metricValue(registry, 'gateway_redis_topology', { role: 'budgets', topology: 'sentinel' }),
      ).toBe(1);
      const ready = (await (await fetch(new URL('/ready', g.origin))).json()) as Record<string, unknown>;
      expect(ready).toMatchObject({ redis: 'redis', redisTopology: { budgets: 'sentinel' } });

      // The bill, and what the new primary holds once every settlement (and what was owed from the
      // switch) has been written: spend equal to the bill, nothing left reserved.
      const billed = results.reduce(
        (sum, r) => sum + ((r.extensions?.cost as Cost | undefined)?.gpuCostUsd ?? 0),
        0,
      );
      // A budget write after the switch pushes what the replica owes (bounded wait).
      await gql(g.url, check('flush'), { headers });
      const total = billed + CHECK_USD;
      let held = await onServer(sentinel.replica.port, apiKey, PREFIX, sentinel.password);
      await until(async () => {
        held = await onServer(sentinel.replica.port, apiKey, PREFIX, sentinel.password);
        return Math.abs(held.spent + held.reserved - total) < 1e-9;
      }, 100);
      // Spend counted twice (+) or lost (−), reservations left over (a settlement whose reply the dying
      // primary never sent, pushed again: its reservation released twice), and the window's total.
      const spentOff = held.spent - total;
      const totalOff = held.spent + held.reserved - total;
      console.info(
        `sentinel failover: ${results.length} checks (${duringSwitch} during the switch), billed ${total.toFixed(4)} USD; ` +
          `new primary: spent ${held.spent.toFixed(4)} (${spentOff >= 0 ? '+' : ''}${spentOff.toFixed(4)}), ` +
          `reserved ${held.reserved.toFixed(4)}, window total off by ${totalOff.toFixed(4)} USD; ` +
          `promoted after ${Math.round(promotedMs)} ms, gateway back on Redis after ${Math.round(followedMs)} ms`,
      );
      // Bounded by what was in flight at the kill: each worker has at most one operation in flight,
      // whose reservation or settlement the dead primary may have taken without replicating it, or
      // applied without answering.
      const bound = WORKERS * FIRST_ESTIMATE + 1e-9;
      expect(Math.abs(totalOff)).toBeLessThanOrEqual(bound);
      expect(Math.abs(spentOff)).toBeLessThanOrEqual(bound);
      expect(Math.abs(held.reserved)).toBeLessThanOrEqual(bound);
    } finally {
      running = false;
      await workers;
      await sleep(0);
    }
  }, 60_000);
});

describe('Sentinel: the primary killed in the middle of a budget burst across two replicas', () => {
  const BUDGET = 0.05;

  it('no request fails, each replica spends only its part of what was left during the switch, and the budget is shared again after it', async () => {
    const setup = await startRedisSentinel({ downAfterMs: 1000 });
    try {
      const prefix = `snb-${randomUUID().slice(0, 8)}:`;
      const env = {
        ...burstEnv(BUDGET),
        REDIS_URL: setup.url,
        REDIS_KEY_PREFIX: prefix,
        REDIS_TIMEOUT_MS: '2000',
      };
      const [a, b] = await Promise.all([scripted.gateway(env), scripted.gateway(env)]);
      expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'redis'), 400)).toBe(true);
      const apiKey = `sk-burst-failover-${randomUUID()}`;
      const headers = { 'x-api-key': apiKey };

      // The first half reserves on the primary; then it is killed; the second half reserves during
      // the switch. Every answer is held until the whole burst has reserved or been refused.
      let killed: () => void = () => {};
      const afterKill = new Promise<void>((resolve) => {
        killed = resolve;
      });
      const results = await burst(
        40,
        async (i) => {
          if (i >= 20) await afterKill;
          return gql((i % 2 === 0 ? a : b).url, check(`f${i}`), { headers });
        },
        async () => {
          // The first half has reserved (reached the upstream) or been refused.
          await until(() => checks() >= Math.min(20, Math.floor((BUDGET + 1e-9) / FIRST_ESTIMATE)), 200);
          await setup.primary.kill();
          expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'fallback'))).toBe(
            true,
          );
          killed();
        },
      );
      expect(results).toHaveLength(40);
      // Nothing failed: answered or refused (at most twice the budget, checked tighter below).
      const { billed, answered, refused } = expectSplitBudget(results, BUDGET);

      // The replica promoted, both gateways follow it; a budget write each pushes what they owe.
      expect(await until(async () => (await setup.primaryPort()) === setup.replica.port, 600)).toBe(true);
      expect(await until(() => [a, b].every((g) => g.app.sharedState.status() === 'redis'), 600)).toBe(true);
      const otherKey = { 'x-api-key': `sk-other-${randomUUID()}` };
      for (const g of [a, b])
        expect((await gql(g.url, check(`flush-${g.url}`), { headers: otherKey })).errors).toBeUndefined();
      let held = await onServer(setup.replica.port, apiKey, prefix, undefined);
      await until(async () => {
        held = await onServer(setup.replica.port, apiKey, prefix, undefined);
        return Math.abs(held.spent + held.reserved - billed) < 1e-9;
      }, 100);
      const spentOff = held.spent - billed;
      const totalOff = held.spent + held.reserved - billed;
      console.info(
        `sentinel failover mid-burst: ${answered} answered, ${refused} refused, billed ${billed.toFixed(4)} USD ` +
          `(budget ${BUDGET}); new primary: spent ${held.spent.toFixed(4)} (${spentOff >= 0 ? '+' : ''}${spentOff.toFixed(4)}), ` +
          `reserved ${held.reserved.toFixed(4)}, window total off by ${totalOff.toFixed(4)} USD`,
      );
      // Bounded by the operations in flight at the kill (their reservations or settlements).
      const bound = 20 * FIRST_ESTIMATE + 1e-9;
      expect(Math.abs(totalOff)).toBeLessThanOrEqual(bound);
      expect(Math.abs(spentOff)).toBeLessThanOrEqual(bound);
      expect(Math.abs(held.reserved)).toBeLessThanOrEqual(bound);
      // Each replica spent only its part of what was left during the switch (contract §9): the bill
      // within the budget plus the estimation error of the operations in flight.
      expect(billed).toBeLessThanOrEqual(BUDGET + MAX_ESTIMATE_ERROR);
      // Shared again: what is left of the key's hour goes once, whichever replica asks, then both refuse.
      let afterwards = 0;
      for (let i = 0; i < 4; i++) {
        const answer = await gql((i % 2 === 0 ? a : b).url, check(`after-${i}`), { headers });
        afterwards += (answer.extensions?.cost as Cost | undefined)?.gpuCostUsd ?? 0;
      }
      expect(billed + afterwards).toBeLessThanOrEqual(BUDGET + MAX_ESTIMATE_ERROR);
      for (const g of [a, b])
        expect((await gql(g.url, check(`after-${g.url}`), { headers })).errors?.[0]?.extensions?.code).toBe(
          'BUDGET_EXCEEDED',
        );
    } finally {
      await setup.stop();
    }
  }, 90_000);
});
