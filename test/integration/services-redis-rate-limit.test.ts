/**
 * REDIS_URL on the reference services (docs/contract.md, More than one machine): two replicas of the
 * services, each with its own connection, on one real redis-server share each caller's limit; Redis
 * killed, paused or never there fails no request and is logged once; Redis back, the shared limit is
 * back. Real HTTP on loopback, a 60 s window throughout so that no window runs out during a test,
 * whatever the machine's speed.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createServices,
  type RunningServices,
  type ServicesOptions,
  startServices,
} from '../../src/services/start-services.js';
import { capturedLogger, LEVEL, type LogLine } from '../support/logs.js';
import { freePort, type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';
import { until } from '../support/waits.js';
import { type Answer, bearer, call, expectErrorShape, postJson } from './services-test-helpers.js';

const { warn: WARN, info: INFO } = LEVEL;

/** The services' log lines at info and above, and those of them about Redis at one level. */
function capturingLogger() {
  const captured = capturedLogger('info');
  const redisLines = (level: number): LogLine[] =>
    captured.lines.filter((line) => line.level === level && /Redis/.test(line.msg));
  return { ...captured, redisLines };
}

const running: RunningServices[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.close()));
});

async function replica(options: ServicesOptions): Promise<RunningServices> {
  const services = await startServices({
    rateLimitWindowMs: 60_000,
    redisMaxReconnectDelayMs: 100,
    ...options,
  });
  running.push(services);
  return services;
}

const check = (url: string, headers: Record<string, string> = {}) =>
  call(`${url}/api/v1/check`, postJson({ value: null }, headers));
const checkV2 = (url: string, headers: Record<string, string> = {}) =>
  call(`${url}/api/v2/null-or-not`, postJson({ value: null }, headers));
const pi = (url: string) => call(`${url}/api/v1/pi`);

/** Sends `count` requests one after the other, spread over `targets` in turn; returns the answers. */
async function alternate(
  count: number,
  targets: Array<() => Promise<Answer<unknown>>>,
): Promise<Answer<unknown>[]> {
  const answers: Answer<unknown>[] = [];
  for (let i = 0; i < count; i++)
    answers.push(await (targets[i % targets.length] as () => Promise<Answer<unknown>>)());
  return answers;
}

const granted = (answers: Answer<unknown>[]) => answers.filter((a) => a.status === 200).length;

/** Every answer is a 200 or a proper 429, never a 5xx. */
function expectOnlyGrantedOrLimited(answers: Answer<unknown>[]): void {
  for (const answer of answers) {
    if (answer.status !== 200) expectErrorShape(answer, 429, 'RATE_LIMITED');
  }
}

describe('Redis unreachable from the start (no redis-server needed)', () => {
  it('starts, answers every request, logs one warn line without the password', async () => {
    const port = await freePort();
    const capture = capturingLogger();
    const services = await replica({
      redisUrl: `redis://alice:s3cret-pw@127.0.0.1:${port}/0`,
      freeRateLimit: 3,
      logger: capture.logger,
    });
    const answers = await alternate(5, [() => check(services.nullCheckUrl), () => pi(services.piDigitsUrl)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    // The memory fallback still limits: 3 per service.
    expectErrorShape(await check(services.nullCheckUrl), 429, 'RATE_LIMITED');
    const warns = capture.redisLines(WARN);
    expect(warns).toHaveLength(1);
    expect(warns[0]?.redis).toBe(`redis://alice:***@127.0.0.1:${port}/0`);
    expect(capture.raw.join('\n')).not.toContain('s3cret-pw');
  });

  it('both services share one connection, closed once both are closed', async () => {
    const port = await freePort();
    const { nullCheck, piDigits, redis } = createServices({
      redisUrl: `redis://127.0.0.1:${port}`,
      redisMaxReconnectDelayMs: 100,
    });
    expect(redis).toBeDefined();
    await nullCheck.close();
    expect(redis?.client.status).not.toBe('end');
    await piDigits.close();
    expect(await until(() => redis?.client.status === 'end', 200), 'the connection ends').toBe(true);
    // Without REDIS_URL there is none.
    const plain = createServices();
    expect(plain.redis).toBeUndefined();
    await Promise.all([plain.nullCheck.close(), plain.piDigits.close()]);
  });
});

requireRedisServer('services-redis-rate-limit');

describe('rate limits in a real Redis', () => {
  let server: RedisServer;
  let inspector: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    inspector = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await inspector.connect();
  });
  afterAll(async () => {
    inspector?.disconnect();
    await server?.stop();
  });

  it('two replicas share one limit per caller: 10 in total, not 20; every key prefixed and with a TTL', async () => {
    const options: ServicesOptions = {
      redisUrl: server.url,
      redisKeyPrefix: 'shared-test:',
      redisTimeoutMs: 5000,
      freeRateLimit: 10,
      proRateLimit: 4,
    };
    const a = await replica(options);
    const b = await replica(options);
    // Free callers, over both versions and both replicas.
    const free = await alternate(30, [
      () => check(a.nullCheckUrl),
      () => checkV2(b.nullCheckUrl),
      () => checkV2(a.nullCheckUrl),
      () => check(b.nullCheckUrl),
    ]);
    expect(granted(free)).toBe(10);
    expectOnlyGrantedOrLimited(free);
    // A key's bucket is shared too; pi-digits has buckets of its own.
    const pro = await alternate(10, [
      () => check(a.nullCheckUrl, bearer('demo-pro')),
      () => check(b.nullCheckUrl, bearer('demo-pro')),
    ]);
    expect(granted(pro)).toBe(4);
    const pis = await alternate(30, [() => pi(a.piDigitsUrl), () => pi(b.piDigitsUrl)]);
    expect(granted(pis)).toBe(10);
    expectOnlyGrantedOrLimited(pis);

    const keys = await inspector.keys('*');
    expect(keys.length).toBeGreaterThanOrEqual(3);
    for (const key of keys) {
      expect(key.startsWith('shared-test:rate-limit:')).toBe(true);
      expect(key).not.toContain('demo-pro');
      const ttl = await inspector.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(60_000);
    }
    expect(keys.some((key) => key.startsWith('shared-test:rate-limit:null-check:'))).toBe(true);
    expect(keys.some((key) => key.startsWith('shared-test:rate-limit:pi-digits:'))).toBe(true);
  });

  it('the same two replicas without Redis grant 10 each (what the shared limit prevents)', async () => {
    const a = await replica({ freeRateLimit: 10 });
    const b = await replica({ freeRateLimit: 10 });
    const free = await alternate(30, [() => check(a.nullCheckUrl), () => check(b.nullCheckUrl)]);
    expect(granted(free)).toBe(20);
  });

  it('Redis killed: every request still answered, one warn line each; Redis back: the shared limit is back', async () => {
    const logs = [capturingLogger(), capturingLogger()];
    const options = (i: number): ServicesOptions => ({
      redisUrl: server.url,
      redisKeyPrefix: 'outage-test:',
      redisTimeoutMs: 5000,
      freeRateLimit: 10,
      logger: logs[i]?.logger,
    });
    const a = await replica(options(0));
    const b = await replica(options(1));
    const before = await alternate(4, [() => check(a.nullCheckUrl), () => check(b.nullCheckUrl)]);
    expect(before.map((x) => x.status)).toEqual([200, 200, 200, 200]);

    await server.kill();
    // Each replica now counts in its own memory, from zero: all answered, none failed.
    const during = await alternate(12, [() => check(a.nullCheckUrl), () => check(b.nullCheckUrl)]);
    expect(during.map((x) => x.status)).toEqual(new Array(12).fill(200));
    for (const log of logs) {
      expect(log.redisLines(WARN)).toHaveLength(1);
      expect(log.redisLines(WARN)[0]?.msg).toMatch(/unavailable/);
    }
    // The fallback still limits, per process: A has used 6 of its 10.
    const rest = await alternate(5, [() => check(a.nullCheckUrl)]);
    expect(rest.map((x) => x.status)).toEqual([200, 200, 200, 200, 429]);
    expectErrorShape(rest[4] as Answer<unknown>, 429, 'RATE_LIMITED');
    // Still one warn line each, however many requests fell back.
    for (const log of logs) expect(log.redisLines(WARN)).toHaveLength(1);

    await server.restart();
    for (const [i, log] of logs.entries()) {
      expect(
        await until(() => log.redisLines(INFO).length === 1, 200),
        `replica ${i} logs that Redis is back`,
      ).toBe(true);
    }
    // The restarted Redis is empty: 10 in total again, across both replicas.
    const after = await alternate(30, [() => check(a.nullCheckUrl), () => check(b.nullCheckUrl)]);
    expect(granted(after)).toBe(10);
    expectOnlyGrantedOrLimited(after);
    for (const log of logs) expect(log.redisLines(WARN)).toHaveLength(1);
  });

  it('Redis paused (too slow to answer): requests are answered from memory, one warn line, then shared again', async () => {
    const capture = capturingLogger();
    const services = await replica({
      redisUrl: server.url,
      redisKeyPrefix: 'pause-test:',
      redisTimeoutMs: 50,
      freeRateLimit: 1000,
      logger: capture.logger,
    });
    expect((await check(services.nullCheckUrl)).status).toBe(200);
    // Frozen, Redis answers no command (the sockets stay open) until the test thaws it.
    server.freeze();
    try {
      const during = await alternate(5, [() => check(services.nullCheckUrl)]);
      expect(during.map((x) => x.status)).toEqual([200, 200, 200, 200, 200]);
      expect(capture.redisLines(WARN)).toHaveLength(1);
      expect(capture.redisLines(WARN)[0]?.reason).toMatch(/timed out/i);
    } finally {
      server.thaw();
    }
    // Thawed, the next request is counted in Redis again, and that is logged once.
    const back = async () => {
      expect((await check(services.nullCheckUrl)).status).toBe(200);
      return capture.redisLines(INFO).length === 1;
    };
    expect(await until(back, 100), 'Redis logged as back').toBe(true);
    const answers = await alternate(3, [() => check(services.nullCheckUrl)]);
    expect(answers.map((x) => x.status)).toEqual([200, 200, 200]);
    expect(capture.redisLines(WARN)).toHaveLength(1);
  });
});
