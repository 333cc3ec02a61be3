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
      const body = new Uint8Array(await response.arrayBuffer()) as Uint8Array<ArrayBuffer>;
      const newHeaders = new fetchAPI.Headers(headers);
      const init = { status: response.status, statusText: response.statusText, headers: newHeaders };
      if (body.length < compression.minBytes) {
        setResponse(new fetchAPI.Response(body, init));
        return;
      }
      newHeaders.append('vary', 'Accept-Encoding');
      const encoding = compression.encodingFor(request.headers.get('accept-encoding') ?? undefined);
      if (encoding === undefined) {
        setResponse(new fetchAPI.Response(body, init));
        return;
      }
      const compressed = await compression.compress(
        Buffer.from(body.buffer, body.byteOffset, body.length),
        encoding,
      );
      newHeaders.set('content-encoding', encoding);
      newHeaders.set('content-length', String(compressed.length));
      setResponse(
        new fetchAPI.Response(
          new Uint8Array(
            compressed.buffer,
            compressed.byteOffset,
            compressed.length,
          ) as Uint8Array<ArrayBuffer>,
          init,
        ),
      );
    },
  };
}
