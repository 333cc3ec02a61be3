import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createSponsorLog } from '../../src/gateway/observability/sponsor-log.js';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

describe('sponsor log', () => {
  it('logs a message the first time, then at most once per interval with the count received since', () => {
    const { logger, lines } = capture();
    let t = 1_000;
    const log = createSponsorLog({ logger, intervalMs: 60_000, now: () => t });
    log.record('pi-digits', 'Brought to you by Pi Inc.');
    for (let i = 0; i < 5; i++) log.record('pi-digits', 'Brought to you by Pi Inc.');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: 'sponsor message',
      upstream: 'pi-digits',
      sponsoredBy: 'Brought to you by Pi Inc.',
      repeats: 1,
    });
    t += 60_000;
    log.record('pi-digits', 'Brought to you by Pi Inc.');
    expect(lines).toHaveLength(2);
    // The 5 silent ones plus this one.
    expect(lines[1]).toMatchObject({ sponsoredBy: 'Brought to you by Pi Inc.', repeats: 6 });
  });

  it('keeps distinct messages and upstreams apart', () => {
    const { logger, lines } = capture();
    const log = createSponsorLog({ logger, intervalMs: 60_000, now: () => 0 });
    log.record('pi-digits', 'A');
    log.record('pi-digits', 'B');
    log.record('null-check', 'A');
    log.record('null-check', 'A');
    expect(lines.map((l) => `${l.upstream}:${l.sponsoredBy}`)).toEqual([
      'pi-digits:A',
      'pi-digits:B',
      'null-check:A',
    ]);
  });

  it('logs every message when the interval is 0', () => {
    const { logger, lines } = capture();
    const log = createSponsorLog({ logger, intervalMs: 0 });
    for (let i = 0; i < 3; i++) log.record('pi-digits', 'A');
    expect(lines).toHaveLength(3);
    expect(log.size).toBe(0);
  });

  it('remembers a bounded number of messages, forgetting the stalest first', () => {
    const { logger, lines } = capture();
    const log = createSponsorLog({ logger, intervalMs: 60_000, maxTracked: 2, now: () => 0 });
    log.record('pi-digits', 'A');
    log.record('pi-digits', 'B');
    log.record('pi-digits', 'C');
    expect(log.size).toBe(2);
    log.record('pi-digits', 'C');
    log.record('pi-digits', 'A');
    expect(lines.map((l) => l.sponsoredBy)).toEqual(['A', 'B', 'C', 'A']);
  });

  it('forgets the stalest across upstreams, a re-logged message counting as fresh', () => {
    const { logger, lines } = capture();
    let t = 0;
    const log = createSponsorLog({ logger, intervalMs: 10, maxTracked: 2, now: () => t });
    log.record('pi-digits', 'A');
    t = 1;
    log.record('null-check', 'A');
    t = 20;
    log.record('pi-digits', 'A'); // logged again: now the freshest
    log.record('null-check', 'B'); // evicts null-check A, the stalest
    expect(log.size).toBe(2);
    t = 21;
    log.record('pi-digits', 'A'); // still remembered: suppressed
    log.record('null-check', 'A'); // forgotten: logged as new
    expect(lines.map((l) => [l.upstream, l.sponsoredBy, l.repeats])).toEqual([
      ['pi-digits', 'A', 1],
      ['null-check', 'A', 1],
      ['pi-digits', 'A', 1],
      ['null-check', 'B', 1],
      ['null-check', 'A', 1],
    ]);
    expect(log.size).toBe(2);
  });

  it('truncates a huge message so one answer cannot blow up the log', () => {
    const { logger, lines } = capture();
    const log = createSponsorLog({ logger });
    log.record('null-check', 'x'.repeat(100_000));
    const shown = String(lines[0]?.sponsoredBy);
    expect(shown.length).toBeLessThan(1100);
    expect(shown.endsWith('[truncated]')).toBe(true);
  });
});
