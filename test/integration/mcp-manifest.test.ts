/**
 * Tools from a trusted-documents manifest (contract §13 with §10): every named query operation of
 * TRUSTED_DOCUMENTS is a tool named by its operation name in snake_case, replacing a built-in tool of
 * that name; in `log` mode the built-in tools stay (and count as untrusted operations, as over POST
 * /graphql), in `enforce` mode only the manifest's operations are tools.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, connectMcp, toolCodes } from '../support/mcp-client.js';
import { metricValue } from '../support/metric-values.js';
import { useScriptedGateways } from '../support/scripted-gateways.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';

const DOCUMENTS = [
  // Replaces the built-in pi_digits: fewer fields, a default.
  'query PiDigits($digits: Int = 2) { pi(digits: $digits) { ... on ConstantDigits { digits precision } } }',
  // Two operations in one document, one of them with a fragment and an input object.
  `query CheckTwo($a: JSON, $b: JSON!) { first: isNull(value: $a) { ...Verdict } second: isNull(value: $b) { ...Verdict } }
query InferThree($input: InferenceInput!) { inference(input: $input) { __typename } }
fragment Verdict on NullCheck { actuallyNull modelName }`,
  // Anonymous: not a tool.
  '{ health { status } }',
];

const scripted = useScriptedGateways();
let dir: string;
let manifest: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mcp-manifest-'));
  manifest = join(dir, 'persisted-documents.json');
  const entries = DOCUMENTS.map((text) => [createHash('sha256').update(text).digest('hex'), text]);
  writeFileSync(manifest, JSON.stringify(Object.fromEntries(entries)));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const untrusted = (registry: Parameters<typeof metricValue>[0]) =>
  metricValue(registry, 'gateway_untrusted_operations_total');

describe('TRUSTED_DOCUMENTS_MODE=log', () => {
  it('the built-in tools and the manifest operations; a manifest tool replaces a built-in one', async () => {
    routeSpecAnswers(scripted.upstream);
    const gateway = await scripted.gateway({ TRUSTED_DOCUMENTS: manifest, FREE_RATE_LIMIT: '0' });
    const client = await connectMcp(gateway.origin);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual([
        'is_null',
        'pi_digits',
        'pi_inference',
        'health',
        'budget',
        'model_scores',
        'check_two',
        'infer_three',
      ]);
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      expect(byName.get('pi_digits')?.description).toMatch(/^GraphQL query PiDigits\./);
      expect(byName.get('pi_digits')?.inputSchema).toMatchObject({ properties: { digits: { default: 2 } } });
      expect(byName.get('check_two')?.inputSchema.required).toEqual(['b']);
      expect(byName.get('check_two')?.description).toMatch(/about 0\.0084 USD/);

      const registry = gateway.app.metrics.registry;
      const before = (await untrusted(registry)) ?? 0;
      const pi = await callTool(client, 'pi_digits');
      expect(pi.structuredContent).toEqual({ pi: { digits: '3.141', precision: 3 } });
      const two = await callTool(client, 'check_two', { a: null, b: 1 });
      expect(two.structuredContent).toEqual({
        first: { actuallyNull: true, modelName: 'null-x-4o' },
        second: { actuallyNull: false, modelName: 'null-x-4o' },
      });
      expect(two._meta?.cost?.upstreamCalls).toBe(2);
      // Manifest operations are trusted; a built-in one is not in the manifest (counted, as over /graphql).
      expect((await untrusted(registry)) ?? 0).toBe(before);
      await callTool(client, 'is_null', { value: 1 });
      expect(await untrusted(registry)).toBe(before + 1);
    } finally {
      await client.close();
    }
  });
});

describe('TRUSTED_DOCUMENTS_MODE=enforce', () => {
  it("only the manifest's operations are tools", async () => {
    routeSpecAnswers(scripted.upstream);
    // As the service answers a check without a value.
    scripted.upstream.route('POST', '/api/v1/check', (request) =>
      'value' in (request.body as object)
        ? { body: nullBody() }
        : { status: 400, body: { error: { status: 400, code: 'UNDEFINED_VALUE', message: 'undefined' } } },
    );
    const gateway = await scripted.gateway({
      TRUSTED_DOCUMENTS: manifest,
      TRUSTED_DOCUMENTS_MODE: 'enforce',
      FREE_RATE_LIMIT: '0',
    });
    const client = await connectMcp(gateway.origin);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(['pi_digits', 'check_two', 'infer_three']);
      const error = await client.callTool({ name: 'is_null', arguments: { value: 1 } }).catch((e) => e);
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
      const two = await callTool(client, 'check_two', { b: 0 });
      expect(two.isError).toBe(true);
      // `a` omitted is undefined: the first field fails (UNDEFINED_VALUE), the second answers.
      expect(toolCodes(two)).toEqual(['UNDEFINED_VALUE']);
      expect(two.structuredContent).toEqual({
        first: null,
        second: { actuallyNull: false, modelName: 'null-x-4o' },
      });
      const infer = await callTool(client, 'infer_three', { input: { desiredDigits: 3 } });
      expect(toolCodes(infer)).toEqual(['BAD_USER_INPUT']);
      expect(infer._meta?.errors?.[0]?.message).toMatch(/liabilityWaiverSigned/);
    } finally {
      await client.close();
    }
  });
});
