/**
 * What single flight across replicas costs Redis (docs/operations.md, Single flight's cost): two
 * gateway processes (the CLI) on one real `redis-server`, in front of one scripted upstream that counts
 * what reaches it, the response cache and budgets off, so every Redis command here is the flights'
 * (the scoreboard's periodic script aside, which runs no SET, GET, MGET or DEL).
 *
 * A replica claims a call across replicas only when it has itself called the same key recently:
 * distinct values cost Redis nothing, counted by Redis (`INFO commandstats`) and by the gateways'
 * own `gateway_redis_commands_total{purpose="flight"}`; a value both replicas have called recently is
 * shared while in flight; a value neither has seen reaches the upstream at most once per replica.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';
import { gql } from '../support/graphql-client.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { routeHeldChecks } from '../support/upstream-bodies.js';
import { gate, until } from '../support/waits.js';

requireRedisServer('flight-redis-cost');

const CHECK_USD = 0.004;
const IS_NULL =
  'query IsNull($value: JSON) { isNull(value: $value) { __typename ... on NullVerdict { isNull } } }';

let redis: RedisServer;
let raw: Redis;
let upstream: ScriptedUpstream;
let a: GatewayProcess;
let b: GatewayProcess;
/** Checks of these values are answered once their gate opens: in flight for as long as a test needs. */
const holds = new Map<string, Promise<void>>();

beforeAll(async () => {
  redis = await startRedisServer();
  raw = new Redis(redis.url, { maxRetriesPerRequest: 0 });
  upstream = await startScriptedUpstream();
  routeHeldChecks(upstream, holds, CHECK_USD);
  const env = {
    NULL_BASE_URL: upstream.url,
    PI_BASE_URL: `${upstream.url}/pi`,
    NULL_API_VERSION: 'v1',
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: 'flight-cost:',
    // A timeout a loaded machine cannot trip: these tests count commands, not fallbacks.
    REDIS_TIMEOUT_MS: '5000',
    RESPONSE_CACHE: 'false',
  };
  [a, b] = await Promise.all([startGatewayProcess(env), startGatewayProcess(env)]);
  for (const replica of [a, b]) {
    const connected = () => replica.lines.some((l) => l.msg === 'redis connected; sharing state');
    expect(await until(connected, 400), 'connected to Redis').toBe(true);
  }
});

afterEach(() => holds.clear());

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  raw?.disconnect();
  await upstream?.close();
  await redis?.stop();
});

/** Calls per command since the last CONFIG RESETSTAT, as Redis counts them (scripts' own included). */
async function commandCalls(): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const match of (await raw.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    calls.set(match[1] as string, Number(match[2]));
  return calls;
}

/** A replica's `gateway_redis_commands_total{purpose="flight"}`. */
async function flightCommands(gateway: GatewayProcess): Promise<number> {
  const text = await (await fetch(gateway.url.replace('/graphql', '/metrics'))).text();
  const match = /^gateway_redis_commands_total\{purpose="flight"\} (\d+)/m.exec(text);
  expect(match, 'gateway_redis_commands_total{purpose="flight"} in /metrics').not.toBeNull();
  return Number(match?.[1]);
}

const checks = () => upstream.count('POST', '/api/v1/check');
const costOf = (result: { extensions?: unknown }) =>
  (result.extensions as { cost: { gpuCostUsd: number } }).cost.gpuCostUsd;

describe('single flight across replicas: what it costs Redis', () => {
  it('distinct values through both replicas make no flight command', async () => {
    const before = [await flightCommands(a), await flightCommands(b)];
    await raw.config('RESETSTAT');
    upstream.resetRecords();
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        gql(i % 2 === 0 ? a.url : b.url, IS_NULL, { variables: { value: `distinct-${i}` } }),
      ),
    );
    for (const answer of answers) expect(answer.errors).toBeUndefined();
    expect(checks()).toBe(24);
    // The flights' commands: SET NX (claim), the settle script (SET, GET, DEL inside), MGET (followers).
    const calls = await commandCalls();
    for (const command of ['set', 'get', 'mget', 'del']) expect(calls.get(command) ?? 0, command).toBe(0);
    expect([await flightCommands(a), await flightCommands(b)]).toEqual(before);
  });

  it('a value each replica has called recently is shared while in flight: one upstream call', async () => {
    for (const url of [a.url, b.url]) await gql(url, IS_NULL, { variables: { value: 'hot' } });
    upstream.resetRecords();
    await raw.config('RESETSTAT');
    const before = (await flightCommands(a)) + (await flightCommands(b));
    const answer = gate();
    holds.set('hot', answer.opened);
    const both = Promise.all([
      gql(a.url, IS_NULL, { variables: { value: 'hot' } }),
      gql(b.url, IS_NULL, { variables: { value: 'hot' } }),
    ]);
    // One replica's call is at the upstream (held); the other claimed too and polls for its answer.
    expect(
      await until(async () => checks() === 1 && ((await commandCalls()).get('mget') ?? 0) > 0, 200),
    ).toBe(true);
    answer.open();
    const [x, y] = await both;
    expect(y.data).toEqual(x.data);
    expect(checks()).toBe(1);
    expect([costOf(x), costOf(y)].sort()).toEqual([0, CHECK_USD]);
    // Both claimed (a SET NX each), the leader settled: counted by the gateways as flight commands.
    expect((await commandCalls()).get('set') ?? 0).toBeGreaterThanOrEqual(2);
    expect((await flightCommands(a)) + (await flightCommands(b)) - before).toBeGreaterThanOrEqual(3);
  });

  it('a value neither replica has seen reaches the upstream at most once per replica', async () => {
    upstream.resetRecords();
    const answer = gate();
    holds.set('new', answer.opened);
    const calls = Promise.all(
      [a.url, a.url, b.url, b.url].map((url) => gql(url, IS_NULL, { variables: { value: 'new' } })),
    );
    // Each replica shares its own two calls in process, and makes one upstream call of its own.
    expect(await until(() => checks() === 2, 200)).toBe(true);
    answer.open();
    for (const result of await calls) expect(result.errors).toBeUndefined();
    expect(checks()).toBe(2);
  });
});
