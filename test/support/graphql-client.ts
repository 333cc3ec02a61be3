/**
 * The tests' one GraphQL client: a POST over real sockets, its answer parsed when it is JSON; and the
 * same POST handed to Yoga's own handler in process, for tests that compare the two paths.
 */
import type { TestGateway } from './gateway.js';

export interface GqlError {
  message: string;
  path?: Array<string | number>;
  locations?: Array<{ line: number; column: number }>;
  extensions?: Record<string, unknown>;
}

export interface GqlResult {
  status: number;
  text: string;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary result shapes
  data?: Record<string, any> | null;
  errors?: GqlError[];
  extensions?: Record<string, unknown>;
}

export interface GqlOptions {
  variables?: Record<string, unknown>;
  operationName?: string;
  headers?: Record<string, string>;
  /** @default 'application/graphql-response+json' */
  accept?: string;
  signal?: AbortSignal;
}

/** The POST of one operation as application/json. */
function post(query: string, options: GqlOptions): RequestInit {
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: options.accept ?? 'application/graphql-response+json',
      ...options.headers,
    },
    body: JSON.stringify({ query, variables: options.variables, operationName: options.operationName }),
    signal: options.signal,
  };
}

/** POSTs one operation as application/json. */
export async function gql(url: string, query: string, options: GqlOptions = {}): Promise<GqlResult> {
  return parsed(await fetch(url, post(query, options)));
}

/** The same POST as `gql`, handed to Yoga's handler (`app.yoga.fetch`): the fast path never sees it. */
export async function gqlInYoga(
  gateway: TestGateway,
  query: string,
  options: GqlOptions = {},
): Promise<GqlResult> {
  return parsed(await gateway.app.yoga.fetch('http://127.0.0.1/graphql', post(query, options)));
}

/** Reads a fetch Response into a GqlResult (body parsed when it is JSON). */
export async function parsed(response: Response): Promise<GqlResult> {
  const text = await response.text();
  let body: object = {};
  try {
    body = JSON.parse(text) as object;
  } catch {
    // not JSON: text and status are still there
  }
  return { status: response.status, text, headers: response.headers, ...body };
}

/** The codes of a result's errors, in order. */
export const codes = (result: { errors?: GqlError[] }): unknown[] =>
  (result.errors ?? []).map((e) => e.extensions?.code);
