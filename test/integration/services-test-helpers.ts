/**
 * Small HTTP helpers for the reference-service contract tests (services-*.test.ts): real requests
 * over loopback to services listening on ephemeral ports.
 */
import type { FastifyInstance } from 'fastify';
import { type Dispatcher, request } from 'undici';
import { afterAll, expect } from 'vitest';

export interface ErrorShape {
  error: { status: number; code: string; message: string };
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  /** Parsed JSON (the services answer JSON only). */
  body: T;
  text: string;
}

/** An answer of POST /api/v1/check (and the v1 fields of POST /api/v2/null-or-not). */
export interface CheckAnswer {
  is_null: boolean | string;
  confidence: number;
  inference_time_ms: number;
  gpu_cost_usd: number;
  model: string;
  experts_consulted: number;
  sponsored_by: string;
  disclaimer: string;
  existential_dread?: boolean;
}

/** Which of the three answers a check gave. */
export function checkKind(answer: CheckAnswer): 'boolean' | 'maybe' | 'existential' {
  if (typeof answer.is_null === 'boolean') return 'boolean';
  return answer.is_null === 'maybe' ? 'maybe' : 'existential';
}

/**
 * `start(options)`: a service made by `create` listening on a free loopback port, its base URL; every
 * service it started is closed after the file's tests.
 */
export function serviceStarter<O>(
  create: (options?: O) => FastifyInstance,
): (options?: O) => Promise<string> {
  const apps: FastifyInstance[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });
  return (options) => {
    const app = create(options);
    apps.push(app);
    return listen(app);
  };
}

/** Listens on 127.0.0.1 with a free port; returns the base URL. */
export async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  return `http://127.0.0.1:${address.port}`;
}

/**
 * One request. undici's `request` rather than fetch: the statistical tests send thousands of requests
 * and fetch's stream machinery costs several times more per call.
 */
export async function call<T = Record<string, unknown>>(
  url: string,
  init: RequestInit = {},
): Promise<Answer<T>> {
  const response = await request(url, {
    method: (init.method ?? 'GET') as Dispatcher.HttpMethod,
    headers: (init.headers ?? {}) as Record<string, string>,
    body: init.body as string | undefined,
  });
  const text = await response.body.text();
  const headers = new Headers();
  for (const [name, value] of Object.entries(response.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return { status: response.statusCode, headers, body: JSON.parse(text) as T, text };
}

/** A POST with a JSON body (or a raw string body when `raw` is set). */
export function postJson(body: unknown, headers: Record<string, string> = {}, raw?: string): RequestInit {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: raw ?? JSON.stringify(body),
  };
}

export const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });
export const xApiKey = (key: string): Record<string, string> => ({ 'x-api-key': key });

/** Runs `count` requests, `concurrency` at a time (bounded), and returns their answers in order. */
export async function many<T>(
  count: number,
  concurrency: number,
  run: (i: number) => Promise<T>,
): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  async function worker(): Promise<void> {
    while (next < count) {
      const i = next++;
      out[i] = await run(i);
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return out;
}

/** Every error answer: the documented shape, matching status, no stack trace. */
export function expectErrorShape(answer: Answer<unknown>, status: number, code: string): ErrorShape['error'] {
  const body = answer.body as ErrorShape;
  expect({ status: answer.status, code: body.error?.code }, answer.text.slice(0, 300)).toEqual({
    status,
    code,
  });
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error).toEqual({ status, code, message: expect.any(String) });
  expect(body.error.message.length).toBeGreaterThan(0);
  // No stack trace, no internals.
  expect(answer.text).not.toMatch(/\bat .+:\d+:\d+/);
  expect(answer.text).not.toContain('node_modules');
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  return body.error;
}
