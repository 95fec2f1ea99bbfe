import { describe, expect, it } from 'vitest';
import { MAX_BLOCK_HOLE_RANGES, MAX_TICKET_BLOCK, type JoinResult, type TicketRange } from '../src/core/ports';
import { BlockSettingsError, DEFAULT_BLOCK_SETTINGS, TicketBlocks } from '../src/core/ticket-blocks';

const settings = { maxSize: 50, maxAgeMs: 500, fillTargetMs: 250 };

/** A join's answer as the store gives it: ticket = the block's first number. */
function answer(from: number, to: number, extra: Partial<JoinResult> = {}): JoinResult {
  return {
    tail: to, cursor: 0, paused: false, maxActive: 0, maxNewPerMinute: 0, active: 0, admittedLastMinute: 0, admittedLast5Minutes: 0,
    eventSize: 0, eventSeed: 0, waiting: 0, epoch: 0, generation: 7,
    ticket: from, claimed: false, replayed: false, block: { from, to }, ...extra,
  };
}

/** Arrivals at `perSecond` from `startMs` for `ms`: the times of next() calls. */
function arrive(blocks: TicketBlocks, startMs: number, ms: number, perSecond: number): Array<number | undefined> {
  const got: Array<number | undefined> = [];
  const gap = 1000 / perSecond;
  for (let t = startMs; t < startMs + ms; t += gap) got.push(blocks.next(t)?.ticket);
  return got;
}

/**
 * Arrivals at `perSecond` from `startMs` for `ms` at one sandbox whose joins are answered at once
 * (the store's tail starts at `tail`): the size of every join, in order.
 */
function serve(blocks: TicketBlocks, startMs: number, ms: number, perSecond: number, tail = { n: 0 }): number[] {
  const sizes: number[] = [];
  const gap = 1000 / perSecond;
  for (let t = startMs; t < startMs + ms; t += gap) {
    if (blocks.next(t) !== undefined) continue;
    const { size } = blocks.joinOptions(t);
    sizes.push(size);
    blocks.accept(size > 1 ? answer(tail.n + 1, tail.n + size) : { ...answer(tail.n + 1, tail.n + 1), block: undefined }, t);
    tail.n += size;
  }
  return sizes;
}

describe('TicketBlocks', () => {
  it('hands a block\'s numbers in order, to the end, with its state', () => {
    const b = new TicketBlocks(settings);
    expect(b.next(0)).toBeUndefined();
    b.accept(answer(11, 15), 0);
    const handed = [1, 2, 3, 4].map((t) => b.next(t));
    expect(handed.map((h) => h?.ticket)).toEqual([12, 13, 14, 15]);
    expect(handed[0]).toEqual({ ticket: 12, epoch: 0, generation: 7 });
    expect(b.next(5)).toBeUndefined();
    expect(b.counts).toEqual({ handed: 4, holes: 0, blocks: 1 });
  });

  it('an arrival asking again (it waited for another join) is not counted twice for the size', () => {
    const once = new TicketBlocks(settings);
    const twice = new TicketBlocks(settings);
    for (let i = 0; i < 40; i++) {
      once.next(0);
      twice.next(0);
      twice.next(0, true);
    }
    // 40 arrivals at a fresh sandbox, counted over at least maxAgeMs (a decayed count's weight of
    // that span is 393 ms): about 100 a second, 25 in a quarter of a second.
    expect(once.joinOptions(0).size).toBe(25);
    expect(twice.joinOptions(0).size).toBe(25);
  });

  it('hands nothing from a block once it is maxAgeMs old, counted from the send; its rest become holes', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(101, 110), 1_000);
    expect(b.next(1_200)?.ticket).toBe(102);
    expect(b.next(1_499)?.ticket).toBe(103);
    expect(b.next(1_500)).toBeUndefined();
    expect(b.joinOptions(1_501).holes).toEqual({ epoch: 0, generation: 7, ranges: [{ from: 104, to: 110 }] });
    expect(b.counts.holes).toBe(7);
  });

  it('an answer that comes back already old gives no numbers: all its rest are holes', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(1, 20), 0);
    expect(b.next(600)).toBeUndefined();
    expect(b.joinOptions(600).holes?.ranges).toEqual([{ from: 2, to: 20 }]);
  });

  it('asks for 1 while arrivals are slow, and grows to maxSize when they are fast', () => {
    const slow = new TicketBlocks(settings);
    arrive(slow, 0, 60_000, 2);
    expect(slow.joinOptions(60_000).size).toBe(1);

    const fast = new TicketBlocks(settings);
    arrive(fast, 0, 3_000, 1_000);
    expect(fast.joinOptions(3_000).size).toBe(50);

    // In between, about fillTargetMs worth of arrivals: 40 a second fill ~10 in 250 ms.
    const mid = new TicketBlocks(settings);
    arrive(mid, 0, 10_000, 40);
    expect(mid.joinOptions(10_000).size).toBeGreaterThanOrEqual(8);
    expect(mid.joinOptions(10_000).size).toBeLessThanOrEqual(12);

    // A lull after the burst brings it back to 1.
    expect(fast.joinOptions(3_000 + 10_000).size).toBe(1);
  });

  it('ramps to full size within a few joins of a burst: a block used up in under half the fill target makes the next up to 4 times as large', () => {
    // 1,000 arrivals a second at one sandbox from its first request. A count over one second alone
    // asked for 50 only at its 26th join (eight of 1, then 2, 2, 3, 3, 4, 5, …); this asks at its 7th.
    const b = new TicketBlocks(settings);
    const sizes = serve(b, 0, 1_000, 1_000);
    const full = sizes.indexOf(settings.maxSize);
    expect(full).toBeGreaterThan(0);
    expect(full).toBeLessThanOrEqual(6);
    expect(sizes.slice(0, 3)).toEqual([1, 1, 1]);
    for (let i = 1; i <= full; i++) expect(sizes[i]).toBeLessThanOrEqual(Math.max(4 * sizes[i - 1]!, 2));
    // Later blocks stay full, and the second's 1,000 arrivals took few joins.
    expect(sizes.slice(full).every((size) => size === settings.maxSize)).toBe(true);
    expect(sizes.length).toBeLessThanOrEqual(full + 1_000 / settings.maxSize + 1);

    // A sandbox that sat idle (its count forgotten) ramps as fast when the next burst comes.
    const again = serve(b, 60_000, 1_000, 1_000);
    expect(again.indexOf(settings.maxSize)).toBe(full);
  });

  it('does not overshoot when arrivals slow down: no block after the slowdown is larger than the one before it', () => {
    const b = new TicketBlocks(settings);
    const tail = { n: 0 };
    serve(b, 0, 300, 1_000, tail);
    const before = b.joinOptions(300).size;
    const after = serve(b, 300, 5_000, 10, tail);
    let previous = before;
    for (const size of after) {
      expect(size).toBeLessThanOrEqual(previous);
      previous = size;
    }
    // 10 a second fill 2.5 in 250 ms.
    expect(after.at(-1)).toBeLessThanOrEqual(3);
  });

  it('a few close arrivals of a slow sandbox still ask for 1', () => {
    const b = new TicketBlocks(settings);
    expect(serve(b, 0, 3, 1_000)).toEqual([1, 1, 1]);
    expect(serve(b, 500, 30_000, 2)).toEqual(Array.from({ length: 60 }, () => 1));
  });

  it('maxSize 1 turns blocks off whatever the rate', () => {
    const b = new TicketBlocks({ maxSize: 1, maxAgeMs: 500, fillTargetMs: 250 });
    arrive(b, 0, 2_000, 5_000);
    expect(b.joinOptions(2_000).size).toBe(1);
  });

  it('reports holes once, and gives them back when the join that carried them failed', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(1, 10), 0);
    b.next(10);
    b.accept(answer(21, 30), 600);
    const first = b.joinOptions(700);
    expect(first.holes?.ranges).toEqual([{ from: 3, to: 10 }]);
    // Taken out: the next join carries none.
    expect(b.joinOptions(701).holes).toBeUndefined();
    b.failed(first.holes);
    expect(b.counts.holes).toBe(0);
    // The second block ages out meanwhile: both go together, merged in order.
    const again = b.joinOptions(1_200);
    expect(again.holes?.ranges).toEqual([{ from: 3, to: 10 }, { from: 22, to: 30 }]);
    expect(b.counts.holes).toBe(17);
  });

  it('merges adjacent holes into one range and keeps at most MAX_BLOCK_HOLE_RANGES, dropping the lowest', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(1, 5), 0);
    b.accept(answer(6, 10), 0);
    // 2..5 and 7..10 are not adjacent (6 is the second joiner's); 1 and 6 are held by joiners.
    expect(b.joinOptions(500).holes?.ranges).toEqual([{ from: 2, to: 5 }, { from: 7, to: 10 }]);

    const many = new TicketBlocks(settings);
    for (let i = 0; i < MAX_BLOCK_HOLE_RANGES + 5; i++) many.accept(answer(i * 10 + 1, i * 10 + 4), 0);
    const ranges = many.joinOptions(500).holes?.ranges as TicketRange[];
    expect(ranges).toHaveLength(MAX_BLOCK_HOLE_RANGES);
    expect(ranges[0]).toEqual({ from: 5 * 10 + 2, to: 5 * 10 + 4 });
    expect(ranges.at(-1)).toEqual({ from: (MAX_BLOCK_HOLE_RANGES + 4) * 10 + 2, to: (MAX_BLOCK_HOLE_RANGES + 4) * 10 + 4 });
  });

  it('observe() of another epoch or generation voids live blocks and unreported holes without reporting them', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(1, 10), 0);
    b.accept(answer(11, 20), 600);
    b.next(650); // the first block aged out: 2..10 are holes of generation 7
    b.observe(0, 8);
    expect(b.next(700)).toBeUndefined();
    expect(b.joinOptions(700).holes).toBeUndefined();
    // Seeing the same state again changes nothing.
    b.accept(answer(1, 5, { generation: 8 }), 700);
    b.observe(0, 8);
    expect(b.next(710)).toEqual({ ticket: 2, epoch: 0, generation: 8 });
    // A reset (new epoch) does the same.
    b.observe(1_000, 8);
    expect(b.next(720)).toBeUndefined();
  });

  it('holes given back after the state changed are dropped', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(1, 10), 0);
    const carried = b.joinOptions(600).holes;
    expect(carried?.ranges).toEqual([{ from: 2, to: 10 }]);
    b.observe(5_000, 7);
    b.failed(carried);
    expect(b.joinOptions(600).holes).toBeUndefined();
  });

  it('an answer of another state starts afresh; a late answer from before a reset already seen is void', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(1, 10), 0);
    b.accept(answer(500, 504, { epoch: 9_000 }), 10);
    expect(b.next(20)).toEqual({ ticket: 501, epoch: 9_000, generation: 7 });
    b.accept(answer(11, 20, { epoch: 0 }), 5);
    expect([b.next(30), b.next(31), b.next(32), b.next(33)].map((h) => h?.ticket)).toEqual([502, 503, 504, undefined]);
  });

  it('several blocks in flight are handed lowest (oldest) first, whatever order the answers come in', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(21, 25), 10);
    b.accept(answer(1, 5), 0);
    b.accept(answer(11, 15), 5);
    const got = arrive(b, 20, 13, 1_000);
    expect(got).toEqual([2, 3, 4, 5, 12, 13, 14, 15, 22, 23, 24, 25, undefined]);
  });

  it('a replayed block may be old: its rest are holes, never handed', () => {
    const b = new TicketBlocks(settings);
    b.accept(answer(31, 40, { replayed: true }), 0);
    expect(b.next(1)).toBeUndefined();
    expect(b.joinOptions(1).holes?.ranges).toEqual([{ from: 32, to: 40 }]);
  });

  it('an answer without a block (size 1, the random method, an open switch) hands nothing', () => {
    const b = new TicketBlocks(settings);
    b.accept({ ...answer(3, 3), block: undefined }, 0);
    expect(b.next(1)).toBeUndefined();
    expect(b.counts.blocks).toBe(0);
    b.accept(answer(4, 4), 0);
    expect(b.next(1)).toBeUndefined();
    expect(b.counts.blocks).toBe(1);
  });

  it('keeps the order bound: every number handed was taken by a join sent less than maxAgeMs before', () => {
    const b = new TicketBlocks(settings);
    let tail = 0;
    const sent: Array<{ at: number; from: number; to: number }> = [];
    // 3,000 arrivals a second for two seconds; each join answered 7 ms after it was sent.
    for (let t = 0; t < 2_000; t += 1 / 3) {
      const handed = b.next(t);
      if (handed !== undefined) {
        const block = sent.find((s) => handed.ticket >= s.from && handed.ticket <= s.to)!;
        expect(t - block.at).toBeLessThan(settings.maxAgeMs);
        continue;
      }
      const { size } = b.joinOptions(t);
      expect(size).toBeLessThanOrEqual(settings.maxSize);
      sent.push({ at: t, from: tail + 1, to: tail + size });
      b.accept(answer(tail + 1, tail + size), t);
      tail += size;
    }
    expect(b.counts.blocks).toBeLessThan(6_000 / 10);
  });

  it('order: a visitor can hold a higher number than one who arrived up to maxAgeMs plus its join\'s trip to the store later, never more', () => {
    // Instance B's block is taken at 0 and its last number handed at 490 ms. Visitor A arrived at
    // another instance at -30 ms and joined; the join reached the store at +10: A's number comes
    // after B's block, though A arrived 520 ms before B's last visitor (more than maxAgeMs).
    const b = new TicketBlocks(settings);
    b.accept(answer(1, 50), 0);
    expect(b.next(490)?.ticket).toBe(2);
    const aTicket = 51; // the store ran A's join after B's block
    expect(aTicket).toBeGreaterThan(2);
    expect(490 - -30).toBeGreaterThan(settings.maxAgeMs);
    expect(490 - -30).toBeLessThan(settings.maxAgeMs + 40);

    // Many instances, each with its own one-way delay to the store (up to 30 ms), arrivals at mixed
    // rates, every join numbered when the store runs it: no inversion reaches maxAgeMs plus the
    // round trip (the earlier visitor's join reached the store at most that long after it arrived).
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    const maxOneWay = 30;
    type Join = { runAt: number; answerAt: number; size: number; holder: { at: number; ticket: number } };
    const instances = Array.from({ length: 6 }, (_, i) => ({
      blocks: new TicketBlocks(settings), oneWay: Math.floor(random() * (maxOneWay + 1)), perMs: [0.002, 0.02, 0.3, 1][i % 4]!,
      busyUntil: 0, due: [] as number[], join: undefined as Join | undefined,
    }));
    const visitors: Array<{ at: number; ticket: number }> = [];
    let tail = 0;
    for (let t = 0; t < 6_000; t++) {
      // The rate of each instance changes every second: bursts and slowdowns.
      const phase = Math.floor(t / 1_000) % 2;
      for (const inst of instances) if (random() < inst.perMs * (phase === 0 ? 1 : 0.1)) inst.due.push(t);
      for (const inst of instances) {
        const join = inst.join;
        if (join !== undefined && join.runAt === t) {
          join.holder.ticket = tail + 1;
          tail += join.size;
        }
      }
      instances.forEach((inst) => {
        const join = inst.join;
        if (join !== undefined && join.answerAt <= t) {
          const from = join.holder.ticket;
          inst.blocks.accept(join.size > 1 ? answer(from, from + join.size - 1) : { ...answer(from, from), block: undefined }, join.runAt - inst.oneWay);
          inst.join = undefined;
        }
        while (inst.join === undefined && inst.due.length > 0) {
          // A request waiting behind a join is served when the join comes back: that is its arrival here.
          inst.due.shift();
          const handed = inst.blocks.next(t);
          if (handed !== undefined) {
            visitors.push({ at: t, ticket: handed.ticket });
            continue;
          }
          const { size } = inst.blocks.joinOptions(t);
          const holder = { at: t, ticket: 0 };
          visitors.push(holder);
          inst.join = { runAt: t + inst.oneWay, answerAt: t + 2 * inst.oneWay, size, holder };
          if (inst.oneWay === 0) {
            holder.ticket = tail + 1;
            tail += size;
            inst.blocks.accept(size > 1 ? answer(holder.ticket, holder.ticket + size - 1) : { ...answer(holder.ticket, holder.ticket), block: undefined }, t);
            inst.join = undefined;
          }
        }
      });
    }
    const numbered = visitors.filter((v) => v.ticket > 0).sort((x, y) => x.ticket - y.ticket);
    expect(new Set(numbered.map((v) => v.ticket)).size).toBe(numbered.length);
    let latest = -Infinity;
    let worst = 0;
    for (const v of numbered) {
      worst = Math.max(worst, latest - v.at);
      latest = Math.max(latest, v.at);
    }
    expect(numbered.length).toBeGreaterThan(4_000);
    expect(worst).toBeLessThan(settings.maxAgeMs + 2 * maxOneWay);
  });

  it('rejects bad settings with one error naming each', () => {
    expect(() => new TicketBlocks({ maxSize: 0, maxAgeMs: 2_000, fillTargetMs: 3_000 })).toThrow(BlockSettingsError);
    expect(() => new TicketBlocks({ maxSize: MAX_TICKET_BLOCK + 1, maxAgeMs: 500, fillTargetMs: 250 })).toThrow(/maxSize/);
    expect(() => new TicketBlocks({ maxSize: 10, maxAgeMs: 500, fillTargetMs: 600 })).toThrow(/fillTargetMs/);
    expect(() => new TicketBlocks(DEFAULT_BLOCK_SETTINGS)).not.toThrow();
  });
});
