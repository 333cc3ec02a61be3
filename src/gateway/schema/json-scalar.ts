/**
 * `scalar JSON`: any JSON value, in both directions.
 *
 * Input is bounded (see json-value.ts): parsed without recursion, refused past 1000 levels, and
 * measured so the resolver can apply MAX_JSON_DEPTH / MAX_JSON_BYTES. Output (`raw` upstream bodies)
 * is checked for depth too, so a pathological upstream body becomes a field error, not a crashed
 * response serializer.
 */
import { createGraphQLError } from 'graphql-yoga';
import { builder } from './builder.js';
import {
  JsonArgument,
  jsonArgumentFromLiteral,
  jsonArgumentFromValue,
  measureJsonDepth,
} from './json-value.js';

export const JsonScalar = builder.scalarType('JSON', {
  description:
    'Any JSON value: null, a boolean, a finite number, a string, a list or an object. As an argument it is ' +
    'bounded in nesting depth (MAX_JSON_DEPTH) and serialized size (MAX_JSON_BYTES); beyond them the field ' +
    'fails with BAD_USER_INPUT.',
  serialize: (value) => {
    try {
      measureJsonDepth(value);
    } catch {
      // Only upstream bodies are output as JSON: a body no JSON client could read is the upstream's fault.
      throw createGraphQLError('the upstream body is not representable as JSON', {
        extensions: { code: 'UPSTREAM_BAD_RESPONSE' },
      });
    }
    return value;
  },
  parseValue: (value) => (value instanceof JsonArgument ? value : jsonArgumentFromValue(value)),
  parseLiteral: (node, variables) => jsonArgumentFromLiteral(node, variables),
});
