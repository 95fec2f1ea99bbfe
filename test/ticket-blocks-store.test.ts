/**
 * Ticket blocks in the store (issue 34): a join that takes B numbers, and the holes its caller
 * reports, on every store (memory, Upstash through the bridge, Redis) against a real redis-server.
 * What holes must never do: spend an admission, a reservation or a slot. What they may do when
 * nobody reports them: be called and lapse, as an abandoned ticket does. And what a block join
 * bills, measured with INFO commandstats as Upstash counts it.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdmissionPolicy, BlockHoles, JoinOptions, QueueStore, TicketRange } from '../src/core/ports';
import { MAX_BLOCK_HOLE_RANGES, MAX_TICKET_BLOCK } from '../src/core/ports';
import { startUpstashBridge } from '../src/node/upstash-bridge';
import { MAX_STORED_HOLE_RANGES, StoreArgumentError } from '../src/store/scripts';
import { TicketBlocks } from '../src/core/ticket-blocks';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { billedCommands } from './support/command-stats';
import { expectSameOnEveryStore, useEveryStore } from './support/every-store';
import { startRedisServer } from './support/redis-server';

const T0 = 1_700_000_040_000;
const PERIOD_MS = 60_000;
/** The first ms of a period, well inside the epoch's magnitudes. */
const START = Math.ceil(T0 / PERIOD_MS) * PERIOD_MS;
const RESERVATION_MS = 30_000;
const rate = (count: number): AdmissionPolicy => ({
  auto: { count, periodMs: PERIOD_MS },
  thresholds: { maxActive: 0, maxNewPerMinute: 0 },
  sessionMs: 600_000,
  reservationMs: RESERVATION_MS,
});
/** Automatic admission off: joins only take numbers, so a line builds up. */
const OFF = rate(0);
const capacity = (maxActive: number): AdmissionPolicy => ({ ...rate(0), thresholds: { maxActive, maxNewPerMinute: 0 } });
const randomQueue = (): string => `b-${randomUUID().slice(0, 12)}`;
const key = (): string => randomUUID().replace(/-/g, '').slice(0, 16);
const ranges = (...r: [number, number][]): TicketRange[] => r.map(([from, to]) => ({ from, to }));

/** Joins as an instance does: `size` numbers, reporting `holes` (of the state the store answers with). */
async function blockJoin(store: QueueStore, q: string, nowMs: number, policy: AdmissionPolicy, size: number, holes?: TicketRange[], extra: JoinOptions = {}) {
  let state: BlockHoles | undefined;
  if (holes !== undefined) {
    const seen = await store.stats(q, nowMs, policy);
    state = { epoch: seen.epoch, generation: seen.generation, ranges: holes };
  }
  const r = await store.join(q, nowMs, policy, { ...extra, block: { size, ...(state && { holes: state }) } });
  return { ticket: r.ticket, block: r.block, tail: r.tail, cursor: r.cursor, claimed: r.claimed, replayed: r.replayed };
}

describe('ticket blocks on every store', () => {
  const stores = useEveryStore();

  it('a block join takes B consecutive numbers in one run; size 1 is an ordinary join and answers no block', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      return [
        await blockJoin(store, q, T0, OFF, 5),
        await blockJoin(store, q, T0 + 1, OFF, 1),
        await store.join(q, T0 + 2, OFF),
        await blockJoin(store, q, T0 + 3, OFF, MAX_TICKET_BLOCK),
        await store.peek(q),
      ];
    });
    expect(got[0]).toEqual({ ticket: 1, block: { from: 1, to: 5 }, tail: 5, cursor: 0, claimed: false, replayed: false });
    expect(got[1]).toMatchObject({ ticket: 6, block: undefined, tail: 6 });
    expect(got[2]).not.toHaveProperty('block');
    expect(got[3]).toMatchObject({ ticket: 8, block: { from: 8, to: 1_007 }, tail: 1_007 });
    expect(got[4]).toEqual({ tail: 1_007, cursor: 0 });
  });

  it('the random method and an open switch ignore the block', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      const random: AdmissionPolicy = { ...OFF, method: 'random', presenceMs: 10_000, seed: 7 };
      const drawn = await store.join(q, T0, random, { block: { size: 20, holes: { epoch: 0, generation: 1, ranges: ranges([1, 1]) } } });
      const open = randomQueue();
      await store.control(open, { switch: 'open' }, T0, OFF);
      const through = await store.join(open, T0 + 1, OFF, { block: { size: 20 } });
      return [{ ticket: drawn.ticket, tail: drawn.tail, block: drawn.block }, { ticket: through.ticket, block: through.block }, await store.peek(open)];
    });
    expect(got).toEqual([{ ticket: 1, tail: 1, block: undefined }, { ticket: 0, block: undefined }, { tail: 0, cursor: 0 }]);
  });

  it('rejects a bad block or bad holes with a clear error and takes nothing', async () => {
    for (const make of [stores.memory, stores.upstash, stores.redis]) {
      const store = make();
      const q = randomQueue();
      await store.join(q, T0, OFF);
      const holes = (r: TicketRange[]): BlockHoles => ({ epoch: 0, generation: 1, ranges: r });
      const bad: JoinOptions['block'][] = [
        { size: 0 },
        { size: MAX_TICKET_BLOCK + 1 },
        { size: 1.5 },
        { size: Number.NaN },
        { size: 2, holes: holes(ranges([0, 3])) },
        { size: 2, holes: holes(ranges([5, 3])) },
        { size: 2, holes: holes(ranges([5, 8], [7, 9])) },
        { size: 2, holes: holes(ranges([5, 8], [1, 2])) },
        { size: 2, holes: holes(ranges([1.5, 3])) },
        { size: 2, holes: holes(Array.from({ length: MAX_BLOCK_HOLE_RANGES + 1 }, (_, i) => ({ from: 2 * i + 1, to: 2 * i + 1 }))) },
        { size: 2, holes: { epoch: -1, generation: 1, ranges: [] } },
      ];
      for (const block of bad) await expect(store.join(q, T0 + 1, OFF, { block }), JSON.stringify(block)).rejects.toBeInstanceOf(StoreArgumentError);
      expect(await store.peek(q)).toEqual({ tail: 1, cursor: 0 });
    }
  });

  it('rate FIFO: with holes reported, a period calls exactly admit_per_period real tickets and none of its calls lapse for a hole', async () => {
    const COUNT = 3;
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      // Real: 1, 11, 12, 21..25. Holes: 2..10 (the first block aged out after one number), 13..20.
      await blockJoin(store, q, START, OFF, 10);
      await blockJoin(store, q, START + 1, OFF, 10, ranges([2, 10]));
      await blockJoin(store, q, START + 2, OFF, 1, ranges([13, 20]));
      for (let i = 0; i < 4; i += 1) await store.join(q, START + 3, OFF);
      const first = await store.poll(q, START + PERIOD_MS, rate(COUNT));
      const claims = [];
      for (const t of [1, 11, 12]) claims.push((await store.claim(q, t, START + PERIOD_MS + 1, rate(COUNT), 0)).claimed);
      // Past every call's claim deadline, in the same period: nothing lapsed, nothing handed on.
      const later = await store.poll(q, START + PERIOD_MS + RESERVATION_MS + 1, rate(COUNT));
      const stats = await store.stats(q, START + PERIOD_MS + RESERVATION_MS + 2, rate(COUNT));
      const next = await store.poll(q, START + 2 * PERIOD_MS, rate(COUNT));
      return [first.cursor, first.admittedLastMinute, claims, later.cursor, stats.totals?.lapsed, stats.totals?.admitted, stats.reserved, next.cursor];
    });
    // The step called 1, 11, 12 and passed over the holes after them (13..20): cursor 20, 3 calls.
    expect(got).toEqual([20, 3, [true, true, true], 20, 0, 3, 0, 23]);
  });

  it('rate FIFO: unreported holes are called, lapse, and are handed on within the rate', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      await blockJoin(store, q, START, OFF, 10);
      for (let i = 0; i < 5; i += 1) await store.join(q, START + 1, OFF);
      const first = await store.poll(q, START + PERIOD_MS, rate(3));
      const claimed = (await store.claim(q, 1, START + PERIOD_MS + 1, rate(3), 0)).claimed;
      const later = await store.poll(q, START + PERIOD_MS + RESERVATION_MS + 1, rate(3));
      const stats = await store.stats(q, START + PERIOD_MS + RESERVATION_MS + 2, rate(3));
      return [first.cursor, claimed, later.cursor, stats.totals?.lapsed];
    });
    // 2 and 3 were nobody's: their calls lapsed and went to 4 and 5.
    expect(got).toEqual([3, true, 5, 2]);
  });

  it('admit N calls N real tickets, passing over holes, never past the tail', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      await blockJoin(store, q, START, OFF, 10);
      await blockJoin(store, q, START + 1, OFF, 5, ranges([3, 9]));
      // Real: 1, 2, 10, 11..15 (8 in all).
      const a = await store.admit(q, 3, START + 2, OFF);
      const b = await store.admit(q, 100, START + 3, OFF);
      const stats = await store.stats(q, START + 4, OFF);
      return [a.admitted, a.cursor, b.admitted, b.cursor, stats.admittedLastMinute, stats.reserved];
    });
    // 1, 2, 10 (holes 3..9 passed); then the other 5, to the tail.
    expect(got).toEqual([3, 10, 5, 15, 8, 8]);
  });

  it('a join with only holes ahead of it has nobody ahead: it walks in', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      // Rate FIFO, 2 a period: 1 walks in with the step (1 and 2 called), 2 claims; 3..10 are holes.
      const first = await blockJoin(store, q, START, rate(2), 10);
      const second = (await store.claim(q, 2, START + 2, rate(2), 0)).claimed;
      // Next period: with the holes passed over nobody is ahead of 11, so the step calls it.
      const third = await blockJoin(store, q, START + PERIOD_MS + 10, rate(2), 1, ranges([3, 10]));
      // Capacity: 1 walks in, 2..10 are holes, 11 walks in too.
      const c = randomQueue();
      const cap1 = await blockJoin(store, c, T0, capacity(5), 10);
      const cap2 = await blockJoin(store, c, T0 + 1, capacity(5), 1, ranges([2, 10]));
      return [first.claimed, first.cursor, second, third.ticket, third.claimed, third.cursor, cap1.claimed, cap2.ticket, cap2.claimed, cap2.cursor];
    });
    expect(got).toEqual([true, 2, true, 11, true, 12, true, 11, true, 11]);
  });

  it('capacity FIFO: holes take no reservation and no slot, and capacity is never exceeded', async () => {
    const MAX = 3;
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      const policy = capacity(MAX);
      const first = await blockJoin(store, q, T0, policy, 10);
      const second = await blockJoin(store, q, T0 + 1, policy, 1, ranges([3, 10]));
      const poll = await store.poll(q, T0 + 2, policy);
      const stats = await store.stats(q, T0 + 3, policy);
      const hole = await store.claim(q, 5, T0 + 4, policy, 0);
      const claims = [(await store.claim(q, 2, T0 + 5, policy, 0)).claimed, (await store.claim(q, 11, T0 + 6, policy, 0)).claimed];
      const after = await store.stats(q, T0 + 7, policy);
      return [first.claimed, second.ticket, second.claimed, poll.cursor, poll.active, stats.reserved, hole.claimed, claims, after.active];
    });
    // 1 walked in; the room's 2 free slots went to 2 and 11 (3..10 passed over): 3 held, never more.
    expect(got).toEqual([true, 11, false, 11, MAX, 2, false, [true, true], MAX]);
  });

  it('a keyed retry of a block join gets the same block; its holes count', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      const joinKey = key();
      await blockJoin(store, q, START, OFF, 4);
      const first = await blockJoin(store, q, START + 1, OFF, 6, undefined, { joinKey });
      const retry = await blockJoin(store, q, START + 2, OFF, 6, ranges([2, 4]), { joinKey });
      const admitted = await store.admit(q, 2, START + 3, OFF);
      return [first, retry, admitted.admitted, admitted.cursor];
    });
    expect(got[0]).toEqual({ ticket: 5, block: { from: 5, to: 10 }, tail: 10, cursor: 0, claimed: false, replayed: false });
    expect(got[1]).toEqual({ ticket: 5, block: { from: 5, to: 10 }, tail: 10, cursor: 0, claimed: false, replayed: true });
    // 1 and 5 are the first two real tickets: the holes the retry carried are passed over.
    expect(got.slice(2)).toEqual([2, 5]);
  });

  it('holes of another epoch or generation are ignored, and a reset drops the ones kept', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      await blockJoin(store, q, START, OFF, 10);
      const seen = await store.stats(q, START, OFF);
      // Another generation's holes, then another epoch's: both void.
      await store.join(q, START + 1, OFF, { block: { size: 1, holes: { epoch: seen.epoch, generation: seen.generation + 1, ranges: ranges([2, 10]) } } });
      await store.join(q, START + 2, OFF, { block: { size: 1, holes: { epoch: seen.epoch + 1, generation: seen.generation, ranges: ranges([2, 10]) } } });
      const stale = await store.admit(q, 3, START + 3, OFF);
      // Holes of this state, then a reset: the line and its holes go.
      const r = randomQueue();
      await blockJoin(store, r, START, OFF, 10);
      await blockJoin(store, r, START + 1, OFF, 1, ranges([2, 10]));
      const reset = await store.reset(r, START + 2, OFF);
      await blockJoin(store, r, START + 3, OFF, 5);
      // Holes reported with the old epoch after the reset: void.
      await store.join(r, START + 4, OFF, { block: { size: 1, holes: { epoch: seen.epoch, generation: reset.generation, ranges: ranges([13, 16]) } } });
      const afterReset = await store.admit(r, 3, START + 5, OFF);
      return [stale.admitted, stale.cursor, reset.cursor, afterReset.admitted, afterReset.cursor];
    });
    // Stale holes count as real: 1, 2, 3 are called. After the reset (cursor 11), 12, 13, 14.
    expect(got).toEqual([3, 3, 11, 3, 14]);
  });

  it('an event\'s pre-queue is called by place: holes in it are left to lapse, holes after it are passed over', async () => {
    const S = START + 10_000;
    const event: AdmissionPolicy = { ...OFF, eventStartMs: S };
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      await blockJoin(store, q, START, event, 5);
      // The first join after the start freezes the pre-queue (1..5): its holes are in it.
      await blockJoin(store, q, S + 1, event, 5, ranges([2, 5]));
      await blockJoin(store, q, S + 2, event, 1, ranges([2, 5], [8, 10]));
      const a = await store.admit(q, 5, S + 3, event);
      const b = await store.admit(q, 3, S + 4, event);
      return [a.eventSize, a.admitted, a.cursor, b.admitted, b.cursor];
    });
    // The 5 places of the pre-queue; then 6, 7 and 11 (8..10 passed over).
    expect(got).toEqual([5, 5, 5, 3, 11]);
  });

  it('a rolled-back store (a join whose floor is above the tail) takes the block above the floor, in a new generation without the old holes', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      await blockJoin(store, q, START, OFF, 3);
      const seen = await store.stats(q, START, OFF);
      const holes: BlockHoles = { epoch: seen.epoch, generation: seen.generation, ranges: ranges([2, 3]) };
      const r = await store.join(q, START + 1, OFF, { floor: { tail: 10, generation: seen.generation }, block: { size: 5, holes } });
      const admitted = await store.admit(q, 2, START + 2, OFF);
      return [r.ticket, r.block, r.tail, r.cursor, r.generation !== seen.generation, admitted.admitted, admitted.cursor];
    });
    // Numbers go on above the floor (the cursor moves up to it); 2 and 3 were the old life's.
    expect(got).toEqual([11, { from: 11, to: 15 }, 15, 10, true, 2, 12]);
  });

  it('every state answered carries the reported holes above the cursor, for no extra command', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      await blockJoin(store, q, START, OFF, 10);
      // Holes 2..4 and 7..10; 11 is the reporting join's own.
      const join = await store.join(q, START + 1, OFF, { block: { size: 1, holes: { epoch: 0, generation: (await store.stats(q, START, OFF)).generation, ranges: ranges([2, 4], [7, 10]) } } });
      const poll = await store.poll(q, START + 2, OFF);
      const stats = await store.stats(q, START + 3, OFF);
      // Admit 2 calls 1 and 5 (2..4 passed over): the holes left start above the cursor.
      const admit = await store.admit(q, 2, START + 4, OFF);
      const after = await store.poll(q, START + 5, OFF);
      // Past every hole: none left.
      const all = await store.admit(q, 10, START + 6, OFF);
      return [join.holes, poll.holes, stats.holes, admit.cursor, admit.holes, after.holes, all.cursor, all.holes];
    });
    const both = ranges([2, 4], [7, 10]);
    expect(got).toEqual([both, both, both, 5, ranges([7, 10]), ranges([7, 10]), 11, undefined]);
  });

  it('the record\'s waiting leaves holes out', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      await blockJoin(store, q, START, OFF, 10);
      await blockJoin(store, q, START + 1, OFF, 1, ranges([4, 10]));
      await store.poll(q, START + 2, OFF);
      const point = (await store.history(q, START + 3)).at(-1);
      return [point?.tail, point?.cursor, point?.waiting];
    });
    // 11 numbers, none called, 7 of them nobody's: 4 people waiting.
    expect(got).toEqual([11, 0, 4]);
  });

  it(`keeps at most ${MAX_STORED_HOLE_RANGES} ranges; past them the highest are called and lapse as unreported holes`, async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      // 3 numbers a block, its last a hole: real 1, 2, 4, 5, 7, 8, ...
      const blocks = MAX_STORED_HOLE_RANGES + 10;
      for (let i = 0; i < blocks; i += 1) await blockJoin(store, q, START + i, OFF, 3);
      const holes = Array.from({ length: blocks }, (_, i): [number, number] => [3 * i + 3, 3 * i + 3]);
      for (let i = 0; i < holes.length; i += MAX_BLOCK_HOLE_RANGES) await blockJoin(store, q, START + blocks, OFF, 1, ranges(...holes.slice(i, i + MAX_BLOCK_HOLE_RANGES)));
      const all = await store.admit(q, 1_000, START + blocks + 1, OFF);
      return [all.cursor, all.admitted];
    });
    const blocks = MAX_STORED_HOLE_RANGES + 10;
    // Every number is called (the tail: blocks' numbers and the reporting joins'); the first
    // MAX_STORED_HOLE_RANGES holes are passed over, the 10 above them are not.
    const tail = 3 * blocks + Math.ceil(blocks / MAX_BLOCK_HOLE_RANGES);
    expect(got).toEqual([tail, tail - MAX_STORED_HOLE_RANGES]);
  });

  it('an instance\'s allocator and the store together: admit N calls every real holder, no hole, to the tail', async () => {
    const got = await expectSameOnEveryStore(stores, async (store) => {
      const q = randomQueue();
      const blocks = new TicketBlocks({ maxSize: 20, maxAgeMs: 500, fillTargetMs: 250 });
      const held: number[] = [];
      let now = START;
      const arrive = async (): Promise<void> => {
        const handed = blocks.next(now);
        if (handed !== undefined) {
          held.push(handed.ticket);
          return;
        }
        const { size, holes } = blocks.joinOptions(now);
        const r = await store.join(q, now, OFF, { block: { size, ...(holes && { holes }) } });
        blocks.accept(r, now);
        held.push(r.ticket);
      };
      // Two bursts of 500 a second; each ends with a block left unfinished, which ages out.
      for (let i = 0; i < 200; i += 1, now += 2) await arrive();
      now += 600;
      for (let i = 0; i < 50; i += 1, now += 2) await arrive();
      now += 600;
      // One more visitor, whose ordinary join reports the last holes.
      const last = blocks.joinOptions(now);
      const r = await store.join(q, now, OFF, { block: { size: 1, ...(last.holes && { holes: last.holes }) } });
      held.push(r.ticket);
      const admitted = await store.admit(q, held.length, now + 1, OFF);
      const { tail } = await store.peek(q);
      return [held.length, new Set(held).size, blocks.counts.holes + held.length === tail, blocks.counts.blocks > 10, admitted.admitted, admitted.cursor === tail];
    });
    expect(got).toEqual([251, 251, true, true, 251, true]);
  });

  it('a store that forgot (FLUSHALL) drops the holes; the next block join starts the numbers again', async () => {
    for (const make of [stores.upstash, stores.redis]) {
      const store = make();
      const q = randomQueue();
      await blockJoin(store, q, START, OFF, 10);
      const before = await store.stats(q, START, OFF);
      await blockJoin(store, q, START + 1, OFF, 1, ranges([2, 10]));
      await stores.connection().flushall();
      const after = await blockJoin(store, q, START + 2, OFF, 10);
      expect(after).toMatchObject({ ticket: 1, block: { from: 1, to: 10 }, tail: 10 });
      // The lost generation's holes, reported late, are void: 1, 2, 3 are called.
      await store.join(q, START + 3, OFF, { block: { size: 1, holes: { epoch: before.epoch, generation: before.generation, ranges: ranges([2, 10]) } } });
      const admitted = await store.admit(q, 3, START + 4, OFF);
      expect([admitted.admitted, admitted.cursor]).toEqual([3, 3]);
    }
  });
});

describe('billed commands of a block join (Upstash store, real redis-server)', () => {
  const token = `test-token-${randomUUID()}`;
  let server: Awaited<ReturnType<typeof startRedisServer>>;
  let bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  let direct: IORedis;
  let store: QueueStore;
  const rows: string[] = [];
  const B = 50;

  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: server.url, token });
    const redis = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
    direct = new IORedis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    await direct.connect();
    store = new UpstashQueueStore({ redis, keyPrefix: `wrb-${randomUUID().slice(0, 8)}` });
    // Every script once, so that no NOSCRIPT miss is counted.
    const warm = randomQueue();
    for (const policy of [rate(5), capacity(5)]) {
      await store.join(warm, T0, policy, { block: { size: 2 } });
      await store.poll(warm, T0, policy);
      await store.admit(warm, 1, T0, policy);
      await store.stats(warm, T0, policy);
      await store.leave(warm, 1, T0, policy, 0);
    }
  });
  afterAll(async () => {
    console.log(['| request | billed commands |', '| --- | ---: |', ...rows].join('\n'));
    direct?.disconnect();
    await bridge?.close();
    await server?.stop();
  });
  const measure = async (label: string, run: () => Promise<unknown>): Promise<number> => {
    const n = await billedCommands(direct, run);
    rows.push(`| ${label} | ${n} |`);
    return n;
  };

  it(`rate FIFO: a block join of ${B} costs what an ordinary join does; with holes at most one more; a step passing holes at most two more`, async () => {
    const q = randomQueue();
    const policy = rate(5);
    await store.poll(q, START - 1, policy);
    await store.join(q, START, policy, { joinKey: key() });
    // People waiting: every join below is a queued one.
    for (let i = 0; i < 3; i += 1) await store.join(q, START + 1, policy);
    const plain = await measure('rate: join, queued', () => store.join(q, START + 2, policy, { joinKey: key() }));
    const block = await measure(`rate: join of a block of ${B}, queued`, () => store.join(q, START + 3, policy, { joinKey: key(), block: { size: B } }));
    const seen = await store.stats(q, START + 3, policy);
    const holes: BlockHoles = { epoch: seen.epoch, generation: seen.generation, ranges: ranges([seen.tail - B + 2, seen.tail - 20], [seen.tail - 10, seen.tail]) };
    const carrying = await measure(`rate: join of a block of ${B} carrying 2 hole ranges`, () => store.join(q, START + 4, policy, { joinKey: key(), block: { size: B, holes } }));
    const retry = key();
    await store.join(q, START + 5, policy, { joinKey: retry, block: { size: B } });
    const replay = await measure(`rate: keyed retry of a block join`, () => store.join(q, START + 6, policy, { joinKey: retry, block: { size: B } }));
    expect(block).toBe(plain);
    expect(carrying).toBeLessThanOrEqual(plain + 1);
    expect(replay).toBeLessThanOrEqual(plain);

    // The period steps: one over plain numbers, one over holes, measured on twin queues.
    const stepOf = async (label: string, withHoles: boolean): Promise<number> => {
      const r = randomQueue();
      await store.poll(r, START - 1, OFF);
      for (let i = 0; i < 4; i += 1) await store.join(r, START, OFF, { block: { size: 10 } });
      if (withHoles) {
        const s = await store.stats(r, START, OFF);
        await store.join(r, START, OFF, { block: { size: 1, holes: { epoch: s.epoch, generation: s.generation, ranges: ranges([2, 10], [12, 20], [22, 30]) } } });
      } else {
        await store.join(r, START, OFF);
      }
      return measure(label, () => store.poll(r, START + PERIOD_MS, policy));
    };
    const step = await stepOf("rate: poll running the period's step", false);
    const passing = await stepOf("rate: poll running the period's step over 3 hole ranges", true);
    expect(passing).toBeLessThanOrEqual(step + 2);
  });

  it(`capacity FIFO: a block join of ${B} costs what an ordinary join does; with holes at most one more; advance passing holes at most two more`, async () => {
    const q = randomQueue();
    const policy = capacity(5);
    await store.poll(q, T0 - 1, policy);
    const walk = await measure('capacity: join, walk-in', () => store.join(q, T0, policy, { joinKey: key() }));
    const blockWalk = await measure(`capacity: join of a block of ${B}, walk-in`, () => store.join(q, T0 + 1, policy, { joinKey: key(), block: { size: B } }));
    const plain = await measure('capacity: join, waiting', () => store.join(q, T0 + 2, policy, { joinKey: key() }));
    const block = await measure(`capacity: join of a block of ${B}, waiting`, () => store.join(q, T0 + 3, policy, { joinKey: key(), block: { size: B } }));
    const seen = await store.stats(q, T0 + 3, policy);
    const holes: BlockHoles = { epoch: seen.epoch, generation: seen.generation, ranges: ranges([seen.tail - B + 2, seen.tail - 20], [seen.tail - 10, seen.tail]) };
    const carrying = await measure(`capacity: join of a block of ${B} carrying 2 hole ranges`, () => store.join(q, T0 + 4, policy, { joinKey: key(), block: { size: B, holes } }));
    expect(blockWalk).toBe(walk);
    expect(block).toBe(plain);
    expect(carrying).toBeLessThanOrEqual(plain + 1);

    const advanceOf = async (label: string, withHoles: boolean): Promise<number> => {
      const r = randomQueue();
      const full = capacity(1);
      await store.poll(r, T0 - 1, full);
      await store.join(r, T0, full);
      for (let i = 0; i < 3; i += 1) await store.join(r, T0, full, { block: { size: 10 } });
      if (withHoles) {
        const s = await store.stats(r, T0, full);
        await store.join(r, T0, full, { block: { size: 1, holes: { epoch: s.epoch, generation: s.generation, ranges: ranges([3, 11], [13, 21], [23, 31]) } } });
      }
      // The one slot is freed: the next ticket is called into it.
      const n = await measure(label, () => store.leave(r, 1, T0 + 1, full, 0));
      const after = await store.stats(r, T0 + 2, full);
      // Ticket 2 holds the room's reservation; with holes, the cursor passed 3..11 with it.
      expect([after.cursor, after.reserved, after.active]).toEqual([withHoles ? 11 : 2, 1, 1]);
      return n;
    };
    const advance = await advanceOf('capacity: leave, the next ticket called', false);
    const passing = await advanceOf('capacity: leave, the next ticket called past 3 hole ranges', true);
    expect(advance).toBe(6);
    expect(passing).toBeLessThanOrEqual(advance + 2);
  });
});
