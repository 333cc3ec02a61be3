/**
 * The operation line goes through pino with the logger's own redaction (operation-report.ts): a field
 * of the line under a redaction path shows the censor, whatever logger the report is given (the
 * gateway's root logger, a child of it, or another pino). A writer that wrote the line around pino,
 * or a child logger without redaction paths, fails here. The line's fields and values are those of
 * docs/operations.md, Logs (every name kept when the writer around pino went, issue 39).
 */
import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';
import { parse } from 'graphql';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { keyCaller } from '../../src/gateway/identity.js';
import { createGatewayMetrics } from '../../src/gateway/observability/metrics.js';
import { createOperationReporter } from '../../src/gateway/observability/operation-report.js';
import { Operation } from '../../src/gateway/operation/operation.js';
import { createLogger, type Logger, type LogStream } from '../../src/shared/logger.js';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      lines.push(chunk.toString());
      callback();
    },
  }) as Writable & LogStream;
  return { stream, parsed: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

/** Reports one named query that made one upstream call which cost 0.002 and failed a field. */
function reportOne(logger: Logger): void {
  const reporter = createOperationReporter({
    metrics: createGatewayMetrics({ defaultMetrics: false }),
    logger,
    tracing: undefined,
    responseCache: false,
  });
  const operation = new Operation({ caller: keyCaller('sk-secret'), requestId: 'req-1', deadlineMs: 0 });
  reporter.executing(operation, parse('query IsNull { isNull(value: 1) { __typename } }'), 'IsNull');
  operation.record({
    upstream: 'null-check',
    endpoint: 'check',
    status: 200,
    durationMs: 3,
    source: 'upstream',
  });
  operation.answered();
  operation.spent(0.002);
  reporter.finish(operation, {
    data: { a: { __typename: 'NullCheck' }, b: null },
    errors: [
      {
        message: 'x',
        extensions: { code: 'UPSTREAM_UNAVAILABLE' },
      } as never,
    ],
  });
}

describe('the operation line', () => {
  it('carries its fields through the gateway’s JSON logger', () => {
    const { stream, parsed } = capture();
    reportOne(createLogger({ destination: stream }));
    const [line, ...rest] = parsed();
    expect(rest).toEqual([]);
    const { time, pid, hostname, ...fields } = line ?? {};
    expect(typeof time).toBe('number');
    expect(pid).toBe(process.pid);
    expect(typeof hostname).toBe('string');
    expect(fields).toEqual({
      level: 30,
      requestId: 'req-1',
      // The key's digest (identity.ts), never the key.
      callerId: `key:${createHash('sha256').update('sk-secret').digest('hex')}`,
      operation: 'IsNull',
      operationType: 'query',
      outcome: 'partial',
      durationMs: expect.any(Number),
      upstreamCalls: 1,
      costUsd: 0.002,
      cacheHits: 0,
      errorCodes: ['UPSTREAM_UNAVAILABLE'],
      msg: 'graphql operation',
    });
  });

  it('is redacted where a redaction path covers one of its fields (a root pino logger)', () => {
    const { stream, parsed } = capture();
    const logger = pino(
      { redact: { paths: ['requestId', 'operation', 'errorCodes[*]'], censor: '[redacted]' } },
      stream,
    );
    reportOne(logger);
    expect(parsed()).toEqual([
      expect.objectContaining({
        requestId: '[redacted]',
        operation: '[redacted]',
        errorCodes: ['[redacted]'],
        outcome: 'partial',
        msg: 'graphql operation',
      }),
    ]);
  });

  it('keeps the redaction of the logger it is given when that is a child (with bindings of its own)', () => {
    const { stream, parsed } = capture();
    const root = pino({ redact: { paths: ['costUsd', 'durationMs'], censor: '[redacted]' } }, stream);
    reportOne(root.child({ component: 'gateway' }));
    expect(parsed()).toEqual([
      expect.objectContaining({
        component: 'gateway',
        costUsd: '[redacted]',
        durationMs: '[redacted]',
        requestId: 'req-1',
      }),
    ]);
  });
});
