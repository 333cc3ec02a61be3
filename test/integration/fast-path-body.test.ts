/**
 * How the fast path reads a request's body (http/fast-path/fast-path.ts: node's `data`, `end` and
 * `error` events, one record per request): a body that arrives in several chunks is joined and
 * served on the fast path like one that arrives at once; a body shorter than its Content-Length gets
 * no GraphQL answer (node's parser answers the cut request, or the connection closes), and the
 * gateway goes on serving.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

const QUERY = 'query IsNull($value: JSON) { isNull(value: $value) { ... on NullVerdict { isNull } } }';

let gateway: TestGateway;

beforeAll(async () => {
  gateway = await startTestGateway();
});

afterAll(async () => {
  await gateway.close();
});

/** Sends `body` in `parts` writes, a few ms apart, with the Content-Length `length`. */
function send(body: string, parts: number, length = Buffer.byteLength(body)) {
  const { port } = new URL(gateway.origin);
  return new Promise<{ status: number; text: string } | { error: string }>((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/graphql',
        headers: { 'content-type': 'application/json', 'content-length': String(length) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', (error) => resolve({ error: (error as NodeJS.ErrnoException).code ?? error.message }));
    const size = Math.ceil(body.length / parts);
    let index = 0;
    const next = () => {
      if (index >= body.length) {
        // A body shorter than announced: the client gives up on it and ends its side.
        if (length !== Buffer.byteLength(body)) req.socket?.end();
        else req.end();
        return;
      }
      req.write(body.slice(index, index + size));
      index += size;
      setTimeout(next, 5);
    };
    next();
  });
}

describe('the fast path reading a body', () => {
  it('joins a body sent in several chunks, and serves it on the fast path', async () => {
    const body = JSON.stringify({ query: QUERY, variables: { value: null }, operationName: 'IsNull' });
    // The first request of a document runs it once (graphql-js); the second is the compiled one.
    expect(await send(body, 1)).toMatchObject({ status: 200 });
    const before = gateway.app.fastPath.served.fast;
    const answer = await send(body, 4);
    expect(answer).toMatchObject({ status: 200 });
    expect(JSON.parse((answer as { text: string }).text).data).toEqual({ isNull: { isNull: true } });
    expect(gateway.app.fastPath.served.fast).toBe(before + 1);
  });

  it('gives no GraphQL answer to a body shorter than its Content-Length, and goes on serving', async () => {
    const body = JSON.stringify({ query: QUERY, variables: { value: 1 }, operationName: 'IsNull' });
    const before = { ...gateway.app.fastPath.served };
    const cut = await send(body, 2, Buffer.byteLength(body) + 10);
    expect(cut).not.toMatchObject({ status: 200 });
    if ('text' in cut) expect(cut.text).toBe('');
    expect(gateway.app.fastPath.served).toEqual(before);
    const after = await send(body, 1);
    expect(after).toMatchObject({ status: 200 });
    expect(JSON.parse((after as { text: string }).text).data).toEqual({ isNull: { isNull: false } });
  });
});
