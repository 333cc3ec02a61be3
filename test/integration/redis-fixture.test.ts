import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { type RedisServer, requireRedisServer, startRedisServer } from '../support/redis-server.js';

requireRedisServer('redis-fixture');
let server: RedisServer | undefined;
afterAll(async () => server?.stop());

describe('the redis-server test fixture', () => {
  it('starts a real server on loopback, restarts it on the same port, and stops it', async () => {
    server = await startRedisServer();
    const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await client.connect();
    await client.set('k', 'v');
    expect(await client.get('k')).toBe('v');
    client.disconnect();
    await server.kill();
    await server.restart();
    const again = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    await again.connect();
    // In memory only: a restart starts empty.
    expect(await again.get('k')).toBeNull();
    again.disconnect();
  });
});
