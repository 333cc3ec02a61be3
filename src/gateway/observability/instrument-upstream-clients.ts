/**
 * Wraps the upstream clients so that every logical upstream call (retries included, cache hits of the
 * clients included) feeds the operation's log line and span, the GPU cost counter and the sponsor log.
 *
 * Why here and not in the schema: the terms require logging every sponsor message *received*, whether
 * or not the client selected `sponsoredBy`; only the clients' answers see them all.
 * Per-attempt HTTP facts (statuses of retries, attempt latency) come from the clients' `onCall` hook.
 */
import { context, trace } from '@opentelemetry/api';
import { isUpstreamError } from '../upstream/errors.js';
import type {
  CallOptions,
  HealthProbe,
  InferenceRequest,
  InferenceResponse,
  NullCheckClient,
  NullCheckRequest,
  NullCheckResponse,
  PiDigitsClient,
  PiRequest,
  PiResponse,
  UpstreamClients,
  UpstreamName,
} from '../upstream/types.js';
import type { ObservabilityCore } from './observability-core.js';
import type { Span } from './tracing.js';

/** Status recorded for an answered call: the clients only hand over validated 200 answers. */
const OK_STATUS = 200;

/** Cost and sponsor of an answer; module-level functions so no closure is created per call. */
type Facts<Res> = (res: Res) => { cost: number | null; sponsor: string | null };
const nullFacts: Facts<NullCheckResponse> = (r) => ({ cost: r.gpuCostUsd, sponsor: r.sponsoredBy });
const piFacts: Facts<PiResponse> = (r) => ({ cost: r.gpuCostUsd, sponsor: r.sponsoredBy });
const inferenceFacts: Facts<InferenceResponse> = (r) => ({ cost: r.costUsd, sponsor: null });

async function observed<Req, Res>(
  core: ObservabilityCore,
  upstream: UpstreamName,
  endpoint: string,
  facts: Facts<Res>,
  target: unknown,
  method: (this: unknown, request: Req, options?: CallOptions) => Promise<Res>,
  request: Req,
  options: CallOptions | undefined,
): Promise<Res> {
  const record = core.operationFor(options);
  const tracer = core.tracer;
  const started = record === undefined ? 0 : performance.now();
  let span: Span | undefined;
  let answer: Res;
  try {
    if (tracer === undefined) {
      answer = await method.call(target, request, options);
    } else {
      span = core.startUpstreamSpan(tracer, record, upstream, endpoint);
      // Running the call in the span's context lets a host's HTTP instrumentation nest under it (and
      // propagate the trace to the upstream).
      answer = await context.with(trace.setSpan(context.active(), span), method, target, request, options);
    }
  } catch (error) {
    const code = isUpstreamError(error) ? error.code : 'INTERNAL';
    const status = isUpstreamError(error) ? (error.statusCode ?? null) : null;
    core.upstreamSettled(record, span, upstream, endpoint, started, status, code, undefined, undefined);
    throw error;
  }
  const { cost, sponsor } = facts(answer);
  core.upstreamSettled(record, span, upstream, endpoint, started, OK_STATUS, undefined, cost, sponsor);
  return answer;
}

async function observedHealth<Body>(
  core: ObservabilityCore,
  upstream: UpstreamName,
  target: unknown,
  method: (this: unknown, options?: CallOptions) => Promise<HealthProbe<Body>>,
  options: CallOptions | undefined,
): Promise<HealthProbe<Body>> {
  const record = core.operationFor(options);
  const tracer = core.tracer;
  const started = record === undefined ? 0 : performance.now();
  const span = tracer === undefined ? undefined : core.startUpstreamSpan(tracer, record, upstream, 'health');
  let probe: HealthProbe<Body>;
  try {
    probe =
      span === undefined
        ? await method.call(target, options)
        : await context.with(trace.setSpan(context.active(), span), method, target, options);
  } catch (error) {
    // The contract says health probes never throw; if one does, it is still accounted for.
    core.upstreamSettled(record, span, upstream, 'health', started, null, 'INTERNAL', undefined, undefined);
    throw error;
  }
  core.metrics.setBreakerState(upstream, probe.breaker);
  const code = probe.reachable ? undefined : 'UPSTREAM_UNAVAILABLE';
  core.upstreamSettled(
    record,
    span,
    upstream,
    'health',
    started,
    probe.statusCode,
    code,
    undefined,
    undefined,
  );
  return probe;
}

/**
 * An object that answers like `inner`: every method of `inner`'s classes is bound to `inner` (the HTTP
 * clients keep their state in `#private` fields, which only `inner` itself can reach) and every other
 * member is reached through the prototype chain. The wrappers then replace the calls they observe.
 */
function delegateTo<T extends object>(inner: T): T {
  const wrapper = Object.create(inner) as T;
  for (let proto = Object.getPrototypeOf(inner); proto !== null && proto !== Object.prototype; ) {
    for (const key of Reflect.ownKeys(proto)) {
      if (key === 'constructor' || Object.hasOwn(wrapper, key)) continue;
      const descriptor = Object.getOwnPropertyDescriptor(proto, key);
      if (descriptor === undefined) continue;
      if (typeof descriptor.value === 'function') {
        Object.defineProperty(wrapper, key, {
          value: descriptor.value.bind(inner),
          writable: true,
          configurable: true,
        });
      } else if (descriptor.get !== undefined) {
        const get = descriptor.get;
        Object.defineProperty(wrapper, key, { get: () => get.call(inner), configurable: true });
      }
    }
    proto = Object.getPrototypeOf(proto);
  }
  return wrapper;
}

/** Optional capability of the HTTP clients: their breaker state, read at scrape time. */
interface WithBreakerState {
  breakerState?: () => HealthProbe<unknown>['breaker'];
}

function watchBreaker(core: ObservabilityCore, upstream: UpstreamName, inner: WithBreakerState): void {
  const read = inner.breakerState;
  if (typeof read === 'function') core.metrics.addBreakerSource(upstream, () => read.call(inner));
}

function wrapNullCheck(core: ObservabilityCore, inner: NullCheckClient): NullCheckClient {
  const wrapper = delegateTo(inner);
  wrapper.check = (request: NullCheckRequest, options?: CallOptions) =>
    observed(core, 'null-check', 'check', nullFacts, inner, inner.check, request, options);
  wrapper.health = (options?: CallOptions) =>
    observedHealth(core, 'null-check', inner, inner.health, options);
  watchBreaker(core, 'null-check', inner as WithBreakerState);
  return wrapper;
}

function wrapPiDigits(core: ObservabilityCore, inner: PiDigitsClient): PiDigitsClient {
  const wrapper = delegateTo(inner);
  wrapper.pi = (request: PiRequest, options?: CallOptions) =>
    observed(core, 'pi-digits', 'pi', piFacts, inner, inner.pi, request, options);
  wrapper.inference = (request: InferenceRequest, options?: CallOptions) =>
    observed(core, 'pi-digits', 'inference', inferenceFacts, inner, inner.inference, request, options);
  wrapper.health = (options?: CallOptions) => observedHealth(core, 'pi-digits', inner, inner.health, options);
  watchBreaker(core, 'pi-digits', inner as WithBreakerState);
  return wrapper;
}

/**
 * The same clients, observed. Meant as the innermost wrapper (right around the HTTP clients), so that
 * what it sees are real upstream answers: the cost actually spent, the sponsor messages actually received.
 */
export function instrumentUpstreamClients<T extends UpstreamClients>(core: ObservabilityCore, clients: T): T {
  const wrapper = delegateTo(clients);
  Object.defineProperty(wrapper, 'nullCheck', {
    value: wrapNullCheck(core, clients.nullCheck),
    enumerable: true,
  });
  Object.defineProperty(wrapper, 'piDigits', {
    value: wrapPiDigits(core, clients.piDigits),
    enumerable: true,
  });
  return wrapper;
}
