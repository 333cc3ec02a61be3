/**
 * The gateway's own trace export (docs/contract.md §6, docs/operations.md, Tracing): with
 * `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, the OpenTelemetry SDK
 * and an OTLP/HTTP exporter are loaded (dynamic imports: unset, none of them is ever loaded) and the
 * spans are exported in batches, off the request path.
 *
 * Who reads which variable: the gateway reads what decides whether and where to export (the
 * endpoints, the protocol, OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER) and fails the start with one line
 * when one of them is wrong; the SDK reads the rest itself, as the OpenTelemetry specification has it
 * (the sampler in sdk-trace-base's BasicTracerProvider, the batch sizes in its BatchSpanProcessor,
 * headers, timeout, compression and certificates in the exporter, the resource in envDetector).
 *
 * Why the endpoint alone turns the export on (no OTEL_TRACING needed): the contract says so, and it is
 * what a platform team sets for every service. Why W3C trace context and no global registration: the
 * gateway continues a caller's `traceparent` and writes the upstreams' itself (tracing.ts), so it needs
 * neither the API's global propagator nor an async context manager, which would cost on every request.
 */

import type { TextMapGetter } from '@opentelemetry/api';
import {
  type DiagLogger,
  DiagLogLevel,
  defaultTextMapSetter,
  diag,
  ROOT_CONTEXT,
  SpanKind,
  trace,
} from '@opentelemetry/api';
import type { Logger } from 'pino';
import { OTEL_VARIABLES } from '../../shared/otel-variables.js';
import type { HeaderReader } from '../operation/request-facts.js';
import type { Tracing } from './tracing-types.js';

export { OTEL_VARIABLES };

/** `service.name` unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise. */
export const DEFAULT_SERVICE_NAME = 'null-pi-gateway';

export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** What the variables ask for, once checked. */
export interface TraceExportPlan {
  /** Where the spans are POSTed: `..._TRACES_ENDPOINT` as given, or the base endpoint + `/v1/traces`. */
  endpoint: string;
  /** The endpoint without user info, query or fragment: for the log. */
  endpointForLog: string;
  protocol: OtlpProtocol;
}

/** An environment value, undefined when unset or blank (the specification treats both alike). */
function envValueOf(env: NodeJS.ProcessEnv, name: (typeof OTEL_VARIABLES)[number]): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

function checkedUrl(name: string, text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`${name} must be an http:// or https:// URL, got "${text}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new Error(
      `${name} must be an http:// or https:// URL (the gateway exports over OTLP/HTTP), got "${text}"`,
    );
  return url;
}

/**
 * Whether and where the gateway exports its spans, from the standard variables; undefined: it does
 * not (no endpoint, OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none). Throws one line for a
 * value the gateway cannot honour (a bad URL, `grpc`, an exporter other than `otlp`).
 */
export function traceExportPlan(env: NodeJS.ProcessEnv): TraceExportPlan | undefined {
  const tracesEndpoint = envValueOf(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseEndpoint = envValueOf(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (tracesEndpoint === undefined && baseEndpoint === undefined) return undefined;
  if (envValueOf(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const exporters = (envValueOf(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp').split(',').map((e) => e.trim());
  if (exporters.includes('none')) return undefined;
  const other = exporters.find((e) => e !== 'otlp' && e !== '');
  if (other !== undefined)
    throw new Error(`OTEL_TRACES_EXPORTER: the gateway exports with "otlp" only (or "none"), got "${other}"`);

  let endpoint: string;
  let url: URL;
  if (tracesEndpoint !== undefined) {
    // Used as given, as the specification says for the per-signal variable.
    url = checkedUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', tracesEndpoint);
    endpoint = tracesEndpoint;
  } else {
    const base = baseEndpoint as string;
    checkedUrl('OTEL_EXPORTER_OTLP_ENDPOINT', base);
    endpoint = `${base.endsWith('/') ? base : `${base}/`}v1/traces`;
    url = checkedUrl('OTEL_EXPORTER_OTLP_ENDPOINT', endpoint);
  }

  const name = envValueOf(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL')
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = envValueOf(env, name) ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json')
    throw new Error(
      `${name}: the gateway exports over OTLP/HTTP, "http/protobuf" (the default) or "http/json", got "${protocol}"`,
    );
  return { endpoint, endpointForLog: `${url.origin}${url.pathname}`, protocol };
}

/**
 * How long the last spans may take to reach the collector when the gateway closes: what is left of
 * SHUTDOWN_TIMEOUT_MS after the drain, at least 1 s (within the few seconds the contract allows past
 * it) and at most 5 s (a collector that answers at all answers in far less; one that does not must
 * not hold the exit).
 */
export function traceFlushMs(leftMs: number): number {
  return Math.round(Math.min(Math.max(leftMs, 1000), 5000));
}

/** The SDK's own warnings and errors (a failed export, dropped spans) as log lines; no chatter below. */
function diagnosticsTo(logger: Logger): DiagLogger {
  const write =
    (level: 'warn' | 'error') =>
    (message: string, ...args: unknown[]): void => {
      const detail =
        args.length === 0 ? undefined : args.map((a) => (a instanceof Error ? a.message : String(a)));
      logger[level]({ detail }, `trace export: ${message}`);
    };
  const ignore = (): void => {};
  return { error: write('error'), warn: write('warn'), info: ignore, debug: ignore, verbose: ignore };
}

/** At most one line per this many ms about failed exports (a dead collector fails every one). */
const FAILURE_LOG_INTERVAL_MS = 10_000;

/**
 * The SDK's errors (a failed export: the collector refused, timed out, answered an error) as one
 * error line, at most one per FAILURE_LOG_INTERVAL_MS, saying how many were left unsaid since.
 */
function failedExportsTo(logger: Logger): (error: unknown) => void {
  let lastAt = Number.NEGATIVE_INFINITY;
  let unsaid = 0;
  return (error) => {
    const now = performance.now();
    if (now - lastAt < FAILURE_LOG_INTERVAL_MS) {
      unsaid++;
      return;
    }
    lastAt = now;
    const reason = error instanceof Error ? error.message : String(error);
    const code = (error as { code?: unknown } | null)?.code;
    logger.error(
      { reason, code: typeof code === 'string' ? code : undefined, failuresNotLogged: unsaid },
      'trace export failed (spans dropped; requests unaffected)',
    );
    unsaid = 0;
  };
}

/** The caller's `traceparent` and `tracestate`, read through the request's header reader. */
const REQUEST_HEADERS: TextMapGetter<HeaderReader> = {
  get: (header, key) => header(key) ?? undefined,
  keys: () => ['traceparent', 'tracestate'],
};

/**
 * Loads the SDK and the exporter `plan` asks for and starts the export: a batch span processor
 * (bounded queue, OTEL_BSP_*: spans past it are dropped, never waited for) in front of the OTLP/HTTP
 * exporter (its own bounded timeout, OTEL_EXPORTER_OTLP_TIMEOUT). Nothing here is on the request path
 * but `span.end()` putting a span in the queue.
 */
export async function startTraceExport(
  plan: TraceExportPlan,
  logger: Logger,
  tracerName: string,
): Promise<Tracing> {
  const [sdk, core, resources, semconv, exporters] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/core'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/semantic-conventions'),
    plan.protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http')
      : import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  diag.setLogger(diagnosticsTo(logger), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  core.setGlobalErrorHandler(failedExportsTo(logger));

  const version = process.env.npm_package_version;
  const resource = resources
    .defaultResource()
    .merge(
      resources.resourceFromAttributes({
        [semconv.ATTR_SERVICE_NAME]: DEFAULT_SERVICE_NAME,
        ...(version === undefined ? {} : { [semconv.ATTR_SERVICE_VERSION]: version }),
      }),
    )
    // Last, so OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults above.
    .merge(
      resources.detectResources({
        detectors: [
          resources.hostDetector,
          resources.processDetector,
          resources.serviceInstanceIdDetector,
          resources.envDetector,
        ],
      }),
    );
  // The URL as checked above; headers, timeout, compression and certificates from the environment.
  const exporter = new exporters.OTLPTraceExporter({ url: plan.endpoint });
  // BasicTracerProvider reads OTEL_TRACES_SAMPLER(_ARG) (default parentbased_always_on) and the span
  // limits; BatchSpanProcessor OTEL_BSP_* (defaults: queue 2048, batch 512, every 5 s).
  const provider = new sdk.BasicTracerProvider({
    resource,
    spanProcessors: [new sdk.BatchSpanProcessor(exporter)],
  });
  const propagator = new core.W3CTraceContextPropagator();
  // The host id is read from a file: settled once here, not by the first export.
  await resource.waitForAsyncAttributes?.();
  const serviceName = resource.attributes[semconv.ATTR_SERVICE_NAME];
  logger.info(
    { endpoint: plan.endpointForLog, protocol: plan.protocol, serviceName },
    'exporting traces over OTLP/HTTP',
  );

  let closing: Promise<void> | undefined;
  return {
    tracer: provider.getTracer(tracerName, version),
    mode: 'own',
    operationParent: (header) => ({
      parent: propagator.extract(ROOT_CONTEXT, header, REQUEST_HEADERS),
      kind: SpanKind.SERVER,
    }),
    upstreamHeaders(span) {
      const headers: Record<string, string> = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
      return headers;
    },
    close(timeoutMs) {
      closing ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), timeoutMs);
        });
        // shutdown() exports what is buffered, then stops the exporter.
        const outcome = await Promise.race([
          provider.shutdown().then(
            () => 'sent' as const,
            (error: unknown) => error,
          ),
          late,
        ]);
        clearTimeout(timer);
        if (outcome === 'late')
          logger.warn(
            { timeoutMs, endpoint: plan.endpointForLog },
            'trace export: the last spans were not sent in time (collector slow or unreachable); going on without them',
          );
        else if (outcome !== 'sent')
          logger.warn(
            {
              endpoint: plan.endpointForLog,
              reason: outcome instanceof Error ? outcome.message : String(outcome),
            },
            'trace export: the last spans could not be sent',
          );
      })();
      return closing;
    },
  };
}
