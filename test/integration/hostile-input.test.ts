/**
 * Hostile and malformed requests against the real gateway on a real socket, in front of scripted
 * upstreams that count what reaches them. Each case must get a clear 4xx or a GraphQL error with a
 * code, nothing may reach an upstream that the gateway can refuse itself, and the gateway must go on
 * serving: after every test a normal query that does reach the upstream is asserted.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { codes, type GqlResult, gql, parsed } from '../support/graphql-client.js';
import { routeSpecAnswers } from '../support/upstream-bodies.js';
import { within } from '../support/waits.js';

let nullUp: ScriptedUpstream;
let piUp: ScriptedUpstream;
let gateway: TestGateway;
let production: TestGateway;

const upstreamCalls = () => nullUp.count() + piUp.count();

beforeAll(async () => {
  [nullUp, piUp] = await Promise.all([startScriptedUpstream(), startScriptedUpstream()]);
  routeSpecAnswers(nullUp, piUp);
  const upstreams = { nullBaseUrl: nullUp.url, piBaseUrl: piUp.url };
  [gateway, production] = await Promise.all([
    startTestGateway(upstreams),
    startTestGateway({ ...upstreams, env: { NODE_ENV: 'production' } }),
  ]);
});
beforeEach(() => {
  nullUp.resetRecords();
  piUp.resetRecords();
});
afterEach(async () => {
  // Still serving, upstream calls included.
  const result = await gql(gateway.url, '{ pi { ... on ConstantDigits { digits } } }');
  expect(result.status).toBe(200);
  expect(result.data).toEqual({ pi: { digits: '3.141' } });
});
afterAll(async () => {
  await Promise.all([gateway?.close(), production?.close()]);
  await Promise.all([nullUp?.close(), piUp?.close()]);
});

/** POSTs a raw body with the given headers. */
async function raw(body: string, headers: Record<string, string>, method = 'POST'): Promise<GqlResult> {
  return parsed(await fetch(gateway.url, { method, headers, body: method === 'GET' ? undefined : body }));
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/graphql-response+json' };

describe('malformed requests', () => {
  // The 2026 draft for application/graphql-response+json: a body that is not JSON is 400; a JSON
  // body that is not a well-formed GraphQL-over-HTTP request is 422.
  it.each([
    ['malformed JSON', '{"query": "{ __typename }"', 400, 'BAD_REQUEST'],
    ['an empty body', '', 400, 'BAD_REQUEST'],
    ['a JSON array (batching is off)', '[{"query": "{ __typename }"}]', 422, 'BAD_REQUEST'],
    ['a JSON number', '42', 422, 'BAD_REQUEST'],
    ['a non-string query', '{"query": {"x": 1}}', 422, 'BAD_REQUEST'],
    [
      'an object operationName',
      '{"query": "{ __typename }", "operationName": {"obj": "ect"}}',
      422,
      'BAD_REQUEST',
    ],
    ['an array operationName', '{"query": "{ __typename }", "operationName": ["a"]}', 422, 'BAD_REQUEST'],
    ['string variables', '{"query": "{ __typename }", "variables": "x"}', 422, 'BAD_REQUEST'],
  ])('%s (%s) → %i %s', async (_what, body, status, code) => {
    const result = await raw(body, JSON_HEADERS);
    expect(result.status).toBe(status);
    expect(codes(result)).toEqual([code]);
    expect(result.text).not.toMatch(/\bat .+\.(ts|js):\d+/); // no stack trace
  });

  it('a syntax error → 400 GRAPHQL_PARSE_FAILED', async () => {
    const result = await gql(gateway.url, '{ pi( }');
    expect(result.status).toBe(400);
    expect(codes(result)).toEqual(['GRAPHQL_PARSE_FAILED']);
  });

  it('an unknown field → 422 GRAPHQL_VALIDATION_FAILED; suggestions only outside production', async () => {
    const dev = await gql(gateway.url, '{ pie { digits } }');
    expect(dev.status).toBe(422);
    expect(codes(dev)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    expect(dev.errors?.[0]?.message).toMatch(/Did you mean "pi"/);
    const prod = await gql(production.url, '{ pie { digits } }');
    expect(prod.status).toBe(422);
    expect(codes(prod)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
    expect(prod.errors?.[0]?.message).not.toMatch(/Did you mean/);
  });

  it('legacy application/json clients get the same errors with HTTP 200 (GraphQL over HTTP)', async () => {
    const result = await gql(gateway.url, '{ pi( }', { accept: 'application/json' });
    expect(result.status).toBe(200);
    expect(codes(result)).toEqual(['GRAPHQL_PARSE_FAILED']);
  });
});

describe('content types, methods and CSRF', () => {
  it('plain GET and application/json POST work without any extra header', async () => {
    const get = await parsed(await fetch(`${gateway.url}?query=${encodeURIComponent('{ __typename }')}`));
    expect(get.status).toBe(200);
    expect(get.data).toEqual({ __typename: 'Query' });
    const post = await raw('{"query": "{ __typename }"}', { 'content-type': 'application/json' });
    expect(post.data).toEqual({ __typename: 'Query' });
  });

  it.each([
    ['a form', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['multipart', { 'content-type': 'multipart/form-data; boundary=x' }],
  ])(
    'a POST a browser sends without preflight (%s) needs a CSRF header: 403 CSRF_PREVENTED',
    async (_what, headers) => {
      const result = await raw('query=%7B__typename%7D', headers as Record<string, string>);
      expect(result.status).toBe(403);
      expect(codes(result)).toEqual(['CSRF_PREVENTED']);
    },
  );

  it('the same form POST with the CSRF header is served', async () => {
    const result = await raw('query=%7B__typename%7D', {
      'content-type': 'application/x-www-form-urlencoded',
      'x-graphql-yoga-csrf': '1',
    });
    expect(result.data).toEqual({ __typename: 'Query' });
  });

  it.each([
    ['application/xml', { 'content-type': 'application/xml' }],
    // Simple requests a browser sends without preflight, but no parser takes them: 415 before any
    // CSRF verdict (the 2026 draft), and nothing runs either way.
    ['text/plain', { 'content-type': 'text/plain' }],
    ['no Content-Type', {}],
  ])('a Content-Type that is not GraphQL (%s) → 415 UNSUPPORTED_MEDIA_TYPE', async (_what, headers) => {
    const result = await raw('query=%7B__typename%7D', headers as Record<string, string>);
    expect(result.status).toBe(415);
    expect(codes(result)).toEqual(['UNSUPPORTED_MEDIA_TYPE']);
  });

  it.each(['PUT', 'DELETE', 'PATCH', 'OPTIONS'])('%s → 405 METHOD_NOT_ALLOWED with Allow', async (method) => {
    const result = await raw('{"query": "{ __typename }"}', { 'content-type': 'application/json' }, method);
    expect(result.status).toBe(405);
    expect(result.headers.get('allow')).toBe('GET, POST, QUERY');
    expect(codes(result)).toEqual(['METHOD_NOT_ALLOWED']);
  });
});

/**
 * Sends a 20 MiB body over a raw socket, as fast as the socket takes it, and stops as soon as an
 * answer arrives. Returns the answer and how much of the body had been sent by then.
 */
async function sendHugeBody(chunked: boolean): Promise<{ status: number; body: string; sentBytes: number }> {
  const total = 20 * 1024 * 1024;
  const { port } = new URL(gateway.origin);
  const socket = connect(Number(port), '127.0.0.1');
  socket.on('error', () => {}); // the server may reset the rest of the upload: expected
  await once(socket, 'connect');
  let received = '';
  let answered!: () => void;
  const answer = new Promise<void>((resolve) => {
    answered = resolve;
  });
  socket.on('data', (data: Buffer) => {
    received += data.toString('latin1');
    const end = received.indexOf('\r\n\r\n');
    if (end < 0) return;
    const length = /content-length:\s*(\d+)/i.exec(received.slice(0, end))?.[1];
    if (length === undefined || received.length >= end + 4 + Number(length)) answered();
  });
  socket.once('close', () => answered());
  socket.write(
    `POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${
      chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${total}`
    }\r\n\r\n`,
  );
  const piece = Buffer.alloc(64 * 1024, 0x20); // JSON whitespace
  let sentBytes = 0;
  let done = false;
  void answer.then(() => {
    done = true;
  });
  while (sentBytes < total && !done) {
    const ok = chunked
      ? socket.write(`${piece.length.toString(16)}\r\n`) && socket.write(piece) && socket.write('\r\n')
      : socket.write(piece);
    sentBytes += piece.length;
    // `once` rejects on 'error' (a reset once the server has answered): that ends the loop too.
    if (!ok) await Promise.race([once(socket, 'drain').catch(() => answered()), answer]);
  }
  await within(answer, 10_000);
  socket.destroy();
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
  return { status, body: received.slice(received.indexOf('\r\n\r\n') + 4), sentBytes };
}

/** The first GraphQL error of a raw HTTP body (chunked or not): the JSON between the outer braces. */
function tooLargeError(body: string): unknown {
  const json = JSON.parse(body.slice(body.indexOf('{'), body.lastIndexOf('}') + 1)) as { errors?: unknown[] };
  return json.errors?.[0];
}

/** Yoga's own answer to a body over `maxRequestBodySize`. */
const YOGA_413 = { message: 'Request body too large', extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' } };

describe('request body size (MAX_REQUEST_BODY_BYTES, 1 MiB by default)', () => {
  it('a 20 MiB body announced by Content-Length is answered 413 before it is sent', async () => {
    const { status, body, sentBytes } = await sendHugeBody(false);
    expect(status).toBe(413);
    expect(tooLargeError(body)).toMatchObject(YOGA_413);
    // The answer came while most of the body was still unsent: the server did not wait for it.
    expect(sentBytes).toBeLessThan(20 * 1024 * 1024);
  });

  it('a chunked 20 MiB body (no Content-Length) is cut off at the limit with 413', async () => {
    const { status, body, sentBytes } = await sendHugeBody(true);
    expect(status).toBe(413);
    expect(tooLargeError(body)).toMatchObject(YOGA_413);
    expect(sentBytes).toBeLessThan(20 * 1024 * 1024);
  });

  it("a body over a configured MAX_REQUEST_BODY_BYTES is 413 on the socket and in Yoga's handler; nothing runs", async () => {
    const small = await startTestGateway({
      nullBaseUrl: nullUp.url,
      piBaseUrl: piUp.url,
      // Versions pinned: no /openapi.json read at start, so the upstreams see only what the test causes.
      env: { MAX_REQUEST_BODY_BYTES: '2048', NULL_API_VERSION: 'v1', PI_API_VERSION: 'v1' },
    });
    try {
      const body = JSON.stringify({ query: `{ pi { __typename } } # ${'x'.repeat(4096)}` });
      const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body };
      const overHttp = await fetch(small.url, init);
      expect(overHttp.status).toBe(413);
      expect(tooLargeError(await overHttp.text())).toMatchObject(YOGA_413);
      const inYoga = await small.app.yoga.fetch('http://gateway.test/graphql', init);
      expect(inYoga.status).toBe(413);
      expect(tooLargeError(await inYoga.text())).toMatchObject(YOGA_413);
      expect(upstreamCalls()).toBe(0);
    } finally {
      await small.close();
    }
  });
});

describe('deep and large values', () => {
  const N = 100_000;

  it('a 100k-deep JSON variable → 422 BAD_USER_INPUT (it cannot be coerced), no upstream call', async () => {
    const deep = `${'['.repeat(N)}${']'.repeat(N)}`;
    const body = `{"query":"query($v: JSON) { isNull(value: $v) { __typename } }","variables":{"v":${deep}}}`;
    const result = await raw(body, JSON_HEADERS);
    expect(result.status).toBe(422);
    expect(codes(result)).toEqual(['BAD_USER_INPUT']);
    // A clear message, not a stack overflow.
    expect(result.errors?.[0]?.message).toMatch(/nested deeper than/);
    expect(upstreamCalls()).toBe(0);
  });

  it('a 100k-deep object variable → 422 BAD_USER_INPUT', async () => {
    const deep = `${'{"a":'.repeat(N)}1${'}'.repeat(N)}`;
    const body = `{"query":"query($v: JSON) { isNull(value: $v) { __typename } }","variables":{"v":${deep}}}`;
    const result = await raw(body, JSON_HEADERS);
    expect(result.status).toBe(422);
    expect(codes(result)).toEqual(['BAD_USER_INPUT']);
    expect(upstreamCalls()).toBe(0);
  });

  it.each([
    ['list', `${'['.repeat(N)}${']'.repeat(N)}`],
    ['object', `${'{a:'.repeat(N)}1${'}'.repeat(N)}`],
  ])(
    'a 100k-deep %s literal in the document → 400 with a code (parse limits), no upstream call',
    async (_what, deep) => {
      const result = await gql(gateway.url, `{ isNull(value: ${deep}) { __typename } }`);
      expect(result.status).toBe(400);
      expect(['GRAPHQL_PARSE_FAILED', 'BAD_USER_INPUT']).toContain(codes(result)[0]);
      expect(upstreamCalls()).toBe(0);
    },
  );

  it('a JSON value over MAX_JSON_BYTES (64 KiB) → BAD_USER_INPUT on the field, no upstream call', async () => {
    const result = await gql(gateway.url, 'query($v: JSON) { isNull(value: $v) { __typename } }', {
      variables: { v: 'x'.repeat(70_000) },
    });
    expect(result.data).toEqual({ isNull: null });
    expect(codes(result)).toEqual(['BAD_USER_INPUT']);
    expect(result.errors?.[0]?.message).toMatch(/at most 65536 are allowed/);
    expect(upstreamCalls()).toBe(0);
  });
});

describe('absurd digit counts (checked before any upstream call)', () => {
  it.each([
    // Validation failures 422; a field refused by its resolver leaves data: 294 (Partial Success).
    ['pi(digits: 1e9)', 422, 'GRAPHQL_VALIDATION_FAILED'],
    ['pi(digits: 2147483648)', 422, 'GRAPHQL_VALIDATION_FAILED'],
    ['pi(digits: 1000000000)', 294, 'BAD_USER_INPUT'],
    ['inference(input: { desiredDigits: 2000000, liabilityWaiverSigned: true })', 294, 'BAD_USER_INPUT'],
    [
      'inference(input: { desiredDigits: 1e9, liabilityWaiverSigned: true })',
      422,
      'GRAPHQL_VALIDATION_FAILED',
    ],
  ])('literal %s → %i %s', async (field, status, code) => {
    const result = await gql(gateway.url, `{ ${field} { __typename } }`);
    expect(result.status).toBe(status);
    expect(codes(result)).toEqual([code]);
    expect(upstreamCalls()).toBe(0);
  });

  it.each([
    // Refused by the resolver (data: { pi: null }): 294; variables that cannot be coerced: 422.
    [1e9, 294],
    [-1, 294],
    [2 ** 31, 422],
    [1.5, 422],
    ['12', 422],
  ])('variable digits = %j → %i BAD_USER_INPUT', async (value, status) => {
    const result = await gql(gateway.url, 'query($d: Int) { pi(digits: $d) { __typename } }', {
      variables: { d: value },
    });
    expect(result.status).toBe(status);
    expect(codes(result)).toEqual(['BAD_USER_INPUT']);
    expect(upstreamCalls()).toBe(0);
  });
});
