/**
 * One upstream's health endpoint (`GET /api/v1/health`), probed with its own short timeout, no API key,
 * no retries and no circuit breaker (it must report the truth while the circuit is open). Never
 * throws: an unreachable upstream is data here.
 *
 * `reachable` means "answered 2xx"; a 2xx whose body does not fit is reachable with `body: null` and
 * `error` set; anything else is not reachable. Error texts are client-safe (no address, no body).
 * What else the gateway knows of the upstream (breaker, API version) is the caller's to add: the
 * breaker's own half-open test runs this probe.
 */
import { UpstreamCallError, type UpstreamName } from '../errors.js';
import type { Operation } from '../operation/operation.js';
import { type Dispatch, dispatchPromise, type HttpForm } from './dispatch.js';
import type { HealthProbe } from './types.js';

/** What the gateway knows of the upstream besides the probe: breaker and API version. */
export type UpstreamStateFields = Pick<
  HealthProbe<unknown>,
  'breaker' | 'apiVersion' | 'deprecated' | 'sunset'
>;

/** What one probe found out: a `HealthProbe` without the upstream's state. */
export type ProbeResult<Body> = Omit<HealthProbe<Body>, keyof UpstreamStateFields>;

export interface HealthProbeOptions<Body> {
  upstream: UpstreamName;
  /** Observation and transport only: health bypasses retries, breaker and versions. */
  dispatch: Dispatch;
  decode: (json: unknown) => Body;
  /** @default 1000 */
  timeoutMs?: number;
}

const noFacts = () => ({ costUsd: null, sponsor: null, model: null });

/**
 * Milliseconds since `start`, to 0.01 ms: what a reader of /ready or the health query needs (and the
 * precision of the log line's durationMs), not performance.now()'s nanosecond noise.
 */
const elapsedMs = (start: number): number => Math.round((performance.now() - start) * 100) / 100;

export function createHealthProbe<Body>(
  options: HealthProbeOptions<Body>,
): (operation?: Operation) => Promise<ProbeResult<Body>> {
  const form: HttpForm<Body> = {
    endpoint: 'health',
    version: 'v1',
    method: 'GET',
    path: '/api/v1/health',
    retry: 'none',
    decode: options.decode,
    facts: noFacts,
  };
  return async (operation) => {
    const start = performance.now();
    try {
      const answer = await dispatchPromise(options.dispatch, {
        upstream: options.upstream,
        forms: { v1: form },
        form,
        operation,
        anonymous: true,
        timeoutMs: options.timeoutMs ?? 1000,
      });
      return {
        reachable: true,
        latencyMs: elapsedMs(start),
        statusCode: answer.statusCode,
        body: answer.value,
        error: null,
      };
    } catch (error) {
      const failure = error instanceof UpstreamCallError ? error : undefined;
      const answered = failure?.kind === 'bad-response' && failure.statusCode !== undefined;
      return {
        reachable: answered,
        latencyMs: elapsedMs(start),
        statusCode: failure?.statusCode ?? null,
        body: null,
        error: failure?.message ?? 'health check failed',
      };
    }
  };
}
