/**
 * The first step of `npm test`: makes sure this machine has what the suite needs, or says in one line
 * why it cannot, so that the README's `npm ci && npm test` passes on a fresh machine with nothing
 * installed by hand, and never skips a part of the suite in silence.
 *
 * - The runtime: npm scripts run on `node_modules/.bin/node` (Node 24 LTS, installed by `npm ci` from
 *   the registry's official binaries); the oldest supported line is 22.15. Anything older fails here.
 * - Debian packages: Chromium (the GraphiQL browser tests), redis-server and redis-sentinel (the
 *   scale-out and Sentinel tests; redis-cli comes with redis-tools, which both depend on), podman with
 *   runc, netavark and iptables (the container image test: runc because crun fails on some kernels'
 *   cgroups, netavark and iptables for published ports, which podman only recommends or suggests) and
 *   debootstrap with Debian's archive keyring (that test assembles its base image from Debian's
 *   packages). When some are missing and this user may install packages (root, or passwordless sudo)
 *   and apt-get exists, they are installed in one apt-get call, bounded in time; otherwise the run
 *   stops with the command that installs them. CHROMIUM_BIN and REDIS_SERVER_BIN name binaries
 *   elsewhere (the tests read the same variables).
 *
 * Plain JavaScript on Node's built-ins only: it must run before anything else has been checked.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';

const OLDEST = [22, 15];
/** Longest wait for one apt-get step, in seconds: a stuck mirror must not eat CI's time budget. */
const APT_TIMEOUT_S = 300;

const say = (line) => process.stdout.write(`test prerequisites: ${line}\n`);
const fail = (line) => {
  process.stderr.write(`npm test: ${line}\n`);
  process.exit(1);
};

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < OLDEST[0] || (major === OLDEST[0] && minor < OLDEST[1])) {
  fail(
    `Node ${process.versions.node} is not supported (Node 24 LTS, or 22.15+). npm ci installs Node 24 into ` +
      `node_modules/.bin on Linux x64/arm64 and Windows x64; elsewhere install Node 24 (see .nvmrc).`,
  );
}

const executable = (path) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};
const onPath = (name) => spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).status === 0;
/** On PATH, or in the sbin directory Debian puts it in (a non-root PATH often lacks /usr/sbin). */
const inSbinOrPath = (name, sbin) => onPath(name) || executable(`${sbin}/${name}`);

/** What the suite needs: how to find it, and the Debian package that provides it. */
const needs = [
  {
    what: 'chromium',
    variable: 'CHROMIUM_BIN',
    found: () => executable(process.env.CHROMIUM_BIN || '/usr/bin/chromium'),
    pkg: 'chromium',
  },
  {
    what: 'redis-server',
    variable: 'REDIS_SERVER_BIN',
    found: () =>
      process.env.REDIS_SERVER_BIN ? executable(process.env.REDIS_SERVER_BIN) : onPath('redis-server'),
    pkg: 'redis-server',
  },
  { what: 'redis-sentinel', found: () => onPath('redis-sentinel'), pkg: 'redis-sentinel' },
  { what: 'podman', found: () => onPath('podman'), pkg: 'podman' },
  { what: 'runc', found: () => inSbinOrPath('runc', '/usr/sbin'), pkg: 'runc' },
  { what: 'netavark', found: () => executable('/usr/lib/podman/netavark'), pkg: 'netavark' },
  { what: 'iptables', found: () => inSbinOrPath('iptables', '/usr/sbin'), pkg: 'iptables' },
  { what: 'debootstrap', found: () => inSbinOrPath('debootstrap', '/usr/sbin'), pkg: 'debootstrap' },
  {
    what: "Debian's archive keyring",
    found: () => existsSync('/usr/share/keyrings/debian-archive-keyring.gpg'),
    pkg: 'debian-archive-keyring',
  },
];

const missing = needs.filter((need) => !need.found());
if (missing.length === 0) {
  say(`Node ${process.versions.node}; ${needs.map((need) => need.pkg).join(', ')} present`);
  process.exit(0);
}

const packages = missing.map((need) => need.pkg);
const variables = missing.flatMap((need) => (need.variable ? [need.variable] : []));
const howTo =
  `run 'sudo apt-get install -y --no-install-recommends ${packages.join(' ')}' ` +
  `${variables.length > 0 ? `(or set ${variables.join(' / ')} to the binary) ` : ''}then npm test again`;
const root = process.getuid?.() === 0;
const sudo = !root && onPath('sudo') && spawnSync('sudo', ['-n', 'true']).status === 0;
if (!onPath('apt-get') || (!root && !sudo)) {
  fail(`the tests need ${packages.join(' and ')}, missing here and not installable by this user: ${howTo}.`);
}

const apt = (args) => {
  const command = [...(sudo ? ['sudo', '-n'] : []), 'timeout', String(APT_TIMEOUT_S), 'apt-get', ...args];
  const run = spawnSync(command[0], command.slice(1), {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
  });
  return { ok: run.status === 0, error: (run.stderr ?? '').trim().split('\n').at(-1) ?? '' };
};

const started = Date.now();
say(`installing ${packages.join(' ')} with apt-get (missing)`);
// A fresh machine has no package lists yet: update first, then install.
const updated = apt(['update', '-qq']);
const installed = updated.ok
  ? apt(['install', '-y', '-qq', '--no-install-recommends', ...packages])
  : updated;
if (!installed.ok) {
  fail(`could not install ${packages.join(' ')} (${installed.error || 'apt-get failed'}): ${howTo}.`);
}
const still = missing.filter((need) => !need.found());
if (still.length > 0) {
  const names = still.map(
    (need) =>
      `${need.what}${need.variable && process.env[need.variable] ? ` (${need.variable}=${process.env[need.variable]})` : ''}`,
  );
  fail(`apt-get installed ${packages.join(' ')}, but ${names.join(' and ')} is still not found: ${howTo}.`);
}
say(`installed ${packages.join(' ')} in ${Math.round((Date.now() - started) / 1000)} s`);
