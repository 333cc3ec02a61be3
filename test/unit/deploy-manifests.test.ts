/**
 * The deployment files (contract §6): deploy/kubernetes/ validates against the Kubernetes API
 * schemas (kubernetes-models) and is consistent (selectors, probes and ports, the grace period against
 * the shutdown bound, the security context, resources), deploy/compose.yaml has the same shape, and
 * every variable either names is a setting the program it configures knows, derived from the settings
 * groups themselves. Each check is also fed a broken copy, to show it can fail. Starts nothing: the
 * image itself is built and run by the container test.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { IContainer, IPodSpec } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { helpText, loadConfig } from '../../src/config.js';
import { servicesCliSettings, servicesHelpText } from '../../src/services/settings.js';
import { OTEL_VARIABLES } from '../../src/shared/otel-variables.js';
import { processSettings } from '../../src/shared/process-settings.js';
import { loadSettings } from '../../src/shared/settings.js';
import { shutdownBoundMs } from '../../src/shared/shutdown-watchdog.js';
import {
  COMPOSE_FILE,
  type ComposeService,
  composeDurationSeconds,
  composeEnvironmentNames,
  composeProgramOf,
  gatewayVariableNames,
  IMAGE,
  type KnownNames,
  type ManifestObject,
  parseYamlDocuments,
  podSpecOf,
  programOf,
  quantity,
  readKubernetesDir,
  schemaProblems,
  servicesVariableNames,
  unknownComposeVariables,
  unknownKubernetesVariables,
} from '../support/deploy-manifests.js';
import {
  gatewayDeploymentMemory,
  imageNodeOptions,
  nodeArgsUnderLimit,
} from '../support/image-node-options.js';

const { kustomization, files, objects } = readKubernetesDir();
const known: KnownNames = { gateway: gatewayVariableNames(), services: servicesVariableNames() };

function one(kind: string, name: string): ManifestObject {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  expect(found, `${kind}/${name}`).toHaveLength(1);
  return found[0]!;
}

const gatewayDeployment = one('Deployment', 'null-pi-gateway');
const gatewayPod = podSpecOf(gatewayDeployment)!;
const gatewayContainer = gatewayPod.containers.find((c) => programOf(c) === 'gateway')!;
const configMap = one('ConfigMap', 'null-pi-gateway');
const secret = one('Secret', 'null-pi-gateway');
const configData = configMap.data as Record<string, string>;
const secretData = secret.stringData as Record<string, string>;

/** A container port by number or by name, as probes and Services may name it. */
function portNumber(container: IContainer, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

const deepCopy = <T>(value: T): T => structuredClone(value);

describe('deploy/kubernetes: a kustomize base of plain manifests', () => {
  it('kustomization.yaml lists every file of the folder and only those, and transforms nothing', () => {
    expect(Object.keys(kustomization).sort()).toEqual(['apiVersion', 'kind', 'resources']);
    expect(kustomization.kind).toBe('Kustomization');
    expect([...(kustomization.resources as string[])].sort()).toEqual(files);
  });

  it('every object validates against the Kubernetes API schema of its kind', () => {
    expect(objects.length).toBeGreaterThanOrEqual(12);
    expect(objects.flatMap(schemaProblems)).toEqual([]);
    const kinds = new Set(objects.map((o) => `${o.apiVersion}/${o.kind}`));
    for (const kind of [
      'apps/v1/Deployment',
      'apps/v1/StatefulSet',
      'v1/Service',
      'v1/ConfigMap',
      'v1/Secret',
      'policy/v1/PodDisruptionBudget',
      'autoscaling/v2/HorizontalPodAutoscaler',
    ]) {
      expect(kinds).toContain(kind);
    }
  });

  it('the schema check fails on an invalid object and on a kind it has no schema for', () => {
    const broken = deepCopy(gatewayDeployment);
    podSpecOf(broken)!.containers[0]!.ports![0]!.containerPort = 'http' as unknown as number;
    expect(schemaProblems(broken).join()).toMatch(/containerPort must be integer/);
    expect(schemaProblems({ ...deepCopy(configMap), apiVersion: 'v1', kind: 'Ingress' })).toHaveLength(1);
  });

  it('names are unique per kind, and every workload selects its own pod template', () => {
    const keys = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const object of objects) {
      if (podSpecOf(object) === undefined) continue;
      const spec = object.spec as {
        selector: { matchLabels: Record<string, string> };
        template: { metadata: { labels: Record<string, string> } };
      };
      expect(spec.template.metadata.labels, object.metadata.name).toMatchObject(spec.selector.matchLabels);
    }
  });

  it('each Service selects the pods of exactly one workload, and its target ports are ports they declare', () => {
    for (const service of objects.filter((o) => o.kind === 'Service')) {
      const spec = service.spec as {
        selector: Record<string, string>;
        ports: Array<{ targetPort: number | string }>;
      };
      const selected = objects.filter((o) => {
        const labels = (
          o.spec as { template?: { metadata?: { labels?: Record<string, string> } } } | undefined
        )?.template?.metadata?.labels;
        return labels !== undefined && Object.entries(spec.selector).every(([k, v]) => labels[k] === v);
      });
      expect(
        selected.map((o) => o.metadata.name),
        service.metadata.name,
      ).toHaveLength(1);
      const container = podSpecOf(selected[0]!)!.containers[0]!;
      for (const port of spec.ports) {
        expect(
          portNumber(container, port.targetPort),
          `${service.metadata.name} ${port.targetPort}`,
        ).toBeDefined();
      }
    }
  });

  it('the gateway: 2+ replicas, the Service, the PodDisruptionBudget and the HPA all aim at it', () => {
    const spec = gatewayDeployment.spec as {
      replicas: number;
      selector: { matchLabels: Record<string, string> };
    };
    expect(spec.replicas).toBeGreaterThanOrEqual(2);
    const podLabels = (
      gatewayDeployment.spec as { template: { metadata: { labels: Record<string, string> } } }
    ).template.metadata.labels;
    const service = one('Service', 'null-pi-gateway').spec as { selector: Record<string, string> };
    expect(podLabels).toMatchObject(service.selector);

    const pdb = one('PodDisruptionBudget', 'null-pi-gateway').spec as {
      selector: { matchLabels: Record<string, string> };
      maxUnavailable?: number;
      minAvailable?: number;
    };
    expect(pdb.selector.matchLabels).toEqual(spec.selector.matchLabels);
    // It allows a drain (maxUnavailable ≥ 1, or minAvailable below the replica floor).
    expect((pdb.maxUnavailable ?? 0) >= 1 || (pdb.minAvailable ?? 0) < spec.replicas).toBe(true);

    const hpa = one('HorizontalPodAutoscaler', 'null-pi-gateway').spec as {
      scaleTargetRef: { apiVersion: string; kind: string; name: string };
      minReplicas: number;
      maxReplicas: number;
      metrics: Array<{
        type: string;
        resource?: { name: string; target: { type: string; averageUtilization?: number } };
      }>;
    };
    expect(hpa.scaleTargetRef).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: 'null-pi-gateway',
    });
    expect(hpa.minReplicas).toBeGreaterThanOrEqual(2);
    expect(hpa.maxReplicas).toBeGreaterThan(hpa.minReplicas);
    // The replicas that may spend a budget during a Redis outage, as the Deployment counts them.
    const { expectedReplicas } = loadConfig({ ...configData, ...secretData }).cost;
    expect(expectedReplicas).toBe(spec.replicas);
    expect(expectedReplicas).toBe(hpa.minReplicas);
    const cpu = hpa.metrics.find((m) => m.type === 'Resource' && m.resource?.name === 'cpu');
    expect(cpu?.resource?.target.type).toBe('Utilization');
    expect(gatewayContainer.resources?.requests?.cpu).toBeDefined(); // utilization is relative to it
  });

  it('probes: liveness GET /health, readiness GET /ready, on the port the gateway listens on and the Service targets', () => {
    const port = loadConfig({ ...configData, ...secretData }).server.port;
    expect(portNumber(gatewayContainer, 'http')).toBe(port);
    expect(gatewayContainer.livenessProbe?.httpGet?.path).toBe('/health');
    expect(gatewayContainer.readinessProbe?.httpGet?.path).toBe('/ready');
    for (const probe of [
      gatewayContainer.livenessProbe,
      gatewayContainer.readinessProbe,
      gatewayContainer.startupProbe,
    ]) {
      if (probe === undefined) continue;
      expect(portNumber(gatewayContainer, probe.httpGet?.port)).toBe(port);
    }
    const servicePorts = (
      one('Service', 'null-pi-gateway').spec as { ports: Array<{ targetPort: string | number }> }
    ).ports;
    for (const servicePort of servicePorts)
      expect(portNumber(gatewayContainer, servicePort.targetPort)).toBe(port);
  });

  it('the grace period outlasts the preStop delay plus the shutdown bound of SHUTDOWN_TIMEOUT_MS', () => {
    const settings = loadConfig({ ...configData, ...secretData });
    // One process per pod: the node:cluster primary has a longer watchdog margin.
    expect(settings.server.workers).toBe(1);
    const preStopSeconds = gatewayContainer.lifecycle?.preStop?.sleep?.seconds;
    expect(preStopSeconds).toBeGreaterThanOrEqual(1);
    const needed = preStopSeconds! + shutdownBoundMs(settings.process.shutdownTimeoutMs) / 1000;
    expect(gatewayPod.terminationGracePeriodSeconds).toBeGreaterThan(needed);

    // The same check on the reference services (no preStop: nothing balances in front of them).
    const services = podSpecOf(one('Deployment', 'null-pi-reference-services'))!;
    const servicesSettings = loadSettings({ process: processSettings }, {});
    expect(services.terminationGracePeriodSeconds).toBeGreaterThan(
      shutdownBoundMs(servicesSettings.process.shutdownTimeoutMs) / 1000,
    );
  });

  it('every container: non-root numeric user, read-only root, no escalation, no capability, RuntimeDefault seccomp, requests ≤ limits', () => {
    const checked: string[] = [];
    for (const object of objects) {
      const pod = podSpecOf(object);
      if (pod === undefined) continue;
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        const where = `${object.metadata.name}/${container.name}`;
        checked.push(where);
        expect(securityProblems(pod, container), where).toEqual([]);
        expect(resourceProblems(container), where).toEqual([]);
      }
      expect(pod.automountServiceAccountToken, object.metadata.name).toBe(false);
      // Service links would inject PI_PORT, REDIS_PORT and the like (tcp://…) into the environment.
      expect(pod.enableServiceLinks, object.metadata.name).toBe(false);
    }
    expect(checked.length).toBeGreaterThanOrEqual(4);
    // A writable /tmp in memory for the gateway, since its root is read-only.
    const tmp = gatewayContainer.volumeMounts?.find((m) => m.mountPath === '/tmp');
    expect(gatewayPod.volumes?.find((v) => v.name === tmp?.name)?.emptyDir?.medium).toBe('Memory');
  });

  it("memory: the Deployment gives the image's NODE_OPTIONS, and the heap they allow fits the limit with what is not heap", () => {
    const image = imageNodeOptions();
    const { nodeOptions, limitBytes } = gatewayDeploymentMemory();
    expect(nodeOptions).toBe(image);
    // What node makes of them inside the container: the old space as a share of the limit.
    const args = nodeArgsUnderLimit(image, limitBytes);
    const oldMiB = Number(
      /^--max-old-space-size=(\d+)$/.exec(args.find((a) => a.startsWith('--max-old-space-size=')) ?? '')?.[1],
    );
    const semiMiB = Number(
      /^--max-semi-space-size=(\d+)$/.exec(
        args.find((a) => a.startsWith('--max-semi-space-size=')) ?? '',
      )?.[1],
    );
    expect(oldMiB).toBeGreaterThan(0);
    expect(semiMiB).toBeGreaterThan(0);
    // The live heap may hold the response cache's 64 MiB and the APQ store's 16 MiB beside the ~45 MB
    // the gateway itself keeps (docs/benchmarks/2026-12-07-memory.md): the old space must leave room.
    expect(oldMiB).toBeGreaterThanOrEqual(45 + 64 + 16 + 32);
    // The young generation (two semi-spaces), and what the memory section measured outside V8's heap
    // (the binary's pages, code, malloc, stacks: ~120 MB at the peak), must fit beside it.
    expect(oldMiB + 2 * semiMiB + 128).toBeLessThanOrEqual(limitBytes / 2 ** 20);
    // And node takes them: the heap limit it reports is the old space plus the young generation.
    const run = spawnSync(
      process.execPath,
      [...args, '-e', 'process.stdout.write(String(require("node:v8").getHeapStatistics().heap_size_limit))'],
      { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } },
    );
    expect(run.stderr).toBe('');
    const limitMiB = Number(run.stdout) / 2 ** 20;
    expect(limitMiB).toBeGreaterThanOrEqual(oldMiB);
    expect(limitMiB).toBeLessThanOrEqual(oldMiB + 4 * semiMiB);
  });

  it('the security and resource checks fail on a container that breaks them', () => {
    const pod = deepCopy(gatewayPod);
    const container = pod.containers[0]!;
    container.securityContext!.readOnlyRootFilesystem = false;
    container.securityContext!.capabilities = { drop: ['NET_RAW'] };
    delete container.securityContext!.runAsUser;
    delete pod.securityContext!.runAsUser;
    expect(securityProblems(pod, container)).toEqual([
      'runAsUser is not a numeric non-root uid',
      'readOnlyRootFilesystem is not true',
      'capabilities.drop is not ALL',
    ]);
    container.resources = { requests: { cpu: '2', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } };
    expect(resourceProblems(container)).toEqual(['cpu: request 2 > limit 1']);
  });

  it('the two Redis roles of §9: budgets never evict and persist, the cache evicts within a maxmemory', () => {
    const budgets = redisArgs(one('StatefulSet', 'null-pi-redis-budgets'));
    expect(budgets.get('--maxmemory-policy')).toBe('noeviction');
    expect(budgets.get('--appendonly')).toBe('yes');
    const cache = redisArgs(one('Deployment', 'null-pi-redis-cache'));
    expect(cache.get('--maxmemory-policy')).toBe('allkeys-lru');
    expect(quantity(cache.get('--maxmemory')!.replace(/mb$/i, 'Mi'))).toBeGreaterThan(0);

    // The gateway's URLs point at them, on the ports their Services expose.
    const budgetsUrl = new URL(secretData.REDIS_URL!);
    const cacheUrl = new URL(secretData.REDIS_CACHE_URL!);
    expect(budgetsUrl.hostname).toBe('null-pi-redis-budgets');
    expect(cacheUrl.hostname).toBe('null-pi-redis-cache');
    for (const url of [budgetsUrl, cacheUrl]) {
      const ports = (one('Service', url.hostname).spec as { ports: Array<{ port: number }> }).ports;
      expect(ports.map((p) => p.port)).toContain(Number(url.port));
      expect(url.password, 'credentials in the user-info').not.toBe('');
    }
    // …with the passwords the servers require.
    const redisSecret = one('Secret', 'null-pi-redis').stringData as Record<string, string>;
    expect(decodeURIComponent(budgetsUrl.password)).toBe(redisSecret['budgets-password']);
    expect(decodeURIComponent(cacheUrl.password)).toBe(redisSecret['cache-password']);
  });

  it('the upstream URLs point at the reference services on the ports they listen on', () => {
    const settings = loadConfig({ ...configData, ...secretData });
    const services = podSpecOf(one('Deployment', 'null-pi-reference-services'))!.containers[0]!;
    const env = Object.fromEntries((services.env ?? []).map((e) => [e.name, e.value ?? 'from-secret']));
    const servicesSettings = loadSettings(servicesCliSettings, {
      ...env,
      API_KEYS: undefined,
      REDIS_URL: undefined,
    });
    for (const [url, port] of [
      [settings.upstreams.nullBaseUrl, servicesSettings.services.nullPort],
      [settings.upstreams.piBaseUrl, servicesSettings.services.piPort],
    ] as const) {
      const parsed = new URL(url!);
      expect(parsed.hostname).toBe('null-pi-reference-services');
      expect(Number(parsed.port)).toBe(port);
      expect(services.ports?.map((p) => p.containerPort)).toContain(port);
    }
  });

  it('every variable a manifest gives the gateway or the services is a setting it knows, with a valid value', () => {
    expect(unknownKubernetesVariables(objects, known)).toEqual([]);
    // Values too: the ConfigMap and Secret together are a configuration the gateway accepts.
    expect(() => loadConfig({ ...configData, ...secretData })).not.toThrow();
  });

  it('the variable check fails on a renamed setting, in the ConfigMap, the Secret or a container env', () => {
    const renamed = deepCopy(objects);
    const map = renamed.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'null-pi-gateway')!;
    const data = map.data as Record<string, string>;
    data.SHUTDOWN_TIMEOUT_SECONDS = data.SHUTDOWN_TIMEOUT_MS!;
    delete data.SHUTDOWN_TIMEOUT_MS;
    const keys = renamed.find((o) => o.kind === 'Secret' && o.metadata.name === 'null-pi-gateway')!;
    (keys.stringData as Record<string, string>).REDIS_BUDGETS_URL = 'redis://x:6379';
    const services = podSpecOf(
      renamed.find((o) => o.metadata.name === 'null-pi-reference-services' && o.kind === 'Deployment')!,
    )!;
    services.containers[0]!.env!.push({ name: 'NULL_CHECK_PORT', value: '4001' });
    expect(unknownKubernetesVariables(renamed, known)).toEqual([
      'ConfigMap/null-pi-gateway: SHUTDOWN_TIMEOUT_SECONDS',
      'Secret/null-pi-gateway: REDIS_BUDGETS_URL',
      'Deployment/null-pi-reference-services container services: NULL_CHECK_PORT',
    ]);
    // A gateway setting given to the services is unknown there, and the other way round.
    expect(known.services.has('NULL_BASE_URL')).toBe(false);
    expect(known.gateway.has('NULL_BASE_URL')).toBe(true);
  });

  it('the known names come from the settings groups and the documented OpenTelemetry variables', () => {
    for (const name of ['PORT', 'SHUTDOWN_TIMEOUT_MS', 'REDIS_URL', 'REDIS_CACHE_URL', 'NULL_BASE_URL'])
      expect(known.gateway).toContain(name);
    for (const name of OTEL_VARIABLES) expect(known.gateway).toContain(name);
    expect(known.gateway.has('OTEL_LOGS_EXPORTER')).toBe(false);
    for (const name of ['NULL_PORT', 'PI_PORT', 'REDIS_URL', 'SHUTDOWN_TIMEOUT_MS'])
      expect(known.services).toContain(name);
  });

  it('every name the deployment files may use is listed by --help (npm start, npm run services)', () => {
    const gatewayHelp = helpText().split(/\s+/);
    const servicesHelp = servicesHelpText().split(/\s+/);
    for (const name of known.gateway) expect(gatewayHelp, name).toContain(name);
    for (const name of known.services) expect(servicesHelp, name).toContain(name);
  });
});

describe('deploy/compose.yaml: the local stack', () => {
  const [compose] = parseYamlDocuments(readFileSync(COMPOSE_FILE, 'utf8'), 'compose.yaml') as [
    { services: Record<string, ComposeService>; volumes?: Record<string, unknown>; [key: string]: unknown },
  ];
  const services = compose.services;
  const gateways = Object.entries(services).filter(([, s]) => composeProgramOf(s) === 'gateway');
  const referenceServices = Object.entries(services).filter(([, s]) => composeProgramOf(s) === 'services');
  const envOf = (service: ComposeService) => service.environment as Record<string, string>;

  it('has the shape of the compose specification this file uses', () => {
    for (const key of Object.keys(compose))
      expect(['name', 'services', 'volumes', 'networks']).toContain(key.startsWith('x-') ? 'name' : key);
    const allowed = new Set([
      'image',
      'build',
      'command',
      'user',
      'environment',
      'ports',
      'volumes',
      'tmpfs',
      'read_only',
      'cap_drop',
      'security_opt',
      'healthcheck',
      'depends_on',
      'stop_grace_period',
    ]);
    for (const [name, service] of Object.entries(services)) {
      expect(
        Object.keys(service).filter((k) => !allowed.has(k)),
        name,
      ).toEqual([]);
      expect(typeof service.image, name).toBe('string');
      expect(Array.isArray(service.command), `${name}: command in exec form`).toBe(true);
      const health = service.healthcheck as { test: string[] } | undefined;
      expect(health?.test[0], `${name}: healthcheck`).toBe('CMD');
      for (const dependency of Object.keys((service.depends_on as Record<string, unknown>) ?? {}))
        expect(Object.keys(services)).toContain(dependency);
      for (const volume of (service.volumes as string[] | undefined) ?? []) {
        const source = volume.split(':')[0]!;
        if (!source.startsWith('.') && !source.startsWith('/'))
          expect(Object.keys(compose.volumes ?? {})).toContain(source);
      }
      // Hardened like the pods: read-only root, a tmpfs /tmp, every capability dropped, a numeric user.
      expect(service.read_only, name).toBe(true);
      expect(service.tmpfs, name).toContain('/tmp');
      expect(service.cap_drop, name).toEqual(['ALL']);
      expect(service.user, name).toMatch(/^[1-9]\d*:\d+$/);
    }
  });

  it("builds the project's image from the repository's Dockerfile: `compose up` works on a fresh clone", () => {
    const ours = Object.entries(services).filter(([, s]) => composeProgramOf(s) !== undefined);
    expect(ours.length).toBe(3);
    for (const [name, service] of ours) {
      const build = service.build as { context?: string; dockerfile?: string } | undefined;
      expect(build?.context, `${name}: build.context`).toBeTypeOf('string');
      const context = resolve(dirname(COMPOSE_FILE), build?.context as string);
      expect(context, name).toBe(resolve(import.meta.dirname, '..', '..'));
      expect(existsSync(join(context, build?.dockerfile ?? 'Dockerfile')), `${name}: Dockerfile`).toBe(true);
      // Built under the tag the Kubernetes manifests run.
      expect(service.image, name).toBe(IMAGE);
    }
    // Nothing else is built: the Redis servers are their upstream images.
    for (const [name, service] of Object.entries(services))
      if (composeProgramOf(service) === undefined) expect(service.build, name).toBeUndefined();
  });

  it('two gateway replicas published on 127.0.0.1 only, in front of the services container', () => {
    expect(gateways.length).toBe(2);
    const published = gateways.flatMap(([, s]) => s.ports as string[]);
    for (const port of published) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    expect(new Set(published.map((p) => p.split(':')[1])).size).toBe(published.length);
    for (const [name, service] of Object.entries(services))
      if (composeProgramOf(service) !== 'gateway') expect(service.ports, name).toBeUndefined();

    expect(referenceServices).toHaveLength(1);
    const [servicesName, servicesService] = referenceServices[0]!;
    const servicesConfig = loadSettings(servicesCliSettings, envOf(servicesService));
    for (const [, gateway] of gateways) {
      const config = loadConfig(envOf(gateway));
      expect(config.cost.expectedReplicas).toBe(gateways.length);
      expect(`${config.server.port}`).toBe((gateway.ports as string[])[0]!.split(':')[2]);
      // Its health check asks the port it listens on.
      expect((gateway.healthcheck as { test: string[] }).test.join(' ')).toContain(
        `127.0.0.1:${config.server.port}/health`,
      );
      for (const [url, port] of [
        [config.upstreams.nullBaseUrl, servicesConfig.services.nullPort],
        [config.upstreams.piBaseUrl, servicesConfig.services.piPort],
      ] as const) {
        expect(new URL(url!).hostname).toBe(servicesName);
        expect(Number(new URL(url!).port)).toBe(port);
      }
      // Stopped after the drain, never during it.
      expect(composeDurationSeconds(gateway.stop_grace_period as string)).toBeGreaterThan(
        shutdownBoundMs(config.process.shutdownTimeoutMs) / 1000,
      );
    }
  });

  it('the two Redis roles: budgets noeviction with an append-only file, the cache allkeys-lru with a maxmemory', () => {
    const [, gateway] = gateways[0]!;
    const config = loadConfig(envOf(gateway));
    const budgets = services[new URL(config.redis.redisUrl!).hostname]!;
    const cache = services[new URL(config.cache.redisCacheUrl!).hostname]!;
    const args = (service: ComposeService) => argMap(service.command as string[]);
    expect(args(budgets).get('--maxmemory-policy')).toBe('noeviction');
    expect(args(budgets).get('--appendonly')).toBe('yes');
    expect(args(cache).get('--maxmemory-policy')).toBe('allkeys-lru');
    expect(args(cache).get('--maxmemory')).toMatch(/^\d+mb$/);
    // The services' rate limits on the Redis that never evicts.
    const [, servicesService] = referenceServices[0]!;
    expect(envOf(servicesService).REDIS_URL).toBe(config.redis.redisUrl);
  });

  it('every variable is a setting its program knows, with a valid value', () => {
    expect(unknownComposeVariables(services, known)).toEqual([]);
    for (const [, gateway] of gateways) expect(() => loadConfig(envOf(gateway))).not.toThrow();
    for (const [, s] of referenceServices)
      expect(() => loadSettings(servicesCliSettings, envOf(s))).not.toThrow();
    expect(composeEnvironmentNames(gateways[0]![1])).toContain('REDIS_CACHE_URL');
  });

  it('the variable check fails on a renamed setting', () => {
    const renamed = deepCopy(services);
    const [gatewayName] = gateways[0]!;
    const env = envOf(renamed[gatewayName]!);
    env.REDIS_CACHE = env.REDIS_CACHE_URL!;
    delete env.REDIS_CACHE_URL;
    const [servicesName] = referenceServices[0]!;
    envOf(renamed[servicesName]!).PI_BASE_URL = 'http://x';
    expect(unknownComposeVariables(renamed, known)).toEqual([
      `compose service ${gatewayName}: REDIS_CACHE`,
      `compose service ${servicesName}: PI_BASE_URL`,
    ]);
  });
});

/** What is wrong with a container's effective security context (its own fields over the pod's). */
function securityProblems(pod: IPodSpec, container: IContainer): string[] {
  const own = container.securityContext ?? {};
  const podLevel = pod.securityContext ?? {};
  const problems: string[] = [];
  if ((own.runAsNonRoot ?? podLevel.runAsNonRoot) !== true) problems.push('runAsNonRoot is not true');
  const uid = own.runAsUser ?? podLevel.runAsUser;
  if (typeof uid !== 'number' || uid <= 0) problems.push('runAsUser is not a numeric non-root uid');
  if (own.readOnlyRootFilesystem !== true) problems.push('readOnlyRootFilesystem is not true');
  if (own.allowPrivilegeEscalation !== false) problems.push('allowPrivilegeEscalation is not false');
  if (own.privileged === true) problems.push('privileged');
  const caps = own.capabilities;
  if (caps?.drop?.length !== 1 || caps.drop[0] !== 'ALL') problems.push('capabilities.drop is not ALL');
  if ((caps?.add ?? []).length > 0) problems.push('capabilities added');
  if ((own.seccompProfile ?? podLevel.seccompProfile)?.type !== 'RuntimeDefault')
    problems.push('seccompProfile is not RuntimeDefault');
  return problems;
}

/** What is wrong with a container's resources: cpu and memory requested and limited, requests ≤ limits. */
function resourceProblems(container: IContainer): string[] {
  const problems: string[] = [];
  for (const resource of ['cpu', 'memory'] as const) {
    const request = container.resources?.requests?.[resource];
    const limit = container.resources?.limits?.[resource];
    if (request === undefined || limit === undefined) {
      problems.push(`${resource}: no request or no limit`);
      continue;
    }
    if (quantity(request) > quantity(limit))
      problems.push(`${resource}: request ${request} > limit ${limit}`);
  }
  return problems;
}

/** `--flag value` pairs of a Redis server's arguments. */
function argMap(args: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg.startsWith('--')) out.set(arg, args[i + 1] ?? '');
  }
  return out;
}

function redisArgs(workload: ManifestObject): Map<string, string> {
  const container = podSpecOf(workload)!.containers[0]!;
  expect(container.image).toMatch(/^redis:/);
  return argMap([...(container.command ?? []), ...(container.args ?? [])]);
}
