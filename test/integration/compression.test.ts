/**
 * Compressed answers (docs/contract.md, Delivery: compression) over real HTTP: the gateway in front of
 * the reference services, raw bytes read with undici's `request` (which, unlike fetch, does not
 * decompress), on both paths (the fast path, and Yoga's handler with HTTP_FAST_PATH=false), for every
 * Accept-Encoding form a client sends, and with COMPRESSION_MIN_BYTES above and below its default.
 */
import zlib from 'node:zlib';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUPPORTED_ENCODINGS } from '../../src/gateway/delivery/compression.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const HAS_ZSTD = SUPPORTED_ENCODINGS.includes('zstd');
const zstdDecompress = (zlib as { zstdDecompressSync?: (b: Buffer) => Buffer }).zstdDecompressSync;

function decode(body: Buffer, encoding: string | undefined): string {
  switch (encoding) {
    case undefined:
      return body.toString('utf8');
    case 'gzip':
      return zlib.gunzipSync(body).toString('utf8');
    case 'br':
      return zlib.brotliDecompressSync(body).toString('utf8');
    case 'zstd':
      return (zstdDecompress as (b: Buffer) => Buffer)(body).toString('utf8');
    default:
      throw new Error(`unexpected content-encoding ${encoding}`);
  }
}

interface Answer {
  status: number;
  encoding: string | undefined;
  vary: string | undefined;
  length: number;
  declaredLength: number;
  text: string;
}

async function send(
  url: string,
  init: { method?: 'GET' | 'POST'; body?: string; acceptEncoding?: string; apiKey?: string },
): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/graphql-response+json' };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  if (init.acceptEncoding !== undefined) headers['accept-encoding'] = init.acceptEncoding;
  if (init.apiKey !== undefined) headers.authorization = `Bearer ${init.apiKey}`;
  const response = await request(url, { method: init.method ?? 'POST', headers, body: init.body });
  const raw = Buffer.from(await response.body.arrayBuffer());
  const encoding = response.headers['content-encoding'] as string | undefined;
  return {
    status: response.statusCode,
    encoding,
    vary: response.headers.vary as string | undefined,
    length: raw.length,
    declaredLength: Number(response.headers['content-length']),
    text: decode(raw, encoding),
  };
}

const PI = (digits: number) =>
  JSON.stringify({ query: `{ pi(digits: ${digits}) { __typename ... on PiDigits { digits } } }` });
const HEALTH = JSON.stringify({ query: '{ health { status } }' });

let fast: TestGateway;
let yogaOnly: TestGateway;
beforeAll(async () => {
  fast = await startTestGateway();
  yogaOnly = await startTestGateway({ env: { HTTP_FAST_PATH: 'false' } });
});
afterAll(async () => {
  await fast?.close();
  await yogaOnly?.close();
});

describe.each([
  ['the fast path', () => fast],
  ["Yoga's handler", () => yogaOnly],
])('compressed answers on %s', (_name, gateway) => {
  let plain: string;
  beforeAll(async () => {
    const answer = await send(gateway().url, { body: PI(20_000), apiKey: 'demo-enterprise' });
    expect(answer.status).toBe(200);
    expect(answer.encoding).toBeUndefined();
    plain = answer.text;
    expect(JSON.parse(plain).data.pi.digits).toHaveLength(20_002);
  });

  it.each([
    ['br', 'br'],
    ['gzip', 'gzip'],
    ['gzip, deflate, br', 'br'],
    ['gzip;q=1.0, br;q=0.5', 'gzip'],
    ['identity', undefined],
    ['compress', undefined],
    ['*', HAS_ZSTD ? 'zstd' : 'br'],
    ['br;q=0, gzip;q=0', undefined],
    ...(HAS_ZSTD ? [['zstd', 'zstd'] as [string, string]] : []),
    ...(HAS_ZSTD ? [['gzip, deflate, br, zstd', 'zstd'] as [string, string]] : []),
  ])('Accept-Encoding %j: %s, the same JSON, Vary, an exact content-length', async (accept, expected) => {
    const answer = await send(gateway().url, {
      body: PI(20_000),
      apiKey: 'demo-enterprise',
      acceptEncoding: accept,
    });
    expect(answer.status).toBe(200);
    expect(answer.encoding).toBe(expected);
    expect(answer.vary).toMatch(/accept-encoding/i);
    expect(answer.declaredLength).toBe(answer.length);
    // The digits are the same; the sponsor message of each answer is the upstream's pick.
    expect(JSON.parse(answer.text).data).toEqual(JSON.parse(plain).data);
    if (expected !== undefined) expect(answer.length).toBeLessThan(plain.length / 2);
  });

  it('sends a small answer as it is, with no Vary, whatever the client accepts', async () => {
    const answer = await send(gateway().url, { body: HEALTH, acceptEncoding: 'br, gzip, zstd' });
    expect(answer.status).toBe(200);
    expect(answer.length).toBeLessThan(1024);
    expect(answer.encoding).toBeUndefined();
    expect(answer.vary ?? '').not.toMatch(/accept-encoding/i);
    expect(JSON.parse(answer.text).data.health.status).toBeTruthy();
  });

  it('compresses a large error answer too (the same rules for every result)', async () => {
    // An unknown field with a 2,000-character name: its error message alone is over the threshold.
    const answer = await send(gateway().url, {
      body: JSON.stringify({ query: `{ ${'x'.repeat(2000)} }` }),
      acceptEncoding: 'gzip',
    });
    expect(JSON.parse(answer.text).errors[0].message).toContain('x'.repeat(2000));
    expect(answer.encoding).toBe('gzip');
    expect(answer.declaredLength).toBe(answer.length);
  });
});

describe("Yoga's other answers", () => {
  it('/metrics is compressed for a scraper that accepts gzip', async () => {
    const plain = await send(`${fast.origin}/metrics`, { method: 'GET' });
    expect(plain.length).toBeGreaterThan(1024);
    const answer = await send(`${fast.origin}/metrics`, { method: 'GET', acceptEncoding: 'gzip' });
    expect(answer.encoding).toBe('gzip');
    expect(answer.text).toContain('# HELP gateway_operations_total');
    expect(answer.length).toBeLessThan(plain.length / 2);
  });

  it('the same operation gets the same encoding on both paths', async () => {
    for (const accept of ['br, gzip', 'gzip', '*', 'identity']) {
      const a = await send(fast.url, { body: PI(5_000), apiKey: 'demo-enterprise', acceptEncoding: accept });
      const b = await send(yogaOnly.url, {
        body: PI(5_000),
        apiKey: 'demo-enterprise',
        acceptEncoding: accept,
      });
      expect(a.encoding).toBe(b.encoding);
      expect(a.vary?.toLowerCase()).toBe(b.vary?.toLowerCase());
      expect(JSON.parse(a.text).data).toEqual(JSON.parse(b.text).data);
    }
  });
});

describe.each([
  ['the fast path', {}, () => fast],
  ["Yoga's handler", { HTTP_FAST_PATH: 'false' }, () => yogaOnly],
])('a COMPRESSION_MIN_BYTES other than the default, on %s', (_name, pathEnv, byDefault) => {
  let high: TestGateway;
  let low: TestGateway;
  beforeAll(async () => {
    [high, low] = await Promise.all([
      startTestGateway({ env: { ...pathEnv, COMPRESSION_MIN_BYTES: '8192' } }),
      startTestGateway({ env: { ...pathEnv, COMPRESSION_MIN_BYTES: '256' } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([high?.close(), low?.close()]);
  });

  const ask = (gateway: TestGateway, digits: number) =>
    send(gateway.url, { body: PI(digits), apiKey: 'demo-enterprise', acceptEncoding: 'gzip' });

  it('8192: an answer between 1 and 8 KB goes as it is, where the default compresses it; a larger one is compressed', async () => {
    const middle = await ask(high, 3000);
    expect(middle.status).toBe(200);
    // The size is the test's premise: over the default threshold, under this gateway's.
    expect(middle.length).toBeGreaterThan(1024);
    expect(middle.length).toBeLessThan(8192);
    expect(middle.encoding).toBeUndefined();
    expect(middle.vary ?? '').not.toMatch(/accept-encoding/i);
    expect(JSON.parse(middle.text).data.pi.digits).toHaveLength(3002);
    // The same answer from a gateway with the default is compressed: the setting decided, not the size.
    expect((await ask(byDefault(), 3000)).encoding).toBe('gzip');

    const large = await ask(high, 20_000);
    expect(large.encoding).toBe('gzip');
    expect(large.vary).toMatch(/accept-encoding/i);
    expect(large.declaredLength).toBe(large.length);
    expect(JSON.parse(large.text).data.pi.digits).toHaveLength(20_002);
  });

  it('256: an answer under 1 KB is compressed, where the default sends it as it is', async () => {
    const small = await ask(low, 300);
    expect(small.status).toBe(200);
    expect(small.encoding).toBe('gzip');
    expect(small.vary).toMatch(/accept-encoding/i);
    expect(small.declaredLength).toBe(small.length);
    // The premise, read from the decoded text: over this gateway's threshold, under the default's.
    expect(small.text.length).toBeGreaterThan(256);
    expect(small.text.length).toBeLessThan(1024);
    expect(JSON.parse(small.text).data.pi.digits).toHaveLength(302);
    const plain = await ask(byDefault(), 300);
    expect(plain.encoding).toBeUndefined();
    expect(plain.length).toBeLessThan(1024);
  });
});
