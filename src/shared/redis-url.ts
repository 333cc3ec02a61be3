/**
 * Redis by URL, for every process of the project (REDIS_URL, REDIS_CACHE_URL): the URL forms people
 * run Redis with, parsed once into what ioredis needs, so the gateway's shared state and the reference
 * services' rate limits connect alike. ioredis speaks Sentinel and Cluster itself: this module only
 * turns a URL into its options.
 *
 * | URL | Topology |
 * | --- | --- |
 * | `redis://[user:password@]host[:port][/db]` | one server (`single`) |
 * | `rediss://…` | the same over TLS |
 * | `redis+sentinel://[user:password@]host[:port][,host[:port]…]/<master name>[/db]` | Sentinel: the sentinels' addresses, then the name they monitor |
 * | `redis+cluster://[user:password@]host[:port][,host[:port]…]` | Redis Cluster: a few of its nodes (the others are discovered) |
 * | `rediss+sentinel://…`, `rediss+cluster://…` | the same over TLS (data nodes and sentinels) |
 *
 * Credentials: the user-info is for the data nodes (the primary and its replicas, every Cluster node),
 * as `redis://` has it. Sentinels usually run without a password; one that has its own is given by the
 * query parameters `sentinelUsername` and `sentinelPassword` (percent-encoded); any other parameter
 * of a Sentinel or Cluster URL is an error, so that a typo is not silently ignored. A one-server URL
 * goes to ioredis as it is, its query parameters (ioredis options, e.g. `?family=6`) included, as
 * before Sentinel and Cluster were supported.
 *
 * Errors are one line naming what is wrong, never the URL itself (it may carry a password).
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';

/** Which kind of Redis deployment a URL names. */
export type RedisTopology = 'single' | 'sentinel' | 'cluster';

export interface RedisAddress {
  host: string;
  port: number;
}

/** A parsed Redis URL. */
export interface RedisTarget {
  topology: RedisTopology;
  /** TLS to every node (and every sentinel). */
  tls: boolean;
  /** single: the server; sentinel: the sentinels; cluster: the seed nodes. */
  nodes: RedisAddress[];
  /** Sentinel only: the monitored primary's name. */
  masterName?: string | undefined;
  /** Database number (single, sentinel); a Cluster has only 0. */
  db: number;
  username?: string | undefined;
  password?: string | undefined;
  sentinelUsername?: string | undefined;
  sentinelPassword?: string | undefined;
  /** The URL as it may be logged: scheme, hosts, ports, master name and db; never a credential. */
  safe: string;
  /** The URL as given (one server: ioredis reads it itself). Secret: never log it. */
  url: string;
}

const DEFAULT_PORT = 6379;
const DEFAULT_SENTINEL_PORT = 26379;
const SCHEMES: Record<string, { topology: RedisTopology; tls: boolean }> = {
  redis: { topology: 'single', tls: false },
  rediss: { topology: 'single', tls: true },
  'redis+sentinel': { topology: 'sentinel', tls: false },
  'rediss+sentinel': { topology: 'sentinel', tls: true },
  'redis+cluster': { topology: 'cluster', tls: false },
  'rediss+cluster': { topology: 'cluster', tls: true },
};
const SENTINEL_PARAMETERS = new Set(['sentinelUsername', 'sentinelPassword']);

/** What a URL that is not a Redis URL gets told (one line, the forms it may take). */
export const REDIS_URL_FORMS =
  'redis://[user:password@]host:port[/db], rediss://…, redis+sentinel://host:port[,host:port…]/<master name>, redis+cluster://host:port[,host:port…] (rediss+sentinel, rediss+cluster for TLS)';

/** A URL that cannot be used; its message is one line and never repeats the URL. */
export class RedisUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RedisUrlError';
  }
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new RedisUrlError(`the ${what} is not valid percent-encoding`);
  }
}

function addressOf(text: string, defaultPort: number): RedisAddress {
  // [v6 address]:port, host:port, or either without a port.
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]+))(?::(\d{1,5}))?$/.exec(text);
  if (match === null) throw new RedisUrlError(`"${text}" is not a host[:port]`);
  const host = match[1] ?? match[2] ?? '';
  const port = match[3] === undefined ? defaultPort : Number(match[3]);
  if (!(port >= 1 && port <= 65_535)) throw new RedisUrlError(`port ${match[3]} is out of range`);
  return { host, port };
}

function shown({ host, port }: RedisAddress): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

function dbOf(text: string): number {
  if (!/^\d{1,2}$/.test(text)) throw new RedisUrlError(`database "${text}" is not a number from 0 to 99`);
  return Number(text);
}

/** Parses a Redis URL; throws a {@link RedisUrlError} (one line, no secret) when it cannot be used. */
export function parseRedisUrl(url: string): RedisTarget {
  const match = /^([a-z+]+):\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/.exec(url.trim());
  if (match === null) throw new RedisUrlError(`not a Redis URL; use ${REDIS_URL_FORMS}`);
  const [, scheme = '', userinfo, hosts = '', path = '', query] = match;
  const kind = SCHEMES[scheme];
  if (kind === undefined) throw new RedisUrlError(`unknown scheme ${scheme}://; use ${REDIS_URL_FORMS}`);
  const { topology, tls } = kind;

  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined && userinfo !== '') {
    const colon = userinfo.indexOf(':');
    const user = colon === -1 ? userinfo : userinfo.slice(0, colon);
    // redis://:password@host (no user) is the usual form for a Redis with requirepass only.
    if (user !== '') username = decode(user, 'user name');
    if (colon !== -1) password = decode(userinfo.slice(colon + 1), 'password');
  }

  if (hosts === '') throw new RedisUrlError('no host');
  const defaultPort = topology === 'sentinel' ? DEFAULT_SENTINEL_PORT : DEFAULT_PORT;
  const nodes = hosts.split(',').map((host) => addressOf(host, defaultPort));
  if (topology === 'single' && nodes.length > 1)
    throw new RedisUrlError(
      `${scheme}:// takes one host; several are redis+sentinel:// (sentinels) or redis+cluster:// (nodes)`,
    );

  const segments = path.split('/').filter((segment) => segment !== '');
  let db = 0;
  let masterName: string | undefined;
  if (topology === 'single') {
    if (segments.length > 1) throw new RedisUrlError('the path is at most a database number');
    if (segments[0] !== undefined) db = dbOf(segments[0]);
  } else if (topology === 'sentinel') {
    if (segments[0] === undefined)
      throw new RedisUrlError(
        `${scheme}:// needs the master name: ${scheme}://host:port[,host:port…]/<name>`,
      );
    if (segments.length > 2)
      throw new RedisUrlError('the path is the master name, then at most a database number');
    masterName = decode(segments[0], 'master name');
    if (segments[1] !== undefined) db = dbOf(segments[1]);
  } else if (segments.length > 0) {
    throw new RedisUrlError(`${scheme}:// takes no path (a Cluster has database 0 only)`);
  }

  let sentinelUsername: string | undefined;
  let sentinelPassword: string | undefined;
  // A one-server URL's query is ioredis' (see the header).
  if (topology !== 'single' && query !== undefined && query !== '') {
    for (const pair of query.split('&')) {
      const [name = '', value = ''] = pair.split('=', 2);
      if (topology !== 'sentinel' || !SENTINEL_PARAMETERS.has(name))
        throw new RedisUrlError(
          `unknown query parameter "${name}"${topology === 'sentinel' ? ' (known: sentinelUsername, sentinelPassword)' : ''}`,
        );
      if (name === 'sentinelUsername') sentinelUsername = decode(value, 'sentinel user name');
      else sentinelPassword = decode(value, 'sentinel password');
    }
  }

  const safe = `${scheme}://${nodes.map(shown).join(',')}${
    masterName === undefined ? '' : `/${encodeURIComponent(masterName)}`
  }${db === 0 ? '' : `/${db}`}`;
  return {
    topology,
    tls,
    nodes,
    masterName,
    db,
    username,
    password,
    sentinelUsername,
    sentinelPassword,
    safe,
    url: url.trim(),
  };
}

/** Why a URL cannot be used (one line), or undefined when it can: for settings validation. */
export function redisUrlProblem(url: string): string | undefined {
  try {
    parseRedisUrl(url);
    return undefined;
  } catch (error) {
    return error instanceof RedisUrlError ? error.message : 'not a Redis URL';
  }
}

/** The URL as it may be logged (see {@link RedisTarget.safe}); never throws. */
export function safeRedisUrl(url: string): string {
  try {
    return parseRedisUrl(url).safe;
  } catch {
    return '(unusable Redis URL)';
  }
}

/** Every secret of a URL, to scrub from error texts before they are logged. */
export function secretsOf(target: RedisTarget): string[] {
  const query = target.url.indexOf('?');
  // ioredis reads options from a one-server URL's query: a password may hide there too.
  const queryPassword =
    query === -1
      ? undefined
      : (new URLSearchParams(target.url.slice(query + 1)).get('password') ?? undefined);
  return [target.password, target.sentinelPassword, queryPassword].filter(
    (secret): secret is string => secret !== undefined && secret !== '',
  );
}

/** A client of any topology: `Redis` (one server, or Sentinel's current primary) or `Cluster`. */
export type RedisClient = Redis | Cluster;

/** How a client behaves, whatever the topology. */
export interface RedisClientOptions {
  /** Longest wait for one command, in ms (ioredis' commandTimeout). */
  commandTimeoutMs: number;
  /** A connection attempt that hangs fails after this, in ms. */
  connectTimeoutMs: number;
  /** Pause before reconnection attempt `attempt` (1, 2, …), in ms. */
  reconnectDelayMs: (attempt: number) => number;
  /**
   * Whether commands wait in a queue while disconnected (false: they fail at once).
   * @default false
   */
  offlineQueue?: boolean;
  /**
   * Connect only on `connect()`.
   * @default false
   */
  lazyConnect?: boolean;
  /** CLIENT SETNAME of each connection. @default none */
  connectionName?: string;
  /** How long `disconnect()` waits for a socket that may already be gone, in ms. @default ioredis' */
  disconnectTimeoutMs?: number;
}

/**
 * An ioredis client for a parsed URL: `new Redis(...)` for one server and Sentinel (ioredis asks the
 * sentinels for the primary, and asks again after every disconnection), `new Cluster(...)` for a
 * Cluster. Commands are never retried nor replayed (`maxRetriesPerRequest: 0`): a command either
 * answers within the timeout or fails, and the callers answer from memory.
 */
export function createRedisClient(target: RedisTarget, options: RedisClientOptions): RedisClient {
  const node: RedisOptions = {
    username: target.username,
    password: target.password,
    db: target.db,
    tls: target.tls ? {} : undefined,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: options.connectTimeoutMs,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    connectionName: options.connectionName,
    disconnectTimeout: options.disconnectTimeoutMs,
    // A Redis error reply is the caller's to handle; never reconnect because of one. Except READONLY:
    // the server we talk to was demoted (a failover, ours or a managed service's); reconnecting asks
    // the sentinels (or DNS) for the new primary. 1: reconnect, the failed command is not resent.
    reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 1 : false),
  };
  const offline = options.offlineQueue ?? false;
  const lazyConnect = options.lazyConnect ?? false;
  if (target.topology === 'cluster') {
    const clusterOptions: ClusterOptions = {
      lazyConnect,
      enableOfflineQueue: offline,
      clusterRetryStrategy: (attempt) => options.reconnectDelayMs(attempt),
      // Every read goes to the masters: the budgets, locks and counters must be read where written.
      scaleReads: 'master',
      // A command caught by a node going away fails now (its caller answers from memory) rather than
      // waiting for the slots to be refreshed; the next command finds the new owner.
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 0,
      slotsRefreshTimeout: options.connectTimeoutMs,
      // Asks for the slots every 5 s (one CLUSTER SLOTS), not only after a MOVED: a change of masters
      // is then seen (and logged) even without traffic to the slots that moved.
      slotsRefreshInterval: 5000,
      // With TLS the certificates name hosts, not the addresses the nodes announce (managed services'
      // advice: keep the name as given).
      dnsLookup: target.tls ? (address, callback) => callback(null, address) : undefined,
      redisOptions: { ...node, db: undefined },
    };
    return new Cluster(
      target.nodes.map(({ host, port }) => ({ host, port })),
      clusterOptions,
    );
  }
  const common: RedisOptions = {
    ...node,
    lazyConnect,
    enableOfflineQueue: offline,
    retryStrategy: (attempt) => options.reconnectDelayMs(attempt),
  };
  if (target.topology === 'sentinel') {
    return new Redis({
      ...common,
      sentinels: target.nodes.map(({ host, port }) => ({ host, port })),
      name: target.masterName,
      sentinelUsername: target.sentinelUsername,
      sentinelPassword: target.sentinelPassword,
      enableTLSForSentinelMode: target.tls,
      sentinelTLS: target.tls ? {} : undefined,
      sentinelRetryStrategy: (attempt) => options.reconnectDelayMs(attempt),
      sentinelCommandTimeout: options.connectTimeoutMs,
      // Subscribes to the sentinels' +switch-master: a planned failover (the old primary still up,
      // now a replica) moves the connection at once instead of at the first refused write.
      failoverDetector: true,
    });
  }
  // The URL itself: ioredis reads host, port, credentials, db, TLS and its query options from it.
  return new Redis(target.url, {
    ...common,
    username: undefined,
    password: undefined,
    db: undefined,
    tls: undefined,
  });
}

/** Whether `client` is a Cluster client. */
export function isCluster(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}
