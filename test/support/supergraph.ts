/**
 * A supergraph on loopback, as a platform team runs one in front of the gateway (contract §14): the
 * supergraph SDL composed by `@theguild/federation-composition` from subgraphs' SDL, and Hive Gateway's
 * runtime serving it on node:http with the settings docs/federation.md gives: the caller's key, cap and
 * fallback headers to the subgraphs, the RateLimit fields back, the gateway's `extensions` carried to
 * the client, demand control when asked. Used by test/integration/federation-router.test.ts and the
 * benchmark's router rows (test/bench/hive-router.ts).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGatewayRuntime, type GatewayPlugin } from '@graphql-hive/gateway';
import { composeServices, compositionHasErrors } from '@theguild/federation-composition';
import { parse } from 'graphql';

export interface SubgraphSource {
  name: string;
  /** Where the router sends this subgraph's fetches. */
  url: string;
  /** The subgraph's SDL: its `_service { sdl }`. */
  sdl: string;
}

/** The supergraph SDL of `subgraphs`; throws the composition errors, one per line. */
export function composeSupergraph(subgraphs: SubgraphSource[]): string {
  const result = composeServices(
    subgraphs.map(({ name, url, sdl }) => ({ name, url, typeDefs: parse(sdl) })),
  );
  if (compositionHasErrors(result))
    throw new Error(`composition failed:\n${result.errors.map((e) => e.message).join('\n')}`);
  return result.supergraphSdl;
}

/** The caller's headers the gateway reads (docs/contract.md: keys, cap, fallback, trace context). */
export const CALLER_HEADERS = [
  'authorization',
  'x-api-key',
  'x-max-cost-usd',
  'x-budget-fallback',
  'traceparent',
];
/** What the gateway answers in headers and the caller reads: its budget (IETF RateLimit fields). */
export const ANSWER_HEADERS = ['ratelimit', 'ratelimit-policy', 'retry-after'];

const pick = (headers: Headers, names: readonly string[]) =>
  Object.fromEntries(names.map((name) => [name, headers.get(name)]));

/**
 * Hive Gateway drops a subgraph's top-level `extensions`; this plugin puts those of `subgraph`'s
 * fetches into the client's answer (a key of a later fetch replaces an earlier one's), so
 * `extensions.cost` and `extensions.sponsoredBy` reach the caller as they do directly.
 */
export function useSubgraphExtensions(subgraph: string): GatewayPlugin {
  const carried = new WeakMap<object, Record<string, unknown>>();
  return {
    onSubgraphExecute({ subgraphName, executionRequest }) {
      const context = executionRequest.context;
      if (subgraphName !== subgraph || context == null) return;
      return ({ result }) => {
        if (Symbol.asyncIterator in result || result.extensions == null) return;
        carried.set(context, { ...carried.get(context), ...result.extensions });
      };
    },
    onExecutionResult({ result, setResult, context }) {
      const extensions = carried.get(context);
      if (extensions === undefined || result == null || Symbol.asyncIterator in result) return;
      setResult({ ...result, extensions: { ...extensions, ...result.extensions } });
    },
  };
}

export interface HiveRouterOptions {
  supergraph: string;
  /** The subgraph whose `extensions` the caller gets (useSubgraphExtensions). @default 'gateway' */
  extensionsOf?: string;
  /** Hive Gateway's demand control: refuse an operation whose `@cost` total is above it. @default none */
  maxCost?: number;
  /** Persisted documents (Hive Gateway's `persistedDocuments`): only these run, by their id. @default none */
  manifest?: Record<string, string>;
  /** More plugins (a test's counters). */
  plugins?: GatewayPlugin[];
  /** @default 0 (ephemeral) */
  port?: number;
}

export interface HiveRouter {
  /** `http://127.0.0.1:<port>/graphql` */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** Hive Gateway's runtime on a loopback port, serving `supergraph` with the settings of docs/federation.md. */
export async function startHiveRouter(options: HiveRouterOptions): Promise<HiveRouter> {
  const { manifest } = options;
  const runtime = createGatewayRuntime({
    supergraph: options.supergraph,
    logging: 'error',
    propagateHeaders: {
      fromClientToSubgraphs: ({ request }) => pick(request.headers, CALLER_HEADERS),
      fromSubgraphsToClient: ({ response }) => pick(response.headers, ANSWER_HEADERS),
    },
    ...(options.maxCost === undefined ? {} : { demandControl: { maxCost: options.maxCost } }),
    ...(manifest === undefined
      ? {}
      : {
          persistedDocuments: {
            getPersistedOperation: (id: string) => manifest[id.replace(/^sha256:/, '')] ?? null,
            allowArbitraryDocuments: false,
            // The gateway's codes (docs/contract.md): an unknown id, and a document sent as text.
            customErrors: {
              notFound: {
                message: 'no document has this id',
                extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' },
              },
              persistedQueryOnly: {
                message: 'only trusted documents run here, by their documentId',
                extensions: { code: 'PERSISTED_QUERY_NOT_IN_LIST' },
              },
            },
          },
        }),
    plugins: () => [useSubgraphExtensions(options.extensionsOf ?? 'gateway'), ...(options.plugins ?? [])],
  });
  const server = createServer(runtime);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await runtime[Symbol.asyncDispose]();
    },
  };
}
