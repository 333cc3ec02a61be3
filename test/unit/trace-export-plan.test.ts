/**
 * What the standard OTEL_* variables mean to the gateway's own trace export
 * (src/gateway/observability/trace-export.ts, `traceExportPlan`), and how long the last spans may
 * take on close (`traceFlushMs`). The export itself, against a real receiver:
 * integration/otlp-export.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  OTEL_VARIABLES,
  traceExportPlan,
  traceFlushMs,
} from '../../src/gateway/observability/trace-export.js';

describe('traceExportPlan', () => {
  it('exports nothing without an endpoint, blank ones included', () => {
    expect(traceExportPlan({})).toBeUndefined();
    expect(
      traceExportPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' }),
    ).toBe(undefined);
    // The other variables alone turn nothing on.
    expect(
      traceExportPlan({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }),
    ).toBeUndefined();
  });

  it('appends /v1/traces to the base endpoint, with or without a trailing slash or a path', () => {
    expect(traceExportPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      endpointForLog: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
    });
    expect(traceExportPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })?.endpoint).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(traceExportPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example/ingest' })?.endpoint).toBe(
      'https://otel.example/ingest/v1/traces',
    );
  });

  it('uses ..._TRACES_ENDPOINT as given, over the base endpoint', () => {
    const plan = traceExportPlan({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom/path',
    });
    expect(plan?.endpoint).toBe('http://traces:4318/custom/path');
  });

  it('logs the endpoint without credentials or query', () => {
    const plan = traceExportPlan({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://user:secret@otel.example/v1/traces?k=v',
    });
    expect(plan?.endpoint).toBe('https://user:secret@otel.example/v1/traces?k=v');
    expect(plan?.endpointForLog).toBe('https://otel.example/v1/traces');
  });

  it('takes http/protobuf by default, http/json when asked, the per-signal protocol first', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(traceExportPlan(endpoint)?.protocol).toBe('http/protobuf');
    expect(traceExportPlan({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })?.protocol).toBe(
      'http/json',
    );
    expect(
      traceExportPlan({
        ...endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      })?.protocol,
    ).toBe('http/json');
  });

  it('refuses, in one line, what it cannot honour', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(() => traceExportPlan({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(
      /^OTEL_EXPORTER_OTLP_PROTOCOL: the gateway exports over OTLP\/HTTP.*got "grpc"$/,
    );
    expect(() => traceExportPlan({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(
      /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/,
    );
    expect(() => traceExportPlan({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' })).toThrow(
      /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:\/\/ or https:\/\/ URL, got "not a url"$/,
    );
    expect(() => traceExportPlan({ ...endpoint, OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(
      /^OTEL_TRACES_EXPORTER: .*got "zipkin"$/,
    );
  });

  it('is turned off by OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, endpoint or not', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(traceExportPlan({ ...endpoint, OTEL_SDK_DISABLED: 'TRUE' })).toBeUndefined();
    expect(traceExportPlan({ ...endpoint, OTEL_SDK_DISABLED: 'false' })).toBeDefined();
    expect(traceExportPlan({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
    expect(traceExportPlan({ ...endpoint, OTEL_TRACES_EXPORTER: 'otlp' })).toBeDefined();
  });

  it('lists every variable it reads among the standard ones the gateway honours', () => {
    for (const name of [
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
      'OTEL_EXPORTER_OTLP_PROTOCOL',
      'OTEL_EXPORTER_OTLP_HEADERS',
      'OTEL_SERVICE_NAME',
      'OTEL_RESOURCE_ATTRIBUTES',
      'OTEL_TRACES_SAMPLER',
      'OTEL_TRACES_SAMPLER_ARG',
    ])
      expect(OTEL_VARIABLES).toContain(name);
  });
});

describe('traceFlushMs', () => {
  it('is what is left of the shutdown bound, at least 1 s and at most 5 s', () => {
    expect(traceFlushMs(3000)).toBe(3000);
    expect(traceFlushMs(-200)).toBe(1000);
    expect(traceFlushMs(10_000)).toBe(5000);
  });
});
