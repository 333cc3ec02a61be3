/**
 * The scoreboard shared by replicas (docs/graphql.md, Models): two gateways on one real redis-server
 * add to one hash, each sees the other's answers, and routes by them; Redis going away fails and
 * slows nothing, and what was scored meanwhile reaches Redis once it is back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptModels } from '../fixtures/scripted-models.js';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { gql } from '../support/graphql-client.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { until } from '../support/waits.js';

requireRedisServer('models-scoreboard-redis');

let redis: RedisServer;
let upstream: ScriptedUpstream;
const gateways: TestGateway[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  upstream = await startScriptedUpstream();
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await upstream?.close();
  await redis?.stop();
});

async function replica(prefix: string): Promise<TestGateway> {
  const g = await startTestGateway({
    nullBaseUrl: upstream.url,
    piBaseUrl: upstream.url,
    env: {
      NULL_API_VERSION: 'v1',
      PI_API_VERSION: 'v1',
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: prefix,
      // A loaded machine must not turn this test's reads into the fallback's (tested below on purpose).
      REDIS_TIMEOUT_MS: '5000',
    },
  });
  gateways.push(g);
  return g;
}

interface Row {
  model: string;
  band: string;
  answers: number;
  correct: number;
}

async function rowOf(g: TestGateway, model: string): Promise<Row | undefined> {
  const result = await gql(g.url, '{ models { model band answers correct } }');
  expect(result.errors).toBeUndefined();
  return ((result.data?.models ?? []) as Row[]).find((r) => r.model === model && r.band === '0');
}

async function checks(g: TestGateway, model: string, n: number, from: number): Promise<void> {
  for (let i = from; i < from + n; i++) {
    const result = await gql(g.url, `{ isNull(value: ${i}, model: ${model}) { __typename } }`);
    expect(result.errors).toBeUndefined();
  }
}

describe('two replicas on one Redis', () => {
  it('share one scoreboard, and each routes by the other’s answers', async () => {
    scriptModels(upstream, { 'null-x-mini': 0.9 });
    const a = await replica('models-share:');
    const b = await replica('models-share:');
    await checks(a, 'NULL_X_MINI', 30, 0); // 27 of 30 on a
    await checks(b, 'NULL_X_MINI', 30, 100); // 27 of 30 on b (the fixture's count goes on: 54 of 60)
    // Reading writes what waits and brings back every replica's answers.
    expect(await rowOf(a, 'null-x-mini')).toBeDefined();
    expect(await rowOf(b, 'null-x-mini')).toMatchObject({ answers: 60, correct: 54 });
    expect(await rowOf(a, 'null-x-mini')).toMatchObject({ answers: 60, correct: 54 });
    // 54/60: lower bound 0.798. On b, minAccuracy 0.75 is mini's, though a measured half of it.
    const routed = await gql(
      b.url,
      '{ isNull(value: 1, minAccuracy: 0.75) { ... on NullCheck { modelName } } }',
    );
    expect(routed.data?.isNull.modelName).toBe('null-x-mini');
  });

  it('goes on through a Redis outage, and writes what it scored meanwhile once Redis is back', async () => {
    scriptModels(upstream, {});
    const a = await replica('models-outage:');
    const b = await replica('models-outage:');
    await redis.stop();
    await checks(a, 'NULL_X_4O', 5, 200);
    // Meanwhile a answers from its own view.
    expect(await rowOf(a, 'null-x-4o')).toMatchObject({ answers: 5, correct: 5 });
    await redis.restart();
    // a reconnects and writes with its next periodic write; b reads it (a bound for the reconnection).
    expect(await until(async () => (await rowOf(b, 'null-x-4o'))?.answers === 5, 100, 100)).toBe(true);
  });
});
