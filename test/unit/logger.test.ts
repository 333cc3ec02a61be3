/**
 * The logger as people and machines read it: pretty is one line per event, coloured only on a
 * terminal, the operation line's important fields first; JSON is one object per line; a destination
 * that fails turns logging off instead of throwing; the default format follows the terminal.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger, flushLogger, type LogStream, logFormatFor } from '../../src/shared/logger.js';

/** A stream that keeps what it is given; `isTTY` as a terminal would say. */
function capture(isTTY = false) {
  let text = '';
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      text += chunk.toString();
      callback();
    },
  }) as Writable & LogStream;
  stream.isTTY = isTTY;
  return { stream, text: () => text };
}

const ESC = '\u001b';

const operationLine = {
  requestId: 'req-7',
  operation: 'IsNull',
  operationType: 'query',
  outcome: 'ok',
  durationMs: 12.5,
  upstreamCalls: [
    { upstream: 'null-check', endpoint: '/api/v1/check', status: 200, durationMs: 10.25 },
    { upstream: 'pi-digits', endpoint: '/api/v1/pi', status: null, durationMs: 5, code: 'UPSTREAM_TIMEOUT' },
  ],
};

/** Logs a few typical events, multi-line texts and nested objects included. */
function logEvents(level: string, stream: LogStream) {
  const logger = createLogger({ level, format: 'pretty', destination: stream });
  logger.info(operationLine, 'graphql operation');
  logger.error({ err: new Error('first line\nsecond line') }, 'shutdown failed');
  logger.warn({ nested: { a: 1, b: [1, 2, { c: 'd' }] }, note: 'two\nlines' }, 'something odd');
  logger.info('shutdown complete');
  return 4;
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('pretty format', () => {
  it.each(['info', 'debug'])(
    'at %s: exactly one line per event, no ANSI escape into a non-terminal',
    (level) => {
      const out = capture(false);
      const events = logEvents(level, out.stream);
      const lines = out.text().split('\n');
      expect(lines.pop()).toBe(''); // every line ends with a newline
      expect(lines).toHaveLength(events);
      for (const line of lines) expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] (INFO|WARN|ERROR): /);
      expect(out.text()).not.toContain(ESC);
    },
  );

  it('puts operation, outcome, durationMs and requestId first on the operation line', () => {
    const out = capture(false);
    createLogger({ format: 'pretty', destination: out.stream }).info(operationLine, 'graphql operation');
    expect(out.text()).toMatch(
      /INFO: graphql operation operation=IsNull outcome=ok durationMs=12\.5 requestId=req-7 /,
    );
  });

  it('shows upstreamCalls compactly at info and every field of them at debug', () => {
    const info = capture(false);
    createLogger({ level: 'info', format: 'pretty', destination: info.stream }).info(operationLine, 'op');
    expect(info.text()).toContain(
      'upstreamCalls=[null-check 200 10.25ms, pi-digits no answer 5ms UPSTREAM_TIMEOUT]',
    );
    expect(info.text()).not.toContain('/api/v1/check');

    const debug = capture(false);
    createLogger({ level: 'debug', format: 'pretty', destination: debug.stream }).info(operationLine, 'op');
    expect(debug.text()).toContain(`upstreamCalls=${JSON.stringify(operationLine.upstreamCalls)}`);
  });

  it('shortens long texts below debug and shows them whole at debug', () => {
    const body = `<html>${'x'.repeat(5000)}</html>`;
    const info = capture(false);
    createLogger({ format: 'pretty', destination: info.stream }).warn({ body }, 'upstream call failed');
    expect(info.text()).toContain('…');
    expect(info.text().length).toBeLessThan(400);
    const debug = capture(false);
    createLogger({ level: 'debug', format: 'pretty', destination: debug.stream }).warn(
      { body },
      'upstream call failed',
    );
    expect(debug.text()).toContain(body);
  });

  it('shows an error as its type and message at info, its stack only at debug', () => {
    const info = capture(false);
    createLogger({ format: 'pretty', destination: info.stream }).error({ err: new Error('boom') }, 'failed');
    expect(info.text()).toContain('err="Error: boom"');
    expect(info.text()).not.toContain('logger.test.ts');

    const debug = capture(false);
    createLogger({ level: 'debug', format: 'pretty', destination: debug.stream }).error(
      { err: new Error('boom') },
      'failed',
    );
    expect(debug.text()).toContain('logger.test.ts'); // a frame of the stack, escaped onto the line
    expect(debug.text().trimEnd().split('\n')).toHaveLength(1);
  });

  it('escapes control characters from logged data (nothing logged drives the terminal)', () => {
    const out = capture(true);
    vi.stubEnv('NO_COLOR', '');
    createLogger({ format: 'pretty', destination: out.stream }).warn(
      { sponsoredBy: `Buy ${ESC}[2Jnow` },
      `sponsor ${ESC}]0;title\u0007`,
    );
    // Colours are on (a terminal), so ESC appears, but only as the start of a colour code.
    expect(out.text()).toContain(ESC);
    expect(out.text()).not.toMatch(new RegExp(`${ESC}(?!\\[\\d+(;\\d+)*m)`));
    expect(out.text()).toContain('\\u001b[2J');
  });

  it.each(['info', 'debug'])(
    'at %s: redacts the key in every redacted path, as JSON does (debug shows every other field in full)',
    (level) => {
      const key = 'sk-pretty-9d1e7b3a-KEYMARK';
      const headers = { authorization: `Bearer ${key}`, 'x-api-key': key, accept: 'application/json' };
      const out = capture(false);
      const logger = createLogger({ level, format: 'pretty', destination: out.stream });
      logger.info({ apiKey: key, headers, note: 'every path' }, 'request in');
      logger.warn({ req: { headers }, upstream: { apiKey: key, headers } }, 'request dumped');
      logger.info({ ...operationLine, apiKey: key }, 'graphql operation');
      const text = out.text();
      expect(text.trimEnd().split('\n')).toHaveLength(3);
      // The lines were written with their other fields (nested ones in full at debug)...
      expect(text).toContain('note="every path"');
      expect(text).toContain('[redacted]');
      if (level === 'debug') expect(text).toContain('"accept":"application/json"');
      // ...and never the key.
      expect(text).not.toContain('KEYMARK');
      expect(text).not.toContain(key.slice(0, 12));
    },
  );

  it('colours on a terminal, and not when NO_COLOR is set', () => {
    vi.stubEnv('NO_COLOR', '');
    const tty = capture(true);
    createLogger({ format: 'pretty', destination: tty.stream }).info('hello');
    expect(tty.text()).toContain(`${ESC}[`);

    vi.stubEnv('NO_COLOR', '1');
    const noColor = capture(true);
    createLogger({ format: 'pretty', destination: noColor.stream }).info('hello');
    expect(noColor.text()).toContain('hello');
    expect(noColor.text()).not.toContain(ESC);
  });
});

describe('json format', () => {
  it('writes one JSON object per line, keys redacted', () => {
    const out = capture(false);
    const logger = createLogger({ format: 'json', destination: out.stream });
    logger.info({ ...operationLine, apiKey: 'secret-key' }, 'graphql operation');
    logger.error({ err: new Error('a\nb') }, 'failed');
    const lines = out.text().trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    const first = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
    expect(first).toMatchObject({ msg: 'graphql operation', operation: 'IsNull', apiKey: '[redacted]' });
    expect(first.upstreamCalls).toEqual(operationLine.upstreamCalls);
    expect(JSON.parse(lines[1] ?? '')).toMatchObject({ msg: 'failed', err: { message: 'a\nb' } });
    expect(out.text()).not.toContain('secret-key');
  });
});

describe('a destination that fails', () => {
  it('turns logging into a no-op instead of throwing, and flush still answers', async () => {
    let writes = 0;
    const failing = new Writable({
      write(_chunk, _encoding, callback) {
        writes++;
        const error = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
        callback(error);
      },
    });
    const logger = createLogger({ format: 'json', destination: failing });
    logger.info('first');
    await new Promise((resolve) => setImmediate(resolve)); // the stream reports its error
    expect(writes).toBe(1);
    expect(() => logger.info('second')).not.toThrow();
    expect(() => logger.error({ err: new Error('x') }, 'third')).not.toThrow();
    await flushLogger(logger, 5000);
    expect(writes).toBe(1); // nothing more was attempted
  });
});

describe('a file descriptor', () => {
  it('gets every line, in order, when it is a regular file (written at once, without the thread pool)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'logger-fd-'));
    try {
      const file = openSync(join(dir, 'log'), 'w');
      const logger = createLogger({ level: 'info', destination: file });
      for (let i = 0; i < 500; i++) logger.info({ i }, 'line');
      await new Promise((resolve) => setImmediate(resolve));
      for (let i = 500; i < 1000; i++) logger.info({ i }, 'line');
      await flushLogger(logger, 5000);
      closeSync(file);
      const lines = readFileSync(join(dir, 'log'), 'utf8').trimEnd().split('\n');
      expect(lines.map((line) => (JSON.parse(line) as { i: number }).i)).toEqual(
        Array.from({ length: 1000 }, (_, i) => i),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('logFormatFor (the default of both CLIs)', () => {
  it.each([
    [undefined, 'development', true, 'pretty'],
    [undefined, 'development', false, 'json'],
    [undefined, 'test', true, 'pretty'],
    [undefined, 'production', true, 'json'],
    [undefined, 'production', false, 'json'],
    ['pretty', 'production', false, 'pretty'],
    ['json', 'development', true, 'json'],
  ] as const)('LOG_FORMAT=%s, NODE_ENV=%s, terminal: %s → %s', (setting, nodeEnv, terminal, expected) => {
    expect(logFormatFor(setting, nodeEnv, terminal)).toBe(expected);
  });
});
