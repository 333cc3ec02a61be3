/**
 * Logs the upstreams' sponsor messages, as their terms of service require, without flooding the log.
 *
 * Each distinct (upstream, message) pair is logged the first time it is seen and then at most once per
 * interval; the line says how many times the message was received since it was last logged, so the log
 * still accounts for every sponsored answer at a fraction of the volume.
 */
import type { Logger } from '../../shared/logger.js';
import type { UpstreamName } from '../upstream/types.js';

export interface SponsorLogOptions {
  logger: Logger;
  /**
   * Each distinct message is logged at most once per interval; 0 logs every message received.
   * @default 60000
   */
  intervalMs?: number;
  /**
   * Most distinct messages remembered; past it, the least recently logged are forgotten (and would be
   * logged again when seen). Bounds memory if an upstream sends a new message with every answer.
   * @default 10000
   */
  maxTracked?: number;
  /**
   * Clock in milliseconds (tests pass a fake one).
   * @default Date.now
   */
  now?: () => number;
}

/** Longest message logged verbatim; an upstream could send megabytes, the log line stays bounded. */
const MAX_MESSAGE_LENGTH = 1000;

interface Seen {
  readonly upstream: UpstreamName;
  readonly message: string;
  loggedAt: number;
  /** Received since the last log line of this message. */
  suppressed: number;
}

export interface SponsorLog {
  /** A sponsor message received from an upstream; logs it when due. */
  record(upstream: UpstreamName, message: string): void;
  /** Distinct messages currently remembered. */
  readonly size: number;
}

export function createSponsorLog(options: SponsorLogOptions): SponsorLog {
  const { logger } = options;
  const intervalMs = options.intervalMs ?? 60_000;
  const maxTracked = options.maxTracked ?? 10_000;
  const now = options.now ?? Date.now;
  // Found by upstream, then by the message itself: no `upstream + message` key string is built (and
  // hashed) for every sponsored answer.
  const seen = new Map<UpstreamName, Map<string, Seen>>();
  // Insertion order = order of last log line (re-logged entries are moved to the end), so the first
  // entries are the stalest: that is what eviction drops, whichever upstream they came from.
  const order = new Set<Seen>();

  const log = (upstream: UpstreamName, message: string, repeats: number) => {
    const sponsoredBy =
      message.length > MAX_MESSAGE_LENGTH ? `${message.slice(0, MAX_MESSAGE_LENGTH)}…[truncated]` : message;
    logger.info({ upstream, sponsoredBy, repeats }, 'sponsor message');
  };

  return {
    record(upstream, message) {
      if (intervalMs === 0) {
        log(upstream, message, 1);
        return;
      }
      const t = now();
      let messages = seen.get(upstream);
      if (messages === undefined) {
        messages = new Map();
        seen.set(upstream, messages);
      }
      const entry = messages.get(message);
      if (entry === undefined) {
        if (order.size >= maxTracked) {
          const oldest = order.values().next();
          if (!oldest.done) {
            order.delete(oldest.value);
            seen.get(oldest.value.upstream)?.delete(oldest.value.message);
          }
        }
        const fresh: Seen = { upstream, message, loggedAt: t, suppressed: 0 };
        messages.set(message, fresh);
        order.add(fresh);
        log(upstream, message, 1);
        return;
      }
      if (t - entry.loggedAt < intervalMs) {
        entry.suppressed++;
        return;
      }
      // `repeats`: this message plus the ones received silently since the last line.
      log(upstream, message, entry.suppressed + 1);
      entry.loggedAt = t;
      entry.suppressed = 0;
      order.delete(entry);
      order.add(entry);
    },
    get size() {
      return order.size;
    },
  };
}
