/**
 * The replica registry: how replicas sharing budgets know each other through Redis (docs/contract.md,
 * More than one machine), whether or not their operations on a key ever overlapped. Each replica beats
 * its token into one sorted set (`<prefix>replicas`, score = Redis' time) every `intervalMs`, off the
 * request path; an entry older than `ttlMs` no longer counts (a killed replica ages out), and a
 * graceful close removes its own. Each beat is one script (replica-registry.lua: ZADD, the old entries
 * out, ZCARD) on one key of its own, touched alone, so it is Cluster-safe, and answers how many
 * replicas count now: what an outage's part of a budget's remainder is divided by (budget-shares.ts),
 * remembered from the last beat that succeeded. Cost: one round trip per replica per `intervalMs`,
 * counted under `health` in `gateway_redis_commands_total`; nothing per operation.
 *
 * The first beat goes as soon as Redis is usable (tried every FIRST_BEAT_RETRY_MS until one succeeds),
 * not an interval after the start. One beat is not yet a count: replicas that started with this one
 * may not have beaten when it did. The registry is read once a second beat succeeded, an interval
 * after the first (every replica up and connected over that interval beat within it); until then the
 * count is at least `expected` (EXPECTED_REPLICAS, the Deployment's replica count), so a replica
 * whose outage comes before it has read the registry does not spend a remainder as if it were alone.
 */
import { luaScript } from './lua-scripts.js';
import { replicaRegistryKey } from './redis-keys.js';
import { FAILED, type RedisLink } from './redis-link.js';

/** How often a replica beats, in ms. */
export const REPLICA_HEARTBEAT_MS = 2_000;
/** Until its first beat succeeds, how often a replica tries it (only while Redis is usable), in ms. */
const FIRST_BEAT_RETRY_MS = 100;

const LUA = luaScript('replica-registry.lua');

export interface ReplicaRegistryOptions {
  link: RedisLink;
  /** This replica's token (the budget store's). */
  token: string;
  /**
   * How often it beats, in ms; 0: never (the registry counts 1, as before it existed).
   * @default REPLICA_HEARTBEAT_MS
   */
  intervalMs?: number;
  /**
   * How long an entry counts after its beat, in ms.
   * @default 3 × intervalMs
   */
  ttlMs?: number;
  /** Longest wait for one beat, in ms (the budget scripts' timeout). */
  timeoutMs?: number | undefined;
  /**
   * The fewest replicas counted until the registry has been read (EXPECTED_REPLICAS).
   * @default 1
   */
  expected?: number | undefined;
}

export interface ReplicaRegistry {
  /** Starts beating (idempotent): at once if Redis is usable, then every interval while it is. */
  start(): void;
  /**
   * The replicas counting at the last beat that succeeded (this one included); until two have
   * succeeded, at least `expected`.
   */
  count(): number;
  /** Stops beating and, Redis usable, removes this replica's entry. */
  close(): Promise<void>;
}

export function createReplicaRegistry(options: ReplicaRegistryOptions): ReplicaRegistry {
  const { link, token, timeoutMs } = options;
  const intervalMs = options.intervalMs ?? REPLICA_HEARTBEAT_MS;
  const ttlMs = options.ttlMs ?? 3 * intervalMs;
  const key = replicaRegistryKey(link.keyPrefix);
  const script = link.script('sharedStateReplicas', 1, LUA);
  const expected = Math.max(1, options.expected ?? 1);
  let counted = 1;
  /** Beats that succeeded, up to 2 (then the registry is read). */
  let beats = 0;
  let started = false;
  let startedAt = 0;
  /** Tries the first beat until one succeeds; then `timer` beats every interval from it. */
  let first: NodeJS.Timeout | undefined;
  let timer: NodeJS.Timeout | undefined;
  let beating: Promise<void> | undefined;
  let closed = false;

  const send = (leave: boolean) =>
    link.run('replicas', () => script(key, token, ttlMs, leave ? '1' : '0'), timeoutMs);

  const beat = () => {
    // Nothing is sent while Redis is away (the stores' rule): the last count stands meanwhile. The
    // first beat also waits for a Cluster's node connections to be open (`nodesReady`), at most an
    // interval: as the later beats, it then goes once the link is usable.
    if (closed || beating !== undefined || !link.usable()) return;
    if (beats === 0 && !link.nodesReady() && performance.now() - startedAt < intervalMs) return;
    beating = send(false)
      .then((reply) => {
        if (reply === FAILED) return;
        const n = Number(reply);
        if (!Number.isFinite(n)) return;
        counted = Math.max(1, n);
        beats = Math.min(2, beats + 1);
        if (beats > 1 || closed) return;
        // The second beat an interval after the first: the count it brings is the registry read.
        clearInterval(first);
        timer = setInterval(beat, intervalMs);
        timer.unref();
      })
      .finally(() => {
        beating = undefined;
      });
  };

  return {
    start() {
      if (closed || started || !(intervalMs > 0)) return;
      started = true;
      startedAt = performance.now();
      // Tried often until one succeeds.
      first = setInterval(beat, Math.min(FIRST_BEAT_RETRY_MS, intervalMs));
      first.unref();
      beat();
    },
    count: () => (beats < 2 ? Math.max(counted, expected) : counted),
    async close() {
      if (closed) return;
      closed = true;
      if (!started) return;
      clearInterval(first);
      clearInterval(timer);
      await beating;
      if (link.usable()) await send(true);
    },
  };
}
