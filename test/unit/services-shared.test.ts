/** The shared pieces of the reference services: keys and tiers, dice, faults, currency, error mapping. */
import { describe, expect, it } from 'vitest';
import {
  apiKeyFromHeaders,
  apiKeyMap,
  createCallerResolver,
  DEMO_API_KEYS,
  keyBucket,
  parseApiKeys,
} from '../../src/services/shared/api-keys.js';
import { formatCost, formatDollars, roundUsd } from '../../src/services/shared/currency.js';
import { toServiceError } from '../../src/services/shared/error-handling.js';
import { createFaultInjector } from '../../src/services/shared/fault-injection.js';
import { redactRedisUrl } from '../../src/services/shared/rate-limit-redis.js';
import {
  DEFAULT_SUNSET_DAYS,
  deprecationDates,
  deprecationHeaders,
  successorLink,
} from '../../src/services/shared/retirement.js';
import { createSeededRandom, hash32 } from '../../src/services/shared/seeded-random.js';
import { ServiceError } from '../../src/services/shared/service-error.js';

/** What `run` throws; fails the test when it throws nothing (so no assertion hides in a catch). */
function thrownBy(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw, but nothing was thrown');
}

describe('api keys and tiers', () => {
  it('parses key:tier lists, with spaces and empty entries', () => {
    expect([...parseApiKeys(' alice:pro , bob:enterprise,,carol:free ')]).toEqual([
      ['alice', 'pro'],
      ['bob', 'enterprise'],
      ['carol', 'free'],
    ]);
  });

  it('refuses a bad entry without printing the key', () => {
    expect(() => parseApiKeys('sk-secret:gold')).toThrow(/entry #1/);
    const error = thrownBy(() => parseApiKeys('ok:pro,sk-secret:gold'));
    expect(error).toBeInstanceOf(TypeError);
    expect(String(error)).toMatch(/entry #2/);
    expect(String(error)).not.toContain('sk-secret');
  });

  it('thrownBy fails when nothing is thrown', () => {
    expect(() => thrownBy(() => parseApiKeys('ok:pro'))).toThrow(/nothing was thrown/);
  });

  it('unset or empty API_KEYS: the demo keys', () => {
    expect(apiKeyMap(undefined)).toBe(DEMO_API_KEYS);
    expect(apiKeyMap('  ')).toBe(DEMO_API_KEYS);
    expect(apiKeyMap({ x: 'pro' }).get('x')).toBe('pro');
  });

  it('reads Bearer (any case) and X-API-Key; empty means none; another scheme is 401', () => {
    expect(apiKeyFromHeaders({ authorization: 'Bearer k1' })).toBe('k1');
    expect(apiKeyFromHeaders({ authorization: 'bearer  k2 ' })).toBe('k2');
    expect(apiKeyFromHeaders({ 'x-api-key': ' k3 ' })).toBe('k3');
    expect(apiKeyFromHeaders({ authorization: 'Bearer k1', 'x-api-key': 'k3' })).toBe('k1');
    expect(apiKeyFromHeaders({ 'x-api-key': '' })).toBeUndefined();
    expect(apiKeyFromHeaders({})).toBeUndefined();
    expect(() => apiKeyFromHeaders({ authorization: 'Basic abc' })).toThrow(ServiceError);
  });

  it('resolves callers: free by address, keys by key; "free" is always free; unknown is 401', () => {
    const resolve = createCallerResolver('free:enterprise,alice:pro,bob:pro');
    expect(resolve({}, '10.0.0.1')).toEqual({ tier: 'free', rateKey: 'free@10.0.0.1' });
    expect(resolve({ 'x-api-key': 'free' }, '10.0.0.1')).toEqual({ tier: 'free', rateKey: 'free@10.0.0.1' });
    const alice = resolve({ authorization: 'Bearer alice' }, '10.0.0.1');
    expect(alice).toEqual({ tier: 'pro', rateKey: keyBucket('alice') });
    // The bucket is the key's own (not the address's), and names a hash, never the key.
    expect(resolve({ 'x-api-key': 'alice' }, '10.0.0.2').rateKey).toBe(alice.rateKey);
    expect(resolve({ 'x-api-key': 'bob' }, '10.0.0.1').rateKey).not.toBe(alice.rateKey);
    expect(alice.rateKey).toMatch(/^key:[0-9a-f]{64}$/);
    expect(alice.rateKey).not.toContain('alice');
    const error = thrownBy(() => resolve({ authorization: 'Bearer sk-unknown' }, '10.0.0.1'));
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).statusCode).toBe(401);
    expect((error as ServiceError).code).toBe('UNAUTHENTICATED');
    expect((error as ServiceError).message).not.toContain('sk-unknown');
  });
});

describe('seeded random', () => {
  it('same seed, same stream; numbers in [0, 1)', () => {
    const a = createSeededRandom(42);
    const b = createSeededRandom(42);
    const c = createSeededRandom(43);
    const sa = Array.from({ length: 100 }, () => a.next());
    expect(Array.from({ length: 100 }, () => b.next())).toEqual(sa);
    expect(Array.from({ length: 100 }, () => c.next())).not.toEqual(sa);
    expect(sa.every((x) => x >= 0 && x < 1)).toBe(true);
  });

  it('int, between and pick stay in range', () => {
    const r = createSeededRandom(1);
    for (let i = 0; i < 1000; i++) {
      const n = r.int(3, 5);
      expect(n >= 3 && n <= 5 && Number.isInteger(n)).toBe(true);
      const x = r.between(0.5, 0.6);
      expect(x >= 0.5 && x < 0.6).toBe(true);
      expect(['a', 'b']).toContain(r.pick(['a', 'b']));
    }
  });

  it('hash32 is a pure function of its inputs', () => {
    expect(hash32(1, 2)).toBe(hash32(1, 2));
    expect(hash32(1, 2)).not.toBe(hash32(2, 1));
  });
});

describe('fault injection', () => {
  it('off by default', () => {
    const faults = createFaultInjector();
    expect(faults.active).toBe(false);
    for (let i = 0; i < 100; i++) expect(faults.roll()).toBeUndefined();
  });

  it('rates give about that share, reproducibly; rate 1 is down', () => {
    const roll = () => {
      const faults = createFaultInjector({ rate500: 0.2, rate503: 0.3, seed: 5 });
      return Array.from({ length: 2000 }, () => faults.roll());
    };
    const rolls = roll();
    expect(roll()).toEqual(rolls);
    const share = (s: number) => rolls.filter((r) => r === s).length / rolls.length;
    expect(share(500)).toBeGreaterThan(0.15);
    expect(share(500)).toBeLessThan(0.25);
    expect(share(503)).toBeGreaterThan(0.25);
    expect(share(503)).toBeLessThan(0.35);
    expect(createFaultInjector({ rate503: 1 }).down).toBe(true);
    expect(createFaultInjector({ rate500: 1 }).unusable).toBe(true);
    expect(createFaultInjector({ latencyMs: 5 }).active).toBe(true);
  });
});

describe('currency', () => {
  it('formats health amounts grouped and costs with four decimals', () => {
    expect(formatDollars(1_234_567.891)).toBe('$1,234,567.89');
    expect(formatCost(0.00421)).toBe('$0.0042');
    expect(formatCost(33.33341)).toBe('$33.3334');
    expect(roundUsd(0.1234567)).toBe(0.123457);
  });
});

describe('error mapping', () => {
  const fastifyError = (props: Record<string, unknown>) => Object.assign(new Error('x'), props) as never;

  it('maps fastify parser errors to our codes', () => {
    expect(
      toServiceError(fastifyError({ code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE', statusCode: 415 })).code,
    ).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(
      toServiceError(fastifyError({ code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413 })).statusCode,
    ).toBe(413);
    expect(
      toServiceError(fastifyError({ code: 'FST_ERR_CTP_INVALID_JSON_BODY', statusCode: 400 })).code,
    ).toBe('INVALID_JSON');
  });

  it('validation errors: the service mapper first, VALIDATION_ERROR otherwise', () => {
    const error = fastifyError({
      statusCode: 400,
      validation: [{ keyword: 'required', instancePath: '', params: { missingProperty: 'value' } }],
    });
    expect(toServiceError(error).code).toBe('VALIDATION_ERROR');
    expect(toServiceError(error, () => new ServiceError(400, 'UNDEFINED_VALUE', 'u')).code).toBe(
      'UNDEFINED_VALUE',
    );
  });

  it('anything unexpected is a generic 500 without details', () => {
    const mapped = toServiceError(fastifyError({ message: 'secret internals at /srv/x.js:1:2' }));
    expect(mapped.statusCode).toBe(500);
    expect(mapped.code).toBe('INTERNAL_ERROR');
    expect(mapped.message).not.toContain('secret');
  });
});

describe('retirement headers', () => {
  const successor = { method: 'POST', path: '/api/v2/null-or-not', howTo: 'same body' } as const;

  it('dates: since in whole seconds (default now), sunset the given days later (default 90)', () => {
    const now = new Date('2026-03-04T05:06:07.890Z');
    const dates = deprecationDates(undefined, undefined, now);
    expect(dates.since.toISOString()).toBe('2026-03-04T05:06:07.000Z');
    expect(dates.sunset.getTime() - dates.since.getTime()).toBe(DEFAULT_SUNSET_DAYS * 86_400_000);
    const fixed = deprecationDates(new Date('2026-01-15T00:00:00Z'), 30, now);
    expect(fixed.since.toISOString()).toBe('2026-01-15T00:00:00.000Z');
    expect(fixed.sunset.toISOString()).toBe('2026-02-14T00:00:00.000Z');
  });

  it('Deprecation is @<unix seconds> (RFC 9745), Sunset an IMF-fixdate (RFC 8594), Link the successor', () => {
    const dates = deprecationDates(new Date('2026-01-15T00:00:00Z'), 30);
    const headers = deprecationHeaders({
      method: 'POST',
      path: '/api/v1/check',
      stage: 'deprecated',
      successor,
      dates,
    });
    expect(headers).toEqual({
      deprecation: `@${Date.UTC(2026, 0, 15) / 1000}`,
      sunset: 'Sat, 14 Feb 2026 00:00:00 GMT',
      link: '</api/v2/null-or-not>; rel="successor-version"',
    });
    expect(successorLink(successor)).toBe(headers.link);
  });
});

describe('Redis URL in logs', () => {
  it('hides the password (and the query, which may carry one), keeps host, port and database', () => {
    expect(redactRedisUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
    expect(redactRedisUrl('redis://:pw-1@cache.internal:6380/2')).toBe('redis://***@cache.internal:6380/2');
    expect(redactRedisUrl('rediss://app:pw-2@cache:6380?password=pw-3')).toBe('rediss://app:***@cache:6380');
    expect(redactRedisUrl('redis://pw-5@cache:6379')).toBe('redis://***@cache:6379');
    for (const url of ['redis://:pw-1@h', 'rediss://app:pw-2@h?password=pw-3', 'redis://pw-5@h']) {
      expect(redactRedisUrl(url)).not.toMatch(/pw-/);
    }
    expect(redactRedisUrl('not a url :pw-4')).toBe('(unparsable Redis URL)');
    expect(redactRedisUrl('redis+sentinel://u:pw-6@s1,s2:5000/m')).toBe(
      'redis+sentinel://s1:26379,s2:5000/m',
    );
    expect(redactRedisUrl('rediss+cluster://:pw-6@n1:7000,n2:7001')).toBe('rediss+cluster://n1:7000,n2:7001');
  });
});
