/**
 * GraphiQL's boot script: browser code, served as `<endpoint>/assets/boot.js` by use-graphiql.ts and
 * run by the page before the GraphiQL bundle (`<script defer>`, in document order). It tells Monaco
 * where its workers are, hands GraphiQL the page options and a fetcher of its own, and renders it.
 *
 * A classic script, not a module (no import or export): it shares the page's global scope with the
 * bundle, hence the one function around everything. Its inputs are the page's two JSON blocks
 * (`graphiql-workers`, `graphiql-options`), written by use-graphiql.ts; its only global is the
 * bundle's `YogaGraphiQL`.
 *
 * Files named `*.browser.ts` are browser code: tsconfig.browser.json type-checks them against the DOM
 * (`npm run typecheck` runs it after tsconfig.json, which leaves them out) and compiles them into
 * dist/ (`npm run build`, `npm start`); Biome lints them with the rest. How the gateway finds the
 * JavaScript, built or not: `bootScriptSource` in use-graphiql.ts.
 */

/** The worker URLs of the page (`graphiql-workers`), by Monaco's worker label. */
interface BootWorkers {
  editorWorkerService: string;
  [label: string]: string;
}

/** A tab of `defaultTabs`: only its variables are read here. */
interface BootTab {
  variables?: string | null;
}

/** What GraphiQL passes to a fetcher: the editors' contents. */
interface FetcherParams {
  query?: string;
  operationName?: string | null;
  variables?: unknown;
}

/** GraphiQL's fetcher options: the Headers editor's contents, parsed. */
interface FetcherOpts {
  headers?: Record<string, string>;
}

/** The page options (`graphiql-options`): Yoga's GraphiQLOptions plus the endpoint. */
interface BootOptions {
  endpoint: string;
  defaultTabs?: BootTab[];
  variables?: string | null;
  /** A result, or the parts of an incremental one (GraphiQL merges an async iterable). */
  fetcher?: (params: FetcherParams, opts?: FetcherOpts) => Promise<unknown> | AsyncIterable<unknown>;
}

/** The global the bundle (graphiql.js) defines. */
declare const YogaGraphiQL: {
  renderYogaGraphiQL(root: HTMLElement | null, options: BootOptions): void;
};

/** Where Monaco looks for its workers: the global `MonacoEnvironment`. */
interface MonacoEnvironment {
  globalAPI: boolean;
  getWorkerUrl(moduleId: string, label: string): string;
}

(() => {
  /** The JSON of a `<script type="application/json">` block of the page. */
  const readJson = <T>(id: string): T => JSON.parse(document.getElementById(id)?.textContent ?? '') as T;

  /**
   * The operations a document names, in order. Block strings, strings and comments are blanked first,
   * so that `query X` inside them does not count.
   */
  const operationNames = (query: string): string[] => {
    const source = query.replace(/"""[\s\S]*?"""|"(?:[^"\\\n]|\\.)*"|#[^\n]*/g, ' ');
    const found = /\b(?:query|mutation|subscription)\s+([_A-Za-z][_0-9A-Za-z]*)/g;
    return Array.from(source.matchAll(found), (match) => match[1] as string);
  };

  // Monaco's workers are same-origin files (worker-src 'self'), not blob: URLs.
  const workers = readJson<BootWorkers>('graphiql-workers');
  (self as typeof self & { MonacoEnvironment?: MonacoEnvironment }).MonacoEnvironment = {
    globalAPI: false,
    getWorkerUrl: (_moduleId, label) =>
      (Object.hasOwn(workers, label) ? workers[label] : undefined) || workers.editorWorkerService,
  };

  /** A JSON answer whatever its status (GraphQL over HTTP answers errors as JSON too). */
  async function jsonOf(response: Response): Promise<unknown> {
    try {
      return await response.json();
    } catch {
      return { errors: [{ message: `HTTP ${response.status}: the answer is not JSON` }] };
    }
  }

  /** The parts of a text/event-stream answer (`event: next`, `data: <json>`), until `complete`. */
  async function* eventParts(request: Promise<Response>): AsyncGenerator<unknown> {
    const response = await request;
    const type = response.headers.get('content-type') || '';
    if (!type.startsWith('text/event-stream') || response.body === null) {
      yield await jsonOf(response);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      let end = buffered.indexOf('\n\n');
      while (end !== -1) {
        const event = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        end = buffered.indexOf('\n\n');
        let name = 'message';
        let data = '';
        for (const line of event.split('\n')) {
          if (line.startsWith('event:')) name = line.slice(6).trim();
          else if (line.startsWith('data:')) data += line.slice(5).trim();
        }
        if (name === 'complete') return;
        if (name === 'next' && data !== '') yield JSON.parse(data);
      }
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    const options = readJson<BootOptions>('graphiql-options');
    // GraphiQL 5 builds its tabs from defaultTabs, but fills the editors of the active tab from its
    // initialQuery / initialVariables props (Yoga's query / variables options) or its stored state;
    // only the query falls back to the first tab (defaultQuery), the variables do not. So on a first
    // visit (no stored tab state) the first tab's variables are handed over here, or its first run
    // would go out without them. Not on later visits: there GraphiQL restores its own tabs, and an
    // initialVariables that no stored tab matches would open an extra tab.
    const first = options.defaultTabs?.[0];
    let stored: string | null = null;
    try {
      stored = window.localStorage.getItem('graphiql:tabState');
    } catch {
      // Storage off (privacy settings): GraphiQL keeps nothing either, every visit is a first one.
    }
    if (first && stored === null && options.variables == null && first.variables != null) {
      options.variables = first.variables;
    }
    // GraphiQL 5 learns a tab's operation name from a debounced parse of its editor: a query pasted
    // and run within ~300 ms went out under the previous name, and Yoga's fetcher refused it
    // ("Cannot infer operation IsNull") without sending it. This fetcher sends what the editor
    // holds: a name the document does not define is replaced by its only operation's name, or left
    // out (the server then asks for one when there are several). A JSON POST answers a plain query;
    // a query with @defer or @stream asks for text/event-stream and hands GraphiQL its parts as
    // they come (an async iterable, which GraphiQL merges).
    options.fetcher = (params, opts) => {
      const names = operationNames(String(params.query || ''));
      let name = params.operationName;
      if (name != null && !names.includes(name)) name = names.length === 1 ? names[0] : undefined;
      const incremental = /@(defer|stream)\b/.test(String(params.query || ''));
      const request = fetch(options.endpoint, {
        method: 'POST',
        credentials: 'same-origin',
        headers: {
          'content-type': 'application/json',
          accept: incremental
            ? 'text/event-stream, application/graphql-response+json;q=0.9'
            : 'application/graphql-response+json, application/json',
          ...opts?.headers,
        },
        body: JSON.stringify({ query: params.query, variables: params.variables, operationName: name }),
      });
      return incremental ? eventParts(request) : request.then(jsonOf);
    };
    YogaGraphiQL.renderYogaGraphiQL(document.getElementById('root'), options);
  });
})();
