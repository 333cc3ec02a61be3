/**
 * Single flight across replicas (best effort): the first replica to claim a key calls the upstream,
 * the others wait a while for its answer instead of calling too.
 *
 * Keys: `<prefix>flight:{<digest>}` is the lock (SET NX PX, valued with this process' token, so a
 * leader whose lock expired never releases the next leader's), `<prefix>answer:{<digest>}` the settled
 * answer (JSON, short TTL). One hash tag: the settle script and the followers' MGET touch both, which
 * a Redis Cluster allows only within one slot. Followers poll both with one MGET, first at once, then at growing
 * intervals (4 ms up to 40 ms): polling keeps one connection per process, where pub/sub would need a
 * second one in subscriber mode, and upstream calls last tens of ms to seconds, so a few polls per
 * wait are cheap. Whatever goes wrong ends in 'lead' or undefined: the caller makes its own call.
 */
import { randomUUID } from 'node:crypto';
import { luaScript } from './lua-scripts.js';
import { taggedRedisKey } from './redis-keys.js';
import { FAILED, type RedisLink } from './redis-link.js';
import type { FlightCoordinator } from './types.js';

const FIRST_POLL_MS = 4;
const MAX_POLL_MS = 40;

const LEAD: Promise<'lead'> = Promise.resolve('lead');
const NOTHING: Promise<undefined> = Promise.resolve(undefined);

// Publish the answer (if any) before releasing the lock, atomically: a follower never sees the lock
// gone and the answer not yet there. The lock is released only if it is still this process'.
const SETTLE = luaScript('flight-settle.lua');

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function createFlightCoordinator(link: RedisLink | undefined): FlightCoordinator {
  if (link === undefined) {
    return { claim: () => LEAD, settle: () => {}, await: () => NOTHING };
  }
  const token = randomUUID();
  const settleScript = link.script('sharedStateSettle', 2, SETTLE);
  const lockKey = (key: string) => taggedRedisKey(link.keyPrefix, 'flight', key);
  const answerKey = (key: string) => taggedRedisKey(link.keyPrefix, 'answer', key);

  const decode = (json: string): unknown => {
    try {
      return JSON.parse(json);
    } catch {
      return undefined;
    }
  };

  return {
    claim(key, ttlMs) {
      if (!link.usable()) return LEAD;
      const px = Math.max(1, Math.ceil(ttlMs));
      return link
        .run('flight_claim', (client) => client.set(lockKey(key), token, 'PX', px, 'NX'))
        .then((reply) => (reply === null ? 'follow' : 'lead'));
    },
    settle(key, value, ttlMs) {
      if (!link.usable()) return; // the lock expires by its TTL
      let json = '';
      if (value !== undefined) {
        try {
          json = JSON.stringify(value) ?? '';
        } catch {
          // Not encodable: release the lock only; followers make their own calls.
        }
      }
      const px = Math.max(1, Math.ceil(ttlMs));
      void link.run('flight_settle', () => settleScript(lockKey(key), answerKey(key), token, json, px));
    },
    async await(key, waitMs, signal) {
      const deadline = performance.now() + waitMs;
      const keys = [answerKey(key), lockKey(key)];
      let delay = FIRST_POLL_MS;
      // Bounded by the deadline: every turn either returns or sleeps at least 1 ms of the wait.
      for (;;) {
        if (signal?.cancelled || !link.usable()) return undefined;
        const reply = await link.run('flight_await', (client) => client.mget(keys));
        if (reply === FAILED) return undefined;
        const [answer, lock] = reply;
        if (typeof answer === 'string') return decode(answer);
        if (lock === null || lock === undefined) return undefined; // the leader gave up or died
        const remaining = deadline - performance.now();
        if (remaining <= 0) return undefined;
        await sleep(Math.max(1, Math.min(delay, remaining)));
        delay = Math.min(delay * 2, MAX_POLL_MS);
      }
    },
  };
}
