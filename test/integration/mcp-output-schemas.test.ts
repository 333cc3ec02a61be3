/**
 * The output schemas of MCP tools (src/gateway/mcp/tool-schemas.ts) against real answers: a gateway
 * on loopback runs each tool's operation over `POST /graphql`, and its `data` (an MCP result's
 * `structuredContent`) is validated with ajv, as the MCP SDK's client does: with the SDK's own ajv
 * (draft-07, its options) against the schema the tools publish, and with a strict 2020-12 ajv
 * against the strictest form (only GraphQL's nullable fields null, nothing but the selection).
 * Answers come from the reference services, and from a scripted upstream for every union member
 * and the failures (partial data with field errors, which the SDK validates too).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { type DocumentNode, type OperationDefinitionNode, parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuiltInTool, builtInTools } from '../../src/gateway/mcp/built-in-tools.js';
import { toolOutputSchema } from '../../src/gateway/mcp/tool-schemas.js';
import { schema } from '../../src/gateway/schema/index.js';
import { type ScriptedUpstream, startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { startTestGateway, type TestGateway, testDigitEngine } from '../support/gateway.js';
import { codes, type GqlResult, gql } from '../support/graphql-client.js';
import { nullBody, nullHealth, piBody, piHealth } from '../support/upstream-bodies.js';

const sdkAjv = new Ajv({ strict: false, validateFormats: true, validateSchema: false, allErrors: true });
const strictAjv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });

interface Validators {
  /** The schema a tool publishes, with the SDK's ajv. */
  published: ValidateFunction;
  /** Only GraphQL's nullable fields null, no key outside the selection, strict 2020-12. */
  strictest: ValidateFunction;
}

function validatorsOf(document: DocumentNode, operation: OperationDefinitionNode): Validators {
  return {
    published: sdkAjv.compile(toolOutputSchema(schema, document, operation)),
    strictest: strictAjv.compile(
      toolOutputSchema(schema, document, operation, { nulls: 'as-graphql', closed: true }),
    ),
  };
}

const tools = new Map(builtInTools(schema).map((tool) => [tool.name, tool]));
const validators = new Map(
  [...tools.values()].map((tool) => [tool.name, validatorsOf(tool.document, tool.operation)]),
);

/** What the answers validated since the last `seen = covered()` covered. */
const covered = () => ({ typenames: new Set<string>(), codes: new Set<unknown>(), partial: 0, answers: 0 });
let seen = covered();

/** Checks `data` as the SDK's client would check structuredContent, and notes what it covered. */
function expectValid(check: Validators, result: GqlResult, what: string): void {
  expect(result.data, `${what}: ${result.text.slice(0, 300)}`).toBeTypeOf('object');
  expect(result.data).not.toBeNull();
  for (const [name, validate] of Object.entries(check)) {
    const ok = validate(result.data);
    expect(ok, `${what} (${name}): ${JSON.stringify(validate.errors)} in ${result.text.slice(0, 600)}`).toBe(
      true,
    );
  }
  seen.answers++;
  if (result.errors !== undefined) seen.partial++;
  for (const code of codes(result)) seen.codes.add(code);
  JSON.stringify(result.data, (key, value) => {
    if (key === '__typename') seen.typenames.add(value);
    return value;
  });
}

function tool(name: string): BuiltInTool {
  const found = tools.get(name);
  if (found === undefined) throw new Error(`no built-in tool ${name}`);
  return found;
}

/** Runs a built-in tool's operation over HTTP with `variables` as its arguments, and checks its data. */
async function call(gateway: TestGateway, name: string, variables: Record<string, unknown> = {}) {
  const built = tool(name);
  const result = await gql(gateway.url, built.source, { variables, operationName: built.operationName });
  expectValid(validators.get(name) as Validators, result, `${name} ${JSON.stringify(variables)}`);
  return result;
}

const BUDGETS = JSON.stringify({ default: { '1h': 5, '24h': 50 } });

describe('in front of the reference services', () => {
  let gateway: TestGateway;
  beforeAll(async () => {
    gateway = await startTestGateway({ env: { NULL_API_VERSION: 'v2', COST_BUDGETS: BUDGETS } });
  });
  afterAll(() => gateway?.close());

  it('every built-in tool, its answers and its refusals', async () => {
    for (const value of [null, 0, 'x', { a: [1, null] }, []]) {
      for (const temperature of [0, 0.6, 1]) await call(gateway, 'is_null', { value, temperature });
    }
    const undefinedValue = await call(gateway, 'is_null', {}); // asks about undefined: the service's 400
    expect(undefinedValue.data).toEqual({ isNull: null });
    expect(codes(await call(gateway, 'is_null', { value: 1, strictMode: true }))).toEqual(['TIER_FORBIDDEN']);
    for (const digits of [0, 3]) {
      for (const temperature of [0, 1]) await call(gateway, 'pi_digits', { digits, temperature });
    }
    await call(gateway, 'pi_digits', { digits: 3, model: 'PI_X_MINI', sponsored: true });
    for (const useChainOfThought of [true, false]) {
      await call(gateway, 'pi_inference', {
        input: { desiredDigits: 5, liabilityWaiverSigned: true, useChainOfThought, temperature: 0.9 },
      });
    }
    const unsigned = await call(gateway, 'pi_inference', {
      input: { desiredDigits: 5, liabilityWaiverSigned: false },
    });
    expect(codes(unsigned)).toEqual(['WAIVER_REQUIRED']);
    expect((await call(gateway, 'health')).data?.health.status).toBe('OK');
    expect((await call(gateway, 'budget')).data?.budget.windows).toHaveLength(2);
    expect((await call(gateway, 'model_scores')).data?.models.length).toBeGreaterThan(0);
  });

  it("the project's own operations (test/operations), as manifest tools", async () => {
    // One manifest of every file: fragments of one file are used by operations of another.
    const dir = join(import.meta.dirname, '..', 'operations');
    const source = readdirSync(dir)
      .filter((file) => file.endsWith('.graphql'))
      .map((file) => readFileSync(join(dir, file), 'utf8'))
      .join('\n');
    const document = parse(source);
    const variables: Record<string, Record<string, unknown>> = {
      IsNull: { value: null, temperature: 0.8 },
      IsNullUndefined: {},
      Inference: { input: { desiredDigits: 4, liabilityWaiverSigned: true, useChainOfThought: true } },
      RoutedPi: { digits: 2, minAccuracy: 0.5 },
      NullAndPi: { digits: 2 },
      Pi: { digits: 3, temperature: 1 },
    };
    let operations = 0;
    for (const operation of document.definitions) {
      if (operation.kind !== 'OperationDefinition') continue;
      const name = operation.name?.value as string;
      const result = await gql(gateway.url, source, {
        variables: variables[name] ?? {},
        operationName: name,
      });
      expectValid(validatorsOf(document, operation), result, name);
      operations++;
    }
    expect(operations).toBeGreaterThanOrEqual(6);
  });
});

describe('in front of a scripted upstream: every member, every failure', () => {
  let upstream: ScriptedUpstream;
  let gateway: TestGateway;
  const engine = testDigitEngine();
  const analysis = {
    school: 'apophatic',
    certainty: 0.4,
    argument: 'Null is the absence that proves presence.',
    references: ['Tractatus'],
    verdict_stability: 'wavering',
    depth: 3,
    unknown: { kept: true },
  };

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    upstream.route('POST', '/api/v2/null-or-not', (request) => {
      const body = request.body as { value?: unknown };
      if (!('value' in body)) {
        return {
          status: 400,
          body: { error: { status: 400, code: 'UNDEFINED_VALUE', message: 'undefined' } },
        };
      }
      switch (body.value) {
        case 'maybe':
          return { body: nullBody({ is_null: 'maybe', philosophical_analysis: analysis }) };
        case 'muse':
          return { body: nullBody({ is_null: { musing: 'Is anything null?' }, model: 'null-x-9000' }) };
        case 'paradox':
          return { status: 500, body: { error: { status: 500, code: 'NULL_PARADOX', message: 'paradox' } } };
        case 'broken':
          return { body: '{"is_null": tru' };
        default:
          return { body: nullBody({ is_null: body.value === null, philosophical_analysis: analysis }) };
      }
    });
    upstream.route('GET', '/pi/api/v1/pi', async (request) => {
      const digits = Number(request.query.digits ?? 3);
      if (digits === 7) return { status: 503 };
      const constant = Number(request.query.temperature ?? 0) > 0 ? 'e' : 'pi';
      const text = await engine.digits(constant, digits);
      return { body: piBody({ digits: text, precision: digits, sponsored_by: 'Pie' }) };
    });
    upstream.route('POST', '/pi/api/v1/inference', async (request) => {
      const { desired_digits: digits, temperature } = request.body as {
        desired_digits: number;
        temperature?: number;
      };
      if (digits === 7) return { destroy: true };
      const text = await engine.digits((temperature ?? 0) > 0 ? 'e' : 'pi', digits);
      return {
        body: { digits: text, chain_of_thought: 'I recall.', tokens_used: 20, cost: 'some doubloons' },
      };
    });
    upstream.route('GET', '/api/v1/health', { body: nullHealth });
    // Healthy, then down: both health shapes.
    upstream.route('GET', '/pi/api/v1/health', (_request, n) =>
      n === 0 ? { body: piHealth } : { status: 503 },
    );
    gateway = await startTestGateway({
      nullBaseUrl: upstream.url,
      piBaseUrl: `${upstream.url}/pi`,
      env: {
        NULL_API_VERSION: 'v2',
        PI_API_VERSION: 'v1',
        RETRY_MAX_ATTEMPTS: '1',
        BREAKER_THRESHOLD: '0',
        COST_BUDGETS: BUDGETS,
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  it('validates every union member and every partial answer', async () => {
    seen = covered();
    for (const value of [null, 1, 'maybe', 'muse'])
      await call(gateway, 'is_null', { value, temperature: 0.9 });
    for (const value of ['paradox', 'broken']) {
      const failed = await call(gateway, 'is_null', { value });
      expect(failed.data).toEqual({ isNull: null });
    }
    await call(gateway, 'is_null', {});
    for (const temperature of [0, 0.5]) await call(gateway, 'pi_digits', { digits: 4, temperature });
    expect((await call(gateway, 'pi_digits', { digits: 7 })).data).toEqual({ pi: null });
    for (const temperature of [0, 0.5]) {
      await call(gateway, 'pi_inference', {
        input: { desiredDigits: 4, liabilityWaiverSigned: true, temperature },
      });
    }
    await call(gateway, 'pi_inference', { input: { desiredDigits: 7, liabilityWaiverSigned: true } });
    expect((await call(gateway, 'health')).data?.health.status).toBe('OK');
    const degraded = await call(gateway, 'health');
    expect(degraded.data?.health).toMatchObject({ status: 'DEGRADED', pi: { reachable: false } });
    await call(gateway, 'budget');
    await call(gateway, 'model_scores');

    for (const member of [
      'NullVerdict',
      'MaybeVerdict',
      'ExistentialVerdict',
      'PiDigits',
      'EulerDigits',
      'PiInference',
      'EulerInference',
    ]) {
      expect(seen.typenames, member).toContain(member);
    }
    for (const code of ['NULL_PARADOX', 'UPSTREAM_BAD_RESPONSE', 'UNDEFINED_VALUE']) {
      expect(seen.codes, String(code)).toContain(code);
    }
    expect([...seen.codes].some((code) => String(code).startsWith('UPSTREAM_'))).toBe(true);
    expect(seen.partial).toBe(5); // the two failed checks, undefined, the failed pi and inference
  });
});
