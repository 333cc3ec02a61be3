/**
 * Pretty log lines for people: one short line per event, the important fields first, control
 * characters escaped. Why pino-pretty as a function in this thread (not a transport worker): one
 * thread less to start and to stop at shutdown, and the same sink (and its error handling) for both
 * formats.
 */
import { createRequire } from 'node:module';
import type { Sink } from './log-sinks.js';

type Colors = { gray(text: string): string };
export type Prettify = (log: Record<string, unknown>) => string;
interface PinoPrettyModule {
  prettyFactory(options: Record<string, unknown>): Prettify;
}

/** Fields shown first, in this order, when a line has them; the rest follow in logged order. */
const FIRST_FIELDS = [
  'operation',
  'outcome',
  'durationMs',
  'requestId',
  'errorCodes',
  'gpuCostUsd',
  'upstream',
  'endpoint',
  'status',
  'code',
  'url',
  'signal',
  'reason',
];
/** Shown by pino-pretty itself (time, level), or noise on a developer's screen (pid, hostname). */
const SKIPPED_FIELDS = new Set(['level', 'time', 'msg', 'pid', 'hostname']);
const PLAIN_TEXT = /^[\w.:/@+-]+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: escaping control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
const MAX_COMPACT = 80;

/** Text from log data, with control characters escaped: nothing logged may drive the terminal. */
function safeText(text: string): string {
  return text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function compactJson(value: unknown, full: boolean): string {
  const json = safeText(JSON.stringify(value) ?? String(value));
  return full || json.length <= MAX_COMPACT ? json : `${json.slice(0, MAX_COMPACT - 1)}…`;
}

/** `upstreamCalls` of the operation line: `[null-check 200 12ms, pi-digits 503 5ms UPSTREAM_UNAVAILABLE]`. */
function compactCalls(calls: unknown[]): string {
  const shown = calls.slice(0, 4).map((call) => {
    if (call === null || typeof call !== 'object') return compactJson(call, false);
    const c = call as Record<string, unknown>;
    const parts = [
      c.upstream,
      c.status ?? 'no answer',
      typeof c.durationMs === 'number' ? `${c.durationMs}ms` : c.durationMs,
      c.code,
    ];
    return safeText(parts.filter((p) => p !== undefined).join(' '));
  });
  if (calls.length > shown.length) shown.push(`+${calls.length - shown.length} more`);
  return `[${shown.join(', ')}]`;
}

/** Longest text field shown whole below debug (an upstream's error body can be megabytes). */
const MAX_TEXT = 200;

function valueText(key: string, value: unknown, full: boolean): string {
  if (typeof value === 'string') {
    const text = full || value.length <= MAX_TEXT ? value : `${value.slice(0, MAX_TEXT)}…`;
    return PLAIN_TEXT.test(text) ? text : safeText(JSON.stringify(text));
  }
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (!full && key === 'upstreamCalls' && Array.isArray(value)) return compactCalls(value);
  if (value !== null && typeof value === 'object' && 'message' in value && !full) {
    // An error: its type and message; the stack only at debug (or in JSON).
    const error = value as { type?: unknown; message?: unknown };
    return safeText(JSON.stringify(`${String(error.type ?? 'Error')}: ${String(error.message)}`));
  }
  if (Array.isArray(value) && value.every((v) => typeof v === 'string' && PLAIN_TEXT.test(v)))
    return value.join(',');
  return compactJson(value, full);
}

/** The message, then `key=value` for every field, the important ones first. */
export function messageFormat(full: boolean) {
  return (log: Record<string, unknown>, messageKey: string, _level: string, extras: { colors: Colors }) => {
    const message = log[messageKey];
    const parts = [typeof message === 'string' ? safeText(message) : ''];
    const keys = Object.keys(log).filter((k) => k !== messageKey && !SKIPPED_FIELDS.has(k));
    keys.sort((a, b) => rank(a) - rank(b));
    for (const key of keys) {
      const value = log[key];
      // Skipped when the message already shows it (`listening on <url>` with `url`); short values are
      // always shown, since a word like `ok` may be in a message by chance.
      const echoed = typeof value === 'string' && value.length >= 8 && parts[0]?.includes(value);
      if (value === undefined || echoed) continue;
      parts.push(`${extras.colors.gray(`${key}=`)}${valueText(key, value, full)}`);
    }
    return parts.join(' ');
  };
}

function rank(key: string): number {
  const i = FIRST_FIELDS.indexOf(key);
  return i < 0 ? FIRST_FIELDS.length : i;
}

/** pino-pretty is a development dependency: absent from a production install. */
export function loadPinoPretty(): PinoPrettyModule | undefined {
  try {
    return createRequire(import.meta.url)('pino-pretty') as PinoPrettyModule;
  } catch {
    return undefined;
  }
}

/** A sink that turns each JSON line into one pretty line before writing it to `out`. */
export function prettySink(out: Sink, prettify: Prettify): Sink {
  return {
    write(chunk: string) {
      let line: string;
      try {
        const log = JSON.parse(chunk) as Record<string, unknown>;
        // pino-pretty prints a top-level error's stack on extra lines: keep it a field like any other.
        if (log.type === 'Error') log.type = 'error';
        line = prettify(log);
      } catch {
        line = chunk;
      }
      return out.write(line.endsWith('\n') ? line : `${line}\n`);
    },
    flush: (callback) => out.flush(callback),
  };
}
