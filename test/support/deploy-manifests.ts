/**
 * Reading and checking the deployment files (deploy/kubernetes/, deploy/compose.yaml) for
 * test/unit/deploy-manifests.test.ts. The checks are functions of parsed objects, so the test can feed
 * them a broken copy and see them fail.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, type IContainer, type IPodSpec, Secret, Service } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { appSettings } from '../../src/config.js';
import { servicesCliSettings } from '../../src/services/settings.js';
import { OTEL_VARIABLES } from '../../src/shared/otel-variables.js';
import { settingEnvNames } from '../../src/shared/settings.js';

export const KUBERNETES_DIR = join(import.meta.dirname, '..', '..', 'deploy', 'kubernetes');
export const COMPOSE_FILE = join(import.meta.dirname, '..', '..', 'deploy', 'compose.yaml');

/** The image the manifests run (h-image's Dockerfile builds it). */
export const IMAGE = 'null-pi-gateway:latest';

/** One Kubernetes object as parsed from YAML, with the file it came from. */
export interface ManifestObject {
  file: string;
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** Parses a YAML text (every document), failing on any YAML error or warning rather than guessing. */
export function parseYamlDocuments(text: string, file: string): unknown[] {
  return parseAllDocuments(text, { merge: true, strict: true, prettyErrors: true })
    .map((doc) => {
      const problems = [...doc.errors, ...doc.warnings];
      if (problems.length > 0) throw new Error(`${file}: ${problems.map((p) => p.message).join('; ')}`);
      return doc.toJS({ maxAliasCount: 100 }) as unknown;
    })
    .filter((value) => value !== null && value !== undefined);
}

/** The kustomization and every object of the other YAML files of `dir`. */
export function readKubernetesDir(dir: string = KUBERNETES_DIR): {
  kustomization: Record<string, unknown>;
  files: string[];
  objects: ManifestObject[];
} {
  const files = readdirSync(dir)
    .filter((name) => /\.ya?ml$/.test(name) && name !== 'kustomization.yaml')
    .sort();
  const [kustomization] = parseYamlDocuments(
    readFileSync(join(dir, 'kustomization.yaml'), 'utf8'),
    'kustomization.yaml',
  );
  const objects: ManifestObject[] = [];
  for (const file of files) {
    for (const doc of parseYamlDocuments(readFileSync(join(dir, file), 'utf8'), file)) {
      objects.push({ ...(doc as ManifestObject), file });
    }
  }
  return { kustomization: kustomization as Record<string, unknown>, files, objects };
}

/** The kubernetes-models class of each kind the manifests may hold: any other kind is an error. */
const MODELS = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
} as const;

/** Validates one object against the Kubernetes API schema of its kind; the problems, or none. */
export function schemaProblems(object: ManifestObject): string[] {
  const key = `${object.apiVersion}/${object.kind}`;
  const Model = (MODELS as Record<string, (typeof MODELS)[keyof typeof MODELS]>)[key];
  if (Model === undefined) return [`${object.file}: no schema known for ${key}`];
  const { file: _file, apiVersion: _apiVersion, kind: _kind, ...data } = object;
  try {
    // biome-ignore lint/suspicious/noExplicitAny: each model takes its own kind's data; validate() checks it.
    new Model(data as any).validate();
    return [];
  } catch (error) {
    return [`${object.file} ${key} ${object.metadata?.name}: ${(error as Error).message}`];
  }
}

/** The pod spec of a workload (Deployment, StatefulSet), or undefined for other kinds. */
export function podSpecOf(object: ManifestObject): IPodSpec | undefined {
  if (object.kind !== 'Deployment' && object.kind !== 'StatefulSet') return undefined;
  const spec = object.spec as { template?: { spec?: IPodSpec } } | undefined;
  return spec?.template?.spec;
}

/** Which program a container of the project's image runs: the gateway or the reference services. */
export function programOf(container: IContainer): 'gateway' | 'services' | undefined {
  if (container.image?.split(':')[0] !== IMAGE.split(':')[0]) return undefined;
  return [...(container.command ?? []), ...(container.args ?? [])].some((arg) =>
    arg.includes('services/main.js'),
  )
    ? 'services'
    : 'gateway';
}

/** Node's own variables a manifest may give the gateway (the image sets NODE_OPTIONS: the Dockerfile). */
export const NODE_VARIABLES = ['NODE_OPTIONS'] as const;

/**
 * Every variable name the gateway knows: its settings groups, the standard OTel variables it
 * honours and node's own.
 */
export function gatewayVariableNames(): Set<string> {
  return new Set([...settingEnvNames(appSettings), ...OTEL_VARIABLES, ...NODE_VARIABLES]);
}

/** Every variable name `npm run services` knows. */
export function servicesVariableNames(): Set<string> {
  return settingEnvNames(servicesCliSettings);
}

export interface KnownNames {
  gateway: Set<string>;
  services: Set<string>;
}

/** Keys of a ConfigMap's data or a Secret's data and stringData. */
function keysOf(object: ManifestObject): string[] {
  const fields = ['data', 'stringData', 'binaryData'] as const;
  return fields.flatMap((field) => Object.keys((object[field] as Record<string, unknown> | undefined) ?? {}));
}

/**
 * Every variable a container of the project's image is given (its `env`, and every key of the
 * ConfigMaps and Secrets it takes whole with `envFrom`) that its program does not know, as
 * `<where>: <NAME>`.
 */
export function unknownKubernetesVariables(objects: ManifestObject[], known: KnownNames): string[] {
  const byRef = (kind: string, name: string | undefined) =>
    objects.find((o) => o.kind === kind && o.metadata.name === name);
  const out: string[] = [];
  for (const object of objects) {
    for (const container of podSpecOf(object)?.containers ?? []) {
      const program = programOf(container);
      if (program === undefined) continue;
      const where = `${object.kind}/${object.metadata.name} container ${container.name}`;
      const names: Array<[string, string]> = (container.env ?? []).map((e) => [where, e.name]);
      for (const source of container.envFrom ?? []) {
        const ref = source.configMapRef
          ? byRef('ConfigMap', source.configMapRef.name)
          : byRef('Secret', source.secretRef?.name);
        const refName = source.configMapRef?.name ?? source.secretRef?.name;
        if (ref === undefined) {
          out.push(`${where}: envFrom ${refName} is not in the manifests`);
          continue;
        }
        for (const key of keysOf(ref))
          names.push([`${ref.kind}/${ref.metadata.name}`, `${source.prefix ?? ''}${key}`]);
      }
      for (const [at, name] of names) if (!known[program].has(name)) out.push(`${at}: ${name}`);
    }
  }
  return [...new Set(out)];
}

/** A compose file's service, as far as the checks read it. */
export interface ComposeService {
  image?: string;
  command?: string[] | string;
  environment?: Record<string, string | number | boolean | null> | string[];
  [field: string]: unknown;
}

/** The names of a compose service's `environment` (map or `NAME=value` list form). */
export function composeEnvironmentNames(service: ComposeService): string[] {
  const env = service.environment;
  if (env === undefined) return [];
  if (Array.isArray(env)) return env.map((entry) => entry.split('=')[0] ?? entry);
  return Object.keys(env);
}

/** Which program a compose service of the project's image runs, as {@link programOf}. */
export function composeProgramOf(service: ComposeService): 'gateway' | 'services' | undefined {
  if (service.image?.split(':')[0] !== IMAGE.split(':')[0]) return undefined;
  const command = Array.isArray(service.command) ? service.command.join(' ') : (service.command ?? '');
  return command.includes('services/main.js') ? 'services' : 'gateway';
}

/** Every variable a compose service of the project's image is given that its program does not know. */
export function unknownComposeVariables(
  services: Record<string, ComposeService>,
  known: KnownNames,
): string[] {
  const out: string[] = [];
  for (const [name, service] of Object.entries(services)) {
    const program = composeProgramOf(service);
    if (program === undefined) continue;
    for (const variable of composeEnvironmentNames(service)) {
      if (!known[program].has(variable)) out.push(`compose service ${name}: ${variable}`);
    }
  }
  return out;
}

/** A Kubernetes resource quantity in base units (cores, bytes); throws on a form it does not know. */
export function quantity(value: string | number): number {
  if (typeof value === 'number') return value;
  const match = /^(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(value);
  if (!match) throw new Error(`not a quantity this check knows: ${value}`);
  const scale: Record<string, number> = {
    '': 1,
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
  };
  return Number(match[1]) * (scale[match[2] ?? ''] ?? Number.NaN);
}

/** A compose duration (`20s`, `1m30s`, `500ms`) in seconds. */
export function composeDurationSeconds(value: string): number {
  const units: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6 };
  let total = 0;
  let rest = value;
  while (rest.length > 0) {
    const match = /^(\d+(?:\.\d+)?)(h|ms|m|s|us)/.exec(rest);
    if (!match) throw new Error(`not a compose duration: ${value}`);
    total += Number(match[1]) * (units[match[2]!] ?? Number.NaN);
    rest = rest.slice(match[0].length);
  }
  return total;
}
