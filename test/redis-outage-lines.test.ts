/**
 * What an operator sees on stderr when Redis goes away and comes back (src/store/redis-store.ts,
 * reportRedisErrors): one line for the outage and one for the recovery, with one Redis and with a
 * Redis Cluster that loses one of its masters (which stays ready for the others, so ioredis reports
 * it only per node). Real redis-servers, stopped and started again on their ports.
 */
import { describe, expect, it } from 'vitest';
import { connectRedis, reportRedisErrors, waitUntilReady, type RedisConnection } from '../src/store/redis-store';
import { startRedisCluster, startRedisServer, startRedisServerOnPort, type RedisCluster } from './support/redis-server';

/** Sends commands until `done()` says so or the deadline passes (a command answered or refused either way). */
async function keepAsking(redis: RedisConnection, done: () => boolean, deadlineMs = 20_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!done() && Date.now() < until) {
    await Promise.all(Array.from({ length: 12 }, (_, i) => redis.set(`k${i}`, 'x').catch(() => undefined)));
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A three-master cluster, a connection to it that reports its outages into `lines`, ready; `run` then plays the outage. */
async function withReportedCluster(run: (cluster: RedisCluster, redis: RedisConnection, lines: string[]) => Promise<void>): Promise<void> {
  const cluster = await startRedisCluster(3);
  const redis = connectRedis({ urls: cluster.urls, cluster: true }, { timeoutMs: 500, retries: 0 });
  const lines: string[] = [];
  reportRedisErrors(redis, (line) => lines.push(line));
  try {
    expect(await waitUntilReady(redis, 5_000)).toBe(true);
    await run(cluster, redis, lines);
  } finally {
    redis.disconnect();
    await cluster.stop();
  }
}

describe('stderr lines for a store outage', () => {
  it('one Redis: a line when it goes, a line when it is back', async () => {
    let server = await startRedisServer();
    const redis = connectRedis({ urls: [server.url], cluster: false }, { timeoutMs: 500, retries: 0 });
    const lines: string[] = [];
    reportRedisErrors(redis, (line) => lines.push(line));
    try {
      expect(await waitUntilReady(redis, 5_000)).toBe(true);
      await server.stop();
      await keepAsking(redis, () => lines.length >= 1);
      server = await startRedisServerOnPort(server.port);
      await keepAsking(redis, () => lines.length >= 2);
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(/^redis: .*; failing store calls fast and reconnecting\n$/);
      expect(lines[1]).toBe('redis: connected again\n');
    } finally {
      redis.disconnect();
      await server.stop();
    }
  }, 60_000);

  it('a Redis Cluster losing one master: a line naming the node when it goes, one when it is back, and nothing for the others', () =>
    withReportedCluster(async (cluster, redis, lines) => {
      const lost = cluster.nodes[0]!.port;
      await cluster.nodes[0]!.stop();
      await keepAsking(redis, () => lines.length >= 1);
      await cluster.restartNode(0);
      await keepAsking(redis, () => lines.length >= 2);
      expect(lines).toEqual([expect.stringMatching(new RegExp(`^redis: cluster node 127\\.0\\.0\\.1:${lost}: .*; failing store calls fast and reconnecting\\n$`)), 'redis: connected again\n']);
    }), 60_000);

  it('a Redis Cluster losing every master: one line for the whole outage, one when all are back', () =>
    withReportedCluster(async (cluster, redis, lines) => {
      for (const node of cluster.nodes) await node.stop();
      // Every node reports, then the cluster itself ("Failed to refresh slots cache"): still one line.
      await keepAsking(redis, () => lines.length >= 1);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      for (let i = 0; i < cluster.nodes.length; i += 1) await cluster.restartNode(i);
      await keepAsking(redis, () => lines.length >= 2);
      expect(lines).toEqual([expect.stringMatching(/; failing store calls fast and reconnecting\n$/), 'redis: connected again\n']);
    }), 60_000);
});
