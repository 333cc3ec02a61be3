/**
 * The node options the image runs the gateway with (the Dockerfile's `ENV NODE_OPTIONS`) and the
 * memory limit the Deployment gives it, for the checks of test/unit/deploy-manifests.test.ts and for
 * the benchmarks, which run the gateway on this machine as it runs in that container.
 *
 * Why a translation: `--max-old-space-size-percentage` is a share of the memory node finds available
 * (the container's cgroup limit, else the machine's). A benchmark process has no such limit, so
 * `nodeArgsUnderLimit` turns the share into the `--max-old-space-size` that node works out inside the
 * container (the limit in MiB × the share, as node's own option parser computes it).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { podSpecOf, programOf, quantity, readKubernetesDir } from './deploy-manifests.js';

export const DOCKERFILE = join(import.meta.dirname, '..', '..', 'Dockerfile');

/** The value of the Dockerfile's `ENV NODE_OPTIONS="..."` (one line, double quotes); throws when absent. */
export function imageNodeOptions(text: string = readFileSync(DOCKERFILE, 'utf8')): string {
  const match = /^ENV NODE_OPTIONS="([^"]*)"\s*$/m.exec(text);
  if (match?.[1] === undefined) throw new Error('the Dockerfile has no ENV NODE_OPTIONS="..." line');
  return match[1];
}

/** The gateway container of the Deployment: its NODE_OPTIONS (undefined when not given) and memory limit. */
export function gatewayDeploymentMemory(): { nodeOptions: string | undefined; limitBytes: number } {
  const { objects } = readKubernetesDir();
  for (const object of objects) {
    if (object.kind !== 'Deployment') continue;
    const container = podSpecOf(object)?.containers.find((c) => programOf(c) === 'gateway');
    if (container === undefined) continue;
    const limit = container.resources?.limits?.memory;
    if (limit === undefined) throw new Error(`${object.file}: the gateway container has no memory limit`);
    const nodeOptions = container.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
    return { nodeOptions, limitBytes: quantity(limit as string | number) };
  }
  throw new Error('no Deployment runs the gateway');
}

/**
 * `options` (a NODE_OPTIONS string) as node arguments for a process outside the container, whose
 * available memory is taken to be `limitBytes`: `--max-old-space-size-percentage=P` becomes
 * `--max-old-space-size=⌊limit in MiB × P / 100⌋`; every other option is kept as it is.
 */
export function nodeArgsUnderLimit(options: string, limitBytes: number): string[] {
  return options
    .split(/\s+/)
    .filter((arg) => arg !== '')
    .map((arg) => {
      const share = /^--max-old-space-size-percentage=(\d+(?:\.\d+)?)%?$/.exec(arg);
      if (share?.[1] === undefined) return arg;
      const limitMiB = Math.floor(limitBytes / 2 ** 20);
      return `--max-old-space-size=${Math.floor((limitMiB * Number(share[1])) / 100)}`;
    });
}

/** The image's node options, as the Deployment's container would apply them, for a process here. */
export function deployedNodeArgs(): string[] {
  return nodeArgsUnderLimit(imageNodeOptions(), gatewayDeploymentMemory().limitBytes);
}

/**
 * The environment the image gives the process besides NODE_OPTIONS that bears on memory: the
 * Dockerfile's `ENV MALLOC_ARENA_MAX=<n>` (glibc's malloc reads it at start), when there is one.
 */
export function imageEnvironment(text: string = readFileSync(DOCKERFILE, 'utf8')): Record<string, string> {
  const match = /^ENV MALLOC_ARENA_MAX=(\d+)\s*$/m.exec(text);
  return match?.[1] === undefined ? {} : { MALLOC_ARENA_MAX: match[1] };
}
