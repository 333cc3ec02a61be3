/**
 * Every Yoga plugin of the gateway says how the fast path gives a JSON POST to /graphql what the
 * plugin gives it on Yoga's path (`FastPathCoverage` in yoga.ts), and its hooks are the reviewed ones.
 * A new plugin, or a new hook on one, fails here on purpose: the fast path runs no Yoga hook but
 * `onValidate`, so whoever adds it must decide (docs/performance.md, Adding a plugin), add its cases to
 * fast-path-equivalence.test.ts, and then update the table below.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createPlanner } from '../../src/gateway/operation-plan.js';
import { schema } from '../../src/gateway/schema/index.js';
import { type GatewayPlugin, type GatewayYogaOptions, gatewayPlugins } from '../../src/gateway/yoga.js';
import { createLogger } from '../../src/shared/logger.js';

/** A dependency the plugin factories must not touch while the plugins are made: any use throws. */
function untouched<T>(name: string): T {
  return new Proxy(
    {},
    {
      get(_target, key) {
        throw new Error(`${name}.${String(key)} used while making the plugins`);
      },
    },
  ) as T;
}

function pluginsOf(env: Record<string, string>): GatewayPlugin[] {
  const config = loadConfig({ NODE_ENV: 'test', ...env });
  const options: GatewayYogaOptions = {
    schema,
    server: config.server,
    limits: config.limits,
    production: false,
    deadlineMs: config.resilience.operationDeadlineMs,
    logger: createLogger({ level: 'silent' }),
    metrics: untouched('metrics'),
    reporter: untouched('reporter'),
    costControl: untouched('costControl'),
    compression: untouched('compression'),
    trusted: untouched('trusted'),
    plan: createPlanner(schema),
    readiness: {
      breaker: () => untouched<never>('readiness.breaker'),
      reachable: () => untouched<never>('readiness.reachable'),
    },
    context: untouched('context'),
  };
  return gatewayPlugins(options, new WeakMap());
}

const hooksOf = (entry: GatewayPlugin): string[] =>
  Object.entries(entry.plugin)
    .filter(([key, value]) => key.startsWith('on') && typeof value === 'function')
    .map(([key]) => key)
    .sort();

/** The reviewed hooks of each plugin (GraphiQL on, the default, and off). */
const REVIEWED: Record<string, string[]> = {
  'request-id': ['onRequest', 'onResponse'],
  'metrics-endpoint': ['onRequest'],
  readiness: ['onRequest', 'onYogaInit'],
  graphiql: ['onRequest'],
  'graphiql-off': ['onRequest'],
  'csrf-prevention': ['onRequestParse'],
  'request-shape-errors': ['onRequestParse'],
  // onResponse: the backstop that settles budget reservations of operations that made no result.
  operation: ['onExecute', 'onExecutionResult', 'onParams', 'onResponse'],
  // onPluginInit adds graphql-armor's validation rules: the fast path applies them through getEnveloped.
  'operation-limits': ['onExecute', 'onParse', 'onPluginInit', 'onValidate'],
  'cost-control': ['onExecute'],
  'request-error-codes': ['onExecute'],
  'trusted-documents': ['onParams'],
  // onResponse: compresses Yoga's answers as the fast path compresses its own (compression.ts).
  compression: ['onResponse'],
};

describe.each([
  ['GraphiQL on', {}],
  ['GraphiQL off', { GRAPHIQL: 'false' }],
])('the gateway plugins (%s)', (_label, env) => {
  const plugins = pluginsOf(env);

  it('each has a name and says how the fast path covers it', () => {
    expect(new Set(plugins.map((p) => p.name)).size).toBe(plugins.length);
    for (const { name, fastPath } of plugins) {
      expect(name).toMatch(/^[a-z-]+$/);
      if (fastPath.kind === 'not-its-requests') expect(fastPath.why.length, name).toBeGreaterThan(5);
      if (fastPath.kind === 'shared-code') expect(fastPath.shared.length, name).toBeGreaterThan(5);
    }
  });

  it('has only the reviewed hooks', () => {
    expect(Object.fromEntries(plugins.map((p) => [p.name, hooksOf(p)]))).toEqual(
      Object.fromEntries(plugins.map((p) => [p.name, REVIEWED[p.name]])),
    );
  });
});
