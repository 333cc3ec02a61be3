/**
 * `npx tsx test/bench/spend-burst.ts`: the QA reproduction of the hourly budget under a burst
 * (docs/contract.md, Cost), printed as one JSON line per scenario (not part of `npm test`).
 *
 * - one process, COST_BUDGET_USD_PER_HOUR=0.05: 100 concurrent `isNull` (distinct values, so nothing
 *   is shared) from one key, against the embedded reference services;
 * - two gateways on one real redis-server, the same budget: 40 concurrent `pi(digits: 3000)`, half
 *   through each, against one pair of reference services.
 *
 * The reference services answer 300 ms later than they would (their fault-injection latency).
 * `billedUsd` is the sum of what the upstreams reported (each answer's extensions.cost.gpuCostUsd);
 * `answered` the operations that got data; `refused` those refused with BUDGET_EXCEEDED.
 * Uses only the test helpers' public entry points, so the same file runs on an older commit.
 */

import { startTestGateway, startTestServices } from '../support/gateway.js';
import { type GqlResult, gql } from '../support/graphql-client.js';
import { startRedisServer } from '../support/redis-server.js';

const BUDGET = '0.05';
/** No rate limits; every answer takes 300 ms more, as a model call does, so the burst all arrives before the first cost. */
const SERVICES_ENV = { FREE_RATE_LIMIT: '0', NULL_FAULT_LATENCY_MS: '300' };

interface Cost {
  gpuCostUsd?: number;
}

function tally(name: string, results: GqlResult[]) {
  let billed = 0;
  let answered = 0;
  let refused = 0;
  for (const result of results) {
    billed += (result.extensions?.cost as Cost | undefined)?.gpuCostUsd ?? 0;
    if (result.data != null && Object.values(result.data).some((v) => v !== null)) answered++;
    if (result.errors?.some((e) => e.extensions?.code === 'BUDGET_EXCEEDED')) refused++;
  }
  const line = {
    scenario: name,
    budgetUsd: Number(BUDGET),
    operations: results.length,
    answered,
    refused,
    billedUsd: Math.round(billed * 1e6) / 1e6,
  };
  console.log(JSON.stringify(line));
}

async function oneProcess() {
  const gateway = await startTestGateway({ env: { ...SERVICES_ENV, COST_BUDGET_USD_PER_HOUR: BUDGET } });
  try {
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        gql(gateway.url, `{ isNull(value: ${i}) { __typename } }`, { headers: { 'x-api-key': 'free' } }),
      ),
    );
    tally('one process, 100 concurrent isNull', results);
  } finally {
    await gateway.close();
  }
}

async function twoReplicas() {
  const redis = await startRedisServer();
  const services = await startTestServices({ freeRateLimit: 0, piFaultLatencyMs: 300 });
  const env = {
    ...SERVICES_ENV,
    COST_BUDGET_USD_PER_HOUR: BUDGET,
    REDIS_URL: redis.url,
    REDIS_TIMEOUT_MS: '1000',
  };
  const replicas = await Promise.all(
    [0, 1].map(() =>
      startTestGateway({ env, nullBaseUrl: services.nullCheckUrl, piBaseUrl: services.piDigitsUrl }),
    ),
  );
  try {
    // Both connected to Redis before the burst (bounded wait).
    for (let i = 0; i < 100 && replicas.some((r) => r.app.sharedState.status() !== 'redis'); i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        gql((replicas[i % 2] as { url: string }).url, `{ pi(digits: ${3000 + i}) { __typename } }`, {
          headers: { 'x-api-key': 'demo-enterprise' },
        }),
      ),
    );
    tally('two replicas + redis, 40 concurrent pi(digits: 3000+), one enterprise key', results);
  } finally {
    await Promise.all(replicas.map((r) => r.close()));
    await services.close();
    await redis.stop();
  }
}

await oneProcess();
await twoReplicas();
process.exit(0);
