/**
 * The Redis deployments people run, on loopback ephemeral ports, for the tests of
 * docs/contract.md §9 (More than one machine): a 3-master Redis Cluster, and Sentinel (a primary,
 * one replica, three sentinels). Debian's `redis-server`, `redis-cli` and `redis-sentinel`; without
 * them the test fails at once with one line naming the package (`npm test` installs them,
 * scripts/test-prerequisites.mjs). Everything started is stopped by `stop()` (call it in afterAll).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, REDIS_SERVER_BIN, requireRedisServer, waitForPong } from './redis-server.js';
import { sleep } from './waits.js';

const REDIS_CLI_BIN = process.env.REDIS_CLI_BIN ?? 'redis-cli';
const REDIS_SENTINEL_BIN = process.env.REDIS_SENTINEL_BIN ?? 'redis-sentinel';

/** Fails at once, naming the Debian package, when `bin` cannot be run here. */
function requireBinary(suite: string, bin: string, debianPackage: string): void {
  const probe = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  if (probe.status === 0) return;
  throw new Error(
    `${suite}: ${bin} not found. npm test installs it (scripts/test-prerequisites.mjs); by hand: sudo apt-get install -y ${debianPackage}.`,
  );
}

/** One Redis process of a topology. */
export interface RedisNode {
  readonly port: number;
  readonly child: ChildProcess;
  /** SIGKILL, as a crash (or the OOM killer) would, and waits for the exit. */
  kill(): Promise<void>;
}

function spawnNode(bin: string, args: string[], port: number): RedisNode {
  const child = spawn(bin, args, { stdio: 'ignore' });
  return {
    port,
    child,
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    },
  };
}

async function started(node: RedisNode, what: string): Promise<void> {
  const ready = await Promise.race([waitForPong(node.port), once(node.child, 'exit').then(() => false)]);
  if (!ready) {
    await node.kill();
    throw new Error(`${what} did not start on port ${node.port}`);
  }
}

/** A client of one loopback port, for the tests' own checks (not the gateway's). */
export function directClient(port: number, password?: string): Redis {
  return new Redis({ host: '127.0.0.1', port, password, lazyConnect: true, maxRetriesPerRequest: 1 });
}

/** Asks `port` until `check` says yes, at most `tries` times `everyMs` apart. */
async function poll(
  port: number,
  check: (client: Redis) => Promise<boolean>,
  tries = 200,
  everyMs = 50,
  password?: string,
) {
  const client = directClient(port, password);
  client.on('error', () => {});
  try {
    await client.connect();
    for (let i = 0; i < tries; i++) {
      if (await check(client).catch(() => false)) return true;
      await sleep(everyMs);
    }
    return false;
  } finally {
    client.disconnect();
  }
}

export interface RedisCluster {
  /** `redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>` */
  readonly url: string;
  readonly nodes: readonly RedisNode[];
  /**
   * Starts one more master, joins it to the cluster and moves `slots` hash slots to it from the
   * others (`redis-cli --cluster add-node`, then `reshard`): the cluster's masters change.
   */
  addMaster(slots: number): Promise<RedisNode>;
  stop(): Promise<void>;
}

/** A node on loopback at `port`, its files in `dir`, memory only (no RDB, no AOF). */
const memoryNodeArgs = (port: number, dir: string): string[] => [
  '--port',
  String(port),
  '--bind',
  '127.0.0.1',
  '--dir',
  dir,
  '--save',
  '',
  '--appendonly',
  'no',
];

/**
 * A Redis Cluster of `masters` masters and no replicas (`redis-cli --cluster create`), each in
 * memory only (no RDB, no AOF), its cluster bus on a port of its own; resolves once every node says
 * `cluster_state:ok`. `args`: more settings for every node.
 */
export async function startRedisCluster(
  options: { masters?: number; args?: string[] } = {},
): Promise<RedisCluster> {
  requireRedisServer('redis cluster');
  requireBinary('redis cluster', REDIS_CLI_BIN, 'redis-tools');
  const dir = mkdtempSync(join(tmpdir(), 'redis-cluster-'));
  const nodes: RedisNode[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  const startNode = async (): Promise<RedisNode> => {
    const port = await freePort();
    const bus = await freePort();
    const node = spawnNode(
      REDIS_SERVER_BIN,
      [
        ...memoryNodeArgs(port, dir),
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(bus),
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        '2000',
        ...(options.args ?? []),
      ],
      port,
    );
    nodes.push(node);
    await started(node, 'redis-server (cluster node)');
    return node;
  };
  const cli = (args: string[], what: string) => {
    const run = spawnSync(REDIS_CLI_BIN, args, { encoding: 'utf8', timeout: 60_000 });
    if (run.status !== 0) throw new Error(`redis-cli ${what} failed: ${run.stdout}${run.stderr}`);
    return run.stdout;
  };
  const clusterOk = async (node: RedisNode) => {
    const ok = await poll(node.port, async (client) => /cluster_state:ok/.test(await client.cluster('INFO')));
    if (!ok) throw new Error(`cluster node ${node.port} never said cluster_state:ok`);
  };
  try {
    for (let i = 0; i < (options.masters ?? 3); i++) await startNode();
    cli(
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      '--cluster create',
    );
    for (const node of nodes) await clusterOk(node);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
    nodes,
    async addMaster(slots) {
      const [first] = nodes;
      if (first === undefined) throw new Error('no cluster');
      const node = await startNode();
      cli(
        ['--cluster', 'add-node', `127.0.0.1:${node.port}`, `127.0.0.1:${first.port}`],
        '--cluster add-node',
      );
      const client = directClient(node.port);
      let myId = '';
      try {
        await client.connect();
        myId = String(await client.cluster('MYID'));
      } finally {
        client.disconnect();
      }
      // Every node must know the newcomer before slots move to it.
      for (const other of nodes) {
        const knows = await poll(other.port, async (c) => String(await c.cluster('NODES')).includes(myId));
        if (!knows) throw new Error(`cluster node ${other.port} never learnt of ${node.port}`);
      }
      // The newcomer must see the cluster as up (else it refuses the keys migrated to it: CLUSTERDOWN),
      // and every node must agree on the configuration (the check says so), before the reshard starts.
      await clusterOk(node);
      let agreed = false;
      for (let i = 0; i < 40 && !agreed; i++) {
        const check = spawnSync(REDIS_CLI_BIN, ['--cluster', 'check', `127.0.0.1:${first.port}`], {
          encoding: 'utf8',
          timeout: 30_000,
        });
        agreed = check.status === 0 && !check.stdout.includes('[ERR]');
        if (!agreed) await sleep(250);
      }
      if (!agreed) throw new Error(`the cluster never agreed on its configuration after adding ${node.port}`);
      cli(
        [
          '--cluster',
          'reshard',
          `127.0.0.1:${first.port}`,
          '--cluster-from',
          'all',
          '--cluster-to',
          myId,
          '--cluster-slots',
          String(slots),
          '--cluster-yes',
        ],
        '--cluster reshard',
      );
      for (const each of nodes) await clusterOk(each);
      return node;
    },
    stop,
  };
}

export interface RedisSentinelSetup {
  /**
   * `redis+sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,127.0.0.1:<s3>/<name>`, with `:<password>@` when
   * the data nodes have one.
   */
  readonly url: string;
  /** The data nodes' password (requirepass and masterauth), if any; the sentinels have none. */
  readonly password: string | undefined;
  readonly name: string;
  /** The primary as started (killed by the test to fail over). */
  readonly primary: RedisNode;
  /** Its replica as started (the one the sentinels promote). */
  readonly replica: RedisNode;
  readonly sentinels: readonly RedisNode[];
  /** What the sentinels say the primary is now: its port, or undefined when they do not answer. */
  primaryPort(): Promise<number | undefined>;
  stop(): Promise<void>;
}

/**
 * A primary, one replica and three sentinels (quorum 2) watching it under `name`, with a short
 * `down-after-milliseconds` and `failover-timeout` so that a failover takes seconds. Resolves once
 * the replica is in sync and every sentinel knows the replica and the two other sentinels (until then
 * a failover could not be authorised).
 */
export async function startRedisSentinel(
  options: { name?: string; downAfterMs?: number; password?: string; args?: string[] } = {},
): Promise<RedisSentinelSetup> {
  const { password } = options;
  requireRedisServer('redis sentinel');
  requireBinary('redis sentinel', REDIS_SENTINEL_BIN, 'redis-sentinel');
  const name = options.name ?? 'gateway';
  const dir = mkdtempSync(join(tmpdir(), 'redis-sentinel-'));
  const nodes: RedisNode[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  const dataArgs = (port: number) => [
    ...memoryNodeArgs(port, dir),
    ...(password === undefined ? [] : ['--requirepass', password, '--masterauth', password]),
    ...(options.args ?? []),
  ];
  try {
    const primaryPort = await freePort();
    const primary = spawnNode(REDIS_SERVER_BIN, dataArgs(primaryPort), primaryPort);
    nodes.push(primary);
    await started(primary, 'redis-server (primary)');
    const replicaPort = await freePort();
    const replica = spawnNode(
      REDIS_SERVER_BIN,
      [...dataArgs(replicaPort), '--replicaof', '127.0.0.1', String(primaryPort)],
      replicaPort,
    );
    nodes.push(replica);
    await started(replica, 'redis-server (replica)');
    const synced = await poll(
      replicaPort,
      async (client) => /master_link_status:up/.test(await client.info('replication')),
      200,
      50,
      password,
    );
    if (!synced) throw new Error('the replica never synced with the primary');

    const sentinels: RedisNode[] = [];
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const config = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        config,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          'sentinel resolve-hostnames no',
          'sentinel announce-ip 127.0.0.1',
          `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
          ...(password === undefined ? [] : [`sentinel auth-pass ${name} ${password}`]),
          `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
          // A failed election is retried after twice this: short, so that a test does not wait for long.
          `sentinel failover-timeout ${name} 4000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      const sentinel = spawnNode(REDIS_SENTINEL_BIN, [config], port);
      nodes.push(sentinel);
      sentinels.push(sentinel);
      await started(sentinel, 'redis-sentinel');
    }
    for (const sentinel of sentinels) {
      const knows = await poll(
        sentinel.port,
        async (client) => {
          const replicas = (await client.call('SENTINEL', 'REPLICAS', name)) as unknown[];
          const others = (await client.call('SENTINEL', 'SENTINELS', name)) as unknown[];
          return replicas.length === 1 && others.length === 2;
        },
        400,
      );
      if (!knows)
        throw new Error(`sentinel ${sentinel.port} never learnt of the replica and the other sentinels`);
    }
    const primaryPortNow = async (): Promise<number | undefined> => {
      for (const sentinel of sentinels) {
        if (sentinel.child.exitCode !== null) continue;
        const client = directClient(sentinel.port);
        client.on('error', () => {});
        try {
          await client.connect();
          const address = (await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as string[] | null;
          if (address?.[1] !== undefined) return Number(address[1]);
        } catch {
          // the next sentinel
        } finally {
          client.disconnect();
        }
      }
      return undefined;
    };
    return {
      url: `redis+sentinel://${password === undefined ? '' : `:${encodeURIComponent(password)}@`}${sentinels
        .map((s) => `127.0.0.1:${s.port}`)
        .join(',')}/${name}`,
      password,
      name,
      primary,
      replica,
      sentinels,
      primaryPort: primaryPortNow,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
