/**
 * GET /ready, the readiness probe (contract §6): 200 when each upstream is usable, 503 otherwise.
 *
 * An upstream counts as usable when its circuit breaker is closed (live traffic is not failing, so no
 * network call is needed) or, when the breaker is open, half-open or disabled, when a health probe
 * reaches it. So a fresh gateway is ready at once, an upstream that keeps failing makes it unready as
 * soon as its breaker opens, and it is ready again as soon as the upstream answers its health endpoint,
 * even before live traffic has closed the breaker.
 *
 * Why probe results are shared and reused for a short while: /ready is public; without it, every hit
 * would make two upstream calls, an amplifier for anyone who can reach the gateway.
 *
 * Liveness is Yoga's own `/health` (always 200, never touches an upstream): an upstream outage must
 * not make an orchestrator restart a healthy gateway.
 */
import type { Plugin } from 'graphql-yoga';
import type { HealthProbe, UpstreamClients } from '../upstream/types.js';

type BreakerState = HealthProbe<unknown>['breaker'];

/** The HTTP clients expose their breaker state; other clients (test doubles) may not. */
interface MaybeWithBreaker {
  breakerState?: () => BreakerState;
  health(): Promise<HealthProbe<unknown>>;
}

export interface ReadinessOptions {
  /** The gateway's upstream clients (health probes and, when they have it, `breakerState()`). */
  clients: UpstreamClients;
  /**
   * Path of the readiness endpoint (GET and HEAD).
   * @default '/ready'
   */
  path?: string;
  /**
   * How long one health probe result is reused by later /ready requests, in ms.
   * @default 1000
   */
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
}

/** Probes one upstream at most once per `cacheMs`; concurrent callers share the probe in flight. */
function sharedProbe(client: MaybeWithBreaker, cacheMs: number): () => Promise<boolean> {
  let last: { at: number; result: Promise<boolean> } | undefined;
  return () => {
    const now = Date.now();
    if (last === undefined || now - last.at >= cacheMs) {
      // health() never throws by contract; the catch keeps /ready answering even if one did.
      const result = client.health().then(
        (probe) => probe.reachable,
        () => false,
      );
      last = { at: now, result };
    }
    return last.result;
  };
}

async function upstreamReadiness(
  client: MaybeWithBreaker,
  probe: () => Promise<boolean>,
): Promise<UpstreamReadiness> {
  const breaker = typeof client.breakerState === 'function' ? client.breakerState() : 'disabled';
  if (breaker === 'closed') return { ready: true, breaker, reachable: null };
  const reachable = await probe();
  return { ready: reachable, breaker, reachable };
}

/** Computes the readiness of both upstreams (what GET /ready answers). */
export function createReadinessCheck(options: ReadinessOptions): () => Promise<ReadinessReport> {
  const cacheMs = options.probeCacheMs ?? 1000;
  const nullCheck = options.clients.nullCheck as MaybeWithBreaker;
  const piDigits = options.clients.piDigits as MaybeWithBreaker;
  const probeNull = sharedProbe(nullCheck, cacheMs);
  const probePi = sharedProbe(piDigits, cacheMs);
  return async () => {
    const [nullReady, piReady] = await Promise.all([
      upstreamReadiness(nullCheck, probeNull),
      upstreamReadiness(piDigits, probePi),
    ]);
    return {
      status: nullReady.ready && piReady.ready ? 'ready' : 'unready',
      upstreams: { nullCheck: nullReady, piDigits: piReady },
    };
  };
}

/** The Yoga plugin serving GET/HEAD `/ready` (see the module comment for the rule). */
export function useReadiness(options: ReadinessOptions): Plugin {
  const path = options.path ?? '/ready';
  const check = createReadinessCheck(options);
  return {
    onRequest({ request, url, endResponse, fetchAPI }) {
      if ((request.method !== 'GET' && request.method !== 'HEAD') || url.pathname !== path) return;
      return check().then((report) => {
        endResponse(
          new fetchAPI.Response(request.method === 'HEAD' ? null : JSON.stringify(report), {
            status: report.status === 'ready' ? 200 : 503,
            headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
          }),
        );
      });
    },
  };
}
