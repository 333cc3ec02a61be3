/**
 * More than one replica on one Redis (docs/contract.md, More than one machine): two gateway processes
 * (the CLI, as `npm start` runs it) in front of one scripted upstream that counts what reaches it, on a
 * real `redis-server`. The response cache and the hourly budget are one across both (the single flight
 * of identical calls: flight-redis-cost.test.ts); Redis going away fails nothing, is logged once and
 * shown on /ready, and sharing resumes by itself. Also WORKERS=2 with Redis: the cluster's workers share one cache.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';
import { gql } from '../support/graphql-client.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { routeHeldChecks } from '../support/upstream-bodies.js';
import { gate, until } from '../support/waits.js';

requireRedisServer('scale-out-redis');

/** Cost of one scripted check, in dollars. */
const CHECK_USD = 0.004;
/**
 * A Redis timeout a loaded machine cannot trip (the default is 25 ms): these tests check sharing, not
 * the fallback a slow Redis read turns into (the fallback has tests of its own; a killed Redis refuses
 * at once, so this does not slow the test that kills it).
 */
const REDIS_TIMEOUT_MS = '5000';

let redis: RedisServer;
let upstream: ScriptedUpstream;
const processes: GatewayProcess[] = [];
/** Checks of these values are answered once their gate opens: in flight for as long as a test needs. */
const holds = new Map<string, Promise<void>>();

const IS_NULL =
  'query IsNull($value: JSON) { isNull(value: $value) { __typename ... on NullVerdict { isNull } } }';

beforeAll(async () => {
  redis = await startRedisServer();
  upstream = await startScriptedUpstream();
  routeHeldChecks(upstream, holds, CHECK_USD);
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await upstream?.close();
  await redis?.stop();
});

/** Two replicas on one Redis, with extra settings. */
async function replicas(env: Record<string, string>): Promise<[GatewayProcess, GatewayProcess]> {
  const shared = {
    NULL_BASE_URL: upstream.url,
    PI_BASE_URL: `${upstream.url}/pi`,
    NULL_API_VERSION: 'v1',
    REDIS_URL: redis.url,
    REDIS_KEY_PREFIX: `test-${processes.length}:`,
    REDIS_TIMEOUT_MS,
    ...env,
  };
  const pair = await Promise.all([startGatewayProcess(shared), startGatewayProcess(shared)]);
  processes.push(...pair);
  for (const replica of pair) await sharing(replica);
  return pair;
}

/**
 * Waits (bounded) until each of the process' `workers` has connected to Redis: a process listens
 * before its lazy Redis connection is up, and a request served before that is served from memory.
 */
async function sharing(gateway: GatewayProcess, workers = 1): Promise<void> {
  const connected = () => gateway.lines.filter((l) => l.msg === 'redis connected; sharing state').length;
  expect(await until(() => connected() >= workers, 400), 'connected to Redis').toBe(true);
}

const checks = () => upstream.count('POST', '/api/v1/check');
/** The values of the checks that reached the upstream, each once. */
const checkedValues = () =>
  new Set(
    upstream.requests
      .filter((r) => r.path === '/api/v1/check')
      .map((r) => (r.body as { value?: unknown }).value),
  );

/**
 * Whether a cached answer is in Redis under `prefix` (bounded wait). A replica writes an answer to
 * Redis after answering its caller, without waiting (best effort): a test that asks another replica
 * for it waits for the write first, so it checks sharing rather than a race it would lose on a busy
 * machine.
 */
async function cachedInRedis(prefix: string): Promise<boolean> {
  const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await client.connect();
    return await until(async () => (await client.keys(`${prefix}cache:*`)).length > 0);
  } finally {
    client.disconnect();
  }
}

/** The key prefix of the two-replica tests with the response cache on. */
const CACHE_PREFIX = 'test-cache:';

describe('two replicas on one Redis', () => {
  let a: GatewayProcess;
  let b: GatewayProcess;
  beforeAll(async () => {
    [a, b] = await replicas({ RESPONSE_CACHE: 'true', REDIS_KEY_PREFIX: CACHE_PREFIX });
  });
  afterEach(() => holds.clear());

  it('an answer fetched through A is a cache hit through B, and costs B nothing', async () => {
    upstream.resetRecords();
    const first = await gql(a.url, IS_NULL, { variables: { value: 'shared-cache' } });
    expect(first.errors).toBeUndefined();
    expect(first.extensions).toMatchObject({
      cache: { hits: 0, misses: 1 },
      cost: { gpuCostUsd: CHECK_USD },
    });
    expect(await cachedInRedis(CACHE_PREFIX)).toBe(true);
    const second = await gql(b.url, IS_NULL, { variables: { value: 'shared-cache' } });
    expect(second.data).toEqual(first.data);
    expect(second.extensions).toMatchObject({
      cache: { hits: 1, misses: 0 },
      cost: { gpuCostUsd: 0, upstreamCalls: 0, cacheHits: 1 },
    });
    expect(checks()).toBe(1);
  });

  // Identical concurrent calls through A and B sharing one upstream call: flight-redis-cost.test.ts
  // (with the cache off: a replica claims only a value it has called recently, and with the cache on
  // that earlier call would make these cache hits).

  it('Redis killed under load: no request fails, one warning, /ready shows it; sharing resumes after', async () => {
    upstream.resetRecords();
    const load = gate();
    for (let v = 0; v < 6; v++) holds.set(`load-${v}`, load.opened);
    const send = (i: number) =>
      gql(i % 2 === 0 ? a.url : b.url, IS_NULL, { variables: { value: `load-${i % 6}` } });
    const before = Array.from({ length: 20 }, (_, i) => send(i));
    // Each of the six values is in flight, its answer held at the upstream, when Redis dies.
    expect(await until(() => checkedValues().size === 6, 200)).toBe(true);
    await redis.kill();
    const after = Array.from({ length: 40 }, (_, i) => send(20 + i));
    load.open();
    const results = await Promise.all([...before, ...after]);
    for (const result of results) {
      expect(result.status).toBe(200);
      expect(result.errors).toBeUndefined();
    }
    expect(await until(async () => (await ready(a)).redis === 'fallback', 100, 50)).toBe(true);
    const report = await ready(a);
    expect(report.status).toBe('ready');
    // Later requests during the outage still answer, from memory.
    expect((await gql(b.url, IS_NULL, { variables: { value: 'during-outage' } })).errors).toBeUndefined();
    expect(a.lines.filter((l) => l.msg === 'redis unavailable; using in-memory state')).toHaveLength(1);

    await redis.restart();
    expect(
      await until(
        async () => (await ready(a)).redis === 'redis' && (await ready(b)).redis === 'redis',
        200,
        50,
      ),
    ).toBe(true);
    expect(a.lines.filter((l) => l.msg === 'redis back; sharing state again')).toHaveLength(1);
    upstream.resetRecords();
    await gql(a.url, IS_NULL, { variables: { value: 'after-restart' } });
    const hit = await gql(b.url, IS_NULL, { variables: { value: 'after-restart' } });
    expect(hit.extensions).toMatchObject({ cache: { hits: 1 } });
    expect(checks()).toBe(1);
  });
});

describe('the hourly budget is one budget across replicas', () => {
  it('spend through A and B adds up, and both refuse once the next estimate no longer fits', async () => {
    const [a, b] = await replicas({ COST_BUDGET_USD_PER_HOUR: '0.01' });
    upstream.resetRecords();
    const key = { authorization: 'Bearer budget-key' };
    // Each reserves its estimate (about 0.004) in Redis: 0.004 through A, then 0.004 through B fit
    // in 0.01; a third, through either replica, would not.
    for (const [i, url] of [a.url, b.url].entries()) {
      const answer = await gql(url, IS_NULL, { variables: { value: `spend-${i}` }, headers: key });
      expect(answer.errors).toBeUndefined();
    }
    for (const url of [a.url, b.url]) {
      const refused = await gql(url, IS_NULL, { variables: { value: 'spend-3' }, headers: key });
      expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BUDGET_EXCEEDED' });
      expect(refused.errors?.[0]?.extensions?.retryAfterSeconds).toBeGreaterThan(3000);
    }
    expect(checks()).toBe(2);
    // Another key has a budget of its own.
    const other = await gql(b.url, IS_NULL, {
      variables: { value: 'spend-4' },
      headers: { 'x-api-key': 'other' },
    });
    expect(other.errors).toBeUndefined();
  });
});

describe('cluster workers on Redis', () => {
  it('WORKERS=2: every worker serves the answer the first one cached', async () => {
    const [cluster] = await Promise.all([
      startGatewayProcess({
        NULL_BASE_URL: upstream.url,
        PI_BASE_URL: `${upstream.url}/pi`,
        NULL_API_VERSION: 'v1',
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: 'test-cluster:',
        RESPONSE_CACHE: 'true',
        REDIS_TIMEOUT_MS,
        WORKERS: '2',
      }),
    ]);
    processes.push(cluster as GatewayProcess);
    await sharing(cluster as GatewayProcess, 2);
    const url = (cluster as GatewayProcess).url;
    upstream.resetRecords();
    await gql(url, IS_NULL, { variables: { value: 'cluster' } });
    expect(await cachedInRedis('test-cluster:')).toBe(true);
    // New connections each time: the primary spreads them over both workers.
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        gql(url, IS_NULL, { variables: { value: 'cluster' }, headers: { connection: 'close' } }),
      ),
    );
    for (const answer of answers) expect(answer.extensions).toMatchObject({ cache: { hits: 1 } });
    expect(checks()).toBe(1);
  });
});

async function ready(gateway: GatewayProcess): Promise<{ status: string; redis?: string }> {
  const response = await fetch(gateway.url.replace('/graphql', '/ready'));
  return (await response.json()) as { status: string; redis?: string };
}
