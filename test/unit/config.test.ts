import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { appSettings, ConfigError, helpText, loadConfig } from '../../src/config.js';
import { servicesCliSettings, servicesHelpText } from '../../src/services/settings.js';
import {
  bool,
  helpText as groupsHelpText,
  int,
  type SettingsGroup,
  setting,
  settingsGroup,
} from '../../src/shared/settings.js';

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
    const mcp = loadConfig({ MCP_ALLOWED_ORIGINS: 'https://Agent.Example.com, http://10.0.0.2:8080/' });
    expect(mcp.server.mcp).toBe(true);
    expect(mcp.server.mcpAllowedOrigins).toEqual(['https://agent.example.com', 'http://10.0.0.2:8080']);
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
    ['MCP', 'perhaps'],
    ['MCP_ALLOWED_ORIGINS', 'agent.example.com'],
    ['MCP_ALLOWED_ORIGINS', 'https://agent.example.com/path'],
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
    let message = '';
    try {
      loadConfig({ API_KEYS: 'secret-key-123:platinum' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/API_KEYS=\(value hidden\)/);
    expect(message).not.toContain('secret-key-123');
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

/**
 * What makes a `--help` text unfit for people: a section heading twice, or a setting whose help leans
 * on something the reader does not have (a spec, a table, a section, a contract, the README).
 */
const LEANING_PHRASES = [
  /\bthe (error|limits?|tiers?|config(uration)?) table\b/i,
  /\bspec(s|ification)?\b/i,
  /\b(see|per|as in) (the )?(readme|docs?|contract|section|table|example)\b/i,
  /\bcontract\b/i,
  /\bsection \d/i,
  /§/,
  /\.md\b/i,
  /\bterms\b/i,
  /\bclient-library\b/i,
];

function helpProblems(help: string, groups: Record<string, SettingsGroup>): string[] {
  const problems: string[] = [];
  const headings = help.split('\n').filter((line) => /^[A-Z][A-Z ]*[A-Z]$/.test(line));
  const titles = new Set(Object.values(groups).map((g) => g.title.toUpperCase()));
  for (const title of titles) {
    const count = headings.filter((h) => h === title).length;
    if (count !== 1) problems.push(`heading ${title} appears ${count} times`);
  }
  for (const heading of headings) if (!titles.has(heading)) problems.push(`unexpected heading ${heading}`);
  for (const group of Object.values(groups)) {
    for (const spec of Object.values(group.settings)) {
      const rows = help
        .split('\n')
        .filter((line) => line.startsWith(`  ${spec.env} `) && line.includes('default:'));
      if (rows.length !== 1) problems.push(`${spec.env} is listed ${rows.length} times`);
      for (const phrase of LEANING_PHRASES)
        if (phrase.test(spec.help)) problems.push(`${spec.env}: "${spec.help}" leans on ${phrase}`);
      if (spec.help.trim().length < 10) problems.push(`${spec.env}: help too short to stand on its own`);
    }
  }
  return problems;
}

describe('--help of both CLIs', () => {
  it('npm start: each heading once, every setting once, every help standing on its own', () => {
    expect(helpProblems(helpText(), appSettings)).toEqual([]);
  });

  it('npm run services: the same', () => {
    expect(helpProblems(servicesHelpText(), servicesCliSettings)).toEqual([]);
  });

  it('the check finds a repeated heading and help that leans on documents', () => {
    const one = setting('ONE', z.string().optional(), 'Pi service: reject (the error table).', '(unset)');
    const two = setting('TWO', z.string().optional(), 'As the spec example says.', '(unset)');
    const groups = { a: settingsGroup('cache', { one }), b: settingsGroup('limits', { two }) };
    const repeated = `${groupsHelpText(groups, [])}\nCACHE\n`;
    expect(helpProblems(repeated, groups)).toEqual([
      'heading CACHE appears 2 times',
      expect.stringMatching(/^ONE: .*leans on/),
      expect.stringMatching(/^TWO: .*leans on/),
    ]);
  });

  it('shows the default the schema gives an unset variable (with its note); words only without one', () => {
    expect(setting('A', int(0, 10).default(3), 'Help.').defaultText).toBe('3');
    expect(setting('B', bool().default(false), 'Help.').defaultText).toBe('false');
    expect(setting('C', int(0, 10).default(0), 'Help.', { note: 'off' }).defaultText).toBe('0 (off)');
    expect(setting('D', z.string().optional(), 'Help.', '(unset: none)').defaultText).toBe('(unset: none)');
    expect(() => setting('E', z.date().default(new Date(0)), 'Help.')).toThrow(/E: .*not a plain value/);
  });

  it("prints groups whose titles differ only in case under one heading ('cache' and 'Cache')", () => {
    const groups = {
      a: settingsGroup('cache', { one: setting('ONE', z.string().optional(), 'The first setting.', '-') }),
      b: settingsGroup('Cache', { two: setting('TWO', z.string().optional(), 'The second setting.', '-') }),
    };
    expect(helpProblems(groupsHelpText(groups, []), groups)).toEqual([]);
  });
});
