/**
 * A reservation is a lease (docs/contract.md, More than one machine): two gateway processes on one
 * real redis-server; eight checks held at the (scripted, in this process) upstream through replica A;
 * A's process group is killed with SIGKILL (Kubernetes past the grace period, the OOM killer). Replica
 * B's `budget` field shows the reservations until their leases expire (the operation's deadline plus
 * BUDGET_LEASE_MARGIN_MS, by Redis' clock), then as spent at their estimates, counted once in B's
 * metrics. The control: an operation that ends normally settles to its actual cost, and nothing lapses.
 *
 * Both bounds are checked against Redis' own clock (TIME, read just before each look at B), not the
 * test's: before the earliest expiry B must still show the money reserved; after the latest, none.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callerIdOf } from '../../src/gateway/identity.js';
import { budgetRedisKeys } from '../../src/gateway/shared-state/redis-keys.js';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
// The scripted upstream's price per check, the gateway's first estimate of one (what is reserved).
import { CHECK_USD, check, FIRST_ESTIMATE } from '../support/budget-bursts.js';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';
import { gql } from '../support/graphql-client.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { gate, sleep, until } from '../support/waits.js';

requireRedisServer('budget-leases');

const HELD = 8;
/** Short, to keep the test short; long enough for eight operations to reserve on a busy machine. */
const DEADLINE_MS = 6000;
const MARGIN_MS = 2000;
const PREFIX = 'leases:';
const BUDGET_QUERY = '{ budget { windows { window limitUsd spentUsd reservedUsd remainingUsd } } }';

interface Window {
  window: string;
  spentUsd: number;
  reservedUsd: number;
}

let redis: RedisServer;
let raw: Redis;
let upstream: ScriptedUpstream;
let a: GatewayProcess;
let b: GatewayProcess;
/** The held checks' answers wait for this (opened at the end, so the upstream closes cleanly). */
const held = gate();

beforeAll(async () => {
  redis = await startRedisServer();
  raw = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  upstream = await startScriptedUpstream();
  routeSpecAnswers(upstream, upstream, '/pi');
  upstream.route('POST', '/api/v1/check', (req) => {
    const value = (req.body as { value?: unknown }).value;
    return {
      holdUntil: typeof value === 'string' && value.startsWith('held-') ? held.opened : undefined,
      body: nullBody({ gpu_cost_usd: CHECK_USD }),
    };
  });
  const env = {
    NULL_BASE_URL: upstream.url,
    PI_BASE_URL: `${upstream.url}/pi`,
    NULL_API_VERSION: 'v1',
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: PREFIX,
    COST_BUDGETS: JSON.stringify({ default: { '1h': 0.05, '24h': 0.5 } }),
    OPERATION_DEADLINE_MS: String(DEADLINE_MS),
    BUDGET_LEASE_MARGIN_MS: String(MARGIN_MS),
    UPSTREAM_TIMEOUT_MS: '30000',
    BREAKER_THRESHOLD: '0',
    RETRY_MAX_ATTEMPTS: '1',
  };
  [a, b] = await Promise.all([
    startGatewayProcess(env, 60_000, { detached: true }),
    startGatewayProcess(env),
  ]);
  for (const replica of [a, b]) {
    const connected = () => replica.lines.some((l) => l.msg === 'redis connected; sharing state');
    expect(await until(connected, 400), 'connected to Redis').toBe(true);
  }
}, 120_000);

afterAll(async () => {
  held.open();
  if (a !== undefined && a.child.exitCode === null && a.child.signalCode === null) killGroup(a);
  await b?.stop();
  raw?.disconnect();
  await upstream?.close();
  await redis?.stop();
});

function killGroup(replica: GatewayProcess) {
  const pid = replica.child.pid;
  if (pid !== undefined) process.kill(-pid, 'SIGKILL');
}

async function windowsOf(replica: GatewayProcess, apiKey: string): Promise<Window[]> {
  const answer = await gql(replica.url, BUDGET_QUERY, { headers: { 'x-api-key': apiKey } });
  expect(answer.errors).toBeUndefined();
  return (answer.data as { budget: { windows: Window[] } }).budget.windows;
}

/** Redis' clock, in ms. */
async function redisNow(): Promise<number> {
  const [seconds, micros] = await raw.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

async function metric(replica: GatewayProcess, name: string): Promise<number> {
  const text = await (await fetch(replica.url.replace('/graphql', '/metrics'))).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.slice(name.length + 1));
}

const round = (usd: number) => Math.round(usd * 1e8) / 1e8;

describe('reservations are leases', () => {
  it('a replica killed holding eight reservations: they lapse into spend at the deadline plus the margin, counted once; a normal operation settles to its cost', async () => {
    const killedKey = `sk-killed-${randomUUID()}`;
    const controlKey = `sk-control-${randomUUID()}`;

    // The control: an operation that ends normally, through B.
    const control = await gql(b.url, check('control'), { headers: { 'x-api-key': controlKey } });
    expect(control.errors).toBeUndefined();
    expect(control.extensions?.cost).toMatchObject({ gpuCostUsd: CHECK_USD });

    // Eight checks held at the upstream through A.
    const before = upstream.count('POST', '/api/v1/check');
    const sentAt = Date.now();
    const inFlight = Array.from({ length: HELD }, (_, i) =>
      gql(a.url, check(`held-${i}`), { headers: { 'x-api-key': killedKey } }).catch(
        (error: unknown) => error,
      ),
    );
    expect(
      await until(() => upstream.count('POST', '/api/v1/check') - before === HELD, 200),
      'all eight at the upstream',
    ).toBe(true);
    const reserved = round(HELD * FIRST_ESTIMATE);
    for (const window of await windowsOf(b, killedKey))
      expect(window).toMatchObject({ spentUsd: 0, reservedUsd: reserved });

    // Each lease expires at most the deadline plus the margin after it was taken (Redis' clock).
    const keys = budgetRedisKeys(PREFIX, callerIdOf(killedKey), [3_600_000, 86_400_000]);
    const leases = await raw.zrange(keys.lease, 0, -1, 'WITHSCORES');
    expect(leases.length).toBe(2 * HELD);
    const expiries: number[] = [];
    for (let i = 0; i < leases.length; i += 2) {
      const taken = Number((leases[i] as string).split(':')[1]);
      const expiry = Number(leases[i + 1]);
      expect(expiry - taken).toBeGreaterThan(MARGIN_MS);
      expect(expiry - taken).toBeLessThanOrEqual(DEADLINE_MS + MARGIN_MS);
      expiries.push(expiry);
    }
    const first = Math.min(...expiries);
    const last = Math.max(...expiries);

    killGroup(a);
    const killedAt = Date.now();
    if (a.child.exitCode === null && a.child.signalCode === null) await once(a.child, 'exit');
    const failed = await Promise.all(inFlight);
    expect(failed.every((outcome) => outcome instanceof Error)).toBe(true);

    // B, polled (bounded): reserved until the first lease expires, none after the last.
    let lapsedAt: number | undefined;
    let looks = 0;
    const tries = Math.ceil((DEADLINE_MS + MARGIN_MS + 30_000) / 100);
    for (let i = 0; i < tries && lapsedAt === undefined; i++) {
      // B's read sweeps by Redis' clock when it runs, between these two readings of it: none lapsed
      // if the later is before the first expiry, all if the earlier is past the last.
      const clock = await redisNow();
      const windows = await windowsOf(b, killedKey);
      const clockAfter = await redisNow();
      looks++;
      if (clockAfter < first)
        for (const window of windows) expect(window).toMatchObject({ spentUsd: 0, reservedUsd: reserved });
      if (clock > last) {
        for (const window of windows) expect(window).toMatchObject({ spentUsd: reserved, reservedUsd: 0 });
        lapsedAt = Date.now();
      }
      await sleep(100);
    }
    expect(lapsedAt, 'the leases lapsed').toBeDefined();
    expect(looks).toBeGreaterThan(1);
    console.info(
      `budget-leases: lapsed ${((lapsedAt as number) - killedAt) / 1000} s after the kill, ` +
        `${((lapsedAt as number) - sentAt) / 1000} s after the checks were sent ` +
        `(deadline ${DEADLINE_MS / 1000} s + margin ${MARGIN_MS / 1000} s)`,
    );

    // Counted once: later reads add nothing, the set is empty, B's metrics count each lease once.
    for (let i = 0; i < 3; i++)
      for (const window of await windowsOf(b, killedKey))
        expect(window).toMatchObject({ spentUsd: reserved, reservedUsd: 0 });
    expect(await raw.exists(keys.lease)).toBe(0);
    expect(await metric(b, 'gateway_budget_lapsed_reservations_total')).toBe(HELD);
    expect(round(await metric(b, 'gateway_budget_lapsed_usd_total'))).toBe(reserved);

    // The control settled to its actual cost, and its lease (long expired by now) lapsed nothing.
    for (const window of await windowsOf(b, controlKey))
      expect(window).toMatchObject({ spentUsd: CHECK_USD, reservedUsd: 0 });
    const controlKeys = budgetRedisKeys(PREFIX, callerIdOf(controlKey), [3_600_000]);
    expect(await raw.exists(controlKeys.lease)).toBe(0);
    expect(await metric(b, 'gateway_budget_lapsed_reservations_total')).toBe(HELD);
  }, 120_000);
});
