/**
 * startServices / servicesOptionsFromSettings (the embedded default) and `npm run services`'s entry
 * (src/services/main.ts) as a real process: URLs logged, bad config refused in one line, graceful stop.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { servicesOptionsFromSettings } from '../../src/services/settings.js';
import { type RunningServices, startServices } from '../../src/services/start-services.js';
import { killLeftovers } from '../support/gateway-process.js';
import { freePort } from '../support/redis-server.js';
import { until } from '../support/waits.js';
import { bearer, call, expectErrorShape } from './services-test-helpers.js';

const running: RunningServices[] = [];
const children: ChildProcess[] = [];

afterAll(async () => {
  await Promise.all(running.map((r) => r.close()));
  killLeftovers(children);
});

describe('startServices', () => {
  it('starts both services on free loopback ports and closes them', async () => {
    const services = await startServices();
    expect(services.nullCheckUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(services.piDigitsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(services.nullCheckUrl).not.toBe(services.piDigitsUrl);
    expect((await call(`${services.nullCheckUrl}/api/v1/health`)).body).toHaveProperty(
      'null_detectable',
      true,
    );
    expect((await call(`${services.piDigitsUrl}/api/v1/health`)).body).toHaveProperty('pi_available', true);
    await services.close();
    await expect(fetch(`${services.nullCheckUrl}/api/v1/health`)).rejects.toThrow();
  });

  it('a port in use fails the start with the system error', async () => {
    const first = await startServices();
    running.push(first);
    const port = Number(new URL(first.piDigitsUrl).port);
    await expect(startServices({ piPort: port })).rejects.toThrow(/EADDRINUSE|address already in use/);
  });
});

describe('servicesOptionsFromSettings', () => {
  it('maps every services setting (host and ports excepted)', () => {
    const config = loadConfig({
      API_KEYS: 'k1:pro',
      SEED: '9',
      PI_OVER_LIMIT: 'clamp',
      PI_ENTERPRISE_MAX_DIGITS: '10',
      PI_MAX_DIGITS: '5000',
      STRICT_MODE_PRO: 'true',
      FREE_RATE_LIMIT: '5',
      PRO_RATE_LIMIT: '6',
      ENTERPRISE_RATE_LIMIT: '7',
      NULL_FAULT_LATENCY_MS: '1',
      NULL_FAULT_500_RATE: '0.1',
      NULL_FAULT_503_RATE: '0.2',
      PI_FAULT_LATENCY_MS: '2',
      PI_FAULT_500_RATE: '0.3',
      PI_FAULT_503_RATE: '0.4',
      NULL_V1: 'deprecated',
      PI_V1_PI: 'off',
      V1_DEPRECATED_SINCE: '2026-01-15',
      V1_SUNSET_DAYS: '30',
      REDIS_URL: 'redis://127.0.0.1:1',
      REDIS_KEY_PREFIX: 'p:',
      REDIS_TIMEOUT_MS: '40',
    });
    expect(servicesOptionsFromSettings(config)).toEqual({
      apiKeys: 'k1:pro',
      seed: 9,
      piOverLimit: 'clamp',
      piEnterpriseMaxDigits: '10',
      piMaxDigits: 5000,
      strictModePro: true,
      freeRateLimit: 5,
      proRateLimit: 6,
      enterpriseRateLimit: 7,
      nullFaultLatencyMs: 1,
      nullFault500Rate: 0.1,
      nullFault503Rate: 0.2,
      piFaultLatencyMs: 2,
      piFault500Rate: 0.3,
      piFault503Rate: 0.4,
      nullV1: 'deprecated',
      piV1Pi: 'off',
      v1DeprecatedSince: new Date('2026-01-15T00:00:00Z'),
      v1SunsetDays: 30,
      redisUrl: 'redis://127.0.0.1:1',
      redisKeyPrefix: 'p:',
      redisTimeoutMs: 40,
    });
  });

  it('defaults: both v1 endpoints on, sunset 90 days after the start, no Redis', () => {
    const options = servicesOptionsFromSettings(loadConfig({}));
    expect(options).toMatchObject({ nullV1: 'on', piV1Pi: 'on', v1SunsetDays: 90, redisTimeoutMs: 25 });
    expect(options.v1DeprecatedSince).toBeUndefined();
    expect(options.redisUrl).toBeUndefined();
  });

  it('refuses a bad stage or date with one line naming the variable', () => {
    for (const [env, name] of [
      [{ NULL_V1: 'retired' }, 'NULL_V1'],
      [{ PI_V1_PI: 'true' }, 'PI_V1_PI'],
      [{ V1_DEPRECATED_SINCE: '2026-02-30' }, 'V1_DEPRECATED_SINCE'],
      [{ V1_DEPRECATED_SINCE: 'yesterday' }, 'V1_DEPRECATED_SINCE'],
      [{ V1_DEPRECATED_SINCE: '2026-01-15T10:00:00' }, 'V1_DEPRECATED_SINCE'],
      [{ V1_SUNSET_DAYS: '0' }, 'V1_SUNSET_DAYS'],
    ] as const) {
      expect(() => loadConfig(env), name).toThrow(new RegExp(`^invalid configuration: ${name}=`));
    }
    expect(
      servicesOptionsFromSettings(loadConfig({ V1_DEPRECATED_SINCE: '2026-01-15T10:00:00+02:00' }))
        .v1DeprecatedSince,
    ).toEqual(new Date('2026-01-15T08:00:00Z'));
  });

  it('the mapped options drive the services', async () => {
    const config = loadConfig({
      API_KEYS: 'ent:enterprise',
      PI_OVER_LIMIT: 'clamp',
      PI_ENTERPRISE_MAX_DIGITS: '10',
    });
    const services = await startServices(servicesOptionsFromSettings(config));
    running.push(services);
    const pi = await call<{ precision: number }>(`${services.piDigitsUrl}/api/v1/pi?digits=50`, {
      headers: bearer('ent'),
    });
    expect(pi.status).toBe(200);
    expect(pi.body.precision).toBe(10);
    expectErrorShape(
      await call(`${services.piDigitsUrl}/api/v1/pi`, { headers: bearer('demo-pro') }),
      401,
      'UNAUTHENTICATED',
    );
  });
});

/** Runs src/services/main.ts under tsx with a clean environment plus `env`. */
function runMain(env: Record<string, string>): {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
} {
  const clean: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/services/main.ts'], {
    env: { ...clean, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  return { child, stdout: () => out, stderr: () => err };
}

describe('npm run services (src/services/main.ts)', () => {
  it('logs both URLs, serves, and exits by itself on SIGTERM', async () => {
    // A Redis that is not there, and v1 of null-check deprecated: the settings reach the services.
    const redisPort = await freePort();
    const run = runMain({
      NULL_PORT: '0',
      PI_PORT: '0',
      HOST: '127.0.0.1',
      LOG_FORMAT: 'json',
      API_KEYS: 'main-key:pro',
      REDIS_URL: `redis://:redis-pw-42@127.0.0.1:${redisPort}`,
      NULL_V1: 'deprecated',
    });
    const listening = await until(() => /pi-digits service listening/.test(run.stdout()), 400);
    expect(listening, `both services listening; stderr: ${run.stderr()}`).toBe(true);
    const urls = [...run.stdout().matchAll(/listening on (http:\/\/127\.0\.0\.1:\d+)/g)].map((m) => m[1]!);
    expect(urls).toHaveLength(2);
    const [nullUrl, piUrl] = urls as [string, string];
    const check = await call<{ is_null: boolean }>(`${nullUrl}/api/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer main-key' },
      body: '{"value": null}',
    });
    expect(check.body.is_null).toBe(true);
    expect(check.headers.get('deprecation')).toMatch(/^@\d+$/);
    expect((await call<{ digits: string }>(`${piUrl}/api/v1/pi`)).body.digits).toBe('3.141');
    // The key never reaches the log; Redis being away is one warn line, without its password.
    expect(run.stdout()).not.toContain('main-key');
    const redisWarnings = run
      .stdout()
      .split('\n')
      .filter((line) => line.includes('Redis unavailable'));
    expect(redisWarnings).toHaveLength(1);
    expect(JSON.parse(redisWarnings[0] ?? '{}')).toMatchObject({
      level: 40,
      redis: `redis://***@127.0.0.1:${redisPort}`,
    });
    expect(run.stdout()).not.toContain('redis-pw-42');
    run.child.kill('SIGTERM');
    const [code] = (await once(run.child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(run.stdout()).toMatch(/shutting down/);
  });

  it('a bad setting stops the start with one line on stderr and exit code 1', async () => {
    const run = runMain({ FREE_RATE_LIMIT: 'lots', API_KEYS: 'sk-secret:gold' });
    const [code] = (await once(run.child, 'exit')) as [number | null];
    expect(code).toBe(1);
    const lines = run.stderr().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/FREE_RATE_LIMIT/);
    expect(lines[0]).not.toMatch(/\bat .+:\d+/);
    expect(run.stderr()).not.toContain('sk-secret');
  });
});
