/**
 * schema.graphql is the printed Pothos schema (a stale file fails here), every type, field,
 * argument and enum value is described, and the contract's fixed names are all there.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/gateway/schema/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('schema.graphql', () => {
  it('is up to date with the Pothos schema (npm run schema:print)', async () => {
    // Run as the npm script runs it (tsx): one copy of graphql-js, exactly the committed bytes.
    const run = promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'scripts/print-schema.ts', '--check'],
      {
        cwd: root,
      },
    );
    // A stale file makes it exit 1 (the promise rejects, with the reason on stderr); fresh, it says nothing.
    await expect(run).resolves.toMatchObject({ stdout: '' });
  });
});

interface Described {
  name: string;
  description?: string | null | undefined;
}

describe('the schema', () => {
  const types = Object.values(schema.getTypeMap()).filter((t) => !t.name.startsWith('__'));
  const builtIn = new Set(['String', 'Int', 'Float', 'Boolean', 'ID']);

  it('describes every type, field, argument and enum value', () => {
    const missing: string[] = [];
    const check = (what: string, item: Described) => {
      if (!item.description?.trim()) missing.push(what);
    };
    for (const type of types) {
      if (builtIn.has(type.name)) continue;
      check(type.name, type);
      if ('getFields' in type) {
        for (const field of Object.values(type.getFields()) as Array<Described & { args?: Described[] }>) {
          check(`${type.name}.${field.name}`, field);
          for (const arg of field.args ?? []) check(`${type.name}.${field.name}(${arg.name})`, arg);
        }
      }
      if ('getValues' in type)
        for (const value of type.getValues()) check(`${type.name}.${value.name}`, value);
    }
    expect(missing).toEqual([]);
  });

  it('has the names the contract fixes', () => {
    const fields = (name: string) => {
      const type = schema.getType(name);
      return type && 'getFields' in type ? Object.keys(type.getFields()) : [];
    };
    expect(fields('Query')).toEqual(
      expect.arrayContaining(['isNull', 'pi', 'inference', 'health', 'models']),
    );
    // Contract §12: the scoreboard's fields, and minAccuracy on the three model-backed fields.
    expect(fields('ModelScore')).toEqual(
      expect.arrayContaining([
        'service',
        'model',
        'band',
        'answers',
        'correct',
        'accuracy',
        'accuracyLowerBound',
        'meanCostUsd',
        'meanLatencyMs',
      ]),
    );
    const query = schema.getQueryType()?.getFields();
    expect(query?.isNull?.args.map((a) => a.name)).toContain('minAccuracy');
    expect(query?.pi?.args.map((a) => a.name)).toContain('minAccuracy');
    expect(fields('NullCheck')).toEqual(
      expect.arrayContaining([
        'confidence',
        'model',
        'inferenceTimeMs',
        'gpuCostUsd',
        'expertsConsulted',
        'sponsoredBy',
        'disclaimer',
        'actuallyNull',
        'correct',
      ]),
    );
    expect(fields('NullVerdict')).toContain('isNull');
    expect(fields('ExistentialVerdict')).toEqual(expect.arrayContaining(['musing', 'raw']));
    expect(fields('ConstantDigits')).toEqual(
      expect.arrayContaining([
        'digits',
        'precision',
        'requestedDigits',
        'correctDigits',
        'confidence',
        'model',
        'inferenceTimeMs',
        'gpuCostUsd',
        'sponsoredBy',
        'disclaimer',
      ]),
    );
    expect(fields('InferenceInput').sort()).toEqual([
      'desiredDigits',
      'liabilityWaiverSigned',
      'minAccuracy',
      'model',
      'temperature',
      'useChainOfThought',
    ]);
    expect(fields('Inference')).toEqual(
      expect.arrayContaining([
        'digits',
        'precision',
        'correctDigits',
        'chainOfThought',
        'tokensUsed',
        'cost',
        'costUsd',
      ]),
    );
    expect(fields('Health')).toEqual(expect.arrayContaining(['status', 'nullCheck', 'pi']));
    const members = (name: string) => {
      const type = schema.getType(name);
      return type && 'getTypes' in type
        ? type
            .getTypes()
            .map((t) => t.name)
            .sort()
        : [];
    };
    expect(members('NullCheckResult')).toEqual(['ExistentialVerdict', 'MaybeVerdict', 'NullVerdict']);
    expect(members('PiResult')).toEqual(['EulerDigits', 'PiDigits']);
    expect(members('InferenceResult')).toEqual(['EulerInference', 'PiInference']);
    const values = (name: string) => {
      const type = schema.getType(name);
      return type && 'getValues' in type ? type.getValues().map((v) => [v.name, v.value]) : [];
    };
    expect(values('NullModel')).toEqual([
      ['NULL_X_4O', 'null-x-4o'],
      ['NULL_X_MINI', 'null-x-mini'],
      ['NULL_X_OPUS', 'null-x-opus'],
    ]);
    expect(values('PiModel')).toEqual([
      ['PI_X_4O', 'pi-x-4o'],
      ['PI_X_MINI', 'pi-x-mini'],
      ['PI_X_OPUS_ALMOST_CORRECT', 'pi-x-opus-almost-correct'],
    ]);
    expect(
      values('HealthStatus')
        .map(([n]) => n)
        .sort(),
    ).toEqual(['DEGRADED', 'DOWN', 'OK']);
    expect(String(schema.getQueryType()?.getFields().health?.type)).toBe('Health!');
    for (const f of ['isNull', 'pi', 'inference'])
      expect(String(schema.getQueryType()?.getFields()[f]?.type)).not.toMatch(/!$/);
  });
});
