/**
 * An OTLP/HTTP trace receiver on a free loopback port, for tests of the gateway's own trace export
 * (src/gateway/observability/trace-export.ts): it takes `POST /v1/traces` (any path, recorded) in
 * both encodings the gateway can send, `application/x-protobuf` and `application/json`, gzip or not,
 * answers 200 with an empty export response, and keeps every span as one flat shape, whatever the
 * encoding (ids as lower-case hex, attribute values as JS values).
 *
 * The protobuf bodies are decoded by protobufjs with the messages of opentelemetry-proto's
 * `collector/trace/v1` request, as far as the tests read them (field numbers as in the proto files;
 * protobufjs skips the fields left out). The OpenTelemetry packages serialize requests but ship no
 * request decoder.
 */
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import protobuf from 'protobufjs';

const OTLP_TRACE_PROTO = `
syntax = "proto3";
package otlp;
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message Resource { repeated KeyValue attributes = 1; }
message InstrumentationScope { string name = 1; string version = 2; }
message Status { string message = 2; int32 code = 3; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  string name = 5;
  int32 kind = 6;
  repeated KeyValue attributes = 9;
  Status status = 15;
  fixed32 flags = 16;
}
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
`;

const ExportTraceServiceRequest = protobuf
  .parse(OTLP_TRACE_PROTO, { keepCase: false })
  .root.lookupType('otlp.ExportTraceServiceRequest');

export type AttributeValue = string | number | boolean | AttributeValue[] | null;

/** One span as received, the same shape from either encoding. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, AttributeValue>;
  scope: string;
}

export interface ReceivedExport {
  path: string;
  contentType: string | undefined;
  headers: IncomingHttpHeaders;
  spans: ReceivedSpan[];
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>` (no path: what OTEL_EXPORTER_OTLP_ENDPOINT takes). */
  readonly url: string;
  /** Every export request so far, in arrival order. */
  readonly exports: ReceivedExport[];
  /** Every span so far, across the exports. */
  spans(): ReceivedSpan[];
  /** Bodies that could not be decoded (each a test failure waiting to be asserted). */
  readonly failures: string[];
  close(): Promise<void>;
}

/** The JSON mapping's and protobufjs' objects alike: camelCase fields, ids hex or bytes. */
interface LooseValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number | { toString(): string };
  doubleValue?: number;
  arrayValue?: { values?: LooseValue[] };
  bytesValue?: unknown;
}
interface LooseKeyValue {
  key: string;
  value?: LooseValue;
}
interface LooseSpan {
  traceId?: string | Uint8Array;
  spanId?: string | Uint8Array;
  parentSpanId?: string | Uint8Array;
  name?: string;
  kind?: number;
  attributes?: LooseKeyValue[];
  status?: { code?: number };
}
interface LooseRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: LooseKeyValue[] };
    scopeSpans?: Array<{ scope?: { name?: string }; spans?: LooseSpan[] }>;
  }>;
}

const hex = (id: string | Uint8Array | undefined): string =>
  id === undefined ? '' : typeof id === 'string' ? id.toLowerCase() : Buffer.from(id).toString('hex');

function attributeValueOf(value: LooseValue | undefined): AttributeValue {
  if (value === undefined) return null;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue.toString());
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(attributeValueOf);
  return null;
}

function attributesOf(list: LooseKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) out[key] = attributeValueOf(value);
  return out;
}

function flatten(request: LooseRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        spans.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name ?? '',
          kind: span.kind ?? 0,
          attributes: attributesOf(span.attributes),
          statusCode: span.status?.code ?? 0,
          resource,
          scope: scopeSpans.scope?.name ?? '',
        });
      }
    }
  }
  return spans;
}

/** The spans of one export body, by its content type. Throws when the body does not decode. */
export function decodeExport(contentType: string | undefined, body: Buffer): ReceivedSpan[] {
  if (contentType?.startsWith('application/json')) return flatten(JSON.parse(body.toString('utf8')));
  if (contentType?.startsWith('application/x-protobuf')) {
    const message = ExportTraceServiceRequest.decode(body);
    // longs as strings: int64 attribute values stay exact until attributeValueOf reads them.
    return flatten(ExportTraceServiceRequest.toObject(message, { longs: String }) as LooseRequest);
  }
  throw new Error(`unexpected content-type ${contentType ?? '(none)'}`);
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const exports: ReceivedExport[] = [];
  const failures: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const contentType = req.headers['content-type'];
      let body = Buffer.concat(chunks);
      try {
        if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
        const spans = decodeExport(contentType, body);
        exports.push({ path: req.url ?? '', contentType, headers: req.headers, spans });
      } catch (error) {
        failures.push(`${req.method} ${req.url}: ${(error as Error).message}`);
        res.writeHead(400).end();
        return;
      }
      // An empty ExportTraceServiceResponse: full success, in either encoding.
      if (contentType?.startsWith('application/json'))
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    failures,
    spans: () => exports.flatMap((e) => e.spans),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
