/**
 * The typed client example (examples/typed-client.ts) against the embedded default: the reference
 * services and the gateway on loopback, the example's own `main(url)`, assertions on its summary.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adviceFor,
  type ClientSummary,
  GATEWAY_ERROR_CODES,
  main,
  type Remedy,
} from '../../examples/typed-client.js';
import { loadConfig } from '../../src/config.js';
import { createDigitEngine, type DigitEngine } from '../../src/digits/digit-engine.js';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { createGateway } from '../../src/gateway/yoga.js';
import { type RunningServices, startServices } from '../../src/services/start-services.js';

let services: RunningServices;
let clients: HttpUpstreamClients;
let digits: DigitEngine;
let server: Server;
let summary: ClientSummary;

beforeAll(async () => {
  services = await startServices({ host: '127.0.0.1' });
  clients = createUpstreamClients({ nullBaseUrl: services.nullCheckUrl, piBaseUrl: services.piDigitsUrl });
  digits = createDigitEngine({ useWorker: false });
  const config = loadConfig({ NODE_ENV: 'test' });
  server = createServer(createGateway({ clients, digits, config, logger: pino({ level: 'silent' }) }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  summary = await main(`http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`);
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await clients?.close();
  await services?.close();
  await digits?.close();
});

describe('typed client example', () => {
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
    });
    expect(summary.errorCodes.OTHER).toBeUndefined();
    expect(summary.remedies).toMatchObject({
      TIER_FORBIDDEN: 'upgrade-tier',
      UNDEFINED_VALUE: 'fix-input',
      WAIVER_REQUIRED: 'sign-waiver',
      UNAUTHENTICATED: 'fix-api-key',
    });
  });

  it('keeps a partial result, the sponsor messages and every request id', () => {
    expect(summary.partialResults).toBe(1);
    expect(summary.sponsors.length).toBeGreaterThan(0);
    expect(summary.requestIds.length).toBeGreaterThan(10);
    expect(new Set(summary.requestIds).size).toBe(summary.requestIds.length);
  });
});

describe('typed client error handling', () => {
  it('has a remedy for every error code of the contract, and retry advice for RATE_LIMITED', () => {
    const remedies = new Map<string, Remedy>();
    for (const code of GATEWAY_ERROR_CODES) {
      const advice = adviceFor({ message: 'x', extensions: { code, retryAfterSeconds: 7 } });
      expect(advice.code).toBe(code);
      expect(advice.message.length).toBeGreaterThan(0);
      remedies.set(code, advice.remedy);
    }
    expect(remedies.size).toBe(11);
    expect(
      adviceFor({ message: 'x', extensions: { code: 'RATE_LIMITED', retryAfterSeconds: 7 } }),
    ).toMatchObject({
      remedy: 'retry-later',
      retryAfterSeconds: 7,
    });
    expect(adviceFor({ message: 'x', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }).code).toBe('OTHER');
  });
});
