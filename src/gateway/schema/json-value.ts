/**
 * JSON values as GraphQL input: parsed and measured without recursion.
 *
 * Why iterative: a 100k-deep `[[[...]]]` variable is only 200 KB, well under the body limit, and a
 * recursive walk (or JSON.stringify) of it overflows the stack. Every walk here uses an explicit stack
 * and stops at HARD_MAX_JSON_DEPTH, so JSON.stringify afterwards is safe. The configured, smaller
 * limits (MAX_JSON_DEPTH, MAX_JSON_BYTES) are checked per request by the resolver against the
 * measurements kept on {@link JsonArgument}, because the schema is built once, before any config.
 */
import { type GraphQLError, Kind, type ValueNode } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';

/** The upper bound MAX_JSON_DEPTH accepts (src/config.ts); nothing deeper is ever walked. */
export const HARD_MAX_JSON_DEPTH = 1000;

/** A parsed JSON argument with its measurements. */
export class JsonArgument {
  /** The value as JSON text (also a stable loader key). */
  readonly json: string;
  /** Serialized size in UTF-8 bytes. */
  readonly bytes: number;

  constructor(
    readonly value: unknown,
    /** Nesting depth: 0 for a scalar, 1 for `[]`/`{}`, 2 for `[[]]`, ... */
    readonly depth: number,
  ) {
    // `?? 'null'`: JSON.stringify(undefined) is undefined, and undefined reads as null in JSON.
    this.json = JSON.stringify(value) ?? 'null';
    this.bytes = Buffer.byteLength(this.json, 'utf8');
  }
}

export function badJson(message: string, node?: ValueNode): GraphQLError {
  return createGraphQLError(message, {
    extensions: { code: 'BAD_USER_INPUT' },
    ...(node ? { nodes: [node] } : {}),
  });
}

function tooDeep(limit: number): GraphQLError {
  return badJson(`JSON value nested deeper than ${limit} levels`);
}

/**
 * Nesting depth of a JS value made of JSON types, iteratively. Throws BAD_USER_INPUT for anything that
 * is not JSON (undefined, functions, non-finite numbers, ...) or deeper than `hardMax`.
 */
export function measureJsonDepth(value: unknown, hardMax = HARD_MAX_JSON_DEPTH): number {
  let max = 0;
  const values: unknown[] = [value];
  const depths: number[] = [0];
  while (values.length > 0) {
    const v = values.pop();
    const d = depths.pop() as number;
    if (v === null) continue;
    switch (typeof v) {
      case 'string':
      case 'boolean':
        continue;
      case 'number':
        if (!Number.isFinite(v)) throw badJson('JSON numbers must be finite');
        continue;
      case 'object': {
        const next = d + 1;
        if (next > hardMax) throw tooDeep(hardMax);
        if (next > max) max = next;
        if (Array.isArray(v)) {
          for (const item of v) {
            values.push(item);
            depths.push(next);
          }
        } else {
          for (const key of Object.keys(v)) {
            const item = (v as Record<string, unknown>)[key];
            // Absent keys (undefined) vanish in JSON text, as JSON.stringify does.
            if (item === undefined) continue;
            values.push(item);
            depths.push(next);
          }
        }
        continue;
      }
      default:
        throw badJson(`not a JSON value (${typeof v})`);
    }
  }
  return max;
}

/** Parses an external (variable) value: it came from JSON already, so it only needs measuring. */
export function jsonArgumentFromValue(value: unknown): JsonArgument {
  return new JsonArgument(value, measureJsonDepth(value));
}

function setKey(target: Record<string, unknown>, key: string, value: unknown): void {
  if (value === undefined) return;
  // A literal `{ __proto__: ... }` must be data, not a prototype change.
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/**
 * Converts a GraphQL literal to a JS value iteratively. Nested `$variables` take the variable's value
 * (an unset one is dropped from objects and null in lists, as JSON.stringify does with undefined).
 * Enum-like bare words are refused: JSON strings need quotes.
 */
export function jsonArgumentFromLiteral(
  root: ValueNode,
  variables?: Readonly<Record<string, unknown>> | null,
): JsonArgument {
  const result: { value: unknown } = { value: undefined };
  const nodes: ValueNode[] = [root];
  const depths: number[] = [0];
  const sinks: Array<(value: unknown) => void> = [(v) => (result.value = v)];
  while (nodes.length > 0) {
    const node = nodes.pop() as ValueNode;
    const depth = depths.pop() as number;
    const sink = sinks.pop() as (value: unknown) => void;
    switch (node.kind) {
      case Kind.NULL:
        sink(null);
        break;
      case Kind.BOOLEAN:
      case Kind.STRING:
        sink(node.value);
        break;
      case Kind.INT:
      case Kind.FLOAT: {
        const n = Number(node.value);
        if (!Number.isFinite(n)) throw badJson(`JSON number out of range: ${node.value.slice(0, 40)}`, node);
        sink(n);
        break;
      }
      case Kind.ENUM:
        throw badJson(`"${node.value.slice(0, 40)}" is not JSON: strings need double quotes`, node);
      case Kind.VARIABLE: {
        // Coerced variables of type JSON are JsonArguments already (parseValue ran on them).
        const v = variables ? variables[node.name.value] : undefined;
        sink(v instanceof JsonArgument ? v.value : v);
        break;
      }
      case Kind.LIST: {
        if (depth + 1 > HARD_MAX_JSON_DEPTH) throw tooDeep(HARD_MAX_JSON_DEPTH);
        const list: unknown[] = new Array(node.values.length).fill(null);
        sink(list);
        node.values.forEach((item, index) => {
          nodes.push(item);
          depths.push(depth + 1);
          sinks.push((v) => {
            list[index] = v === undefined ? null : v;
          });
        });
        break;
      }
      case Kind.OBJECT: {
        if (depth + 1 > HARD_MAX_JSON_DEPTH) throw tooDeep(HARD_MAX_JSON_DEPTH);
        const object: Record<string, unknown> = {};
        sink(object);
        // Pushed in reverse so keys are assigned in document order.
        for (let i = node.fields.length - 1; i >= 0; i--) {
          const field = node.fields[i]!;
          nodes.push(field.value);
          depths.push(depth + 1);
          sinks.push((v) => setKey(object, field.name.value, v));
        }
        break;
      }
    }
  }
  // Variables nested in the literal may be deep themselves: measure the whole result.
  return new JsonArgument(result.value, measureJsonDepth(result.value));
}
