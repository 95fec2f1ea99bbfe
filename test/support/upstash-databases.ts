/**
 * Several databases for one queue, as `store_shards` spreads it: `count` real redis-servers, each
 * behind its own Upstash REST bridge and reached by the real @upstash/redis client (no retries, so a
 * failure shows), with a direct ioredis connection beside it for what a test reads or does to the
 * server. Started in beforeAll and stopped in afterAll of the calling file or block.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { createUpstashClientOptions } from '../../src/store/upstash-store';
import { startRedisServer, type RedisServer } from './redis-server';

export interface UpstashDatabase {
  readonly server: RedisServer;
  readonly bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  readonly client: Redis;
  readonly direct: IORedis;
}

/** The databases, filled in beforeAll (the array is the same one throughout). */
export function useUpstashDatabases(count: number): readonly UpstashDatabase[] {
  const databases: UpstashDatabase[] = [];
  const token = `test-token-${randomUUID()}`;
  beforeAll(async () => {
    for (let i = 0; i < count; i++) {
      const server = await startRedisServer();
      const bridge = await startUpstashBridge({ redisUrl: server.url, token });
      const client = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
      databases.push({ server, bridge, client, direct: new IORedis(server.url) });
    }
  }, 60_000);
  afterAll(async () => {
    for (const d of databases) {
      d.direct.disconnect();
      await d.bridge.close();
      await d.server.stop();
    }
  });
  return databases;
}
