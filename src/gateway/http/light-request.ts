/**
 * The fast path's stand-in for a Fetch `Request`: a thin view of a node:http request whose body has
 * already been read into a Buffer (the fast path only takes bodies with a Content-Length).
 *
 * Why not a real `Request`: building one per call (URL, a Headers copy, a ReadableStream over the
 * socket, an AbortController wired to it) and reading its body through that stream is most of what
 * Yoga's own HTTP handler costs. Plugins only ever read a few members (method, url, headers.get,
 * signal, json()), which this class answers with the same values a real one would have, computed
 * only when asked for.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

/**
 * A Fetch `Headers` over node's parsed request headers. Reads go to node's object (no copy); the
 * first write copies it, so node's own object is never changed.
 */
export class NodeRequestHeaders {
  #raw: IncomingHttpHeaders;
  #copied = false;

  constructor(raw: IncomingHttpHeaders) {
    this.#raw = raw;
  }

  /** Node joins repeated headers with ', ' (a Fetch Headers does too); set-cookie stays a list. */
  get(name: string): string | null {
    const value = this.#raw[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(', ') : value;
  }

  has(name: string): boolean {
    return this.#raw[name.toLowerCase()] !== undefined;
  }

  set(name: string, value: string): void {
    this.#writable()[name.toLowerCase()] = String(value);
  }

  append(name: string, value: string): void {
    const key = name.toLowerCase();
    const current = this.get(key);
    this.#writable()[key] = current === null ? String(value) : `${current}, ${value}`;
  }

  delete(name: string): void {
    delete this.#writable()[name.toLowerCase()];
  }

  getSetCookie(): string[] {
    const value = this.#raw['set-cookie'];
    return value === undefined ? [] : [...value];
  }

  forEach(callback: (value: string, name: string, headers: this) => void): void {
    for (const [name, value] of this.entries()) callback(value, name, this);
  }

  *entries(): IterableIterator<[string, string]> {
    for (const name of Object.keys(this.#raw).sort()) {
      const value = this.get(name);
      if (value !== null) yield [name, value];
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

  #writable(): IncomingHttpHeaders {
    if (!this.#copied) {
      this.#raw = { ...this.#raw };
      this.#copied = true;
    }
    return this.#raw;
  }
}

/** A Request whose body is a Buffer already read from `req`. */
export class LightRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: NodeRequestHeaders;
  readonly #body: Buffer;
  readonly #res: ServerResponse;
  #controller: AbortController | undefined;
  #bodyUsed = false;
  #json: unknown;

  constructor(req: IncomingMessage, res: ServerResponse, url: string, body: Buffer) {
    this.method = req.method ?? 'GET';
    this.url = url;
    this.headers = new NodeRequestHeaders(req.headers);
    this.#body = body;
    this.#res = res;
  }

  /**
   * Aborts when the client goes away before the answer is sent, with the response's error as the
   * reason when there is one (what @whatwg-node/server's node adapter does).
   */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      const controller = new AbortController();
      this.#controller = controller;
      const res = this.#res;
      if (res.destroyed && !res.writableFinished) controller.abort(res.errored ?? undefined);
      else
        res.once('close', () => {
          if (!res.writableFinished && !controller.signal.aborted) controller.abort(res.errored ?? undefined);
        });
    }
    return this.#controller.signal;
  }

  get bodyUsed(): boolean {
    return this.#bodyUsed;
  }

  get body(): ReadableStream<Uint8Array> | null {
    const bytes = this.#body;
    if (bytes.length === 0) return null;
    return new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(bytes));
        controller.close();
      },
    });
  }

  text(): Promise<string> {
    this.#bodyUsed = true;
    return Promise.resolve(this.#body.toString('utf-8'));
  }

  /** Exactly @whatwg-node/node-fetch's `json()`, error message included (clients see it in a 400). */
  json(): Promise<unknown> {
    this.#bodyUsed = true;
    if (this.#json !== undefined) return Promise.resolve(this.#json);
    const text = this.#body.toString('utf-8');
    try {
      this.#json = JSON.parse(text);
    } catch (error) {
      if (error instanceof SyntaxError) error.message += `, "${text}" is not valid JSON`;
      return Promise.reject(error);
    }
    return Promise.resolve(this.#json);
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    this.#bodyUsed = true;
    const bytes = this.#body;
    return Promise.resolve(
      bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
    );
  }

  bytes(): Promise<Uint8Array> {
    this.#bodyUsed = true;
    return Promise.resolve(new Uint8Array(this.#body));
  }

  blob(): Promise<Blob> {
    this.#bodyUsed = true;
    return Promise.resolve(new Blob([new Uint8Array(this.#body)]));
  }

  /** Whatever asks for a clone gets a real Request with the same method, URL, headers and body. */
  clone(): Request {
    return this.toRequest();
  }

  /** A real Fetch Request with the same facts, for code that needs one. */
  toRequest(RequestClass: typeof Request = Request): Request {
    const headers = new Headers();
    for (const [name, value] of this.headers) headers.set(name, value);
    return new RequestClass(this.url, {
      method: this.method,
      headers,
      body: this.#body.length > 0 ? new Uint8Array(this.#body) : null,
      signal: this.signal,
    });
  }
}
