/**
 * Slow is not away (docs/contract.md, More than one machine): a burst of one key's operations across
 * two gateway processes on one real redis-server, right after they start, while four busy loops (child
 * processes spinning, bounded in time, killed after) load the machine. The default timeouts: 25 ms
 * for the cache and single flight (REDIS_TIMEOUT_MS), the budget scripts' own (REDIS_BUDGET_TIMEOUT_MS)
 * for the budgets. The bill stays within the budget plus one operation's estimate, and once every
 * operation has finished no replica's `budget` field shows money reserved.
 *
 * The upstream is the scripted one, in this process: it holds the burst's answers until every
 * operation has reached it (reserved) or been refused, so the whole burst is in flight at once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
// The scripted upstream's price per check, the gateway's first estimate of one (what is reserved).
import { CHECK_USD, check, FIRST_ESTIMATE } from '../support/budget-bursts.js';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';
import { type GqlResult, gql } from '../support/graphql-client.js';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { gate, sleep, until } from '../support/waits.js';

requireRedisServer('budget-loaded');

const BUDGET = 0.05;
const BURST = 40;
/** Busy loops, each a process spinning for at most this long (killed as soon as the test ends). */
const BUSY_LOOPS = 4;
const BUSY_MS = 120_000;
const BUDGET_QUERY = '{ budget { windows { window spentUsd reservedUsd } } }';

let redis: RedisServer;
let upstream: ScriptedUpstream;
const replicas: GatewayProcess[] = [];
const loops: ChildProcess[] = [];
/** While the burst is being sent: its answers wait for this. */
let held: Promise<void> | undefined;

function spin(): ChildProcess {
  return spawn(process.execPath, ['-e', `const end = Date.now() + ${BUSY_MS}; while (Date.now() < end) {}`], {
    stdio: 'ignore',
  });
}

function stopSpinning() {
  for (const loop of loops.splice(0))
    if (loop.exitCode === null && loop.signalCode === null) loop.kill('SIGKILL');
}

beforeAll(async () => {
  redis = await startRedisServer();
  upstream = await startScriptedUpstream();
  routeSpecAnswers(upstream, upstream, '/pi');
  upstream.route('POST', '/api/v1/check', () => ({
    holdUntil: held,
    body: nullBody({ gpu_cost_usd: CHECK_USD }),
  }));
});

afterAll(async () => {
  stopSpinning();
  await Promise.all(replicas.map((replica) => replica.stop()));
  await upstream?.close();
  await redis?.stop();
});

async function reservedOn(replica: GatewayProcess, apiKey: string): Promise<number> {
  const answer = await gql(replica.url, BUDGET_QUERY, { headers: { 'x-api-key': apiKey } });
  expect(answer.errors).toBeUndefined();
  const windows = (answer.data as { budget: { windows: Array<{ reservedUsd: number }> } }).budget.windows;
  return Math.max(...windows.map((window) => window.reservedUsd));
}

async function metric(replica: GatewayProcess, name: string): Promise<number> {
  const text = await (await fetch(replica.url.replace('/graphql', '/metrics'))).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.slice(name.length + 1));
}

describe('a burst on a loaded machine', () => {
  it('two replicas started under four busy loops: billed within the budget plus one estimate, nothing left reserved', async () => {
    for (let i = 0; i < BUSY_LOOPS; i++) loops.push(spin());
    try {
      const env = {
        NULL_BASE_URL: upstream.url,
        PI_BASE_URL: `${upstream.url}/pi`,
        NULL_API_VERSION: 'v1',
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: 'loaded:',
        COST_BUDGET_USD_PER_HOUR: String(BUDGET),
        // A held answer is a slow upstream to the gateway: bounds no loaded machine reaches (they are
        // not what is tested), and leases that cannot lapse while the test looks.
        UPSTREAM_TIMEOUT_MS: '60000',
        OPERATION_DEADLINE_MS: '120000',
        BREAKER_THRESHOLD: '0',
        RETRY_MAX_ATTEMPTS: '1',
      };
      const pair = await Promise.all([startGatewayProcess(env, 180_000), startGatewayProcess(env, 180_000)]);
      replicas.push(...pair);
      for (const replica of pair) {
        const connected = () => replica.lines.some((l) => l.msg === 'redis connected; sharing state');
        expect(await until(connected, 600), 'connected to Redis').toBe(true);
      }

      // The burst, at once, half through each replica.
      const apiKey = `sk-loaded-${randomUUID()}`;
      const headers = { 'x-api-key': apiKey };
      const answers = gate();
      held = answers.opened;
      let settled = 0;
      const results = Array.from({ length: BURST }, (_, i) =>
        gql((pair[i % 2] as GatewayProcess).url, check(`v${i}`), { headers }).finally(() => {
          settled++;
        }),
      );
      try {
        const reached = () => settled + upstream.count('POST', '/api/v1/check') === BURST;
        expect(await until(reached, 1200), 'each operation reserved or was refused').toBe(true);
      } finally {
        held = undefined;
        answers.open();
      }
      const done: GqlResult[] = await Promise.all(results);

      let billed = 0;
      let answered = 0;
      let refused = 0;
      const other: unknown[] = [];
      for (const result of done) {
        billed += (result.extensions?.cost as { gpuCostUsd?: number } | undefined)?.gpuCostUsd ?? 0;
        const codes = (result.errors ?? []).map((e) => e.extensions?.code);
        if (codes.length === 0) answered++;
        else if (codes.length === 1 && codes[0] === 'BUDGET_EXCEEDED') refused++;
        else other.push(result.errors);
      }
      billed = Math.round(billed * 1e8) / 1e8;
      const fallbacks = pair.map(
        (replica) => replica.lines.filter((l) => l.msg === 'redis unavailable; using in-memory state').length,
      );
      console.info(
        `budget-loaded: ${answered} answered, ${refused} refused, billed ${billed} USD against ${BUDGET} ` +
          `(+ one estimate ${FIRST_ESTIMATE}); outages logged per replica: ${fallbacks.join(', ')}`,
      );
      expect(other).toEqual([]);
      expect(answered + refused).toBe(BURST);
      expect(answered).toBeGreaterThan(0);
      expect(billed).toBeLessThanOrEqual(BUDGET + FIRST_ESTIMATE);

      // Every operation finished: no replica shows money reserved (settlements are sent without
      // waiting for them: a bounded wait, far shorter than any lease).
      for (const replica of pair) {
        let reserved = Number.NaN;
        for (let i = 0; i < 200; i++) {
          reserved = await reservedOn(replica, apiKey);
          if (reserved === 0) break;
          await sleep(100);
        }
        expect(reserved).toBe(0);
        expect(await metric(replica, 'gateway_budget_lapsed_reservations_total')).toBe(0);
      }
    } finally {
      stopSpinning();
    }
  }, 300_000);
});
