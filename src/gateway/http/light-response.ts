/**
 * The fast path's stand-in for a Fetch `Response`, handed to Yoga's result processor as
 * `fetchAPI.Response`: it keeps the status, the headers (in order, as named) and the body as given,
 * and is written to node's response in one `writeHead` + `end`.
 *
 * It behaves as @whatwg-node/node-fetch's Response does where that shows on the wire: the status text
 * from node's table, `content-type: text/plain;charset=UTF-8` for a string body without one, and a
 * `content-length` for a non-empty string or byte body.
 */
import { type ServerResponse, STATUS_CODES } from 'node:http';

type HeadersInitLike =
  | Record<string, string | readonly string[]>
  | Iterable<readonly [string, string]>
  | { forEach(callback: (value: string, name: string) => void): void };

/** Response headers: insertion order and the name as first set are kept (both reach the wire). */
export class LightResponseHeaders {
  /** lower-case name → [name as set, value]. */
  readonly #map = new Map<string, [string, string]>();
  #cookies: string[] | undefined;

  constructor(init?: HeadersInitLike) {
    if (init === undefined || init === null) return;
    if (typeof (init as { forEach?: unknown }).forEach === 'function' && !Array.isArray(init)) {
      (init as { forEach(cb: (value: string, name: string) => void): void }).forEach((value, name) => {
        this.append(name, value);
      });
    } else if (Symbol.iterator in (init as object)) {
      for (const [name, value] of init as Iterable<readonly [string, string]>) this.append(name, value);
    } else {
      for (const [name, value] of Object.entries(init as Record<string, string | readonly string[]>)) {
        if (Array.isArray(value)) for (const v of value) this.append(name, String(v));
        else this.append(name, String(value));
      }
    }
  }

  get(name: string): string | null {
    const key = name.toLowerCase();
    if (key === 'set-cookie') return this.#cookies === undefined ? null : this.#cookies.join(', ');
    return this.#map.get(key)?.[1] ?? null;
  }

  has(name: string): boolean {
    const key = name.toLowerCase();
    return key === 'set-cookie' ? this.#cookies !== undefined : this.#map.has(key);
  }

  set(name: string, value: string): void {
    const key = name.toLowerCase();
    if (key === 'set-cookie') {
      this.#cookies = [String(value)];
      return;
    }
    const entry = this.#map.get(key);
    if (entry === undefined) this.#map.set(key, [name, String(value)]);
    else entry[1] = String(value);
  }

  append(name: string, value: string): void {
    const key = name.toLowerCase();
    if (key === 'set-cookie') {
      if (this.#cookies === undefined) this.#cookies = [String(value)];
      else this.#cookies.push(String(value));
      return;
    }
    const entry = this.#map.get(key);
    if (entry === undefined) this.#map.set(key, [name, String(value)]);
    else entry[1] = `${entry[1]}, ${value}`;
  }

  delete(name: string): void {
    const key = name.toLowerCase();
    if (key === 'set-cookie') this.#cookies = undefined;
    else this.#map.delete(key);
  }

  getSetCookie(): string[] {
    return this.#cookies === undefined ? [] : [...this.#cookies];
  }

  forEach(callback: (value: string, name: string, headers: this) => void): void {
    for (const [name, value] of this.entries()) callback(value, name, this);
  }

  *entries(): IterableIterator<[string, string]> {
    const names = [...this.#map.keys()];
    if (this.#cookies !== undefined) names.push('set-cookie');
    for (const name of names.sort()) {
      if (name === 'set-cookie') for (const cookie of this.#cookies ?? []) yield [name, cookie];
      else yield [name, this.#map.get(name)?.[1] ?? ''];
    }
  }

  *keys(): IterableIterator<string> {
    for (const [name] of this.entries()) yield name;
  }

  *values(): IterableIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  /** `[name, value, name, value, ...]` for `writeHead`, in insertion order. */
  toFlatList(): string[] {
    const list: string[] = [];
    for (const [name, value] of this.#map.values()) list.push(name, value);
    if (this.#cookies !== undefined) for (const cookie of this.#cookies) list.push('set-cookie', cookie);
    return list;
  }
}

export interface LightResponseInit {
  status?: number;
  statusText?: string;
  headers?: HeadersInitLike;
}

/** Bodies this class writes itself; anything else (a stream) makes it hand over to a real Response. */
export type LightBody = string | Uint8Array | null;

export class LightResponse {
  readonly status: number;
  readonly statusText: string;
  readonly headers: LightResponseHeaders;
  readonly url = '';
  readonly redirected = false;
  readonly type = 'default';
  /** The body exactly as given to the constructor. */
  readonly bodyInit: unknown;
  #bodyUsed = false;

  constructor(body?: unknown, init?: LightResponseInit) {
    this.bodyInit = body ?? null;
    this.status = init?.status || 200;
    this.statusText = init?.statusText || STATUS_CODES[this.status] || 'OK';
    this.headers = new LightResponseHeaders(init?.headers);
    const bodyInit = this.bodyInit;
    if (typeof bodyInit === 'string') {
      if (!this.headers.has('content-type')) this.headers.set('content-type', 'text/plain;charset=UTF-8');
      const length = Buffer.byteLength(bodyInit);
      if (length > 0 && !this.headers.has('content-length'))
        this.headers.set('content-length', String(length));
    } else if (bodyInit instanceof Uint8Array) {
      if (bodyInit.byteLength > 0 && !this.headers.has('content-length'))
        this.headers.set('content-length', String(bodyInit.byteLength));
    }
  }

  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  get bodyUsed(): boolean {
    return this.#bodyUsed;
  }

  /** True when the body is one this class can write without a real Response. */
  get isLight(): boolean {
    const body = this.bodyInit;
    return body === null || typeof body === 'string' || body instanceof Uint8Array;
  }

  text(): Promise<string> {
    this.#bodyUsed = true;
    const body = this.bodyInit;
    if (body === null) return Promise.resolve('');
    if (typeof body === 'string') return Promise.resolve(body);
    if (body instanceof Uint8Array) return Promise.resolve(Buffer.from(body).toString('utf-8'));
    return this.toResponse().text();
  }

  json(): Promise<unknown> {
    return this.text().then((text) => JSON.parse(text) as unknown);
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    return this.text().then((text) => {
      const bytes = Buffer.from(text);
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    });
  }

  clone(): LightResponse {
    return this;
  }

  /** A real Fetch Response with the same status, headers and body (for bodies this class cannot write). */
  toResponse(ResponseClass: typeof Response = Response): Response {
    const headers = new Headers();
    for (const [name, value] of this.headers) headers.append(name, value);
    return new ResponseClass(this.bodyInit as BodyInit | null, {
      status: this.status,
      statusText: this.statusText,
      headers,
    });
  }

  /** Writes status, headers and body to node's response in one go. */
  writeTo(res: ServerResponse): void {
    const body = this.bodyInit as LightBody;
    res.writeHead(this.status, this.statusText, this.headers.toFlatList());
    if (body === null) res.end();
    else res.end(body);
  }
}
