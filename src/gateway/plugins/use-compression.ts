/**
 * Compressed answers on Yoga's path (docs/contract.md, Delivery: compression): every Response Yoga made
 * (GraphQL results, /metrics, /ready, GraphiQL's page) at or above COMPRESSION_MIN_BYTES, compressed with
 * the encoding the client accepts, by the same rules as the fast path (compression.ts). Registered last,
 * so that it sees the final headers. GraphiQL's assets are gzipped already and keep their encoding;
 * streamed answers (text/event-stream, multipart) are not compressible types and pass as they are.
 *
 * Why not `useContentEncoding` of @whatwg-node/server: it splits Accept-Encoding without q-values or
 * spaces, has no size threshold and no `Vary`, and offers gzip and deflate only (CompressionStream).
 */
import type { Plugin } from 'graphql-yoga';
import type { Compression } from '../delivery/compression.js';

export interface CompressionPluginOptions {
  compression: Compression;
}

export function useCompression(options: CompressionPluginOptions): Plugin {
  const { compression } = options;
  return {
    async onResponse({ request, response, setResponse, fetchAPI }) {
      if (response.body === null || request.method === 'HEAD') return;
      const headers = response.headers;
      if (
        !compression.compressible(
          response.status,
          headers.get('content-type'),
          headers.get('content-encoding'),
          headers.get('cache-control'),
        )
      )
        return;
      // A known length below the threshold: nothing to read or copy.
      const length = headers.get('content-length');
      if (length !== null && Number(length) < compression.minBytes) return;
      const body = Buffer.from(await response.arrayBuffer());
      // The same decision as the fast path's (compression.ts `deliver`).
      const delivered = await compression.deliver(body, request.headers.get('accept-encoding') ?? undefined);
      const newHeaders = new fetchAPI.Headers(headers);
      if (delivered.vary) newHeaders.append('vary', 'Accept-Encoding');
      if (delivered.encoding !== undefined) {
        newHeaders.set('content-encoding', delivered.encoding);
        newHeaders.set('content-length', String(delivered.length));
      }
      const sent = delivered.body as Buffer;
      setResponse(
        new fetchAPI.Response(
          new Uint8Array(sent.buffer, sent.byteOffset, sent.length) as Uint8Array<ArrayBuffer>,
          {
            status: response.status,
            statusText: response.statusText,
            headers: newHeaders,
          },
        ),
      );
    },
  };
}
