/**
 * Requests that each cost a store call must not let one client drive the store (DESIGN.md: store
 * load follows arrivals, not the crowd's behaviour): VIP attempts count for the client's ticket
 * limit, the heartbeat script's calls refresh a slot only when it is due and stay under a
 * per-client allowance, and a random-method ticket polled faster than its page does is answered
 * from the POP's cache. Store calls are counted with FaultyStore around the in-memory store.
 */
import { describe, expect, it } from 'vitest';
import { admissionPolicy } from '../src/core/context';
import { parseConfig } from '../src/core/config';
import { DRAW_GATE_MAX_SECONDS, drawGateSeconds } from '../src/core/visit';
import { hashVipCode } from '../src/core/vip';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryQueueStore } from '../src/store/memory-store';
import { BASE_SETTINGS, FaultyStore, ManualClock, MemoryLogger, cookieFrom, createVip, payloadOf, source, testHandler } from './support/fixtures';

const SITE = 'https://shop.example';
const CLIENT = { address: '198.51.100.7', pop: 'TEST' };
const N = 1000;

function rig(settings: Record<string, string>) {
  const clock = new ManualClock();
  const inner = new MemoryQueueStore();
  const store = new FaultyStore(inner);
  const logger = new MemoryLogger();
  const handler = testHandler(settings, { store, clock, logger, ticketLimiter: new MemoryFailureLimiter(clock) });
  const config = parseConfig(source({ ...BASE_SETTINGS, ...settings }));
  const policy = admissionPolicy(config);
  const get = (path = '/', cookie?: string, client = CLIENT) =>
    handler(new Request(`${SITE}${path}`, { headers: cookie !== undefined ? { cookie: `waiting_room=${cookie}` } : {} }), client);
  const post = (path: string, cookie: string, client = CLIENT) => handler(new Request(`${SITE}${path}`, { method: 'POST', headers: { cookie: `waiting_room=${cookie}` } }), client);
  return { clock, inner, store, logger, handler, config, policy, get, post };
}

/** A well-formed VIP code that no store holds. */
const UNKNOWN_CODE = 'ABCDEFGHJKMNPQRS';

describe('VIP attempts count for the ticket limit', () => {
  it('a flood of codes from one client costs a store call only while the client is under the limit', async () => {
    const r = rig({ ticket_limit: '4', ticket_window_seconds: '10', ticket_penalty_minutes: '2' });
    const statuses = new Map<number, number>();
    for (let i = 0; i < N; i++) {
      const response = await r.get(`/?wr_vip=${UNKNOWN_CODE}`);
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
    // Before: 1000 use_vip calls and 4 joins (1004). Now the first 4 requests each try the code and,
    // as it does not work, take a ticket (counted once: the same request); the rest are refused.
    expect(r.store.calls).toBe(8);
    expect(statuses.get(200)).toBe(4);
    expect(statuses.get(429)).toBe(N - 4);
    // The refusal is the ticket limit's own answer.
    const refused = await r.get(`/?wr_vip=${UNKNOWN_CODE}`);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('120');
    expect(r.logger.last).toMatchObject({ decision: 'ticket_limited' });
    expect(r.logger.last?.reason).toMatch(/^ticket_held/);
  });

  it('a held client is refused even with a good code, and the code keeps its use; a malformed code costs nothing', async () => {
    const r = rig({ ticket_limit: '2' });
    const code = 'QRSTUVWXYZ234567';
    await createVip(r.inner, 'default', await hashVipCode(code), { uses: 1, expiresAtMs: null }, r.clock.now());
    // A visitor with a waiting ticket polls without counting; its VIP attempts count.
    const waiting = cookieFrom(await r.get('/'))!;
    for (let i = 0; i < 5; i++) await r.get(`/?wr_vip=${UNKNOWN_CODE}`, waiting);
    const calls = r.store.calls;
    const held = await r.get(`/?wr_vip=${code}`, waiting);
    expect(held.status).toBe(429);
    expect(r.store.calls).toBe(calls);
    // Another client uses the code: its one use was still there.
    const other = await r.get(`/?wr_vip=${code}`, undefined, { address: '203.0.113.9', pop: 'TEST' });
    expect(other.status).toBe(303);
    expect(payloadOf(cookieFrom(other)!)).toMatchObject({ k: 'a', t: 0 });
    // A malformed code is no attempt: no count, no store call of its own, the visitor queues as usual.
    const fresh = rig({ ticket_limit: '1' });
    const ticket = cookieFrom(await fresh.get('/'))!;
    const polls = fresh.store.calls;
    for (let i = 0; i < 10; i++) expect((await fresh.get('/?wr_vip=nope', ticket)).status).toBe(200);
    expect(fresh.store.calls).toBe(polls + 10);
  });
});

describe('the heartbeat script under a flood', () => {
  const CAPACITY = { max_active: '10', activity_refresh_seconds: '30', ticket_limit: '4', ticket_window_seconds: '10' };

  async function admitted(r: ReturnType<typeof rig>): Promise<string> {
    const cookie = cookieFrom(await r.get('/'))!;
    expect(payloadOf(cookie)).toMatchObject({ k: 'a' });
    expect(payloadOf(cookie)['r']).toBeTypeOf('number');
    return cookie;
  }

  it('a heartbeat refreshes the slot only once it is due, and replays of a due cookie stay under the client allowance', async () => {
    const r = rig(CAPACITY);
    const cookie = await admitted(r);
    const before = r.store.calls;
    // Before: 1000 heartbeats at one instant were 1000 touch calls.
    const early = await Promise.all(Array.from({ length: N }, () => r.post('/__wr/heartbeat', cookie)));
    expect(r.store.calls).toBe(before);
    expect(await early[0]!.json()).toEqual({ state: 'active', refreshed: false });
    expect(r.logger.last?.reason).toBe('refresh_not_due');

    // Due: the first refreshes the slot and renews the cookie; a replay flood of the old cookie
    // reaches the store only ticket_limit times in the window.
    r.clock.advance(30_000);
    const due = await r.post('/__wr/heartbeat', cookie);
    expect(await due.json()).toEqual({ state: 'active', refreshed: true });
    expect(payloadOf(cookieFrom(due)!)['r']).toBe(Math.floor(r.clock.now() / 1000));
    const flood = await Promise.all(Array.from({ length: N }, () => r.post('/__wr/heartbeat', cookie)));
    expect(r.store.calls).toBe(before + 4);
    expect(flood.every((response) => response.status === 200)).toBe(true);
    expect(r.logger.records.filter((l) => l.reason?.startsWith('session_limited'))).toHaveLength(N - 3);
    // The renewed cookie is not due: no store call.
    await r.post('/__wr/heartbeat', cookieFrom(due)!);
    expect(r.store.calls).toBe(before + 4);
  });

  it('a replay flood from a new /64 each time stays under the /48\'s allowance, 16 × the client\'s', async () => {
    const r = rig(CAPACITY);
    const cookie = await admitted(r);
    r.clock.advance(30_000);
    const before = r.store.calls;
    for (let n = 0; n < 300; n++) await r.post('/__wr/heartbeat', cookie, { address: `2001:db8:9:${n.toString(16)}::1`, pop: 'TEST' });
    expect(r.store.calls - before).toBe(64);
    expect(r.logger.last).toMatchObject({ reason: 'session_limited: store call 300 in 10 s from its /48, over 64; answered without the store', client: '2001:db8:9::/48' });
  });

  it('a leave flood stays under the client allowance; after a leave the next heartbeat refreshes the slot', async () => {
    const r = rig(CAPACITY);
    const cookie = await admitted(r);
    const before = r.store.calls;
    // Following a link: the beacon, then the next page's first heartbeat, a second later.
    expect((await r.post('/__wr/leave', cookie)).status).toBe(204);
    r.clock.advance(1_000);
    const beat = await r.post('/__wr/heartbeat', cookie);
    expect(await beat.json()).toEqual({ state: 'active', refreshed: true });
    expect(r.store.calls).toBe(before + 2);
    // The slot outlives the grace: it was refreshed.
    r.clock.advance((r.config.leaveGraceSeconds + 5) * 1000);
    expect((await r.inner.stats('default', r.clock.now(), r.policy)).active).toBe(1);

    // Before: 1000 leaves were 1000 leave calls. Now 2 more (4 in the window), then none.
    r.clock.advance(10_000);
    const calls = r.store.calls;
    const leaves = await Promise.all(Array.from({ length: N }, () => r.post('/__wr/leave', cookie)));
    expect(leaves.every((response) => response.status === 204)).toBe(true);
    expect(r.store.calls).toBe(calls + 4);
  });
});

describe('random method: polls faster than the page are answered from the POP cache', () => {
  const RANDOM = { queue_method: 'random', admit_per_period: '0', state_cache_seconds: '1', refresh_seconds: '20' };

  it('the gate is at most half the refresh interval and at most 5 s, and off with the cache off', () => {
    expect(drawGateSeconds({ stateCacheSeconds: 1, refreshSeconds: 20 })).toBe(DRAW_GATE_MAX_SECONDS);
    expect(drawGateSeconds({ stateCacheSeconds: 1, refreshSeconds: 5 })).toBe(2);
    expect(drawGateSeconds({ stateCacheSeconds: 1, refreshSeconds: 1 })).toBe(1);
    expect(drawGateSeconds({ stateCacheSeconds: 0, refreshSeconds: 20 })).toBe(0);
  });

  it('1000 polls of one ticket at one instant cost one draw; polls at the page interval each reach the store', async () => {
    const r = rig(RANDOM);
    let cookie = cookieFrom(await r.get('/'))!;
    expect(payloadOf(cookie)).toMatchObject({ k: 'w', t: 1 });
    r.clock.advance(1_000);
    const before = r.store.calls;
    // Before: 1000 polls were 1000 draw calls.
    for (let i = 0; i < N; i++) await r.get('/', cookie);
    expect(r.store.calls).toBe(before + 1);
    await Promise.all(Array.from({ length: N }, () => r.get('/', cookie)));
    expect(r.store.calls).toBe(before + 1);
    expect(r.logger.last).toMatchObject({ decision: 'waiting', cache: 'hit', ticket: 1 });
    // A poll every second for a minute: one draw per gate (5 s), never falling out of the draw.
    const start = r.store.calls;
    for (let s = 0; s < 60; s++) {
      r.clock.advance(1_000);
      cookie = cookieFrom(await r.get('/', cookie))!;
      expect(payloadOf(cookie)).toMatchObject({ k: 'w', t: 1 });
    }
    expect(r.store.calls - start).toBe(12);
    // At the page's interval (20 s), every poll is a draw: presence renewed, the draw asked.
    const paced = r.store.calls;
    for (let i = 0; i < 5; i++) {
      r.clock.advance(20_000);
      cookie = cookieFrom(await r.get('/', cookie))!;
    }
    expect(r.store.calls - paced).toBe(5);
  });

  it('a fast poller gains nothing and a drawn ticket learns of it within the gate', async () => {
    const r = rig(RANDOM);
    let fast = cookieFrom(await r.get('/'))!;
    let slow = cookieFrom(await r.get('/', undefined, { address: '203.0.113.9', pop: 'TEST' }))!;
    // Both stay in the draw for several presence windows, the one polling every 100 ms and the
    // one polling at the page's interval.
    let fastCalls = 0;
    for (let t = 0; t < 120_000; t += 100) {
      r.clock.advance(100);
      const calls = r.store.calls;
      fast = cookieFrom(await r.get('/', fast))!;
      fastCalls += r.store.calls - calls;
      expect(payloadOf(fast)['t']).toBe(1);
      if (t % 20_000 === 0) {
        slow = cookieFrom(await r.get('/', slow))!;
        expect(payloadOf(slow)['t']).toBe(2);
      }
    }
    // One draw per 5 s, not one per 100 ms.
    expect(fastCalls).toBe(24);
    expect((await r.inner.stats('default', r.clock.now(), r.policy)).waiting).toBe(2);

    // One is drawn right after the fast poller's answer was kept: it learns within the gate.
    r.clock.advance(DRAW_GATE_MAX_SECONDS * 1000);
    const kept = r.store.calls;
    fast = cookieFrom(await r.get('/', fast))!;
    expect(r.store.calls).toBe(kept + 1);
    await r.inner.admit('default', 2, r.clock.now(), r.policy);
    r.clock.advance(DRAW_GATE_MAX_SECONDS * 1000 - 100);
    fast = cookieFrom(await r.get('/', fast))!;
    expect(payloadOf(fast)).toMatchObject({ k: 'w' });
    r.clock.advance(100);
    const learnt = await r.get('/', fast);
    expect(learnt.headers.get('x-origin')).toBe('yes');
    expect(payloadOf(cookieFrom(learnt)!)).toMatchObject({ k: 'a', t: 1 });
  });

  it('with the per-POP cache off, every poll is a draw, as before', async () => {
    const r = rig({ ...RANDOM, state_cache_seconds: '0' });
    const cookie = cookieFrom(await r.get('/'))!;
    const before = r.store.calls;
    for (let i = 0; i < 10; i++) await r.get('/', cookie);
    expect(r.store.calls).toBe(before + 10);
  });
});
