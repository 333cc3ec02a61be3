/**
 * The standard OpenTelemetry environment variables the gateway honours (contract §6). They are not
 * zod settings: their names and meanings are the OpenTelemetry specification's, read by the SDK the
 * gateway loads when an endpoint is set. Listed once here so that what reads them and what checks the
 * deployment files (test/unit/deploy-manifests.test.ts: every variable a manifest names must be one
 * the gateway knows) agree on the same set.
 */
export const OTEL_VARIABLES = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
] as const;

export type OtelVariable = (typeof OTEL_VARIABLES)[number];
