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

interface ChildNode<C> {
  readonly next: Map<string, ChildNode<C>>;
  child: C | undefined;
}

function stepTo<C>(node: ChildNode<C>, value: string): ChildNode<C> {
  let found = node.next.get(value);
  if (found === undefined) {
    found = { next: new Map(), child: undefined };
    node.next.set(value, found);
  }
  return found;
}

/**
 * The labelled children of a metric whose label values are known only at run time (bounded: label
 * values above pass through a `BoundedLabel` or come from fixed sets), each looked up once with
 * prom-client's `labels()` and kept, as prom-client documents for hot paths; found again by their
 * values through nested maps, without a label object or a key built per event.
 */
export function keptChildren<C>(
  child: (...values: string[]) => C,
): (a: string, b: string, c?: string, d?: string) => C {
  const root: ChildNode<C> = { next: new Map(), child: undefined };
  return (a, b, c, d) => {
    let node = stepTo(stepTo(root, a), b);
    if (c !== undefined) node = stepTo(node, c);
    if (d !== undefined) node = stepTo(node, d);
    if (node.child === undefined)
      node.child = c === undefined ? child(a, b) : d === undefined ? child(a, b, c) : child(a, b, c, d);
    return node.child;
  };
}
