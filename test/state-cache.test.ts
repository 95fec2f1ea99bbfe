/**
 * The per-POP cache of the queue's state: the cache itself, then the handler using it against the
 * real Upstash store through the bridge on a real redis-server, with simulated POPs and time.
 */
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets } from '../src/core/config';
import { admissionPolicy, createHandler, type Handler } from '../src/core/handler';
import type { QueueStore } from '../src/core/ports';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { BASE_SECRETS, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, RecordingOrigin, source } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';
import IORedis from 'ioredis';

describe('MemoryStateCache', () => {
  it('answers from memory within the lifetime and loads again after it', async () => {
    const clock = new ManualClock();
    const cache = new MemoryStateCache(clock);
    let loads = 0;
    const load = async () => ++loads;
    expect(await cache.getOrLoad('k', 2, load)).toEqual({ value: 1, hit: false });
    clock.advance(1999);
    expect(await cache.getOrLoad('k', 2, load)).toEqual({ value: 1, hit: true });
    clock.advance(1);
    expect(await cache.getOrLoad('k', 2, load)).toEqual({ value: 2, hit: false });
    expect(await cache.getOrLoad('other', 2, load)).toEqual({ value: 3, hit: false });
  });

  it('peeks without loading or waiting: the fresh value, else nothing', async () => {
    const clock = new ManualClock();
    const cache = new MemoryStateCache(clock);
    expect(await cache.peek('k')).toBeUndefined();
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const loading = cache.getOrLoad('k', 2, async () => {
      await gate;
      return 'state';
    });
    // A load under way is not waited for.
    expect(await cache.peek('k')).toBeUndefined();
    release();
    await loading;
    expect(await cache.peek('k')).toBe('state');
    clock.advance(2_000);
    expect(await cache.peek('k')).toBeUndefined();
    expect(cache.loads).toBe(1);
  });

  it('collapses concurrent misses into one load', async () => {
    const cache = new MemoryStateCache(new ManualClock());
    let loads = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const load = async () => {
      loads++;
      await gate;
      return 'state';
    };
    const all = Promise.all(Array.from({ length: 100 }, () => cache.getOrLoad('k', 1, load)));
    release();
    const results = await all;
    expect(loads).toBe(1);
    expect(results.filter((r) => !r.hit)).toHaveLength(1);
    expect(results.every((r) => r.value === 'state')).toBe(true);
  });

  it('caches no failure, and every waiter sees it', async () => {
    const cache = new MemoryStateCache(new ManualClock());
    let calls = 0;
    const failing = async () => {
      calls++;
      throw new Error('store down');
    };
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => cache.getOrLoad('k', 1, failing)));
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(calls).toBe(1);
    expect(await cache.getOrLoad('k', 1, async () => 'back')).toEqual({ value: 'back', hit: false });
  });
});

describe('MemoryStateCache, bounded', () => {
  it('past its bound drops the expired entries first, then the least recently stored, and keeps what was stored again', async () => {
    const clock = new ManualClock();
    const cache = new MemoryStateCache(clock, 100);
    const one = async () => 1;
    // A long-lived entry, stored again as it would be each lifetime; 60 short marks that expire.
    await cache.getOrLoad('state', 3600, one);
    for (let i = 0; i < 60; i++) await cache.getOrLoad(`short:${i}`, 1, one);
    clock.advance(2_000);
    for (let i = 0; i < 39; i++) await cache.getOrLoad(`mark:${i}`, 180, one);
    expect(cache.size).toBe(100);
    // The 101st: the 60 expired ones go, nothing live.
    await cache.getOrLoad('mark:39', 180, one);
    expect(cache.size).toBe(41);
    expect(await cache.peek('state')).toBe(1);
    for (let i = 0; i < 40; i++) expect(await cache.peek(`mark:${i}`)).toBe(1);
    // An hour on, all of that has expired: the next time the bound is passed it all goes, and what
    // was stored since (the state, loaded again when it expired) stays.
    clock.advance(3_600_000 - 2_000);
    for (let i = 40; i < 100; i++) await cache.getOrLoad(`mark:${i}`, 180, one);
    await cache.getOrLoad('state', 3600, one);
    await cache.getOrLoad('mark:100', 180, one);
    expect(cache.size).toBeLessThanOrEqual(100);
    expect(await cache.peek('state')).toBe(1);
    expect(await cache.peek('mark:100')).toBe(1);
    // The marks stored an hour ago have expired and went first.
    expect(await cache.peek('mark:0')).toBeUndefined();
  });

  it('counts an entry loaded again as recent: the queue state outlives older marks when live ones must go', async () => {
    const clock = new ManualClock();
    const cache = new MemoryStateCache(clock, 10);
    const one = async () => 1;
    await cache.getOrLoad('state', 1, one);
    for (let i = 0; i < 9; i++) await cache.getOrLoad(`mark:${i}`, 180, one);
    clock.advance(1_500);
    // The state expired and is loaded again: it is now the most recently stored.
    expect((await cache.getOrLoad('state', 1, one)).hit).toBe(false);
    await cache.getOrLoad('mark:9', 180, one);
    expect(cache.size).toBe(9);
    expect(await cache.peek('state')).toBe(1);
    expect(await cache.peek('mark:0')).toBeUndefined();
    expect(await cache.peek('mark:9')).toBe(1);
  });

  it('never holds more than its bound under a flood of distinct keys', async () => {
    const clock = new ManualClock();
    const cache = new MemoryStateCache(clock, 1_000);
    let most = 0;
    for (let i = 0; i < 5_000; i++) {
      await cache.getOrLoad(`pow-spent:default:${i}`, 180, async () => true);
      most = Math.max(most, cache.size);
    }
    expect(most).toBe(1_000);
    // The most recent marks are kept: a replay of a fresh solution is still caught.
    expect((await cache.getOrLoad('pow-spent:default:4999', 180, async () => true)).hit).toBe(true);
  });
});

describe('polls on the real store with the per-POP cache', () => {
  let redis: RedisServer;
  let bridge: UpstashBridge;
  let direct: IORedis;

  beforeAll(async () => {
    redis = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: redis.url, token: 'cache-test-token' });
    direct = new IORedis(redis.url);
  });
  afterAll(async () => {
    direct?.disconnect();
    await bridge?.close();
    await redis?.stop();
  });
  beforeEach(async () => {
    await direct.flushall();
  });

  function upstashStore(): QueueStore {
    return new UpstashQueueStore({
      redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: 'cache-test-token', retries: 0 })),
    });
  }

  /** One simulated POP: its own cache and handler, sharing the store and the clock. */
  function pop(store: QueueStore, clock: ManualClock, settings: Record<string, string>): { handler: Handler; cache: MemoryStateCache } {
    const cache = new MemoryStateCache(clock);
    const handler = createHandler({
      config: parseConfig(source({ ...BASE_SETTINGS, ...settings })),
      secrets: parseSecrets(source(BASE_SECRETS)),
      store,
      origin: new RecordingOrigin(),
      logger: new MemoryLogger(),
      clock,
      cache,
    });
    return { handler, cache };
  }

  const CLIENT = { address: '198.51.100.1', pop: 'SIM' };
  const visit = (handler: Handler, cookie?: string) =>
    handler(new Request('https://shop.example/', { headers: cookie ? { cookie: `waiting_room=${cookie}` } : {} }), CLIENT);

  it('200 polls inside one lifetime cost one store call; after the lifetime, one more', async () => {
    const clock = new ManualClock();
    const store = new FaultyStore(upstashStore());
    const { handler } = pop(store, clock, { state_cache_seconds: '2' });
    const cookies: string[] = [];
    for (let i = 0; i < 200; i++) cookies.push(cookieFrom(await visit(handler))!);
    const joins = store.calls;
    expect(joins).toBe(200);
    const responses = await Promise.all(cookies.map((c) => visit(handler, c)));
    expect(responses.every((r) => r.status === 200)).toBe(true);
    expect(store.calls - joins).toBe(1);
    const before = await direct.info('commandstats');
    clock.advance(1_000);
    for (const c of cookies.slice(0, 50)) await visit(handler, c);
    expect(store.calls - joins).toBe(1);
    clock.advance(1_000);
    for (const c of cookies) await visit(handler, c);
    expect(store.calls - joins).toBe(2);
    // Counted by Redis too: the 250 polls after the first lifetime ran the poll script once.
    expect(scriptCalls(await direct.info('commandstats')) - scriptCalls(before)).toBe(1);
  });

  it('an admission reaches a waiting visitor within one lifetime', async () => {
    const clock = new ManualClock();
    const store = upstashStore();
    const { handler } = pop(store, clock, { state_cache_seconds: '3' });
    const cookie = cookieFrom(await visit(handler))!;
    await visit(handler, cookie);
    await store.admit('default', 1, clock.now(), admissionPolicy(parseConfig(source(BASE_SETTINGS))));
    // Within the lifetime the POP still answers from its cache...
    clock.advance(2_999);
    expect(await isAccess(await visit(handler, cookie))).toBe(false);
    // ...and one lifetime after the cache was filled it sees the admission.
    clock.advance(1);
    expect(await isAccess(await visit(handler, cookie))).toBe(true);
  });

  it('a ticket taken at another POP after a lost state or a reset keeps its place at a POP whose cached state is older; stale tickets still rejoin, the check costing one call a lifetime', async () => {
    const clock = new ManualClock();
    const store = new FaultyStore(upstashStore());
    const settings = { state_cache_seconds: '5', admit_per_period: '0' };
    const a = pop(store, clock, settings);
    const b = pop(store, clock, settings);
    const claims = (cookie: string) => JSON.parse(Buffer.from(cookie.split('.')[1]!, 'base64url').toString('utf8')) as { t: number; gen?: number; g?: number };
    // Two visitors in line at A; A keeps the state in its cache (generation 1).
    const stale = [cookieFrom(await visit(a.handler))!, cookieFrom(await visit(a.handler))!];
    await visit(a.handler, stale[0]);
    const lost = claims(stale[0]!).gen;
    // The store forgets; a newcomer at B takes ticket 1 of the new generation.
    await direct.flushall();
    const fresh = cookieFrom(await visit(b.handler))!;
    expect(claims(fresh).t).toBe(1);
    expect(claims(fresh).gen).not.toBe(lost);
    // At A, within its cache lifetime: the ticket is the store's current one, not a lost one.
    const calls = store.calls;
    const atA = await visit(a.handler, fresh);
    expect(atA.status).toBe(200);
    const kept = cookieFrom(atA) ?? fresh;
    expect(claims(kept)).toMatchObject({ t: 1, gen: claims(fresh).gen });
    expect(await direct.hget('wr:{default}:ctl', 'tail')).toBe('1');
    expect(store.calls - calls).toBe(1);
    // The lost generation's tickets rejoin behind it, one join each and no more checks this lifetime.
    const rejoined = await Promise.all(stale.map(async (c) => claims(cookieFrom(await visit(a.handler, c))!)));
    expect(rejoined.map((c) => c.t).sort()).toEqual([2, 3]);
    expect(rejoined.every((c) => c.gen === claims(fresh).gen)).toBe(true);
    expect(store.calls - calls).toBe(3);

    // A reset at B, and a newcomer there: its ticket is of the new epoch, A's cache of the old one.
    clock.advance(5_000);
    await visit(a.handler, fresh);
    await store.reset('default', clock.now(), admissionPolicy(parseConfig(source({ ...BASE_SETTINGS, ...settings }))));
    const afterReset = cookieFrom(await visit(b.handler))!;
    expect(claims(afterReset).g).toBeGreaterThan(claims(fresh).g ?? 0);
    const atA2 = await visit(a.handler, afterReset);
    expect(atA2.status).toBe(200);
    expect(claims(cookieFrom(atA2) ?? afterReset)).toMatchObject({ t: claims(afterReset).t, g: claims(afterReset).g });
  });

  it('automatic admission advances exactly once per period, whatever the number of POPs', async () => {
    const periodSeconds = 10;
    const quota = 5;
    for (const popCount of [1, 4, 12]) {
      await direct.flushall();
      const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
      const store = upstashStore();
      const settings = { state_cache_seconds: '1', admit_per_period: String(quota), admit_period_seconds: String(periodSeconds) };
      const pops = Array.from({ length: popCount }, () => pop(store, clock, settings));
      // A burst of 200 arrivals spread over the POPs: the first period's quota walks straight in.
      const cookies: string[] = [];
      for (let i = 0; i < 200; i++) cookies.push(cookieFrom(await visit(pops[i % popCount]!.handler))!);
      const cursors: number[] = [(await store.peek('default')).cursor];
      // One simulated minute: every second, 20 waiting visitors poll, each at a random POP, and the
      // visitors called so far come through (a call nobody takes up would be handed on between steps).
      for (let second = 1; second <= 60; second++) {
        clock.advance(1000);
        const called = cookies.slice(0, cursors.at(-1)).map((_, i) => i);
        // Each visitor's browser keeps the cookie it is given (a renewed ticket, an access token),
        // as a real one does: tickets expire after queue_timeout_seconds without a poll.
        const go = async (popIndex: number, visitor: number): Promise<void> => {
          const renewed = cookieFrom(await visit(pops[popIndex % popCount]!.handler, cookies[visitor]));
          if (renewed !== undefined) cookies[visitor] = renewed;
        };
        await Promise.all([
          ...Array.from({ length: 20 }, (_, i) => go(second * 7 + i, (second * 13 + i) % cookies.length)),
          ...called.map((visitor) => go(visitor, visitor)),
        ]);
        cursors.push((await store.peek('default')).cursor);
      }
      const steps = cursors.slice(1).map((c, i) => c - cursors[i]!);
      // The cursor moved by the quota exactly at each period boundary (every 10 s), never between.
      expect(steps.filter((s) => s !== 0), `${popCount} POPs`).toEqual(Array(6).fill(quota));
      steps.forEach((step, i) => expect(step !== 0, `second ${i + 1}`).toBe((i + 1) % periodSeconds === 0));
    }
  });
});

function scriptCalls(commandstats: string): number {
  let total = 0;
  for (const match of commandstats.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) total += Number(match[1]);
  return total;
}

async function isAccess(response: Response): Promise<boolean> {
  const cookie = cookieFrom(response);
  if (cookie === undefined) return false;
  const claims = JSON.parse(Buffer.from(cookie.split('.')[1]!, 'base64url').toString('utf8')) as { k: string };
  return claims.k === 'a';
}
