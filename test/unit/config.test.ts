import { describe, expect, it } from 'vitest';
import { ConfigError, helpText, loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it('applies the documented defaults when nothing is set', () => {
    const config = loadConfig({});
    expect(config.server.port).toBe(4000);
    expect(config.upstreams.timeoutMs).toBe(5000);
    expect(config.resilience.breakerThreshold).toBe(5);
    expect(config.upstreams.nullBaseUrl).toBeUndefined();
    expect(config.upstreams.piBaseUrl).toBeUndefined();
    expect(config.services.nullPort).toBe(4001);
    expect(config.services.piPort).toBe(4002);
    expect(config.services.freeRateLimit).toBe(60);
    expect(config.services.piOverLimit).toBe('reject');
  });

  it('treats an empty variable as unset', () => {
    const config = loadConfig({ PORT: '', NULL_BASE_URL: '  ', BREAKER_THRESHOLD: '' });
    expect(config.server.port).toBe(4000);
    expect(config.upstreams.nullBaseUrl).toBeUndefined();
    expect(config.resilience.breakerThreshold).toBe(5);
  });

  it('parses and normalises values', () => {
    const config = loadConfig({
      PORT: '8080',
      NULL_BASE_URL: 'http://127.0.0.1:4001/',
      BREAKER_THRESHOLD: '0',
      RESPONSE_CACHE: 'false',
      API_KEYS: 'k1:pro, k2:enterprise',
    });
    expect(config.server.port).toBe(8080);
    expect(config.upstreams.nullBaseUrl).toBe('http://127.0.0.1:4001');
    expect(config.resilience.breakerThreshold).toBe(0);
    expect(config.cache.responseCache).toBe(false);
    expect(config.services.apiKeys).toBe('k1:pro, k2:enterprise');
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['NULL_BASE_URL', 'not a url'],
    ['PI_BASE_URL', 'ftp://example.com'],
    ['UPSTREAM_TIMEOUT_MS', '-1'],
    ['BREAKER_THRESHOLD', '2.5'],
    ['NODE_ENV', 'staging'],
    ['API_KEYS', 'k1:gold'],
  ])('refuses %s=%s with one line naming the variable', (name, value) => {
    let error: unknown;
    try {
      loadConfig({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).message;
    expect(message).toContain(name);
    expect(message).not.toContain('\n');
  });

  it('never echoes API_KEYS values in its error', () => {
    expect(() => loadConfig({ API_KEYS: 'secret-key-123:platinum' })).toThrow(/API_KEYS=\(value hidden\)/);
    try {
      loadConfig({ API_KEYS: 'secret-key-123:platinum' });
    } catch (e) {
      expect((e as Error).message).not.toContain('secret-key-123');
    }
  });
});

describe('helpText', () => {
  it('lists every setting with its default', () => {
    const help = helpText();
    expect(help).toMatch(/PORT\s+default: 4000/);
    expect(help).toMatch(/UPSTREAM_TIMEOUT_MS\s+default: 5000/);
    expect(help).toMatch(/BREAKER_THRESHOLD\s+default: 5/);
  });
});
