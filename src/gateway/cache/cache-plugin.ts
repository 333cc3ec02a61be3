/**
 * The Yoga plugin of the deterministic-answer cache: `extensions.cache: { hits, misses }` on every
 * operation that made a cacheable upstream call, and the sponsor messages of answers served from the
 * cache (or shared with another operation's call) added to `extensions.sponsoredBy`, which the
 * observability plugin fills from real upstream answers only.
 *
 * Register it after the observability plugin: Yoga runs `onExecutionResult` hooks in plugin order.
 */
import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { CallOptions } from '../upstream/types.js';
import type { ResponseCache } from './response-cache.js';

/** Result extensions this plugin adds (contract: fields may be added, none renamed). */
export interface CacheExtensions {
  cache?: { hits: number; misses: number };
  sponsoredBy?: string[];
}

/** The part of the gateway context this plugin reads (src/context.ts OperationScope). */
interface WithOperation {
  operation?: { callOptionsIfCreated?: CallOptions | undefined };
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

export function useResponseCacheExtensions(cache: ResponseCache): Plugin {
  return {
    onExecutionResult({ result, setResult, context }) {
      // Only operations that made an upstream call have call options; the others have nothing to show.
      const callOptions = (context as WithOperation).operation?.callOptionsIfCreated;
      if (callOptions === undefined || result === undefined || isAsyncIterable(result)) return;
      const stats = cache.statsFor(callOptions);
      if (stats === undefined) return;
      const single = result as ExecutionResult;
      const extensions: Record<string, unknown> = {
        ...single.extensions,
        cache: { hits: stats.hits, misses: stats.misses },
      };
      if (stats.sponsors !== undefined) {
        const known = (single.extensions?.sponsoredBy as string[] | undefined) ?? [];
        const merged = [...known];
        for (const sponsor of stats.sponsors) if (!merged.includes(sponsor)) merged.push(sponsor);
        extensions.sponsoredBy = merged;
      }
      setResult({ ...single, extensions });
    },
  };
}
