/**
 * The operation line written in one piece (fixedLineWriter) against pino's own line for the same
 * logger, fields and time, byte for byte: every kind of value the operation line holds, strings that
 * need escapes, the levels, a child's bindings. Where the writer declines (an escape pino may write
 * otherwise), it says so and the line is pino's.
 */
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger, fixedLineWriter, type LogStream } from '../../src/shared/logger.js';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(chunk.toString());
      callback();
    },
  }) as Writable & LogStream;
  return { stream, lines };
}

/** The operation report's logger: a child without redaction (operation-report.ts). */
function reporterLogger(stream: LogStream, bindings: Record<string, unknown> = {}): Logger {
  const root = createLogger({ level: 'info', destination: stream });
  const parent = Object.keys(bindings).length === 0 ? root : root.child(bindings);
  return parent.child({}, { redact: { paths: [] } });
}

const FIELDS: Array<Record<string, unknown>> = [
  {
    requestId: 'a1b2c3d4e5f60718',
    operation: 'IsNull',
    operationType: 'query',
    outcome: 'ok',
    durationMs: 12.34,
    upstreamCalls: 1,
    costUsd: 0.000012,
    cacheHits: 0,
    estimatedCostUsd: 1.5e-7,
  },
  {
    requestId: 'req "quoted" \\ back',
    operation: null,
    operationType: 'mutation',
    outcome: 'partial',
    durationMs: 0,
    upstreamCalls: 0,
    errorCodes: ['UPSTREAM_UNAVAILABLE', 'BAD_USER_INPUT'],
  },
  {
    requestId: 'é ü ñ — 😀 日本',
    operation: 'x'.repeat(150),
    operationType: 'subscription',
    outcome: 'error',
    durationMs: -0,
    upstreamCalls: 1e21,
    costUsd: Number.NaN,
    cacheHits: Number.POSITIVE_INFINITY,
    estimatedCostUsd: 0.1 + 0.2,
  },
  { requestId: 'r', operation: undefined, outcome: 'cancelled', durationMs: 123456.78 },
  {},
];

describe('fixedLineWriter', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2026-11-27T12:00:00.123Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  for (const bindings of [{}, { role: 'cache', n: 2, nested: { a: 'b"c' } }])
    for (const level of ['info', 'warn'] as const)
      it(`writes pino's bytes (${level}, bindings ${JSON.stringify(bindings)})`, () => {
        const byPino = capture();
        const byWriter = capture();
        const pinoLogger = reporterLogger(byPino.stream, bindings);
        const writer = fixedLineWriter(reporterLogger(byWriter.stream, bindings), 'graphql operation');
        expect(writer).toBeDefined();
        for (const fields of FIELDS) {
          pinoLogger[level](fields, 'graphql operation');
          expect(writer?.(level, fields)).toBe(true);
        }
        expect(byWriter.lines).toEqual(byPino.lines);
        expect(byWriter.lines).toHaveLength(FIELDS.length);
      });

  it('declines strings with \\u escapes (a lone surrogate, a control character): pino writes those', () => {
    const { stream, lines } = capture();
    const writer = fixedLineWriter(reporterLogger(stream), 'graphql operation');
    expect(writer?.('info', { requestId: 'lone \ud800 surrogate' })).toBe(false);
    expect(writer?.('info', { requestId: 'bell \u0007' })).toBe(false);
    expect(lines).toEqual([]);
  });

  it('is not offered for a pretty logger or a pino made elsewhere', async () => {
    const { stream } = capture();
    expect(fixedLineWriter(createLogger({ format: 'pretty', destination: stream }), 'm')).toBeUndefined();
    const { pino } = await import('pino');
    expect(fixedLineWriter(pino({ level: 'info' }, stream), 'm')).toBeUndefined();
  });
});
