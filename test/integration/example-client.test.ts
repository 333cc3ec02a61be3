/**
 * The typed client example (examples/typed-client.ts) against the embedded default: the gateway
 * (`createApp`) with the reference services in-process on loopback, the example's own `main(url)`,
 * assertions on its summary.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adviceFor,
  type ClientSummary,
  GATEWAY_ERROR_CODES,
  main,
  type Remedy,
} from '../../examples/typed-client.js';
import { ERROR_CODES, type ErrorCode } from '../../src/gateway/errors.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

let gateway: TestGateway;
let summary: ClientSummary;

beforeAll(async () => {
  // As in production: only the documents of codegen's manifest run, and the client sends their ids.
  gateway = await startTestGateway({
    env: {
      TRUSTED_DOCUMENTS: 'generated/client/persisted-documents.json',
      TRUSTED_DOCUMENTS_MODE: 'enforce',
    },
  });
  summary = await main(gateway.url);
});

afterAll(async () => {
  await gateway?.close();
});

describe('typed client example', () => {
  it('runs every operation by its documentId against a gateway enforcing the manifest', () => {
    expect(Object.keys(summary.errorCodes).filter((code) => code.startsWith('PERSISTED_'))).toEqual([]);
    expect(summary.errorCodes.OTHER).toBeUndefined();
    expect(summary.requestIds.length).toBeGreaterThan(10);
  });

  it('reads health and the free tier’s digits', () => {
    expect(summary.health).toBe('OK');
    expect(summary.freePi).toBe('3.141');
  });

  it('meets every member of every union at temperature 1.0', () => {
    for (const typename of [
      'NullVerdict',
      'MaybeVerdict',
      'ExistentialVerdict',
      'PiDigits',
      'EulerDigits',
      'PiInference',
      'EulerInference',
    ]) {
      expect(summary.typenames[typename], typename).toBeGreaterThan(0);
    }
  });

  it('maps the errors it provoked to their codes and remedies', () => {
    expect(summary.errorCodes).toMatchObject({
      TIER_FORBIDDEN: expect.any(Number),
      UNDEFINED_VALUE: 1,
      BAD_USER_INPUT: 1,
      WAIVER_REQUIRED: 1,
      UNAUTHENTICATED: 1,
      BUDGET_EXCEEDED: 1,
    });
    expect(summary.errorCodes.OTHER).toBeUndefined();
    expect(summary.remedies).toMatchObject({
      TIER_FORBIDDEN: 'upgrade-tier',
      UNDEFINED_VALUE: 'fix-input',
      WAIVER_REQUIRED: 'sign-waiver',
      UNAUTHENTICATED: 'fix-api-key',
      BUDGET_EXCEEDED: 'raise-cost-cap',
    });
  });

  it('adds up extensions.cost: operations that called an upstream were billed, refused ones were not', () => {
    // Three operations were refused before any call: temperature 2 (BAD_USER_INPUT), the unsigned
    // waiver (WAIVER_REQUIRED) and the cap of 0 USD (BUDGET_EXCEEDED); the models scoreboard calls
    // nothing. Every other one says its cost.
    expect(summary.costed).toBe(summary.requestIds.length - 4);
    // One answered upstream call each, but two for health (both upstreams) and for the partial result.
    expect(summary.upstreamCalls).toBe(summary.costed + 2);
    expect(summary.costUsd).toBeGreaterThan(0);
  });

  it('routes pi by minAccuracy and reads the scoreboard the tour filled', () => {
    expect(summary.routedModel).toMatch(/^pi-x-/);
    // At least the null check and pi at temperature 0 and 1, and the models the tour named.
    expect(summary.modelRows).toBeGreaterThanOrEqual(4);
  });

  it('keeps a partial result, the sponsor messages and every request id', () => {
    expect(summary.partialResults).toBe(1);
    expect(summary.sponsors.length).toBeGreaterThan(0);
    expect(summary.requestIds.length).toBeGreaterThan(10);
    expect(new Set(summary.requestIds).size).toBe(summary.requestIds.length);
  });
});

/**
 * The codes a client acts on, from the gateway's own table (src/gateway/errors.ts), not from the
 * example's list: every field error code, and BUDGET_EXCEEDED, the one request-level refusal a valid
 * operation meets. INTERNAL_SERVER_ERROR is a field code with nothing to act on but a report, which
 * is what the example does with any code it does not know (OTHER). The other request-level codes
 * (parse, validation, HTTP, trusted documents) come from a client's own bugs or setup: OTHER too.
 */
const ACTIONABLE: readonly ErrorCode[] = (Object.keys(ERROR_CODES) as ErrorCode[]).filter(
  (code) => (ERROR_CODES[code].field || code === 'BUDGET_EXCEEDED') && code !== 'INTERNAL_SERVER_ERROR',
);

describe('typed client error handling', () => {
  it('has a remedy for every error code of the contract, and retry advice for RATE_LIMITED', () => {
    // A code added to the gateway's table that a client should act on fails here until the example
    // handles it; a code the example lists that the gateway never sends fails here too.
    expect([...GATEWAY_ERROR_CODES].sort()).toEqual([...ACTIONABLE].sort());
    const remedies = new Map<string, Remedy>();
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      const advice = adviceFor({ message: 'x', extensions: { code, retryAfterSeconds: 7 } });
      expect(advice.message.length, code).toBeGreaterThan(0);
      if (ACTIONABLE.includes(code)) {
        expect(advice.code).toBe(code);
        remedies.set(code, advice.remedy);
      } else {
        expect(advice, code).toMatchObject({ code: 'OTHER', remedy: 'report' });
      }
    }
    expect(remedies.size).toBe(ACTIONABLE.length);
    expect(
      adviceFor({ message: 'x', extensions: { code: 'RATE_LIMITED', retryAfterSeconds: 7 } }),
    ).toMatchObject({
      remedy: 'retry-later',
      retryAfterSeconds: 7,
    });
    // BUDGET_EXCEEDED: a spent hourly budget is a wait, a cap below the estimate is the caller's to raise.
    expect(
      adviceFor({ message: 'x', extensions: { code: 'BUDGET_EXCEEDED', retryAfterSeconds: 30 } }),
    ).toMatchObject({ remedy: 'retry-later', retryAfterSeconds: 30 });
    expect(
      adviceFor({
        message: 'x',
        extensions: { code: 'BUDGET_EXCEEDED', estimatedCostUsd: 0.01, maxCostUsd: 0 },
      }),
    ).toMatchObject({ remedy: 'raise-cost-cap', message: expect.stringContaining('0.01 USD') });
    expect(adviceFor({ message: 'x', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }).code).toBe('OTHER');
  });
});
