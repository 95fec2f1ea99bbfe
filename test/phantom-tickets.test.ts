/**
 * Joins that time out: the store takes the ticket but its answer comes after the handler gave up,
 * so the visitor never gets its ticket. Through the handler, the real Upstash store and the REST
 * bridge on a real redis-server: "admit N" must still let in N visitors who show up, in order; and
 * a visitor who comes back gets the ticket its lost join took (its join key), not a second one, so
 * a walk-in's seat is its own and not a phantom's.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/core/config';
import { admissionPolicy, type Handler } from '../src/core/handler';
import type { QueueStore } from '../src/core/ports';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, payloadOf, source, testHandler } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';

const TOKEN = 'phantom-test-token';
const STORE_TIMEOUT_MS = 200;

/** A store whose join answers arrive `lateMs` after the store has done its work, while `late` is on. */
class LateJoins extends FaultyStore {
  late = false;
  /** Joins whose answer has not come back yet (late ones sleep here after the store did its work). */
  inFlight = 0;
  constructor(inner: QueueStore, lateMs: number) {
    super(inner);
    const join = this.join;
    // The join ring keeps one key per slot (a key's first three hex digits), so two of a test's ten
    // random keys share a slot about once in a hundred runs, and the later join then overwrites the
    // earlier one's entry: the ring's documented trade-off, which the store contract tests on its
    // own. Here each key gets a slot of its own (a key, and its retry, always the same one), so
    // these tests are about lost answers and never fail by that chance.
    const slots = new Map<string, string>();
    const ownSlot = (key: string): string => {
      let placed = slots.get(key);
      if (placed === undefined) slots.set(key, (placed = (slots.size + 1).toString(16).padStart(3, '0') + key.slice(3)));
      return placed;
    };
    this.join = async (queue, nowMs, policy, options) => {
      this.inFlight += 1;
      try {
        const result = await join(queue, nowMs, policy, options?.joinKey === undefined ? options : { ...options, joinKey: ownSlot(options.joinKey) });
        if (this.late) await sleep(lateMs);
        return result;
      } finally {
        this.inFlight -= 1;
      }
    };
  }
}

/** Every join the handler gave up on has finished at the store (a deadline only bounds a failure). */
async function settled(store: LateJoins): Promise<void> {
  await expect.poll(() => store.inFlight, { timeout: 15_000, interval: 20, message: 'joins still waiting for their answer' }).toBe(0);
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
    const settings = { state_cache_seconds: '1', refresh_seconds: '2' };
    const config = parseConfig(source({ ...BASE_SETTINGS, ...settings, store_timeout_ms: String(STORE_TIMEOUT_MS) }));
    const handlerWith = (timeoutMs: number): Handler => testHandler({ ...settings, store_timeout_ms: String(timeoutMs) }, { store, clock });
    // Joins run against the short timeout; the polls and claims afterwards against a generous one, so
    // that only the joins this test makes late (not a busy machine) decide who holds a ticket.
    const joining = handlerWith(STORE_TIMEOUT_MS);
    const polling = handlerWith(10_000);
    const request = (cookie?: string) => new Request('https://shop.example/', { headers: cookie ? { cookie: `waiting_room=${cookie}` } : {} });
    const visit = (cookie?: string) => (cookie === undefined ? joining : polling)(request(cookie), { address: '198.51.100.1', pop: 'SIM' });
    // Load the scripts first: a NOSCRIPT miss must not be what makes a join late.
    await inner.join('warm-up', clock.now(), admissionPolicy(config));

    // 30 arrivals; every third join answers too late: the visitor is held without a ticket (its
    // cookie keeps only the join's key), and here never comes back.
    const holders = new Map<number, string>();
    for (let i = 1; i <= 30; i += 1) {
      store.late = i % 3 === 0;
      const response = await visit();
      const cookie = cookieFrom(response);
      // A join late for another reason (a busy machine) makes one more phantom: the same case.
      const ticket = cookie === undefined ? 0 : (payloadOf(cookie)['t'] as number);
      if (store.late) expect(ticket).toBe(0);
      if (ticket > 0) holders.set(ticket, cookie!);
    }
    store.late = false;
    // Let the late answers land (however long a busy machine takes): the store did take every ticket.
    await settled(store);
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

  it('capacity mode: a visitor whose join answer was lost comes back to the ticket that join took; the seats are all real people', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 25, 12, 0, 0));
    const inner = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: TOKEN, retries: 0 })), keyPrefix: 'wr-retry' });
    const store = new LateJoins(inner, 3 * STORE_TIMEOUT_MS);
    const settings = { max_active: '5', state_cache_seconds: '1', refresh_seconds: '2' };
    const handlerWith = (timeoutMs: number): Handler => testHandler({ ...settings, store_timeout_ms: String(timeoutMs) }, { store, clock });
    const joining = handlerWith(STORE_TIMEOUT_MS);
    const retrying = handlerWith(10_000);
    const policy = admissionPolicy(parseConfig(source({ ...BASE_SETTINGS, ...settings })));
    const request = (cookie?: string) => new Request('https://shop.example/', { headers: cookie ? { cookie: `waiting_room=${cookie}` } : {} });
    await inner.join('warm-up', clock.now(), policy);

    // Ten arrivals at a room of five; every second join answers too late.
    const pending: string[] = [];
    const tickets = new Map<number, Record<string, unknown>>();
    for (let i = 1; i <= 10; i += 1) {
      store.late = i % 2 === 0;
      const cookie = cookieFrom(await joining(request(), { address: `198.51.100.${i}`, pop: 'SIM' }));
      expect(cookie).toBeDefined();
      const claims = payloadOf(cookie!);
      // A join late for another reason (a busy machine) loses its answer too: the same case.
      if (store.late) expect(claims['t']).toBe(0);
      if (claims['t'] === 0) {
        // No ticket, only the key of the join that got no answer.
        expect(claims).toMatchObject({ k: 'w', p: expect.stringMatching(/^[0-9a-f]{16}$/) });
        pending.push(cookie!);
      } else {
        tickets.set(claims['t'] as number, claims);
      }
    }
    store.late = false;
    await settled(store);
    // The store took all ten tickets; the first five hold the seats, two of them for visitors who did not hear.
    expect(await store.peek('default')).toEqual({ tail: 10, cursor: 5 });
    expect(pending.length).toBeGreaterThanOrEqual(5);

    // They come back: each gets the ticket its lost join took, and no new ticket is taken.
    clock.advance(2_000);
    const retried: number[] = [];
    for (const cookie of pending) {
      const claims = payloadOf(cookieFrom(await retrying(request(cookie), { address: '198.51.100.200', pop: 'SIM' }))!);
      expect(claims['t']).toBeGreaterThan(0);
      retried.push(claims['t'] as number);
      expect(tickets.has(claims['t'] as number)).toBe(false);
      tickets.set(claims['t'] as number, claims);
    }
    expect([...tickets.keys()].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await store.peek('default')).toEqual({ tail: 10, cursor: 5 });
    // Tickets 1..5 are in (the late walk-ins included, with their seats), 6..10 wait: five seats,
    // five people with an access token, no seat held by nobody.
    for (let t = 1; t <= 10; t += 1) expect(tickets.get(t)!['k'], `ticket ${t}`).toBe(t <= 5 ? 'a' : 'w');
    expect(await store.stats('default', clock.now(), policy)).toMatchObject({ active: 5, reserved: 0, admittedLastMinute: 5 });
    // A second retry with the same key changes nothing either.
    const again = payloadOf(cookieFrom(await retrying(request(pending[0]), { address: '198.51.100.200', pop: 'SIM' }))!);
    expect(again['t']).toBe(retried[0]);
    expect(await store.peek('default')).toEqual({ tail: 10, cursor: 5 });
  });
});
