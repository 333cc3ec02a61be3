/**
 * A real `redis-server` (Debian package) on a free loopback port, started and stopped by the test
 * that needs it. `npm test` installs the package when it is missing (scripts/test-prerequisites.mjs),
 * so the Redis tests never skip: without the binary they fail, saying how to install it.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer, Socket, connect as tcpConnect } from 'node:net';

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? 'redis-server';

/** Whether `redis-server` can be run here. */
export function redisServerAvailable(): boolean {
  const probe = spawnSync(REDIS_SERVER_BIN, ['--version'], { encoding: 'utf8' });
  return probe.status === 0 && /Redis server v=/.test(probe.stdout);
}

/**
 * Fails the test file at once, with the way to install it, when `redis-server` cannot be run here:
 * the Redis tests are never skipped (scripts/test-prerequisites.mjs installs it for `npm test`).
 */
export function requireRedisServer(suite: string): void {
  if (redisServerAvailable()) return;
  throw new Error(
    `${suite}: redis-server not found (REDIS_SERVER_BIN=${REDIS_SERVER_BIN}). npm test installs it; ` +
      'by hand: sudo apt-get install -y redis-server.',
  );
}

/** A free TCP port on 127.0.0.1 (free when asked; the server binds it right after). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Sends PING until the server answers PONG, at most `tries` times 50 ms apart. */
export async function waitForPong(port: number, tries = 100): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    const pong = await new Promise<boolean>((resolve) => {
      const socket = new Socket();
      const done = (ok: boolean) => {
        socket.destroy();
        resolve(ok);
      };
      socket.setTimeout(500, () => done(false));
      socket.once('error', () => done(false));
      // NOAUTH: up, and asking for the password it was started with (requirepass).
      socket.once('data', (data) => done(/^(\+PONG|-NOAUTH)/.test(data.toString())));
      socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
    });
    if (pong) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

export interface RedisServer {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** Stops the server (SIGTERM) and waits for it to exit. Idempotent. */
  stop(): Promise<void>;
  /** Kills it at once (SIGKILL), as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same port (after stop or kill). */
  restart(): Promise<void>;
  /**
   * Freezes it (SIGSTOP) until `thaw()`: its sockets stay open and nothing is answered, for as long as
   * the test needs (a Redis too slow to answer, held rather than merely slowed for a while).
   */
  freeze(): void;
  /** Lets a frozen server go on (SIGCONT): it answers what it was sent meanwhile. */
  thaw(): void;
}

/**
 * Starts `redis-server` on a free loopback port, in memory only (no RDB, no AOF). `args`: more
 * command-line settings, e.g. `['--maxmemory', '8mb', '--maxmemory-policy', 'allkeys-lru']` for a
 * Redis configured as a cache.
 */
export async function startRedisServer(options: { args?: string[] } = {}): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | undefined;

  const start = async () => {
    const proc = spawn(
      REDIS_SERVER_BIN,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--protected-mode',
        'yes',
        ...(options.args ?? []),
      ],
      { stdio: 'ignore' },
    );
    child = proc;
    const ready = await Promise.race([waitForPong(port), once(proc, 'exit').then(() => false)]);
    if (!ready) {
      proc.kill('SIGKILL');
      throw new Error(`redis-server did not start on port ${port}`);
    }
  };

  const end = async (signal: NodeJS.Signals) => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = once(proc, 'exit');
    proc.kill(signal);
    proc.kill('SIGCONT'); // a frozen server acts on the signal once it runs again
    await exited;
  };

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    restart: async () => {
      await end('SIGTERM');
      await start();
    },
    freeze: () => {
      child?.kill('SIGSTOP');
    },
    thaw: () => {
      child?.kill('SIGCONT');
    },
  };
}

/** A loopback TCP proxy to a Redis port: what goes through it is cut off at once by `cut()`. */
export interface CuttableLink {
  /** `redis://` URL of the proxy. */
  readonly url: string;
  /** Stops the proxy and destroys every connection through it (a partition, or a process gone). */
  cut(): void;
}

/** Starts a loopback proxy to `port`: a client through it can be cut off from Redis mid-test. */
export async function startCuttableLink(port: number): Promise<CuttableLink> {
  const sockets = new Set<Socket>();
  const proxy = createServer((client) => {
    const upstream = tcpConnect(port, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const address = proxy.address();
  const proxyPort = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `redis://127.0.0.1:${proxyPort}`,
    cut() {
      proxy.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}
