/**
 * Settings every process of the project reads, whether it runs the gateway (`npm start`) or only the
 * reference services (`npm run services`): environment, bind address, shutdown, logs and Redis.
 */
import { z } from 'zod';
import { int, setting, settingsGroup } from './settings.js';

export const processSettings = settingsGroup('process', {
  nodeEnv: setting(
    'NODE_ENV',
    z.enum(['development', 'production', 'test']).default('development'),
    'production: JSON log lines (unless LOG_FORMAT says otherwise), and the gateway hides GraphQL field suggestions. GraphiQL and introspection stay on in every environment.',
  ),
  host: setting(
    'HOST',
    z.string().min(1).default('::'),
    'Address to bind to; 127.0.0.1 keeps the process to this machine. Falls back to 0.0.0.0 where IPv6 is off.',
    { note: 'all interfaces, IPv4 and IPv6' },
  ),
  shutdownTimeoutMs: setting(
    'SHUTDOWN_TIMEOUT_MS',
    int(0, 600_000).default(10_000),
    'On SIGTERM or SIGINT, how long accepted requests may take to finish; the process exits at the latest a few seconds after it, whatever happens.',
  ),
});

export const logSettings = settingsGroup('logs', {
  logLevel: setting(
    'LOG_LEVEL',
    z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    'Lowest level written: fatal, error, warn, info, debug, trace, or silent for none. From debug on, pretty lines show everything in full (every upstream call, error stacks, long texts).',
  ),
  logFormat: setting(
    'LOG_FORMAT',
    z.enum(['json', 'pretty']).optional(),
    'json: one JSON object per line. pretty: one short readable line per event, coloured only on a terminal.',
    'json in production or when not a terminal, pretty on a terminal',
  ),
});

export const redisSettings = settingsGroup('redis', {
  redisUrl: setting(
    'REDIS_URL',
    z
      .string()
      .regex(/^rediss?:\/\/\S+$/, 'must be a redis:// or rediss:// URL')
      .optional(),
    'Redis 6+ shared by every replica: the gateway keeps its response cache, in-flight call sharing and cost budgets there, the reference services their rate limits. Redis going away never fails a request: each process falls back to memory until it is back.',
    '(unset: state kept in memory, per process)',
  ),
  redisKeyPrefix: setting(
    'REDIS_KEY_PREFIX',
    z
      .string()
      .regex(/^[A-Za-z0-9:._-]{1,64}$/, 'must be 1 to 64 of A-Z a-z 0-9 : . _ -')
      .default('null-pi:'),
    'Prefix of every Redis key the project writes, so several deployments can share one Redis.',
  ),
  redisTimeoutMs: setting(
    'REDIS_TIMEOUT_MS',
    int(1, 10_000).default(25),
    'Longest wait for one Redis command before the process uses its in-memory state instead.',
  ),
});
