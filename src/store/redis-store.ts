/**
 * The store over Redis itself (TCP, through ioredis), for self-hosting without Upstash or the bridge:
 * a Node host then needs only Redis 7+ (one server, or Redis Cluster), and several Node hosts behind
 * a load balancer share every queue through it.
 *
 * It runs the very same scripts as the Upstash store, through the same UpstashQueueStore (so the
 * same argument checks and reply parsing): only the two calls that store makes, EVALSHA and EVAL,
 * are implemented here. Redis 7 refuses Upstash's `allow-key-locking` flag, so each script is handed
 * to Redis with it dropped (adaptScript). That text has another SHA-1 than the pinned one: EVALSHA
 * maps each pin to the SHA-1 of the adapted text, worked out once at module load, so a call is still
 * one EVALSHA and only a NOSCRIPT (a fresh or flushed Redis, a failover, a node new to the cluster)
 * costs a second round trip, an EVAL of the adapted text that caches it again.
 *
 * Failure: a down Redis must fail a call fast, so the handler's store-failure policy applies at once
 * rather than after a queue of retries. Hence no offline queue (a command while disconnected is
 * refused at once), a per-command timeout equal to the store timeout, a bounded number of retries
 * per command, and no automatic resending of commands in flight when the connection dropped (a
 * resent join would take a second ticket). The connection itself reconnects in the background.
 * As with Upstash, a command that timed out may still have run in Redis: the operator's actions are
 * idempotent for that reason (admit keys, reset's expected epoch).
 *
 * Cluster: every key of a queue carries the `{queue}` hash tag, so all of a script's KEYS are in one
 * slot and ioredis sends each EVALSHA to the node that owns it.
 */

import { createHash } from 'node:crypto';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { QueueStore } from '../core/ports';
import { adaptScript } from './script-flags';
import { OUTBOX_SCRIPTS } from './outbox';
import { STORE_SCRIPTS } from './scripts';
import { UpstashQueueStore, type UpstashScriptClient } from './upstash-store';

export type RedisConnection = Redis | Cluster;

function sha1(text: string): string {
  return createHash('sha1').update(text, 'utf8').digest('hex');
}

/** Pinned SHA-1 (of the text with Upstash's flag) → SHA-1 of the text Redis runs. */
export const REDIS_SCRIPT_SHAS: ReadonlyMap<string, string> = new Map([...STORE_SCRIPTS, ...OUTBOX_SCRIPTS].map((s) => [s.sha1, sha1(adaptScript(s.text))]));

/** EVALSHA/EVAL over ioredis, in the shape UpstashQueueStore calls them. */
export function createRedisScriptClient(redis: RedisConnection): UpstashScriptClient {
  return {
    async evalsha<TArgs extends unknown[], TData = unknown>(sha: string, keys: string[], args: TArgs): Promise<TData> {
      // An unknown SHA-1 passes through: Redis answers NOSCRIPT and the store falls back to EVAL.
      const redisSha = REDIS_SCRIPT_SHAS.get(sha) ?? sha;
      return (await redis.evalsha(redisSha, keys.length, ...keys, ...args.map(String))) as TData;
    },
    async eval<TArgs extends unknown[], TData = unknown>(script: string, keys: string[], args: TArgs): Promise<TData> {
      return (await redis.eval(adaptScript(script), keys.length, ...keys, ...args.map(String))) as TData;
    },
  };
}

export interface RedisQueueStoreOptions {
  readonly redis: RedisConnection;
  /** @default "wr" */
  readonly keyPrefix?: string;
}

export function createRedisQueueStore(options: RedisQueueStoreOptions): QueueStore {
  return new UpstashQueueStore({
    redis: createRedisScriptClient(options.redis),
    ...(options.keyPrefix !== undefined && { keyPrefix: options.keyPrefix }),
  });
}

export interface RedisTarget {
  /** `redis://` or `rediss://` URLs; several mean a cluster (they are its seed nodes). */
  readonly urls: readonly string[];
  /** A cluster even with one URL (a cluster's configuration endpoint). */
  readonly cluster: boolean;
}

/**
 * Parses `REDIS_URL`: one URL, or several separated by commas (a cluster's seed nodes). Returns the
 * problem as a message when it is not that, so the host can refuse it with its other problems.
 */
export function parseRedisUrls(value: string | undefined): readonly string[] | string {
  if (value === undefined || value.trim() === '') return 'is required with WR_STORE=redis (e.g. redis://127.0.0.1:6379)';
  const urls = value.split(',').map((u) => u.trim());
  for (const url of urls) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return `is not a URL: ${JSON.stringify(url)} (expected redis://host:port or rediss://…, several separated by commas)`;
    }
    if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') return `must use redis:// or rediss://, got ${JSON.stringify(url)}`;
    if (parsed.hostname === '') return `has no host: ${JSON.stringify(url)}`;
  }
  return urls;
}

export interface RedisConnectionOptions {
  /** Per-command timeout, ms: the store timeout. */
  readonly timeoutMs: number;
  /** Retries of one command after a connection error, 0..3 (ioredis `maxRetriesPerRequest`). */
  readonly retries: number;
}

/**
 * A connection (or cluster client) with the fail-fast settings described at the top. Connects in
 * the background; see `waitUntilReady`.
 */
export function connectRedis(target: RedisTarget, options: RedisConnectionOptions): RedisConnection {
  const { timeoutMs, retries } = options;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new RangeError(`invalid store timeout ${String(timeoutMs)}: expected an integer number of ms >= 1`);
  if (!Number.isSafeInteger(retries) || retries < 0 || retries > 3) throw new RangeError(`invalid store retries ${String(retries)}: expected an integer from 0 to 3`);
  const [first, ...rest] = target.urls;
  if (first === undefined) throw new RangeError('no Redis URL');
  const common: RedisOptions = {
    commandTimeout: timeoutMs,
    connectTimeout: Math.max(timeoutMs, 1_000),
    maxRetriesPerRequest: retries,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    // Reconnect for ever, at most every 2 s, so a Redis that comes back is used again.
    retryStrategy: (times) => Math.min(times * 100, 2_000),
  };
  if (!target.cluster && rest.length === 0) return new Redis(first, common);
  const nodes = target.urls.map((url) => {
    const u = new URL(url);
    return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port === '' ? 6379 : Number(u.port) };
  });
  const u = new URL(first);
  const clusterOptions: ClusterOptions = {
    enableOfflineQueue: false,
    clusterRetryStrategy: (times) => Math.min(times * 100, 2_000),
    slotsRefreshTimeout: Math.max(timeoutMs, 1_000),
    redisOptions: {
      ...common,
      ...(u.username !== '' && { username: decodeURIComponent(u.username) }),
      ...(u.password !== '' && { password: decodeURIComponent(u.password) }),
      ...(u.protocol === 'rediss:' && { tls: {} }),
    },
  };
  return new Cluster(nodes, clusterOptions);
}

/**
 * Resolves true once the connection is ready, or false after `timeoutMs` (the host then starts
 * anyway: calls fail fast until Redis is there, which the handler's store-failure policy covers).
 */
export function waitUntilReady(redis: RedisConnection, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    redis.once('ready', onReady);
  });
}

/**
 * Reports connection trouble once per outage (ioredis emits an error per reconnect attempt, and
 * prints them all when nobody listens).
 */
export function reportRedisErrors(redis: RedisConnection, write: (line: string) => void): void {
  let down = false;
  const outage = (what: string): void => {
    if (down) return;
    down = true;
    write(`redis: ${what}; failing store calls fast and reconnecting\n`);
  };
  const recovered = (): void => {
    if (!down) return;
    down = false;
    write('redis: connected again\n');
  };
  if (!(redis instanceof Cluster)) {
    redis.on('error', (error: Error) => outage(error.message));
    redis.on('ready', recovered);
    return;
  }
  // A cluster that loses one master stays ready for the others and says so only per node, and one
  // that loses them all reports every node and then itself: one line for the outage either way
  // (naming the first node that went), and one once every node that went is back.
  const away = new Set<string>();
  redis.on('error', (error: Error) => outage(error.message));
  redis.on('node error', (error: Error, address: string) => {
    away.add(address);
    outage(`cluster node ${address}: ${error.message}`);
  });
  redis.on('+node', (node: { options?: { host?: string; port?: number }; once(event: 'ready', listener: () => void): void }) => {
    const address = `${node.options?.host ?? ''}:${node.options?.port ?? ''}`;
    node.once('ready', () => {
      away.delete(address);
      if (away.size === 0) recovered();
    });
  });
  redis.on('ready', () => {
    if (away.size === 0) recovered();
  });
}
