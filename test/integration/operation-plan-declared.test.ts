/**
 * Every root field that calls an upstream declares the Pothos extension `upstream` that
 * operation-plan.ts counts from (MAX_UPSTREAM_CALLS, the X-Max-Cost-Usd estimate): checked
 * behaviourally, each root field run through a gateway in front of a loopback upstream that counts
 * every request. The planner itself, on documents, is in test/unit/operation-plan.test.ts.
 */
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  getNamedType,
  getNullableType,
  isCompositeType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
} from 'graphql';
import { beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamFieldExtension } from '../../src/gateway/operation/operation-plan.js';
import { schema } from '../../src/gateway/schema/index.js';
import type { TestGateway } from '../support/gateway.js';
import { codes, gql } from '../support/graphql-client.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';

/** A GraphQL literal of this input type that validates (required fields only, for input objects). */
function literalOf(type: GraphQLInputType): string {
  const inner = getNullableType(type);
  if (isListType(inner)) return `[${literalOf(inner.ofType)}]`;
  if (isEnumType(inner)) return (inner.getValues()[0] as { name: string }).name;
  if (isInputObjectType(inner)) {
    const fields = Object.values(inner.getFields()).filter((f) => isNonNullType(f.type));
    return `{${fields.map((f) => `${f.name}: ${literalOf(f.type)}`).join(', ')}}`;
  }
  if (isScalarType(inner)) {
    switch (inner.name) {
      case 'Int':
      case 'Float':
      case 'JSON':
        return '1';
      case 'Boolean':
        return 'true';
      default:
        return '"x"';
    }
  }
  throw new Error(`no literal for ${String(type)}`);
}

/** The smallest valid selection of a root field: its required arguments, `__typename` when composite. */
function minimalSelection(field: GraphQLField<unknown, unknown>): string {
  const required = field.args.filter((a: GraphQLArgument) => isNonNullType(a.type));
  const args =
    required.length === 0 ? '' : `(${required.map((a) => `${a.name}: ${literalOf(a.type)}`).join(', ')})`;
  return `${field.name}${args}${isCompositeType(getNamedType(field.type)) ? ' { __typename }' : ''}`;
}

const upstreamOf = (field: GraphQLField<unknown, unknown>) =>
  (field.extensions as { upstream?: UpstreamFieldExtension }).upstream;

describe('every root field that calls an upstream declares the `upstream` extension', () => {
  const rootFields = Object.values(schema.getQueryType()?.getFields() ?? {});
  // Nothing is scripted: every request is answered 404, and counted.
  const scripted = useScriptedGateways();
  let gateway: TestGateway;

  beforeAll(async () => {
    gateway = await scripted.gateway({ BREAKER_THRESHOLD: '0', RETRY_MAX_ATTEMPTS: '1' });
  });

  it.each(rootFields.map((f) => [f.name, f] as const))(
    '%s: declares at least the upstream requests it makes, or makes none',
    async (_name, field) => {
      const query = `{ ${minimalSelection(field)} }`;
      scripted.upstream.resetRecords();
      const result = await gql(gateway.url, query);
      // The generated operation ran (a validation failure would prove nothing).
      expect(codes(result)).not.toContain('GRAPHQL_VALIDATION_FAILED');
      expect(result.data, query).toBeDefined();
      const requests = scripted.upstream.count();
      const declared = upstreamOf(field)?.calls ?? 0;
      expect(
        requests,
        `${query} made ${requests} upstream requests, declares ${declared}`,
      ).toBeLessThanOrEqual(declared);
      if (declared > 0) expect(requests, `${query} declares calls it never makes`).toBeGreaterThan(0);
    },
  );
});
