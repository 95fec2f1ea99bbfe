/**
 * Ticket blocks at the edge (src/core/edge-blocks.ts, visit.ts): what the handler does around the
 * allocator, on every store (memory, Upstash through the bridge, Redis), each behind a wrapper
 * that can make it fail, on a manual clock. A failing store is never a visitor's 5xx and the holes
 * a failed join carried reach the store on the next; a cached state and a block of different lives
 * are settled by the store; a retried join, a cookie of a lost state and a walk-in go to the store;
 * capacity mode's room is not traded for a handed number.
 */
import jws from 'jws';
import { describe, expect, it, vi } from 'vitest';
import { admissionPolicy } from '../src/core/context';
import { forgetTicketBlocks } from '../src/core/edge-blocks';
import type { QueueState, QueueStore, RequestLog } from '../src/core/ports';
import { waitingOf } from '../src/core/types';
import { DEFAULT_BLOCK_SETTINGS } from '../src/core/ticket-blocks';
import { parseConfig } from '../src/core/config';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { useEveryStore } from './support/every-store';
import { BASE_SETTINGS, cookieFrom, FaultyStore, KEY_1, ManualClock, MemoryLogger, payloadOf, purposeKey, source, testHandler } from './support/fixtures';

const SETTINGS = { ticket_blocks: '10', state_cache_seconds: '5', admit_per_period: '0' };
const CACHE_KEY = 'queue-state:default';

interface Answer {
  readonly status: number;
  readonly claims: Record<string, unknown> | undefined;
  readonly cookie: string | undefined;
  readonly line: RequestLog;
  readonly page: string;
}

function rig(store: QueueStore, settings: Record<string, string> = {}) {
  forgetTicketBlocks();
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  const cache = new MemoryStateCache(clock);
  const faulty = new FaultyStore(store);
  const all = { ...SETTINGS, ...settings };
  const handler = testHandler(all, { store: faulty, clock, logger, cache });
  const policy = admissionPolicy(parseConfig(source({ ...BASE_SETTINGS, ...all })));
  /** A visitor's request: without a cookie, a new visitor. */
  const request = async (cookie?: string): Promise<Answer> => {
    const response = await handler(new Request('https://shop.example/products', { headers: { accept: 'text/html', ...(cookie !== undefined && { cookie: `waiting_room=${cookie}` }) } }), {
      address: '192.0.2.7',
      pop: undefined,
    });
    const set = cookieFrom(response);
    const page = await response.text();
    return { status: response.status, cookie: set, claims: set === undefined ? undefined : payloadOf(set), line: logger.last!, page };
  };
  /** Arrivals until this instance holds numbers of a block it has not handed out; the last answer. */
  const untilLeftovers = async (): Promise<{ last: Answer; end: number }> => {
    let end = 0;
    for (let i = 0; i < 200; i++) {
      const answer = await request();
      end = Math.max(end, Number(/took \d+-(\d+)/.exec(answer.line.block ?? '')?.[1] ?? 0));
      if (i >= 40 && end > (answer.claims?.['t'] as number)) return { last: answer, end };
    }
    throw new Error('no block with numbers left');
  };
  return { clock, logger, cache, store: faulty, inner: store, policy, handler, request, untilLeftovers };
}

describe.each(['memory', 'upstash', 'redis'] as const)('ticket blocks at the edge, %s store', (kind) => {
  const stores = useEveryStore();
  const fresh = (): QueueStore => stores[kind]();

  it("a failing store is not the visitor's 5xx, and the holes its failed join carried reach the store on the next", async () => {
    const r = rig(fresh());
    const { last, end } = await r.untilLeftovers();
    const lastTicket = last.claims!['t'] as number;
    // The block ages out while the store fails: the join that would report its rest fails too.
    r.clock.advance(DEFAULT_BLOCK_SETTINGS.maxAgeMs);
    r.store.mode = 'error';
    const failed = await r.request();
    expect(failed.status).toBe(200);
    expect(failed.claims).toMatchObject({ k: 'w', t: 0 });
    expect(failed.claims?.['p']).toMatch(/^[0-9a-f]{16}$/);
    expect(failed.line.store_error).toBeDefined();
    expect(failed.line.block).toBeUndefined();
    r.store.mode = 'ok';
    const next = await r.request();
    expect(next.line.block).toMatch(new RegExp(`reported ${end - lastTicket} holes`));
    expect(next.claims).toMatchObject({ k: 'w', t: end + 1 });
  });

  it('ticket_block_ms sets how long a block is handed from: 200 ms here, not the default 500', async () => {
    const r = rig(fresh(), { ticket_block_ms: '200' });
    const { last, end } = await r.untilLeftovers();
    const lastTicket = last.claims!['t'] as number;
    // Still young: the next number comes from the block, no store call.
    r.clock.advance(199);
    const young = await r.request();
    expect(young.line.block).toBe('handed');
    expect(young.claims).toMatchObject({ k: 'w', t: lastTicket + 1 });
    // 200 ms after its join was sent the block is over (at the default it would last 300 ms more):
    // the next arrival joins and reports the rest as holes.
    r.clock.advance(1);
    const calls = r.store.calls;
    const aged = await r.request();
    expect(r.store.calls).toBe(calls + 1);
    expect(aged.line.block).toMatch(new RegExp(`reported ${end - lastTicket - 1} holes`));
    expect(aged.claims).toMatchObject({ k: 'w', t: end + 1 });
  });

  it('while a block lasts, new visitors get numbers with no store call even when the store fails', async () => {
    const r = rig(fresh());
    const { last, end } = await r.untilLeftovers();
    r.store.mode = 'error';
    const calls = r.store.calls;
    let ticket = last.claims!['t'] as number;
    while (ticket < end) {
      const answer = await r.request();
      expect(answer.status).toBe(200);
      expect(answer.line.block).toBe('handed');
      expect(answer.claims).toMatchObject({ k: 'w', t: ticket + 1 });
      ticket += 1;
    }
    expect(r.store.calls).toBe(calls);
    // The block used up, the next one joins, fails, and is held (store_failure = hold).
    const held = await r.request();
    expect(held.status).toBe(200);
    expect(held.claims).toMatchObject({ t: 0 });
    expect(r.store.calls).toBe(calls + 1);
  });

  it("a cached state of another life than the block's is settled by the store: a reset voids the block, a stale cache does not", async () => {
    const r = rig(fresh());
    const { last, end } = await r.untilLeftovers();
    const epoch = (last.claims!['g'] as number | undefined) ?? 0;
    // A state cached from before this life (another instance's answer): the store says the block stands.
    const current = await r.inner.poll('default', r.clock.now(), r.policy);
    await r.cache.put(CACHE_KEY, { ...current, epoch: current.epoch + 12_345 } satisfies QueueState, 5);
    const stale = await r.request();
    expect(stale.line.block).toBe('handed');
    expect(stale.claims).toMatchObject({ k: 'w', t: (last.claims!['t'] as number) + 1 });
    expect(stale.claims?.['g'] ?? 0).toBe(epoch);
    // The queue reset, and another instance's poll cached the new life: the block is void.
    r.clock.advance(1);
    const resetAt = r.clock.now();
    await r.inner.reset('default', resetAt, r.policy);
    await r.cache.put(CACHE_KEY, await r.inner.poll('default', resetAt, r.policy), 5);
    const after = await r.request();
    expect(after.line.block).not.toBe('handed');
    expect(after.claims).toMatchObject({ k: 'w', g: resetAt });
    expect(after.claims!['t']).toBeGreaterThan(end);
    // Nothing of the old block is handed out afterwards: the next number is the new life's next.
    const then = await r.request();
    expect(then.claims).toMatchObject({ k: 'w', t: (after.claims!['t'] as number) + 1, g: resetAt });
  });

  it('a retried join (its key) goes to the store while a block lasts', async () => {
    const r = rig(fresh());
    r.store.mode = 'error';
    const pending = await r.request();
    expect(pending.claims?.['p']).toBeDefined();
    r.store.mode = 'ok';
    // Past the POP's memory of the failure, which would answer the retry without asking.
    r.clock.advance(6_000);
    const { last, end } = await r.untilLeftovers();
    const calls = r.store.calls;
    const retried = await r.request(pending.cookie);
    expect(r.store.calls).toBe(calls + 1);
    expect(retried.line.block).not.toBe('handed');
    expect(retried.claims).toMatchObject({ k: 'w' });
    expect(retried.claims?.['t']).toBeGreaterThan(end);
    // The block still serves the next new visitor.
    const next = await r.request();
    expect(next.line.block).toBe('handed');
    expect(next.claims?.['t']).toBe((last.claims!['t'] as number) + 1);
  });

  it('a cookie of a lost state joins in the store, which must hear of the loss, while a block lasts', async () => {
    const r = rig(fresh());
    const { last, end } = await r.untilLeftovers();
    const generation = last.claims!['gen'] as number;
    // A waiting ticket of another life of the store, signed with our key (made by jws, not by the room).
    const iat = Math.floor(r.clock.now() / 1000);
    const lost = jws.sign({
      header: { alg: 'HS256', kid: 'k1', typ: 'JWT' },
      payload: { q: 'default', k: 'w', t: 3, iat, exp: iat + 60, j: iat, gen: generation === 1 ? 2 : 1 },
      secret: purposeKey(KEY_1, 'waiting'),
    });
    const calls = r.store.calls;
    const rejoined = await r.request(lost);
    expect(rejoined.line.reason).toBe('ticket_from_lost_state');
    expect(rejoined.line.block).not.toBe('handed');
    // The POP's cached state is of another era than the ticket: the store is asked once whether the
    // cache is the older one (it is not), then the join is the other store call.
    expect(r.store.calls).toBe(calls + 2);
    expect(rejoined.claims).toMatchObject({ k: 'w', gen: generation });
    expect(rejoined.claims!['t']).toBeGreaterThan(end);
    // Another lost ticket in the same cache lifetime: its join alone.
    const again = await r.request(lost);
    expect(again.line.reason).toBe('ticket_from_lost_state');
    expect(r.store.calls).toBe(calls + 3);
    expect(again.claims!['t']).toBeGreaterThan(rejoined.claims!['t'] as number);
    // The block still serves the next new visitor.
    const next = await r.request();
    expect(next.line.block).toBe('handed');
    expect(next.claims?.['t']).toBe((last.claims!['t'] as number) + 1);
  });

  /**
   * Joins held at a gate the test opens (or fails), counted as they are asked: arrivals can find a
   * block join under way for as long as the test wants, with no timing involved.
   */
  function holdJoins(r: ReturnType<typeof rig>) {
    const join = r.store.join;
    let open: () => void = () => undefined;
    let fail: (error: Error) => void = () => undefined;
    const gate = new Promise<void>((resolve, reject) => {
      open = resolve;
      fail = reject;
    });
    const held = { asked: 0, open, fail };
    r.store.join = async (...a) => {
      held.asked += 1;
      await gate;
      return join(...a);
    };
    return held;
  }

  /** Arrivals at a still clock until blocks are large, then past every block's age: none is live. */
  async function warmedWithoutBlock(r: ReturnType<typeof rig>): Promise<void> {
    for (let i = 0; i < 100; i++) expect((await r.request()).status).toBe(200);
    r.clock.advance(DEFAULT_BLOCK_SETTINGS.maxAgeMs);
  }

  /** A block join held under way, and three arrivals behind it that found no block: they wait, no join of their own. */
  async function threeBehindAHeldJoin(r: ReturnType<typeof rig>): Promise<{ held: ReturnType<typeof holdJoins>; first: ReturnType<typeof r.request>; behind: ReturnType<typeof r.request>[] }> {
    await warmedWithoutBlock(r);
    const held = holdJoins(r);
    const first = r.request();
    await vi.waitFor(() => expect(held.asked).toBe(1), { timeout: 5_000 });
    const behind = [r.request(), r.request(), r.request()];
    await new Promise((resolve) => setImmediate(resolve));
    expect(held.asked).toBe(1);
    return { held, first, behind };
  }

  it('arrivals that find no block while a block join is under way wait for it and take its numbers in the order they came, with no store call', async () => {
    const r = rig(fresh());
    const { held, first, behind } = await threeBehindAHeldJoin(r);
    held.open();
    const led = await first;
    expect(led.line.block).toMatch(/^took \d+-\d+/);
    const t = led.claims!['t'] as number;
    const answers = await Promise.all(behind);
    expect(held.asked).toBe(1);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.map((a) => a.line.block)).toEqual(['handed', 'handed', 'handed']);
    expect(answers.map((a) => a.claims!['t'])).toEqual([t + 1, t + 2, t + 3]);
  });

  it("a join under way that fails sends those waiting for it to join themselves: no visitor's 5xx", async () => {
    const r = rig(fresh());
    const { held, first, behind } = await threeBehindAHeldJoin(r);
    r.store.mode = 'error';
    held.fail(new Error('store is down'));
    const answers = [await first, ...(await Promise.all(behind))];
    // Each asked the store itself (none is left waiting) and got the holding page with its join's key.
    expect(held.asked).toBe(4);
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.claims).toMatchObject({ k: 'w', t: 0 });
      expect(answer.claims?.['p']).toMatch(/^[0-9a-f]{16}$/);
    }
  });

  it('a visitor behind 50 reported holes is told the people really ahead, on the page, in the status and in the waiting count', async () => {
    const r = rig(fresh());
    const q = 'default';
    // 1 holds a number, 2..51 are a block's rest reported as holes, 52 holds one: two people.
    await r.inner.join(q, r.clock.now(), r.policy, { block: { size: 51 } });
    const seen = await r.inner.stats(q, r.clock.now(), r.policy);
    await r.inner.join(q, r.clock.now(), r.policy, { block: { size: 1, holes: { epoch: seen.epoch, generation: seen.generation, ranges: [{ from: 2, to: 51 }] } } });
    // The visitor's own join answers the state it is told its place from.
    const visitor = await r.request();
    expect(visitor.claims).toMatchObject({ k: 'w', t: 53 });
    const status = async (): Promise<Record<string, unknown>> => {
      const response = await r.handler(new Request('https://shop.example/__wr/status', { headers: { accept: 'application/json', cookie: `waiting_room=${visitor.cookie}` } }), { address: '192.0.2.7', pop: undefined });
      return (await response.json()) as Record<string, unknown>;
    };
    expect(await status()).toMatchObject({ state: 'waiting', ticket: 53, place: 3, ahead: 2 });
    expect(visitor.page).toContain('2 people are ahead of you');
    // From a state loaded afresh (the cache's lifetime over), the same.
    r.clock.advance(6_000);
    expect(await status()).toMatchObject({ place: 3, ahead: 2 });
    // The line's waiting count: 3 people, not 53 numbers.
    expect(waitingOf(await r.inner.stats(q, r.clock.now(), r.policy), false)).toBe(3);
    // A peek (what several databases split an admit N by) reports the same holes, writing nothing.
    expect(await r.inner.peek(q)).toEqual({ tail: 53, cursor: 0, holes: [{ from: 2, to: 51 }] });
    // Once 1 is let in, the holes right behind it are passed over: one person ahead.
    await r.inner.admit(q, 1, r.clock.now(), r.policy);
    r.clock.advance(6_000);
    expect(await status()).toMatchObject({ place: 2, ahead: 1 });
    expect(await r.inner.peek(q)).toEqual({ tail: 53, cursor: 51 });
  });

  it('capacity mode with room: every visitor walks in at its join, none is handed a number to wait with', async () => {
    const r = rig(fresh(), { max_active: '1000' });
    for (let i = 0; i < 60; i++) {
      const answer = await r.request();
      expect(answer.claims).toMatchObject({ k: 'a' });
      expect(answer.line.block).toBeUndefined();
    }
    expect(r.store.calls).toBe(60);
  });
});
