/**
 * The whole local stack for end-to-end tests: a real redis-server on a free port, the Upstash
 * bridge over it, the demo origin, and the waiting room on the Node host using the real
 * `@upstash/redis` client through the bridge.
 */
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { startDemoOrigin } from '../../src/node/demo-origin';
import { startHost, type RunningServer } from '../../src/node/host';
import { startUpstashBridge, type UpstashBridge } from '../../src/node/upstash-bridge';
import { buildWaitingRoom } from '../../src/node/waiting-room';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './fixtures';
import { startRedisServer, type RedisServer } from './redis-server';

export const UPSTASH_TOKEN = BASE_SECRETS['upstash_token']!;

export interface Stack {
  readonly redis: RedisServer;
  /** Direct access to Redis, to check what the waiting room wrote. */
  readonly direct: IORedis;
  bridge: UpstashBridge;
  readonly origin: RunningServer;
  readonly room: RunningServer;
  readonly logger: MemoryLogger;
  /** Stops the bridge (the store becomes unreachable). */
  stopBridge(): Promise<void>;
  /** Starts the bridge again on the same port. */
  startBridge(): Promise<void>;
  close(): Promise<void>;
}

export async function startStack(settings: Record<string, string> = {}): Promise<Stack> {
  const redis = await startRedisServer();
  let bridge = await startUpstashBridge({ redisUrl: redis.url, token: UPSTASH_TOKEN });
  const bridgePort = bridge.port;
  const origin = await startDemoOrigin();
  const logger = new MemoryLogger();
  const built = buildWaitingRoom({
    settings: source({ ...BASE_SETTINGS, upstash_url: bridge.url, store_timeout_ms: '500', ...settings }),
    secrets: source(BASE_SECRETS),
    originUrl: origin.url,
    logger,
    store: (config, secrets) =>
      new UpstashQueueStore({
        redis: new Redis(
          createUpstashClientOptions({ url: config.upstashUrl!, token: secrets.upstashToken!, retries: config.storeRetries }),
        ),
      }),
  });
  const room = await startHost(built.handler);
  const direct = new IORedis(redis.url, { lazyConnect: false, maxRetriesPerRequest: 1 });
  const stack: Stack = {
    redis,
    direct,
    bridge,
    origin,
    room,
    logger,
    async stopBridge() {
      await stack.bridge.close();
    },
    async startBridge() {
      bridge = await startUpstashBridge({ redisUrl: redis.url, token: UPSTASH_TOKEN, port: bridgePort });
      stack.bridge = bridge;
    },
    async close() {
      direct.disconnect();
      await Promise.allSettled([room.close(), origin.close(), stack.bridge.close()]);
      await redis.stop();
    },
  };
  return stack;
}

/** A visitor with a one-cookie jar, talking HTTP to the waiting room. */
export class HttpVisitor {
  cookie: string | undefined;
  constructor(
    private readonly base: string,
    private readonly cookieName = 'waiting_room',
  ) {}

  async get(path = '/', init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookie !== undefined) headers.set('cookie', `${this.cookieName}=${this.cookie}`);
    const response = await fetch(`${this.base}${path}`, { ...init, headers, redirect: 'manual' });
    for (const header of response.headers.getSetCookie()) {
      const [pair] = header.split(';');
      if (pair?.startsWith(`${this.cookieName}=`)) this.cookie = pair.slice(this.cookieName.length + 1);
    }
    return response;
  }

  /** The claims of the current cookie (unverified: for assertions). */
  get claims(): Record<string, unknown> {
    const part = (this.cookie ?? '').split('.')[1] ?? '';
    return part === '' ? {} : (JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>);
  }
}
