/**
 * The gateway process's own JSON log lines, as an operator's log pipeline reads them: every line is
 * one JSON object whose keys appear once (a repeated key, such as the `pid` pino already adds, is
 * kept by some parsers and dropped by others), and the figures a reader sees are rounded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';

let gateway: GatewayProcess;
beforeAll(async () => {
  gateway = await startGatewayProcess({ NODE_ENV: 'production' });
});
afterAll(async () => {
  await gateway?.stop();
});

describe('log lines and health figures', () => {
  it('writes every key of a line once, pid included', async () => {
    const response = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ isNull(value: 1) { __typename } }' }),
    });
    expect(response.status).toBe(200);
    const deadline = Date.now() + 10_000;
    while (!gateway.lines.some((l) => l.msg === 'graphql operation') && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(gateway.raw.some((l) => l.includes('"msg":"starting"'))).toBe(true);
    expect(gateway.raw.some((l) => l.includes('"msg":"graphql operation"'))).toBe(true);
    for (const line of gateway.raw) {
      // JSON.parse keeps the last of two equal keys: written again, such a line comes out shorter.
      expect(JSON.stringify(JSON.parse(line))).toBe(line);
      expect(line.match(/"pid":/g)).toHaveLength(1);
    }
    // The operation line's fields, in order, as log pipelines read them (docs/operations.md, Logs).
    const operation = gateway.lines.find((l) => l.msg === 'graphql operation');
    expect(Object.keys(operation ?? {})).toEqual([
      'level',
      'time',
      'pid',
      'hostname',
      'requestId',
      'callerId',
      'operation',
      'operationType',
      'outcome',
      'durationMs',
      'upstreamCalls',
      'costUsd',
      'cacheHits',
      'estimatedCostUsd',
      'msg',
    ]);
    expect(operation).toMatchObject({
      level: 30,
      callerId: 'anonymous',
      operation: null,
      operationType: 'query',
      outcome: 'ok',
    });
  });

  it('answers health latencies to 0.01 ms', async () => {
    const response = await fetch(gateway.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ health { nullCheck { latencyMs } pi { latencyMs } } }' }),
    });
    const body = (await response.json()) as {
      data: { health: { nullCheck: { latencyMs: number }; pi: { latencyMs: number } } };
    };
    for (const latency of [body.data.health.nullCheck.latencyMs, body.data.health.pi.latencyMs]) {
      expect(latency).toBeGreaterThan(0);
      expect(Math.round(latency * 100) / 100).toBe(latency);
    }
  });
});
