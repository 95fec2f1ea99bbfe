/**
 * The three QueueStore implementations side by side on one real redis-server started for the
 * calling describe block: the in-memory store, the Upstash store through the Upstash REST bridge,
 * and the Redis store (ioredis, no bridge). Each store made gets a key prefix of its own.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, expect } from 'vitest';
import type { QueueStore } from '../../src/core/ports';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { MemoryQueueStore } from '../../src/store/memory-store';
import { connectRedis, createRedisQueueStore, waitUntilReady, type RedisConnection } from '../../src/store/redis-store';
import { UpstashQueueStore, createUpstashClientOptions } from '../../src/store/upstash-store';
import { startRedisServer, type RedisServer } from './redis-server';

export interface EveryStore {
  readonly memory: () => QueueStore;
  /** `prefix`: the keys' prefix, for a test that reaches the keys through `connection()` (the same server). */
  readonly upstash: (prefix?: string) => QueueStore;
  /** `prefix`: the keys' prefix, for a test that reaches the keys through `connection()`. */
  readonly redis: (prefix?: string) => QueueStore;
  /** The Redis store's connection to the server (started in beforeAll). */
  readonly connection: () => RedisConnection;
}

/** Starts the server, bridge and connection in beforeAll and stops them in afterAll of the caller's block. */
export function useEveryStore(): EveryStore {
  let server: RedisServer;
  let bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  let redis: Redis;
  let direct: RedisConnection;
  const token = `test-token-${randomUUID()}`;
  const prefix = (): string => `wr-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: server.url, token });
    redis = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
    direct = connectRedis({ urls: [server.url], cluster: false }, { timeoutMs: 5_000, retries: 0 });
    await waitUntilReady(direct, 5_000);
  });
  afterAll(async () => {
    await direct?.quit();
    await bridge?.close();
    await server?.stop();
  });

  return {
    memory: () => new MemoryQueueStore(),
    upstash: (keyPrefix = prefix()) => new UpstashQueueStore({ redis, keyPrefix }),
    redis: (keyPrefix = prefix()) => createRedisQueueStore({ redis: direct, keyPrefix }),
    connection: () => direct,
  };
}

/**
 * Runs the same calls on a fresh store of each kind and expects the same answers, call by call;
 * returns the in-memory store's answers (for what the run must have covered).
 */
export async function expectSameOnEveryStore(stores: EveryStore, run: (store: QueueStore) => Promise<unknown[]>): Promise<unknown[]> {
  const memory = await run(stores.memory());
  expect(await run(stores.upstash())).toEqual(memory);
  expect(await run(stores.redis())).toEqual(memory);
  return memory;
}
