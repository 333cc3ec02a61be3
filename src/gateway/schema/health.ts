/**
 * `health: Health!`: both upstream health endpoints, probed concurrently, folded into OK / DEGRADED /
 * DOWN. Never fails as a whole: an unreachable upstream is data here, not an error.
 */

import type { UpstreamFieldExtension } from '../operation/operation-plan.js';
import type { HealthProbe, NullHealthBody, PiHealthBody } from '../upstream/types.js';
import { builder } from './builder.js';
import { fieldTable } from './field-table.js';
import { floatOrNull, intOrNull } from './numbers.js';

export type HealthStatusValue = 'OK' | 'DEGRADED' | 'DOWN';

export interface HealthShape {
  status: HealthStatusValue;
  nullCheck: HealthProbe<NullHealthBody>;
  pi: HealthProbe<PiHealthBody>;
}

export const HealthStatus = builder.enumType('HealthStatus', {
  description: 'Overall state of the upstreams as seen by the gateway.',
  values: {
    OK: { value: 'OK', description: 'Both upstreams reachable and reporting status "ok" or "healthy".' },
    DEGRADED: {
      value: 'DEGRADED',
      description: 'One upstream unreachable, or reachable but not reporting "ok"/"healthy".',
    },
    DOWN: { value: 'DOWN', description: 'Neither upstream reachable.' },
  } as const,
});

const HEALTHY = new Set(['ok', 'healthy']);

function isHealthy(probe: HealthProbe<{ status: string }>): boolean {
  return (
    probe.reachable && typeof probe.body?.status === 'string' && HEALTHY.has(probe.body.status.toLowerCase())
  );
}

/** OK = both reachable and healthy; DOWN = neither reachable; else DEGRADED. */
export function healthStatusOf(
  nullCheck: HealthProbe<{ status: string }>,
  pi: HealthProbe<{ status: string }>,
): HealthStatusValue {
  if (isHealthy(nullCheck) && isHealthy(pi)) return 'OK';
  if (!nullCheck.reachable && !pi.reachable) return 'DOWN';
  return 'DEGRADED';
}

export const UpstreamHealth = builder
  .interfaceRef<HealthProbe<{ status: string }>>('UpstreamHealth')
  .implement({
    description: "One upstream's health probe, as made by the gateway (HEALTH_TIMEOUT_MS per probe).",
    fields: (t) => ({
      reachable: t.boolean({
        description: 'Whether the health endpoint answered with a valid health body.',
        resolve: (p) => p.reachable,
      }),
      latencyMs: t.float({
        description: 'How long the probe took, in milliseconds.',
        resolve: (p) => floatOrNull(p.latencyMs) ?? 0,
      }),
      statusCode: t.int({
        nullable: true,
        description: 'HTTP status of the answer; null when there was none (refused, timed out).',
        resolve: (p) => intOrNull(p.statusCode),
      }),
      error: t.string({
        nullable: true,
        description: 'Why the upstream counts as unreachable; null when it is reachable.',
        resolve: (p) => p.error,
      }),
      breaker: t.string({
        nullable: true,
        description:
          "State of the gateway's circuit breaker for this upstream: closed, open, half-open or disabled.",
        resolve: (p) => p.breaker,
      }),
      status: t.string({
        nullable: true,
        description: 'Overall status as the service reports it (upstream `status`).',
        resolve: (p) => p.body?.status ?? null,
      }),
      apiVersion: t.string({
        description:
          'The API version the gateway calls this upstream with now: v1 or v2. It moves to v2 by itself when the upstream retires v1.',
        resolve: (p) => p.apiVersion,
      }),
      deprecated: t.boolean({
        description:
          'Whether the upstream marked the endpoint the gateway uses as deprecated (Deprecation header).',
        resolve: (p) => p.deprecated,
      }),
      sunset: t.string({
        nullable: true,
        description:
          'When the upstream says that deprecated endpoint goes away (its Sunset header, an HTTP date).',
        resolve: (p) => p.sunset,
      }),
    }),
  });

// The body fields of each upstream's health type: read from its health body as they are, null when
// the upstream was unreachable (no body). Field order is the tables' (the published schema's).
export const NullCheckHealth = builder.objectRef<HealthProbe<NullHealthBody>>('NullCheckHealth').implement({
  description:
    'Health of the null-check service (GET /api/v1/health); body fields are null when unreachable.',
  interfaces: [UpstreamHealth],
  fields: (t) => ({
    ...fieldTable(
      {
        nullDetectable: 'Whether null can currently be detected (upstream `null_detectable`).',
        undefinedDetectable: 'Whether undefined can currently be detected (upstream `undefined_detectable`).',
      },
      (name, description) =>
        t.boolean({ nullable: true, description, resolve: (p) => p.body?.[name] ?? null }),
    ),
    ...fieldTable(
      {
        clusterStatus: 'Free-text state of the inference cluster (upstream `cluster_status`).',
        philosophyConsultant: 'Carried as null by the service (upstream `philosophy_consultant`).',
        monthlyBurn: 'Monthly spending as a currency string (upstream `monthly_burn`).',
      },
      (name, description) =>
        t.string({ nullable: true, description, resolve: (p) => p.body?.[name] ?? null }),
    ),
  }),
});

export const PiHealth = builder.objectRef<HealthProbe<PiHealthBody>>('PiHealth').implement({
  description: 'Health of the pi-digits service (GET /api/v1/health); body fields are null when unreachable.',
  interfaces: [UpstreamHealth],
  fields: (t) => ({
    ...fieldTable(
      { piAvailable: 'Whether pi generation is available (upstream `pi_available`).' },
      (name, description) =>
        t.boolean({ nullable: true, description, resolve: (p) => p.body?.[name] ?? null }),
    ),
    ...fieldTable(
      {
        gpuCluster: 'Free-text state of the GPU cluster (upstream `gpu_cluster`).',
        monthlyBurnRate: 'Monthly spending as a currency string (upstream `monthly_burn_rate`).',
      },
      (name, description) =>
        t.string({ nullable: true, description, resolve: (p) => p.body?.[name] ?? null }),
    ),
  }),
});

export const Health = builder.objectRef<HealthShape>('Health').implement({
  description: 'Health of both upstreams, probed concurrently. This field never fails as a whole.',
  fields: (t) => ({
    status: t.field({ type: HealthStatus, description: 'OK, DEGRADED or DOWN.', resolve: (p) => p.status }),
    nullCheck: t.field({
      type: NullCheckHealth,
      description: 'The null-check service.',
      resolve: (p) => p.nullCheck,
    }),
    pi: t.field({ type: PiHealth, description: 'The pi-digits service.', resolve: (p) => p.pi }),
  }),
});

builder.queryField('health', (t) =>
  t.field({
    type: Health,
    description:
      'Probes both upstream health endpoints concurrently. Never fails: unreachable is reported as data.',
    // One health call per upstream; health costs nothing (no model answers it: @cost 0).
    extensions: { upstream: { calls: 2 } satisfies UpstreamFieldExtension },
    cost: 0,
    resolve: async (_root, _args, context) => {
      const [nullCheck, pi] = await context.loaders.health();
      return { status: healthStatusOf(nullCheck, pi), nullCheck, pi };
    },
  }),
);
