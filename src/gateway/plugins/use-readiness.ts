/**
 * GET /ready, the readiness probe, on Yoga's own `useReadinessCheck`: 200 when each upstream is
 * usable, 503 otherwise, with a JSON body an operator can act on.
 *
 * An upstream counts as usable when its circuit breaker is closed (live traffic is not failing, so no
 * network call is needed) or, when the breaker is open, half-open or disabled, when a health probe
 * reaches it. A fresh gateway is ready at once; an upstream that keeps failing makes it unready as
 * soon as its breaker opens, and ready again as soon as the upstream answers its health endpoint.
 * Redis is reported but never makes the gateway unready: without it each replica runs on memory.
 *
 * Probe results are shared and reused for a short while: /ready is public, and without that every
 * hit would make two upstream calls, an amplifier for anyone who can reach the gateway.
 *
 * Liveness is Yoga's own `/health` (always 200, never touches an upstream): an upstream outage must
 * not make an orchestrator restart a healthy gateway.
 */
import { type Plugin, useReadinessCheck } from 'graphql-yoga';
import type { UpstreamName } from '../errors.js';
import type { BreakerState } from '../upstream/interceptors/circuit-breaker.js';

export interface ReadinessPluginOptions {
  /** The breaker state of an upstream. */
  breaker(upstream: UpstreamName): BreakerState;
  /** Whether an upstream's health endpoint answers (called only when its breaker is not closed). */
  reachable(upstream: UpstreamName): Promise<boolean>;
  /** Where shared state lives now: memory (no REDIS_URL), redis, or fallback (Redis unreachable). */
  sharedState?: (() => 'memory' | 'redis' | 'fallback') | undefined;
  /** Which kind of Redis each role uses (single, sentinel, cluster); absent roles use none. */
  redisTopology?: (() => ReadinessReport['redisTopology']) | undefined;
  /** @default '/ready' */
  path?: string;
  /** How long one probe result is reused, in ms. @default 1000 */
  probeCacheMs?: number;
}

/** One upstream in the /ready body. No address, no error text: only what an operator acts on. */
export interface UpstreamReadiness {
  ready: boolean;
  breaker: BreakerState;
  /** Whether the health probe reached it; null when no probe was needed (breaker closed). */
  reachable: boolean | null;
}

export interface ReadinessReport {
  status: 'ready' | 'unready';
  upstreams: { nullCheck: UpstreamReadiness; piDigits: UpstreamReadiness };
  redis?: 'memory' | 'redis' | 'fallback';
  /** With a Redis URL: `{ budgets: 'sentinel', cache: 'cluster' }` (REDIS_URL, REDIS_CACHE_URL). */
  redisTopology?: { budgets?: 'single' | 'sentinel' | 'cluster'; cache?: 'single' | 'sentinel' | 'cluster' };
}

export function createReadinessCheck(options: ReadinessPluginOptions): () => Promise<ReadinessReport> {
  const cacheMs = options.probeCacheMs ?? 1000;
  const last = new Map<UpstreamName, { at: number; result: Promise<boolean> }>();
  const probe = (upstream: UpstreamName) => {
    const now = Date.now();
    const cached = last.get(upstream);
    if (cached !== undefined && now - cached.at < cacheMs) return cached.result;
    const result = options.reachable(upstream).catch(() => false);
    last.set(upstream, { at: now, result });
    return result;
  };
  const readiness = async (upstream: UpstreamName): Promise<UpstreamReadiness> => {
    const breaker = options.breaker(upstream);
    if (breaker === 'closed') return { ready: true, breaker, reachable: null };
    const reachable = await probe(upstream);
    return { ready: reachable, breaker, reachable };
  };
  return async () => {
    const [nullCheck, piDigits] = await Promise.all([readiness('null-check'), readiness('pi-digits')]);
    const report: ReadinessReport = {
      status: nullCheck.ready && piDigits.ready ? 'ready' : 'unready',
      upstreams: { nullCheck, piDigits },
    };
    const redis = options.sharedState?.();
    if (redis !== undefined) report.redis = redis;
    const topology = options.redisTopology?.();
    if (topology !== undefined && Object.keys(topology).length > 0) report.redisTopology = topology;
    return report;
  };
}

export function useReadiness(options: ReadinessPluginOptions): Plugin {
  const check = createReadinessCheck(options);
  return useReadinessCheck({
    endpoint: options.path ?? '/ready',
    check: async ({ request, fetchAPI }) => {
      const report = await check();
      return new fetchAPI.Response(request.method === 'HEAD' ? null : JSON.stringify(report), {
        status: report.status === 'ready' ? 200 : 503,
        headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
      });
    },
  });
}
