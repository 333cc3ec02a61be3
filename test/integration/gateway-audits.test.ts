/**
 * GraphQL over HTTP conformance: graphql-http's server audits against the gateway on a real socket.
 * Every MUST audit passes, one test each; the SHOULD and MAY audits pass as well.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { serverAudits } from 'graphql-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createDigitEngine } from '../../src/digits/digit-engine.js';
import { createGatewayServer, type GatewayServer } from '../../src/gateway/http/gateway-server.js';
import {
  createUpstreamClients,
  type HttpUpstreamClients,
} from '../../src/gateway/upstream/create-upstream-clients.js';
import { createGateway } from '../../src/gateway/yoga.js';
import { createLogger } from '../../src/shared/logger.js';

const engine = createDigitEngine({ useWorker: false });
let server: GatewayServer;
let clients: HttpUpstreamClients;
let url = '';

beforeAll(async () => {
  // The audits only ask for `__typename` and malformed requests: no upstream is ever called, so
  // the clients point at a closed loopback port.
  clients = createUpstreamClients({ nullBaseUrl: 'http://127.0.0.1:9', piBaseUrl: 'http://127.0.0.1:9' });
  const config = loadConfig({ NODE_ENV: 'test' });
  const logger = createLogger({ level: 'silent' });
  const yoga = createGateway({ clients, digits: engine, config, logger });
  // The server as `npm start` builds it: POSTs with a JSON body take the HTTP fast path.
  server = createGatewayServer({ yoga, config, logger });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await clients.close();
  await engine.close();
});

describe('graphql-http server audits', () => {
  const audits = serverAudits({ url: () => url, fetchFn: fetch });

  it('runs against the fast path', () => {
    expect(server.gatewayListener.fastPath).toBe(true);
  });

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

  it('passes every SHOULD and MAY audit too', async () => {
    const optional = audits.filter((a) => !a.name.startsWith('MUST'));
    const results = await Promise.all(optional.map((a) => a.fn()));
    expect(
      results.filter((r) => r.status !== 'ok').map((r) => `${r.name}: ${'reason' in r ? r.reason : ''}`),
    ).toEqual([]);
  });
});
