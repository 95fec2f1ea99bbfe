/**
 * The random method on every store, call by call: a seeded run of joins (with and without join keys,
 * some retried), waiting visitors' draws, POP polls, admits, claims, pauses and stats — presence
 * lapsing, periods turning, joins drawn by their own step, reservations lapsing and drawn again —
 * answered identically by the in-memory store, the Upstash store through the bridge and the Redis
 * store (ioredis), all on a real redis-server. The draw's rules live twice (draws.lua and
 * memory-store.ts); this holds them to the same answers where the contract suite checks promises.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AdmissionPolicy, QueueStore } from '../src/core/ports';
import { expectSameOnEveryStore, useEveryStore } from './support/every-store';
import { seededRandom } from './support/seeded-random';

const T0 = 1_700_000_000_000;

/** Rate mode (1 per 5-s period) or capacity mode (max active 3), random method, 8-s presence: a line builds up. */
function policyFor(capacityMode: boolean, seed: number): AdmissionPolicy {
  return {
    auto: { count: capacityMode ? 0 : 1, periodMs: 5_000 },
    thresholds: { maxActive: capacityMode ? 3 : 0, maxNewPerMinute: 0 },
    sessionMs: 20_000,
    reservationMs: 4_000,
    method: 'random',
    presenceMs: 8_000,
    seed,
  };
}

async function randomRun(store: QueueStore, queue: string, seed: number, capacityMode: boolean): Promise<unknown[]> {
  const next = seededRandom(seed);
  const out: unknown[] = [];
  let now = T0;
  let generation: number | undefined;
  const tickets: number[] = [];
  const keys: string[] = [];
  // Each call carries a seed of its own, as the edge draws one per call; the run's generator makes it.
  const policy = (): AdmissionPolicy => policyFor(capacityMode, Math.floor(next() * 2 ** 40));
  for (let i = 0; i < 220; i++) {
    now += Math.floor(next() * 2_500);
    const u = next();
    // Mostly a recent visitor (still polling), sometimes any.
    const pool = next() < 0.8 ? tickets.slice(-8) : tickets;
    const ticket = pool.length === 0 ? 1 : pool[Math.floor(next() * pool.length)]!;
    if (u < 0.35) {
      // A retried join (the same key again) now and then, as after a lost answer.
      const key = keys.length > 0 && next() < 0.15 ? keys[Math.floor(next() * keys.length)]! : randomKey(next);
      keys.push(key);
      const r = await store.join(queue, now, policy(), { joinKey: key });
      tickets.push(r.ticket);
      generation = r.generation;
      out.push(r);
    } else if (u < 0.7) {
      out.push(await store.draw(queue, ticket, now, policy(), Math.floor(next() * 60_000), generation));
    } else if (u < 0.8) {
      out.push(await store.poll(queue, now, policy()));
    } else if (u < 0.85) {
      out.push(await store.claim(queue, ticket, now, policy(), 0, generation));
    } else if (u < 0.88) {
      out.push(await store.admit(queue, 1 + Math.floor(next() * 3), now, policy()));
    } else if (u < 0.9) {
      out.push(await store.control(queue, { paused: next() < 0.5 }, now, policy()));
    } else {
      out.push(await store.stats(queue, now, policy()));
    }
  }
  return out;
}

function randomKey(next: () => number): string {
  let key = '';
  for (let i = 0; i < 16; i++) key += Math.floor(next() * 16).toString(16);
  return key;
}

describe('the random method on every store', () => {
  const stores = useEveryStore();

  it.each([
    ['rate mode', false],
    ['capacity mode', true],
  ])('answers a seeded run of calls the same, call by call, on all three stores (%s)', async (_, capacityMode) => {
    for (const seed of [1, 2, 3]) {
      const queue = `rp-${randomUUID().slice(0, 8)}`;
      const memory = await expectSameOnEveryStore(stores, (store) => randomRun(store, queue, seed, capacityMode));
      // The run exercised what it is for: visitors drawn, some of them by their own join.
      const outcomes = memory.map((r) => (r as { outcome?: string }).outcome).filter((o) => o !== undefined);
      expect(outcomes).toContain('drawn');
      expect(outcomes).toContain('waiting');
      if (!capacityMode) expect(memory.some((r) => (r as { ticket?: number; claimed?: boolean; replayed?: boolean }).claimed === true && (r as { replayed?: boolean }).replayed === false)).toBe(true);
    }
  });
});
