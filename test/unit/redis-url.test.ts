/**
 * Redis by URL (src/shared/redis-url.ts; docs/contract.md §9): every form, credentials in the
 * user-info, the logged form without them, and bad URLs refused at start with one line that never
 * repeats the URL.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { parseRedisUrl, redisUrlProblem, safeRedisUrl, secretsOf } from '../../src/shared/redis-url.js';
import { ConfigError } from '../../src/shared/settings.js';

describe('parseRedisUrl', () => {
  it('one server: redis:// and rediss://, credentials, database, default port', () => {
    expect(parseRedisUrl('redis://cache.internal')).toMatchObject({
      topology: 'single',
      tls: false,
      nodes: [{ host: 'cache.internal', port: 6379 }],
      db: 0,
      username: undefined,
      password: undefined,
      safe: 'redis://cache.internal:6379',
    });
    expect(parseRedisUrl('rediss://app:s%40cret@10.0.0.5:6380/2')).toMatchObject({
      topology: 'single',
      tls: true,
      nodes: [{ host: '10.0.0.5', port: 6380 }],
      db: 2,
      username: 'app',
      password: 's@cret',
      safe: 'rediss://10.0.0.5:6380/2',
    });
    // requirepass only: no user, a password.
    expect(parseRedisUrl('redis://:pw-1@[::1]:7000')).toMatchObject({
      nodes: [{ host: '::1', port: 7000 }],
      username: undefined,
      password: 'pw-1',
      safe: 'redis://[::1]:7000',
    });
    // ioredis' own query options still go through on a one-server URL (it reads the URL itself).
    expect(parseRedisUrl('redis://h:1?family=6').topology).toBe('single');
  });

  it('Sentinel: the sentinels, the master name, an optional database, the sentinels’ own credentials', () => {
    expect(parseRedisUrl('redis+sentinel://s1:26379,s2,10.0.0.9:5000/mymaster')).toMatchObject({
      topology: 'sentinel',
      tls: false,
      nodes: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
        { host: '10.0.0.9', port: 5000 },
      ],
      masterName: 'mymaster',
      db: 0,
      safe: 'redis+sentinel://s1:26379,s2:26379,10.0.0.9:5000/mymaster',
    });
    const withSecrets = parseRedisUrl(
      'rediss+sentinel://app:data-pw@s1,s2/m/3?sentinelUsername=sen&sentinelPassword=sen%2Fpw',
    );
    expect(withSecrets).toMatchObject({
      topology: 'sentinel',
      tls: true,
      masterName: 'm',
      db: 3,
      username: 'app',
      password: 'data-pw',
      sentinelUsername: 'sen',
      sentinelPassword: 'sen/pw',
      safe: 'rediss+sentinel://s1:26379,s2:26379/m/3',
    });
    expect(secretsOf(withSecrets).sort()).toEqual(['data-pw', 'sen/pw']);
  });

  it('Cluster: seed nodes, credentials for every node, no path', () => {
    expect(parseRedisUrl('redis+cluster://:pw@n1:7000,n2:7001,n3')).toMatchObject({
      topology: 'cluster',
      tls: false,
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
        { host: 'n3', port: 6379 },
      ],
      password: 'pw',
      safe: 'redis+cluster://n1:7000,n2:7001,n3:6379',
    });
    expect(parseRedisUrl('rediss+cluster://clustercfg.example.cache.amazonaws.com:6379').tls).toBe(true);
  });

  it('never shows a credential in the logged form, nor in a problem', () => {
    for (const url of [
      'redis://user:pw-2@h:1/0',
      'rediss://:pw-2@h',
      'redis+sentinel://u:pw-2@s1/m?sentinelPassword=pw-2',
      'redis+cluster://u:pw-2@n1,n2',
      'redis://u:pw-2@h:1?password=pw-2',
    ]) {
      expect(safeRedisUrl(url)).not.toContain('pw-2');
      expect(secretsOf(parseRedisUrl(url))).toContain('pw-2');
    }
    expect(redisUrlProblem('redis+sentinel://u:pw-2@s1')).not.toContain('pw-2');
    expect(redisUrlProblem('redis://u:pw-2@h:99999')).not.toContain('pw-2');
  });

  it.each([
    ['http://cache:6379', /unknown scheme http:\/\//],
    ['cache:6379', /not a Redis URL/],
    ['redis://', /no host/],
    ['redis://a:1,b:2', /takes one host/],
    ['redis://h:0', /port 0 is out of range/],
    ['redis://h:70000', /port 70000 is out of range/],
    ['redis://h/x', /database "x"/],
    ['redis://h/1/2', /at most a database number/],
    ['redis+sentinel://s1,s2', /needs the master name/],
    ['redis+sentinel://s1/m/x', /database "x"/],
    ['redis+sentinel://s1/m?password=x', /unknown query parameter "password"/],
    ['redis+cluster://n1,n2/0', /takes no path/],
    ['redis+cluster://n1?tls=1', /unknown query parameter "tls"/],
    ['redis+cluster://n1,,n2', /is not a host\[:port\]/],
    ['redis://h w:1', /not a Redis URL|not a host/],
  ])('refuses %s with one line', (url, problem) => {
    const message = redisUrlProblem(url);
    expect(message).toMatch(problem);
    expect(message).not.toContain('\n');
    expect(() => parseRedisUrl(url)).toThrow(problem);
  });
});

describe('REDIS_URL and REDIS_CACHE_URL in the settings', () => {
  it('take every form', () => {
    const config = loadConfig({
      REDIS_URL: 'redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/gateway',
      REDIS_CACHE_URL: 'redis+cluster://127.0.0.1:7000,127.0.0.1:7001',
    });
    expect(config.redis.redisUrl).toBe('redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/gateway');
    expect(config.cache.redisCacheUrl).toBe('redis+cluster://127.0.0.1:7000,127.0.0.1:7001');
  });

  it.each([
    ['REDIS_URL', 'redis+sentinel://:pw-9@127.0.0.1:26379'],
    ['REDIS_CACHE_URL', 'memcached://:pw-9@127.0.0.1'],
  ])('refuse a bad %s at start: one ConfigError line naming the variable, never the value', (env, url) => {
    let thrown: unknown;
    try {
      loadConfig({ [env]: url });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    const message = (thrown as Error).message;
    expect(message).toContain(`${env}=(value hidden)`);
    expect(message).not.toContain('pw-9');
    expect(message).not.toContain('\n');
  });
});
