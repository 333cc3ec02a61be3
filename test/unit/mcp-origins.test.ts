/**
 * Which browser origins may use /mcp (src/gateway/mcp/origins.ts; contract §13): loopback origins on
 * any port, and those of MCP_ALLOWED_ORIGINS, compared as origins (scheme, host and port), never as
 * text prefixes. In a gateway: test/integration/mcp-http.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { corsFields, originAllowed, preflightFields } from '../../src/gateway/mcp/origins.js';

const LISTED = ['https://agent.example.com', 'http://10.0.0.2:8080'];

describe('originAllowed', () => {
  it.each([
    ['http://localhost', true],
    ['http://localhost:6274', true],
    ['https://127.0.0.1:8443', true],
    ['http://[::1]:3000', true],
    ['https://agent.example.com', true],
    ['https://AGENT.example.com:443', true],
    ['http://10.0.0.2:8080', true],
    ['http://10.0.0.2', false],
    ['http://agent.example.com', false],
    ['https://agent.example.com.evil.example', false],
    ['http://localhost.evil.example', false],
    ['http://127.0.0.1.nip.io', false],
    ['http://evil.example.com', false],
    ['null', false],
    ['file://', false],
    ['chrome-extension://abcdef', false],
    ['', false],
  ])('%s: %s', (origin, allowed) => {
    expect(originAllowed(origin, LISTED)).toBe(allowed);
  });
});

describe('CORS fields', () => {
  it('name the origin, never *, and vary on it', () => {
    expect(corsFields('http://localhost:6274')).toMatchObject({
      'access-control-allow-origin': 'http://localhost:6274',
      vary: 'Origin',
    });
    const preflight = preflightFields('http://localhost:6274');
    expect(preflight['access-control-allow-methods']).toBe('POST');
    for (const header of [
      'authorization',
      'x-api-key',
      'mcp-protocol-version',
      'x-max-cost-usd',
      'x-budget-fallback',
    ])
      expect(preflight['access-control-allow-headers']).toContain(header);
  });
});
