/**
 * GraphiQL served by the gateway itself, under a strict Content-Security-Policy.
 *
 * Why not Yoga's built-in page: it inlines 9 MB of script and builds the Monaco workers from blob:
 * URLs, which a CSP without 'unsafe-inline' script and blob: workers forbids. Here the bundle of
 * @graphql-yoga/render-graphiql (GraphiQL with Monaco, no CDN) is served as separate same-origin
 * assets, the page options and the worker URLs travel in non-executable JSON blocks, and workers load
 * from 'self'. The page's own script is an asset too, `boot.js`: graphiql-boot.browser.ts, browser code
 * type-checked and linted like the rest (graphiql-boot.ts says how it is built and found).
 *
 * The 9 MB bundle is imported on the first GraphiQL request, not at start: a gateway nobody opens in a
 * browser never loads it. Assets are gzipped once and revalidated by ETag.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import type { GraphiQLOptions, Plugin } from 'graphql-yoga';
import type { Logger } from '../../shared/logger.js';
import { bootScriptSource } from './graphiql-boot.js';

const gzip = promisify(gzipCallback);

/** The CSP of the GraphiQL page. Monaco injects <style> elements, hence 'unsafe-inline' for styles only. */
export const GRAPHIQL_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const HEADERS_EXAMPLE = JSON.stringify({ Authorization: 'Bearer free' }, null, 2);

/** One ready example operation per root field (GraphiQL tabs). */
export const GRAPHIQL_TABS: NonNullable<GraphiQLOptions['defaultTabs']> = [
  {
    query: `# Is it null? Omit \`value\` to ask about undefined (UNDEFINED_VALUE), pass null for null.
# Your API key goes in the Headers tab: "Authorization": "Bearer <key>" or "X-API-Key": "<key>";
# with an identity provider, your token instead: "Authorization": "Bearer <token>"
# (no key = free tier; the reference services know demo-pro and demo-enterprise).
query IsNull($value: JSON, $temperature: Float) {
  isNull(value: $value, model: NULL_X_4O, temperature: $temperature) {
    __typename
    ... on NullVerdict { isNull }
    ... on MaybeVerdict { answer }
    ... on ExistentialVerdict { musing raw }
    ... on NullCheck { actuallyNull correct confidence model modelName sponsoredBy }
  }
}
`,
    variables: JSON.stringify({ value: null, temperature: 0 }, null, 2),
    headers: HEADERS_EXAMPLE,
  },
  {
    query: `# Digits of pi, checked against the real thing. Free tier: at most 3 digits.
query Pi($digits: Int) {
  pi(digits: $digits, model: PI_X_4O) {
    __typename
    ... on ConstantDigits { digits precision requestedDigits correctDigits confidence modelName sponsoredBy }
  }
}
`,
    variables: JSON.stringify({ digits: 3 }, null, 2),
    headers: HEADERS_EXAMPLE,
  },
  {
    query: `# The beta inference endpoint: needs a signed liability waiver.
query Inference($input: InferenceInput!) {
  inference(input: $input) {
    __typename
    ... on Inference { digits precision requestedDigits correctDigits chainOfThought tokensUsed cost costUsd }
  }
}
`,
    variables: JSON.stringify(
      { input: { desiredDigits: 3, useChainOfThought: true, liabilityWaiverSigned: true } },
      null,
      2,
    ),
    headers: HEADERS_EXAMPLE,
  },
  {
    query: `# Both upstreams, probed concurrently. Never fails as a whole.
query Health {
  health {
    status
    nullCheck { reachable latencyMs statusCode error breaker status nullDetectable clusterStatus }
    pi { reachable latencyMs statusCode error breaker status piAvailable gpuCluster }
  }
}
`,
    headers: HEADERS_EXAMPLE,
  },
  {
    query: `# What an operation costs. Every answer that called an upstream carries extensions.cost
# { gpuCostUsd, upstreamCalls, cacheHits }. The Headers tab caps it: with "X-Max-Cost-Usd", an
# operation expected to cost more is refused with BUDGET_EXCEEDED before anything is called
# (lower the cap to 0.01 to see it). null-x-opus costs about ten times null-x-4o.
query Bill {
  cheap: isNull(value: 1, model: NULL_X_4O) { ... on NullCheck { modelName gpuCostUsd } }
  dear: isNull(value: 2, model: NULL_X_OPUS) { ... on NullCheck { modelName gpuCostUsd } }
}
`,
    headers: JSON.stringify({ Authorization: 'Bearer free', 'X-Max-Cost-Usd': '0.05' }, null, 2),
  },
  {
    query: `# The model scoreboard: every answer of every model scored against the truth the gateway
# computes (strict null, the real digits of pi), per temperature band. accuracyLowerBound is the
# lower bound of a 95 % Wilson interval. Ask isNull/pi for \`minAccuracy: 0.9\` instead of a model
# and the cheapest model measured to be that good answers (extensions.cost.routing says why).
query Models {
  models { service model band answers correct accuracy accuracyLowerBound meanCostUsd meanLatencyMs }
}
`,
    headers: HEADERS_EXAMPLE,
  },
];

interface Asset {
  type: string;
  body: Uint8Array;
  gzipped: Uint8Array;
  etag: string;
}

/** Asset file names under `<endpoint>/assets/` → the render-graphiql export they come from. */
const ASSET_SOURCES = {
  'graphiql.js': ['js', 'text/javascript; charset=utf-8'],
  'graphiql.css': ['css', 'text/css; charset=utf-8'],
  'editor.worker.js': ['editorWorkerService', 'text/javascript; charset=utf-8'],
  'json.worker.js': ['jsonWorker', 'text/javascript; charset=utf-8'],
  'graphql.worker.js': ['graphqlWorker', 'text/javascript; charset=utf-8'],
} as const;

function etagOf(body: Uint8Array): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
}

async function makeAsset(type: string, text: string | Uint8Array): Promise<Asset> {
  const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  return { type, body, gzipped: await gzip(body, { level: 6 }), etag: etagOf(body) };
}

/** JSON inside <script type="application/json">: `<` escaped so no `</script>` can end it early. */
function scriptSafeJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

interface GraphiQLBundle {
  assets: Map<string, Asset>;
  page: Asset;
}

async function loadBundle(endpoint: string, options: GraphiQLOptions): Promise<GraphiQLBundle> {
  const source = await import('@graphql-yoga/render-graphiql/graphiql');
  const assets = new Map<string, Asset>();
  const versions: Record<string, string> = {};
  for (const [name, [key, type]] of Object.entries(ASSET_SOURCES)) {
    const asset = await makeAsset(type, source[key]);
    assets.set(name, asset);
    versions[name] = asset.etag.slice(1, 11);
  }
  const favicon = /^data:[^;,]+;base64,(.*)$/.exec(source.favicon);
  if (favicon?.[1]) {
    const asset = await makeAsset('image/x-icon', Buffer.from(favicon[1], 'base64'));
    assets.set('favicon.ico', asset);
    versions['favicon.ico'] = asset.etag.slice(1, 11);
  }
  const boot = await makeAsset('text/javascript; charset=utf-8', await bootScriptSource());
  assets.set('boot.js', boot);
  versions['boot.js'] = boot.etag.slice(1, 11);

  const v = (name: string) => `${endpoint}/assets/${name}?v=${versions[name]}`;
  // Where Monaco finds its workers (same-origin files, not blob: URLs), by worker label.
  const workers = {
    editorWorkerService: v('editor.worker.js'),
    json: v('json.worker.js'),
    graphql: v('graphql.worker.js'),
  };
  const title = options.title ?? 'GraphiQL';
  const html = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${title.replace(/[<>&"]/g, '')}</title>
    <link rel="icon" href="${v('favicon.ico')}" />
    <link rel="stylesheet" href="${v('graphiql.css')}" />
    <script type="application/json" id="graphiql-workers">${scriptSafeJson(workers)}</script>
    <script type="application/json" id="graphiql-options">${scriptSafeJson({ ...options, endpoint })}</script>
    <script defer src="${v('boot.js')}"></script>
    <script defer src="${v('graphiql.js')}"></script>
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>GraphiQL needs JavaScript. The API itself answers POST ${endpoint} without it.</noscript>
    <div id="root"></div>
  </body>
</html>
`;
  return { assets, page: await makeAsset('text/html; charset=utf-8', html) };
}

export interface GraphiQLPluginOptions {
  /** The GraphQL endpoint; the page is served there, the assets under `<endpoint>/assets/`. @default '/graphql' */
  endpoint?: string;
  /** Page title. @default 'GraphiQL' */
  title?: string;
  /** Where a failure to load the page and its assets is logged (the request gets a 500). */
  logger?: Logger;
  /**
   * The tabs to open with, read when the page is first built; undefined: one example per query
   * (GRAPHIQL_TABS). In TRUSTED_DOCUMENTS_MODE=enforce, the manifest's documents, which run as shown.
   * @default () => GRAPHIQL_TABS
   */
  tabs?: () => GraphiQLOptions['defaultTabs'] | undefined;
}

function wantsGzip(request: Request): boolean {
  return /\bgzip\b/.test(request.headers.get('accept-encoding') ?? '');
}

function respond(
  request: Request,
  asset: Asset,
  extraHeaders: Record<string, string>,
  fetchAPI: { Response: typeof Response },
) {
  const headers: Record<string, string> = {
    'content-type': asset.type,
    etag: asset.etag,
    'x-content-type-options': 'nosniff',
    vary: 'accept-encoding',
    ...extraHeaders,
  };
  if (request.headers.get('if-none-match') === asset.etag) {
    return new fetchAPI.Response(null, { status: 304, headers });
  }
  let body = asset.body;
  if (wantsGzip(request)) {
    headers['content-encoding'] = 'gzip';
    body = asset.gzipped;
  }
  headers['content-length'] = String(body.byteLength);
  // A Buffer is a Uint8Array; the DOM typings only want it over a plain ArrayBuffer.
  return new fetchAPI.Response(request.method === 'HEAD' ? null : (body as Uint8Array<ArrayBuffer>), {
    status: 200,
    headers,
  });
}

/**
 * A Yoga plugin serving GraphiQL on a browser GET of the endpoint (Accept: text/html) and its assets
 * under `<endpoint>/assets/`. Register it only when GraphiQL is enabled; set Yoga's own `graphiql: false`.
 */
export function useSelfHostedGraphiQL(options: GraphiQLPluginOptions = {}): Plugin {
  const endpoint = options.endpoint ?? '/graphql';
  const assetPrefix = `${endpoint}/assets/`;
  const pageOptions: GraphiQLOptions = {
    title: options.title ?? 'GraphiQL',
    defaultTabs: GRAPHIQL_TABS,
    defaultQuery: GRAPHIQL_TABS[0]?.query ?? undefined,
    headers: HEADERS_EXAMPLE,
    defaultEditorToolsVisibility: true,
    shouldPersistHeaders: false,
  };
  let bundle: Promise<GraphiQLBundle> | undefined;
  const getBundle = () => {
    if (bundle === undefined) {
      const tabs = options.tabs?.();
      if (tabs !== undefined && tabs.length > 0) {
        pageOptions.defaultTabs = tabs;
        pageOptions.defaultQuery = tabs[0]?.query ?? undefined;
      }
    }
    bundle ??= loadBundle(endpoint, pageOptions).catch((error: unknown) => {
      bundle = undefined; // a failed load is retried by the next request
      options.logger?.error({ err: error }, 'GraphiQL: cannot load its page and assets');
      throw error;
    });
    return bundle;
  };

  return {
    onRequest({ request, url, endResponse, fetchAPI }) {
      const method = request.method;
      if (method !== 'GET' && method !== 'HEAD') return;
      const path = url.pathname;
      if (path === endpoint || path === `${endpoint}/`) {
        if (!request.headers.get('accept')?.includes('text/html')) return;
        return getBundle().then((b) =>
          endResponse(
            respond(
              request,
              b.page,
              {
                'content-security-policy': GRAPHIQL_CSP,
                'cache-control': 'no-cache',
                'referrer-policy': 'no-referrer',
                'x-frame-options': 'DENY',
              },
              fetchAPI,
            ),
          ),
        );
      }
      if (!path.startsWith(assetPrefix)) return;
      const name = path.slice(assetPrefix.length);
      return getBundle().then((b) => {
        const asset = b.assets.get(name);
        if (!asset) {
          endResponse(
            new fetchAPI.Response('Not Found', { status: 404, headers: { 'content-type': 'text/plain' } }),
          );
          return;
        }
        // Versioned URLs (?v=) never change content: cache for a year; others revalidate by ETag.
        const cache = url.searchParams.has('v') ? 'public, max-age=31536000, immutable' : 'no-cache';
        endResponse(respond(request, asset, { 'cache-control': cache }, fetchAPI));
      });
    },
  };
}
