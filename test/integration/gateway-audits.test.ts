/**
 * GraphQL over HTTP conformance: graphql-http's server audits against the gateway (`createApp`, the
 * server `npm start` runs: fast path first, Yoga for the rest) on a real socket, in development and
 * in production (NODE_ENV=production). Every MUST audit passes, one test each; the SHOULD and MAY
 * audits pass as well, but those that the 2026 draft of GraphQL over HTTP (stage 2, text as of
 * August 2026) answers otherwise for application/graphql-response+json: each is listed below with
 * the draft's wording, and must fail for exactly that reason (docs/contract.md, Errors).
 */
import { serverAudits } from 'graphql-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refusedUrl } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

/** graphql-http 1.23's audits the newer draft overrides, with what the draft says instead. */
const NEWER_DRAFT: Record<string, string> = {
  'MAY use 400 status code on missing {query} parameter':
    'a request that is not a well-formed GraphQL-over-HTTP request SHOULD be answered 422',
  'SHOULD use a status code of 400 on variable coercion failure when accepting application/graphql-response+json':
    'variables that cannot be coerced SHOULD be answered 422',
};

describe.each(['test', 'production'])('graphql-http server audits (NODE_ENV=%s)', (nodeEnv) => {
  let gateway: TestGateway;
  let url = '';

  beforeAll(async () => {
    // The audits only ask for `__typename` and malformed requests: no upstream is ever called, so
    // both upstreams are a loopback port nothing listens on.
    const nowhere = await refusedUrl();
    gateway = await startTestGateway({
      nullBaseUrl: nowhere,
      piBaseUrl: nowhere,
      env: { NODE_ENV: nodeEnv },
    });
    url = gateway.url;
  });

  afterAll(async () => {
    await gateway?.close();
  });

  const audits = serverAudits({ url: () => url, fetchFn: fetch });

  it('has MUST audits to run', () => {
    expect(audits.filter((a) => a.name.startsWith('MUST')).length).toBeGreaterThan(10);
  });

  for (const audit of audits.filter((a) => a.name.startsWith('MUST'))) {
    it(audit.name, async () => {
      const result = await audit.fn();
      expect(
        result.status === 'ok' ? 'ok' : `${result.status}: ${'reason' in result ? result.reason : ''}`,
      ).toBe('ok');
    });
  }

  it('passes every SHOULD and MAY audit too, but those the 2026 draft overrides (which answer 422)', async () => {
    const optional = audits.filter((a) => !a.name.startsWith('MUST'));
    expect(optional.length).toBeGreaterThan(0);
    const results = await Promise.all(optional.map((a) => a.fn()));
    expect(
      results.filter((r) => r.status !== 'ok').map((r) => `${r.name}: ${'reason' in r ? r.reason : ''}`),
    ).toEqual(Object.keys(NEWER_DRAFT).map((name) => `${name}: Response status code is not 400`));
  });

  it('served part of the audits on the fast path, and handed the rest to Yoga', () => {
    expect(gateway.config.process.nodeEnv).toBe(nodeEnv);
    expect(gateway.app.fastPath.served.fast).toBeGreaterThan(0);
  });
});
