/**
 * Joins that time out: the store takes the ticket but its answer comes after the handler gave up,
 * so the visitor never gets the cookie. Through the handler, the real Upstash store and the REST
 * bridge on a real redis-server: "admit N" must still let in N visitors who show up, in order.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets } from '../src/core/config';
import { admissionPolicy, createHandler, type Handler } from '../src/core/handler';
import type { QueueStore } from '../src/core/ports';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { BASE_SECRETS, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, payloadOf, RecordingOrigin, source } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';

const TOKEN = 'phantom-test-token';
const STORE_TIMEOUT_MS = 200;

/** A store whose join answers arrive `lateMs` after the store has done its work, while `late` is on. */
class LateJoins extends FaultyStore {
  late = false;
  constructor(inner: QueueStore, lateMs: number) {
    super(inner);
    const join = this.join;
    this.join = async (...a) => {
      const result = await join(...a);
      if (this.late) await sleep(lateMs);
      return result;
    };
  }
}

describe('tickets lost to a join timeout do not consume admissions', () => {
  let redis: RedisServer;
  let bridge: UpstashBridge;
  let direct: IORedis;

  beforeAll(async () => {
    redis = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: redis.url, token: TOKEN });
    direct = new IORedis(redis.url);
  });
  afterAll(async () => {
    direct?.disconnect();
    await bridge?.close();
    await redis?.stop();
  });

  it('rate mode: admit 10 lets in the first 10 visitors who hold a ticket, once the lost tickets lapse', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 25, 12, 0, 0));
    const inner = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: TOKEN, retries: 0 })) });
    const store = new LateJoins(inner, 3 * STORE_TIMEOUT_MS);
    const settings = { ...BASE_SETTINGS, state_cache_seconds: '1', refresh_seconds: '2' };
    const config = parseConfig(source({ ...settings, store_timeout_ms: String(STORE_TIMEOUT_MS) }));
    const handlerWith = (timeoutMs: number): Handler =>
      createHandler({
        config: parseConfig(source({ ...settings, store_timeout_ms: String(timeoutMs) })),
        secrets: parseSecrets(source(BASE_SECRETS)),
        store,
        origin: new RecordingOrigin(),
        logger: new MemoryLogger(),
        clock,
        cache: new MemoryStateCache(clock),
      });
    // Joins run against the short timeout; the polls and claims afterwards against a generous one, so
    // that only the joins this test makes late (not a busy machine) decide who holds a ticket.
    const joining = handlerWith(STORE_TIMEOUT_MS);
    const polling = handlerWith(10_000);
    const request = (cookie?: string) => new Request('https://shop.example/', { headers: cookie ? { cookie: `waiting_room=${cookie}` } : {} });
    const visit = (cookie?: string) => (cookie === undefined ? joining : polling)(request(cookie), { address: '198.51.100.1', pop: 'SIM' });
    // Load the scripts first: a NOSCRIPT miss must not be what makes a join late.
    await inner.join('warm-up', clock.now(), admissionPolicy(config));

    // 30 arrivals; every third join answers too late: the visitor is held without a ticket.
    const holders = new Map<number, string>();
    for (let i = 1; i <= 30; i += 1) {
      store.late = i % 3 === 0;
      const response = await visit();
      const cookie = cookieFrom(response);
      if (store.late) expect(cookie).toBeUndefined();
      // A join late for another reason (a busy machine) makes one more phantom: the same case.
      if (cookie !== undefined) holders.set(payloadOf(cookie)['t'] as number, cookie);
    }
    store.late = false;
    // Let the late answers land: the store did take every ticket.
    await sleep(4 * STORE_TIMEOUT_MS);
    expect(await store.peek('default')).toEqual({ tail: 30, cursor: 0 });
    const real = [...holders.keys()].sort((a, b) => a - b);
    expect(real.length).toBeGreaterThanOrEqual(10);
    expect(real.length).toBeLessThanOrEqual(20);

    await store.admit('default', 10, clock.now(), admissionPolicy(config));
    const admitted: number[] = [];
    // Every ticket holder polls every second for longer than two claim deadlines (2 + 1 + 5 s each).
    for (let second = 0; second < 30; second += 1) {
      clock.advance(1_000);
      for (const [ticket, cookie] of holders) {
        const next = cookieFrom(await visit(cookie));
        if (next !== undefined && payloadOf(next)['k'] === 'a') {
          admitted.push(ticket);
          holders.delete(ticket);
        }
      }
    }
    // Exactly 10 people let in, the 10 earliest who held a ticket; no lost ticket took an admission.
    expect(admitted.sort((a, b) => a - b)).toEqual(real.slice(0, 10));
    expect(await store.stats('default', clock.now(), admissionPolicy(config))).toMatchObject({ reserved: 0, admittedLastMinute: 10 });
  });
});
