/**
 * A store that forgets one key. An evicting database (Upstash's eviction, when an operator turns it
 * on, drops whole keys at random, TTL-less ones too) can take a queue's `active` or `reserved` set
 * and leave its ctl hash, with the book that counts what those sets held. Nothing stored would ever
 * lapse again, so capacity mode's max_active would hold the room shut for as long as the book
 * lived. Or it can take the random method's draw set (`waiting`), whose count ctl keeps too: a draw
 * by rank then found no member and every script that ran the step failed. Run on the real scripts
 * (a real redis-server, through the Upstash bridge and through ioredis), with the key taken away as
 * eviction would: the line moves again within two minutes' points (the next step, for the draw),
 * and the recount costs nothing while the room is not stuck.
 */
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { AdmissionPolicy, QueueState, QueueStore } from '../src/core/ports';
import { useEveryStore } from './support/every-store';

const T0 = Date.UTC(2026, 10, 29, 7, 0, 0);
/** Sessions of an hour: a real holder's slot outlives the test, so only the recount can free room. */
const CAPACITY: AdmissionPolicy = {
  auto: { count: 0, periodMs: 1_000 },
  thresholds: { maxActive: 3, maxNewPerMinute: 0 },
  sessionMs: 3_600_000,
  reservationMs: 10_000,
};
const Q = 'default';

/** The commands Redis ran while `run` ran, by name (INFO commandstats before and after; INFO itself left out). */
async function commandsRun(direct: Redis, run: () => Promise<unknown>): Promise<Map<string, number>> {
  const read = async (): Promise<Map<string, number>> => {
    const calls = new Map<string, number>();
    for (const m of (await direct.info('commandstats')).matchAll(/cmdstat_([a-z_|-]+):calls=(\d+)/g)) calls.set(m[1]!, Number(m[2]));
    return calls;
  };
  const before = await read();
  await run();
  const ran = new Map<string, number>();
  for (const [name, n] of await read()) if (name !== 'info' && n !== (before.get(name) ?? 0)) ran.set(name, n - (before.get(name) ?? 0));
  return ran;
}

describe.each(['upstash', 'redis'] as const)('a store that forgets one key, %s store', (kind) => {
  const stores = useEveryStore();
  const fresh = (): { store: QueueStore; prefix: string } => {
    const prefix = `wr-forget-${kind}-${Math.random().toString(36).slice(2, 8)}`;
    return { store: kind === 'redis' ? stores.redis(prefix) : stores.upstash(prefix), prefix };
  };
  const evict = async (prefix: string, set: 'active' | 'reserved' | 'waiting'): Promise<void> => {
    expect(await stores.connection().del(`${prefix}:{${Q}}:${set}`)).toBe(1);
  };
  /** Polls every 10 s from `from` until `done` holds; the state it held at, and when. */
  const pollUntil = async (store: QueueStore, from: number, until: number, done: (s: QueueState) => boolean): Promise<{ state: QueueState; at: number }> => {
    let state = await store.poll(Q, from, CAPACITY);
    for (let at = from; at <= until; at += 10_000) {
      state = await store.poll(Q, at, CAPACITY);
      if (done(state)) return { state, at };
    }
    return { state, at: Number.POSITIVE_INFINITY };
  };

  it('with `active` gone, the room it held is counted again and the waiting visitors are called', async () => {
    const { store, prefix } = fresh();
    for (let i = 0; i < 3; i++) expect((await store.join(Q, T0 + i, CAPACITY)).claimed).toBe(true);
    const waiting = [await store.join(Q, T0 + 10, CAPACITY), await store.join(Q, T0 + 11, CAPACITY)];
    expect(waiting.map((j) => [j.ticket, j.claimed])).toEqual([[4, false], [5, false]]);
    await evict(prefix, 'active');
    // The book still counts three slots: the room stays full and nobody is called...
    expect((await store.poll(Q, T0 + 1_000, CAPACITY)).cursor).toBe(3);
    // ...until a minute's point finds it stuck where the last one left it, and counts the sets.
    const { state, at } = await pollUntil(store, T0 + 2_000, T0 + 300_000, (s) => s.cursor >= 5);
    expect(at - T0).toBeLessThanOrEqual(180_000);
    expect(state.cursor).toBe(5);
    // Two reservations, no slot: what the sets hold.
    expect(state.active).toBe(2);
    expect((await store.claim(Q, 4, at + 1, CAPACITY, at + 1 - T0)).claimed).toBe(true);
  });

  it('with `reserved` gone, its reservations stop holding room, and the next visitor is called long before the held slot ends', async () => {
    const { store, prefix } = fresh();
    for (let i = 0; i < 3; i++) await store.join(Q, T0 + i, CAPACITY);
    for (let i = 0; i < 3; i++) await store.join(Q, T0 + 10 + i, CAPACITY);
    // Two holders leave: 4 and 5 are called, each with a reservation; 3 keeps its slot.
    await store.leave(Q, 1, T0 + 1_000, CAPACITY, 0);
    await store.leave(Q, 2, T0 + 1_001, CAPACITY, 0);
    expect((await store.poll(Q, T0 + 1_002, CAPACITY)).cursor).toBe(5);
    await evict(prefix, 'reserved');
    // The reservations' lapse finds nothing to remove: the book would keep them for the hour.
    expect((await store.poll(Q, T0 + 20_000, CAPACITY)).cursor).toBe(5);
    const { state, at } = await pollUntil(store, T0 + 21_000, T0 + 600_000, (s) => s.cursor >= 6);
    expect(at - T0).toBeLessThanOrEqual(180_000);
    // 3's slot and 6's reservation: 2, with room for one more.
    expect(state.active).toBe(2);
  });

  it('random method, with `waiting` gone: no script fails, the lost visitors rejoin the draw, and each period draws its count from those present', async () => {
    const { store, prefix } = fresh();
    const random: AdmissionPolicy = { ...CAPACITY, auto: { count: 3, periodMs: 10_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, method: 'random', presenceMs: 30_000, seed: 7 };
    const period = Math.ceil(T0 / 10_000) * 10_000;
    const old: number[] = [];
    for (let i = 0; i < 20; i++) old.push((await store.join(Q, period - 20_000 + i, random)).ticket);
    await evict(prefix, 'waiting');
    // ctl still counts 20 in the draw; the set is empty. Each old visitor is unknown now, and rejoins.
    const again: number[] = [];
    let before = 0;
    for (const [i, t] of old.entries()) {
      const drawn = await store.draw(Q, t, period - 5_000 + i, random, 15_000);
      expect(drawn.outcome).toBe('unknown');
      const joined = await store.join(Q, period - 5_000 + i, random);
      again.push(joined.ticket);
      before = joined.cursor;
    }
    // The period's step draws 3 of the 20 present (before the fix, a draw by rank found no member
    // where ctl's count said there was one, and every script that ran the step failed).
    const stepped = await store.poll(Q, period + 1, random);
    expect(stepped.cursor - before).toBe(3);
    expect(stepped.waiting).toBe(17);
    const outcomes = await Promise.all(again.map((t, i) => store.draw(Q, t, period + 2 + i, random, 20_000)));
    expect(outcomes.filter((d) => d.outcome === 'drawn')).toHaveLength(3);
    expect(outcomes.filter((d) => d.outcome === 'waiting')).toHaveLength(17);
  });

  it('a full room that moved since the last point is not counted again; one that did not pays two commands at its point, and nothing changes', async () => {
    const { store } = fresh();
    for (let i = 0; i < 3; i++) await store.join(Q, T0 + i, CAPACITY);
    await store.join(Q, T0 + 10, CAPACITY);
    await store.join(Q, T0 + 11, CAPACITY);
    // Minute 0's point leaves its stamp (cursor 3); 1 leaves, 4 is called and claims: full again.
    await store.poll(Q, T0 + 1_000, CAPACITY);
    await store.leave(Q, 1, T0 + 30_000, CAPACITY, 0);
    expect((await store.claim(Q, 4, T0 + 31_000, CAPACITY, 31_000)).claimed).toBe(true);
    const direct = stores.connection() as Redis;
    let moved: QueueState | undefined;
    let stuck: QueueState | undefined;
    // Minute 1's point: full, 5 waiting, but the cursor moved (3 to 4): no recount.
    const movedRan = await commandsRun(direct, async () => {
      moved = await store.poll(Q, T0 + 61_000, CAPACITY);
    });
    expect(movedRan.get('zcount')).toBeUndefined();
    // Minute 2's point: full, 5 waiting, the cursor still 4: the sets are counted, and agree with
    // the book. The script, its HMGET and HSET, the record's fold (one ZRANGEBYSCORE, issue 33),
    // and the recount's ZCARD and ZCOUNT: nothing else.
    const stuckRan = await commandsRun(direct, async () => {
      stuck = await store.poll(Q, T0 + 121_000, CAPACITY);
    });
    expect(Object.fromEntries(stuckRan)).toEqual({ evalsha: 1, hmget: 1, hset: 1, zrangebyscore: 1, zcard: 1, zcount: 1 });
    expect([moved?.cursor, moved?.active]).toEqual([4, 3]);
    expect([stuck?.cursor, stuck?.active, stuck?.admittedLast5Minutes]).toEqual([4, 3, moved?.admittedLast5Minutes]);
    // A poll in the same minute writes no point: no recount either.
    expect(Object.fromEntries(await commandsRun(direct, () => store.poll(Q, T0 + 122_000, CAPACITY)))).toEqual({ evalsha: 1, hmget: 1 });
  });
});
