/**
 * The standard OpenTelemetry environment variables the gateway honours (contract §6). They are not
 * zod settings: their names and meanings are the OpenTelemetry specification's, read by the gateway
 * (src/gateway/observability/trace-export.ts) or by the SDK it loads when an endpoint is set.
 * OTEL_TRACING is the gateway's own setting (settings.ts), not one of these. Listed once here so that what reads them and what checks the
 * deployment files (test/unit/deploy-manifests.test.ts: every variable a manifest names must be one
 * the gateway knows) agree on the same set.
 */
export const OTEL_VARIABLES = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
  'OTEL_EXPORTER_OTLP_TIMEOUT',
  'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
  'OTEL_EXPORTER_OTLP_COMPRESSION',
  'OTEL_EXPORTER_OTLP_TRACES_COMPRESSION',
  'OTEL_EXPORTER_OTLP_CERTIFICATE',
  'OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE',
  'OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE',
  'OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE',
  'OTEL_EXPORTER_OTLP_CLIENT_KEY',
  'OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_TRACES_EXPORTER',
  'OTEL_SDK_DISABLED',
  'OTEL_BSP_SCHEDULE_DELAY',
  'OTEL_BSP_EXPORT_TIMEOUT',
  'OTEL_BSP_MAX_QUEUE_SIZE',
  'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
] as const;

export type OtelVariable = (typeof OTEL_VARIABLES)[number];
