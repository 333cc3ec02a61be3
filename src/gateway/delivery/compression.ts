/**
 * Compressed answers (docs/contract.md, Delivery: compression): the encoding a client accepts, chosen
 * once per distinct `Accept-Encoding` value, and the body compressed with node:zlib off the main thread
 * (zlib's asynchronous functions run in the thread pool: a megabyte never blocks the event loop).
 *
 * Shared by both request paths through one decision, `deliver`: the fast path hands it the string it
 * answers with, and Yoga's path (plugins/use-compression.ts) the body of the Response Yoga made, so
 * one request gets the same encoding and headers on either. Answers below `minBytes` are never compressed (the frame costs more than it saves) and say
 * nothing about encodings; every answer at or above it carries `Vary: Accept-Encoding`, compressed or
 * not, since another client would get another encoding.
 *
 * Negotiation: `negotiator` (jshttp, what Express and Fastify use): q-values, `*`, `identity;q=0`.
 * Between encodings the client weighs the same, the server prefers zstd (where the runtime has it:
 * Node 22.15+ and 23.8+), then br, then gzip. Levels are for dynamic content, not for static assets
 * built once: zstd 1, brotli 2, gzip 4. The large answers here are digits, close to random: higher
 * levels only spend CPU looking for repeats that are not there (zstd 3 made 1M digits 13 % larger
 * and cost 5x the CPU of zstd 1; brotli 5 cost 3-4x brotli 2's for larger output from 100k digits
 * up). Brotli 1 is a special fast mode that compresses 20k digits and introspection worse than 2.
 * Measured in docs/performance.md (Compression).
 */
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import Negotiator from 'negotiator';

export type ContentEncoding = 'zstd' | 'br' | 'gzip';

export interface CompressionOptions {
  /** COMPRESSION_MIN_BYTES: smaller answers are sent as they are. @default 1024 */
  minBytes?: number;
}

const zstdCompress = (zlib as { zstdCompress?: typeof zlib.gzip }).zstdCompress;
/** ZSTD_c_compressionLevel (100 in zstd's API), from node's constants where the runtime has them. */
const ZSTD_LEVEL_PARAM =
  (zlib.constants as unknown as { ZSTD_c_compressionLevel?: number }).ZSTD_c_compressionLevel ?? 100;
/** The encodings this runtime can produce, in the server's order of preference. */
export const SUPPORTED_ENCODINGS: readonly ContentEncoding[] =
  typeof zstdCompress === 'function' ? ['zstd', 'br', 'gzip'] : ['br', 'gzip'];

const compressors: Record<ContentEncoding, (body: Buffer) => Promise<Buffer>> = {
  gzip: promisify((body: Buffer, done: (error: Error | null, result: Buffer) => void) =>
    zlib.gzip(body, { level: 4 }, done),
  ),
  br: promisify((body: Buffer, done: (error: Error | null, result: Buffer) => void) =>
    zlib.brotliCompress(
      body,
      {
        params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: 2,
          [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.length,
          [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
        },
      },
      done,
    ),
  ),
  zstd: (body) =>
    new Promise<Buffer>((resolve, reject) =>
      // Only listed in SUPPORTED_ENCODINGS when the runtime has it.
      (
        zstdCompress as (
          body: Buffer,
          options: object,
          done: (error: Error | null, result: Buffer) => void,
        ) => void
      )(body, { params: { [ZSTD_LEVEL_PARAM]: 1 } }, (error, result) =>
        error ? reject(error) : resolve(result),
      ),
    ),
};

/** Media types worth compressing; anything else (images, already compressed) is sent as it is. */
const COMPRESSIBLE =
  /^(application\/(json|graphql-response\+json|javascript)|text\/(html|css|plain|javascript))\b/;

/** Distinct Accept-Encoding values remembered; browsers send a handful, so a small bound is plenty. */
const MAX_REMEMBERED = 256;

/** An answer's body as it is sent, and the header fields that say how. */
export interface Delivered {
  readonly body: string | Buffer;
  /** Its length in bytes (Content-Length). */
  readonly length: number;
  /** `Vary: Accept-Encoding` at or above `minBytes`; `Content-Encoding` when compressed. */
  readonly vary: boolean;
  readonly encoding: ContentEncoding | undefined;
}

export interface Compression {
  readonly minBytes: number;
  /**
   * The one decision both lanes take for a compressible answer: below `minBytes` it goes as it is;
   * at or above it, it varies on Accept-Encoding and is compressed with the encoding the client
   * accepts, if any. Synchronous when nothing is compressed (the common, small answer: no copy).
   */
  deliver(body: string | Buffer, acceptEncoding: string | undefined): Delivered | Promise<Delivered>;
  /**
   * Whether an answer of this type, status and headers may be compressed at all (a body, not yet
   * encoded, not `no-transform`, a compressible media type).
   */
  compressible(
    status: number,
    contentType: string | null | undefined,
    contentEncoding: string | null | undefined,
    cacheControl: string | null | undefined,
  ): boolean;
  compress(body: Buffer, encoding: ContentEncoding): Promise<Buffer>;
}

export function createCompression(options: CompressionOptions = {}): Compression {
  const minBytes = options.minBytes ?? 1024;
  const chosen = new Map<string, ContentEncoding | undefined>();
  const preferred = { preferred: [...SUPPORTED_ENCODINGS] };
  const available = [...SUPPORTED_ENCODINGS, 'identity'];
  const encodingFor = (acceptEncoding: string | undefined): ContentEncoding | undefined => {
    if (acceptEncoding === undefined || acceptEncoding === '') return undefined;
    if (chosen.has(acceptEncoding)) return chosen.get(acceptEncoding);
    // negotiator 1.x takes the server's preference among equal q-values (its README); the
    // DefinitelyTyped types still describe 0.6's one-argument form.
    const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } }) as unknown as {
      encoding(available: string[], options: { preferred: string[] }): string | undefined;
    };
    const best = negotiator.encoding(available, preferred);
    const encoding = SUPPORTED_ENCODINGS.includes(best as ContentEncoding)
      ? (best as ContentEncoding)
      : undefined;
    if (chosen.size < MAX_REMEMBERED) chosen.set(acceptEncoding, encoding);
    return encoding;
  };
  return {
    minBytes,
    deliver(body, acceptEncoding) {
      const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
      const vary = length >= minBytes;
      const encoding = vary ? encodingFor(acceptEncoding) : undefined;
      if (encoding === undefined) return { body, length, vary, encoding };
      return compressors[encoding](typeof body === 'string' ? Buffer.from(body) : body).then(
        (compressed) => ({
          body: compressed,
          length: compressed.length,
          vary,
          encoding,
        }),
      );
    },
    compressible(status, contentType, contentEncoding, cacheControl) {
      if (status < 200 || status === 204 || status === 304) return false;
      if (contentEncoding != null && contentEncoding !== '' && contentEncoding !== 'identity') return false;
      if (cacheControl?.includes('no-transform')) return false;
      return contentType != null && COMPRESSIBLE.test(contentType);
    },
    compress(body, encoding) {
      return compressors[encoding](body);
    },
  };
}
