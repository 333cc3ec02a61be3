/**
 * The caller sees its budget (docs/contract.md, Cost): the IETF RateLimit header fields on every
 * GraphQL answer to a caller with a budget, on both lanes, agreeing with the `budget` field and with
 * what was billed; none for a caller without a budget.
 */
import { describe, expect, it } from 'vitest';
import { gql } from '../support/graphql-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody } from '../support/upstream-bodies.js';

const scripted = useScriptedGateways();
const BUDGETS = JSON.stringify({ default: { '1h': 0.05, '24h': 0.5 }, anonymous: {} });
const CHECK = '{ isNull(value: 1) { __typename } }';
const BUDGET = '{ budget { windows { window limitUsd spentUsd reservedUsd remainingUsd refillSeconds } } }';

interface Window {
  window: string;
  limitUsd: number;
  spentUsd: number;
  reservedUsd: number;
  remainingUsd: number;
}

/** `"1h";r=38000;t=1200, …` as { window: { r, t } }. */
function parsed(header: string | null): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const member of (header ?? '').split(/,\s*/)) {
    if (member === '') continue;
    const [name, ...params] = member.split(';');
    out[(name as string).replace(/"/g, '')] = Object.fromEntries(
      params.map((p) => p.split('=') as [string, string]),
    );
  }
  return out;
}

describe.each([
  ['the fast path', 'true'],
  ["Yoga's lane", 'false'],
])('RateLimit header fields, %s', (_lane, fastPath) => {
  it('every answer to a caller with a budget carries them, and they agree with the budget field and the bill', async () => {
    scripted.upstream.route('POST', '/api/v1/check', { body: nullBody({ gpu_cost_usd: 0.01 }) });
    const g = await scripted.gateway({ COST_BUDGETS: BUDGETS, HTTP_FAST_PATH: fastPath });
    const headers = { authorization: `Bearer sk-headers-${fastPath}` };
    const first = await gql(g.url, CHECK, { headers });
    expect(first.errors).toBeUndefined();
    expect(first.headers.get('ratelimit-policy')).toBe(
      '"1h";q=50000;w=3600;qu="usd-micro", "24h";q=500000;w=86400;qu="usd-micro"',
    );
    expect(Object.keys(parsed(first.headers.get('ratelimit')))).toEqual(['1h', '24h']);
    // The check cost 0.01: the budget field (which calls nothing) and its own answer's headers agree.
    const seen = await gql(g.url, BUDGET, { headers });
    const windows = (seen.data as { budget: { windows: Window[] } }).budget.windows;
    expect(windows.map((w) => [w.window, w.limitUsd, w.spentUsd, w.reservedUsd, w.remainingUsd])).toEqual([
      ['1h', 0.05, 0.01, 0, 0.04],
      ['24h', 0.5, 0.01, 0, 0.49],
    ]);
    const left = parsed(seen.headers.get('ratelimit'));
    expect(left['1h']?.r).toBe('40000');
    expect(left['24h']?.r).toBe('490000');
    expect(Number(left['1h']?.t)).toBeGreaterThan(0);
  });

  it('a caller without a budget gets neither field', async () => {
    const g = await scripted.gateway({ COST_BUDGETS: BUDGETS, HTTP_FAST_PATH: fastPath });
    const anonymous = await gql(g.url, '{ __typename }');
    expect(anonymous.headers.get('ratelimit')).toBeNull();
    expect(anonymous.headers.get('ratelimit-policy')).toBeNull();
    const none = await scripted.gateway({ HTTP_FAST_PATH: fastPath });
    const keyed = await gql(none.url, '{ __typename }', { headers: { authorization: 'Bearer sk-free' } });
    expect(keyed.headers.get('ratelimit')).toBeNull();
  });
});
