/**
 * What the gateway asks of its redis-server during a benchmark row, as Redis itself counts it.
 *
 * - Commands and µs: `INFO commandstats` after `CONFIG RESETSTAT` (reset just before the measured
 *   phase). `calls` and `usec` summed over every command, a script's inner commands included as Redis
 *   reports them: an EVALSHA counts once and so does each `redis.call` it makes, and the EVALSHA's
 *   `usec` already holds its inner commands' time (so the µs sum counts that time twice, as the
 *   figures of issue 40 did; the redis-server's CPU from /proc is the undoubled figure). The bench's
 *   own admin commands (`config`, `info`, `client`, `monitor`, `hello`) are left out.
 * - Round trips: the top-level commands, each a request and its reply on the connection (a script is
 *   one, whatever it runs), counted with MONITOR: every line whose source is a client, not `lua`.
 *   MONITOR slows Redis down, so it runs during the row's warm-up (the same workload), never while
 *   the row is measured.
 */
import { Redis } from 'ioredis';

/** Commands the benchmark itself sends (or a client library sends on connecting): not the gateway's. */
const ADMIN = new Set(['config', 'info', 'client', 'monitor', 'hello', 'command']);

/** The ECHO that marks the end of a MONITOR count. */
const END_MARK = 'null-pi-bench:monitor-end';

export interface CommandStats {
  /** Calls summed over the gateway's commands (scripts' inner commands included). */
  calls: number;
  /** Their `usec` summed. */
  usec: number;
  /** Calls per command (lower case), admin commands left out. */
  byCommand: Record<string, number>;
}

async function withClient<T>(url: string, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableReadyCheck: false });
  try {
    await client.connect();
    return await use(client);
  } finally {
    client.disconnect();
  }
}

/** `CONFIG RESETSTAT`: commandstats start from zero. */
export function resetCommandStats(url: string): Promise<void> {
  return withClient(url, async (client) => {
    await client.config('RESETSTAT');
  });
}

/** `INFO commandstats`, summed (see the header). */
export function readCommandStats(url: string): Promise<CommandStats> {
  return withClient(url, async (client) => {
    const text = await client.info('commandstats');
    const stats: CommandStats = { calls: 0, usec: 0, byCommand: {} };
    for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
      const command = (match[1] as string).toLowerCase();
      if (ADMIN.has(command.split('|')[0] as string)) continue;
      const calls = Number(match[2]);
      stats.calls += calls;
      stats.usec += Number(match[3]);
      stats.byCommand[command] = calls;
    }
    return stats;
  });
}

/** Top-level commands sent to Redis while `during` runs (MONITOR; see the header), and by command. */
export async function countRoundTrips<T>(
  url: string,
  during: () => Promise<T>,
): Promise<{ result: T; roundTrips: number; byCommand: Record<string, number> }> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, enableReadyCheck: false });
  await client.connect();
  try {
    const monitor = await client.monitor();
    let roundTrips = 0;
    const byCommand: Record<string, number> = {};
    let sawEnd: (() => void) | undefined;
    const ended = new Promise<void>((resolve) => {
      sawEnd = resolve;
    });
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === 'lua') return;
      const command = String(args[0] ?? '').toLowerCase();
      if (command === 'echo' && args[1] === END_MARK) sawEnd?.();
      if (ADMIN.has(command) || command === 'echo') return;
      roundTrips++;
      byCommand[command] = (byCommand[command] ?? 0) + 1;
    });
    try {
      const result = await during();
      // Every command Redis ran before this ECHO has been fed to the monitor before it: wait for it
      // (bounded), so the lines still on their way are counted.
      await withClient(url, (other) => other.echo(END_MARK));
      await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
      return { result, roundTrips, byCommand };
    } finally {
      monitor.disconnect();
    }
  } finally {
    client.disconnect();
  }
}
