/**
 * Label values the gateway's metric areas share: what an unnamed operation is called, and a bound on
 * label values chosen by others (clients' operation names, upstreams' model names), so that /metrics
 * cannot grow without bound.
 */
import type { UpstreamName } from '../errors.js';

/** Label value of operations without a name. */
export const ANONYMOUS_OPERATION = '(anonymous)';
/** Label value of operation names beyond `maxOperationNames`, and of unknown model names. */
export const OTHER_OPERATION = '(other)';
const MAX_LABEL_LENGTH = 100;

/** The upstreams, in the order their series are first exported. */
export const UPSTREAMS: readonly UpstreamName[] = ['null-check', 'pi-digits'];

/** Maps a value chosen by others to its label value: `empty` for none, `(other)` past the bound. */
export type BoundedLabel = (value: string | null) => string;

/** A bounded set of label values: the first `max` distinct values (each ≤ 100 characters) are kept. */
export function boundedLabel(max: number, empty: string): BoundedLabel {
  const known = new Set<string>();
  return (value) => {
    if (value === null || value === '') return empty;
    if (known.has(value)) return value;
    if (known.size >= max || value.length > MAX_LABEL_LENGTH) return OTHER_OPERATION;
    known.add(value);
    return value;
  };
}

/** One child per upstream, looked up once (prom-client's `labels()`), for metrics labelled by upstream only. */
export function perUpstream<C>(child: (upstream: UpstreamName) => C): Record<UpstreamName, C> {
  return { 'null-check': child('null-check'), 'pi-digits': child('pi-digits') };
}
