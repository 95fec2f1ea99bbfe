/**
 * One contract for every QueueStore: the same suite runs against the in-memory store and against the
 * Upstash store talking to a real redis-server through the local Upstash REST bridge, so the two
 * cannot drift apart. Upstash-only promises (pinned hashes, NOSCRIPT fallback, one request per call)
 * follow the contract.
 */

import { seededRandom } from './support/seeded-random';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from '@upstash/redis';
import type { RedisConfigFastly } from '@upstash/redis/fastly';
import IORedis from 'ioredis';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AdmissionPolicy, AutoAdmission, HistoryPoint, QueueState, QueueStore, RuntimeControl, VipCode } from '../src/core/ports';
import { startUpstashBridge } from '../src/node/upstash-bridge';
import { MemoryQueueStore } from '../src/store/memory-store';
import {
  DEFAULT_PRESENCE_MS,
  MAX_SEED,
  STORE_SCRIPTS,
  StoreArgumentError,
  VIP_KEEP_EXPIRED_MS,
  VIP_TTL_MS,
  createDrawRng,
  IDEMPOTENCY_SLOT_KEEP,
  idempotencySlot,
  emptyTotals,
  RECORD_SLOTS,
  TOTALS_LENGTH,
} from '../src/store/scripts';
import {
  StoreReplyError,
  UpstashQueueStore,
  createUpstashClientOptions,
  type UpstashScriptClient,
} from '../src/store/upstash-store';
import { createUpstashScriptClient } from '../src/store/upstash-http';
import { createVip } from './support/fixtures';
import { startRedisCluster, startRedisServer } from './support/redis-server';
import { adaptScript } from '../src/store/script-flags';
import { OUTBOX_SCRIPTS } from '../src/store/outbox';
import { REDIS_SCRIPT_SHAS, connectRedis, createRedisQueueStore, parseRedisUrls, waitUntilReady, type RedisConnection } from '../src/store/redis-store';
import { createServer, type AddressInfo } from 'node:net';
import { createServer as createHttpServer } from 'node:http';

const PERIOD_MS = 1_000;
/** A period index far from 0, so period arithmetic runs on realistic epoch-ms magnitudes. */
const P = 1_700_000_000;
/** A time inside period `p`; `offset` stays within the period. */
const at = (p: number, offset = 0): number => p * PERIOD_MS + offset;
const NO_THRESHOLDS = { maxActive: 0, maxNewPerMinute: 0 };
/** Rate mode: period auto-admission only. */
const rate = (auto: AutoAdmission): AdmissionPolicy => ({ auto, thresholds: NO_THRESHOLDS, sessionMs: 600_000, reservationMs: 30_000 });
const OFF: AdmissionPolicy = rate({ count: 0, periodMs: PERIOD_MS });
const every = (count: number): AdmissionPolicy => rate({ count, periodMs: PERIOD_MS });

/** Capacity mode. A start time on a realistic epoch-ms magnitude. */
const T0 = 1_700_000_000_000;
const SESSION_MS = 120_000;
const RESERVATION_MS = 20_000;
const cap = (
  maxActive: number,
  maxNewPerMinute: number,
  options: { sessionMs?: number; reservationMs?: number; auto?: AutoAdmission } = {},
): AdmissionPolicy => ({
  auto: options.auto ?? { count: 0, periodMs: PERIOD_MS },
  thresholds: { maxActive, maxNewPerMinute },
  sessionMs: options.sessionMs ?? SESSION_MS,
  reservationMs: options.reservationMs ?? RESERVATION_MS,
});

/** Random method: a waiting visitor is present while its last poll is younger than this. */
const PRESENCE_MS = 10_000;
/** The random method on top of a policy, with this call's seed. */
const randomly = (policy: AdmissionPolicy, seed = 0): AdmissionPolicy => ({ ...policy, method: 'random', seed, presenceMs: PRESENCE_MS });
/** A scheduled event on top of a policy. */
const withEvent = (policy: AdmissionPolicy, eventStartMs: number, seed = 0): AdmissionPolicy => ({ ...policy, eventStartMs, seed });
/** ctl `rt` as the scripts write it, with `admitted` visitors let in, all in wait bucket `bucket`. */
function totalsText({ admitted = 0, bucket = 0 }: { admitted?: number; bucket?: number }): string {
  const n = new Array<number>(TOTALS_LENGTH).fill(0);
  n[0] = admitted;
  n[5 + bucket] = admitted;
  return n.join(':');
}

/** A minute start near T0, for the history; and an event start in the middle of a 60-s period. */
const MIN0 = Math.floor(T0 / 60_000) * 60_000;
const S = MIN0 + 630_000;
/** A seed as the caller makes one: an integer 0 .. 2^48 - 1, here from a seeded generator. */
const seedFrom = (next: () => number): number => Math.floor(next() * 2 ** 24) * 2 ** 24 + Math.floor(next() * 2 ** 24);
/** Chi-square critical values at p = 0.001, by degrees of freedom. */
const CHI_SQUARE_P001 = { 9: 27.88, 39: 72.05 } as const;
const chiSquare = (counts: readonly number[]): number => {
  const expected = counts.reduce((a, b) => a + b, 0) / counts.length;
  return counts.reduce((sum, c) => sum + (c - expected) ** 2 / expected, 0);
};

const randomQueue = (): string => `q-${randomUUID().slice(0, 12)}`;
/** A fresh VIP code's hash, as the caller makes it: lower-case hex SHA-256. */
const vipHash = (): string => createHash('sha256').update(randomUUID()).digest('hex');
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

async function joinMany(store: QueueStore, queue: string, n: number, nowMs = at(P), policy = OFF): Promise<number[]> {
  const tickets: number[] = [];
  for (let i = 0; i < n; i += 1) tickets.push((await store.join(queue, nowMs, policy)).ticket);
  return tickets;
}

/** Tickets in 1..tail that may enter now. */
async function admittedTickets(store: QueueStore, queue: string): Promise<number[]> {
  const { tail, cursor } = await store.peek(queue);
  return range(1, tail).filter((t) => t <= cursor);
}

/**
 * The most of `times` (ms) in any 60-s window (end - 60 s, end]. The count only rises at a time in
 * the list, so the windows ending at those times are the only candidates for the busiest.
 */
function busiestMinute(times: readonly number[]): number {
  return Math.max(0, ...times.map((end) => times.filter((at) => at > end - 60_000 && at <= end).length));
}


function describeQueueStoreContract(name: string, createStore: () => QueueStore): void {
  describe(`${name}: QueueStore contract`, () => {
    describe('tickets', () => {
      it('starts a fresh queue at tail 0, cursor 0 and hands out tickets from 1', async () => {
        const store = createStore();
        const q = randomQueue();
        expect(await store.peek(q)).toEqual({ tail: 0, cursor: 0 });
        expect(await store.join(q, at(P), OFF)).toMatchObject({ ticket: 1, tail: 1, cursor: 0 });
        expect(await store.join(q, at(P), OFF)).toMatchObject({ ticket: 2, tail: 2, cursor: 0 });
        expect(await store.peek(q)).toEqual({ tail: 2, cursor: 0 });
      });

      it('gives 1,000 concurrent joins exactly the tickets 1..1000', async () => {
        const store = createStore();
        const q = randomQueue();
        const results = await Promise.all(Array.from({ length: 1_000 }, () => store.join(q, at(P), OFF)));
        const tickets = results.map((r) => r.ticket).sort((a, b) => a - b);
        expect(tickets).toEqual(range(1, 1_000));
        for (const r of results) {
          expect(r.tail).toBe(r.ticket);
          expect(r.cursor).toBe(0);
        }
        expect(await store.peek(q)).toEqual({ tail: 1_000, cursor: 0 });
      });
    });

    describe('admit', () => {
      it('lets tickets in strictly in order, accumulates, and never passes the tail', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 10);

        expect(await store.admit(q, 4, at(P), OFF)).toMatchObject({ tail: 10, cursor: 4, admitted: 4 });
        expect(await admittedTickets(store, q)).toEqual([1, 2, 3, 4]);

        expect(await store.admit(q, 3, at(P), OFF)).toMatchObject({ tail: 10, cursor: 7, admitted: 3 });
        expect(await admittedTickets(store, q)).toEqual(range(1, 7));

        expect(await store.admit(q, 100, at(P), OFF)).toMatchObject({ tail: 10, cursor: 10, admitted: 3 });
        expect(await store.admit(q, 1, at(P), OFF)).toMatchObject({ tail: 10, cursor: 10, admitted: 0 });

        // Nothing was banked by the over-large admit: later visitors wait.
        expect(await store.join(q, at(P), OFF)).toMatchObject({ ticket: 11, tail: 11, cursor: 10 });
        await store.join(q, at(P), OFF);
        expect(await store.admit(q, 5, at(P), OFF)).toMatchObject({ tail: 12, cursor: 12, admitted: 2 });
      });

      it('admits nobody on an empty queue and banks nothing for later', async () => {
        const store = createStore();
        const q = randomQueue();
        expect(await store.admit(q, 5, at(P), OFF)).toMatchObject({ tail: 0, cursor: 0, admitted: 0 });
        expect(await store.join(q, at(P), OFF)).toMatchObject({ ticket: 1, tail: 1, cursor: 0 });
      });

      it('never over-admits under concurrent admits', async () => {
        const store = createStore();
        const q = randomQueue();
        await Promise.all(Array.from({ length: 50 }, () => store.join(q, at(P), OFF)));
        const results = await Promise.all(Array.from({ length: 20 }, () => store.admit(q, 5, at(P), OFF)));
        expect(results.reduce((sum, r) => sum + r.admitted, 0)).toBe(50);
        expect(results.map((r) => r.admitted).sort((a, b) => a - b)).toEqual([
          ...Array.from({ length: 10 }, () => 0),
          ...Array.from({ length: 10 }, () => 5),
        ]);
        expect(await store.peek(q)).toEqual({ tail: 50, cursor: 50 });
      });

      it('does not move a cursor that automatic admission put ahead of the tail', async () => {
        const store = createStore();
        const q = randomQueue();
        expect(await store.join(q, at(P), every(5))).toMatchObject({ ticket: 1, tail: 1, cursor: 5 });
        expect(await store.admit(q, 3, at(P), OFF)).toMatchObject({ tail: 1, cursor: 5, admitted: 0 });
      });

      it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
        'rejects count %s and changes nothing',
        async (count) => {
          const store = createStore();
          const q = randomQueue();
          await joinMany(store, q, 3);
          await expect(store.admit(q, count, at(P), OFF)).rejects.toMatchObject({ code: 'ERR_STORE_ARGUMENT' });
          expect(await store.peek(q)).toEqual({ tail: 3, cursor: 0 });
        },
      );

      it('takes a count of 0 with a key as a replay check: nobody let in, a used key answered, an unused one kept at 0', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 5);
        expect(await store.admit(q, 2, at(P), OFF, 'used')).toMatchObject({ cursor: 2, admitted: 2, replayed: false, asked: 2 });
        expect(await store.admit(q, 0, at(P) + 1, OFF, 'used')).toMatchObject({ cursor: 2, admitted: 2, replayed: true, asked: 2 });
        expect(await store.admit(q, 0, at(P) + 2, OFF, 'unused')).toMatchObject({ cursor: 2, admitted: 0, replayed: false, asked: 0 });
        // The unused key now stands for 0: used again with a count, it replays 0 and lets nobody in.
        expect(await store.admit(q, 3, at(P) + 3, OFF, 'unused')).toMatchObject({ cursor: 2, admitted: 0, replayed: true, asked: 0 });
        expect(await store.peek(q)).toEqual({ tail: 5, cursor: 2 });
      });
    });

    describe('automatic admission', () => {
      it('admits the first visitor of a quiet queue at once', async () => {
        const store = createStore();
        const q = randomQueue();
        const first = await store.join(q, at(P, 123), every(3));
        expect(first.ticket).toBe(1);
        expect(first.cursor).toBe(3);
        expect(first.ticket <= first.cursor).toBe(true);
      });

      it('moves the cursor by count on the first poll of a period only; a join with people waiting leaves the step to the poll', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 10);

        expect(await store.poll(q, at(P), every(2))).toMatchObject({ tail: 10, cursor: 2 });
        expect(await store.poll(q, at(P, 999), every(2))).toMatchObject({ tail: 10, cursor: 2 });
        expect(await store.join(q, at(P, 500), every(2))).toMatchObject({ ticket: 11, tail: 11, cursor: 2 });

        expect(await store.poll(q, at(P + 1), every(2))).toMatchObject({ tail: 11, cursor: 4 });
        expect(await store.poll(q, at(P + 1, 1), every(2))).toMatchObject({ tail: 11, cursor: 4 });
        // People wait: the join takes its ticket and nothing else (the step's calls need reservations).
        expect(await store.join(q, at(P + 5), every(2))).toMatchObject({ ticket: 12, tail: 12, cursor: 4 });
        // Skipped periods do not add up: the next step moves by one period's count.
        expect(await store.poll(q, at(P + 5, 1), every(2))).toMatchObject({ tail: 12, cursor: 6 });
        expect(await admittedTickets(store, q)).toEqual(range(1, 6));
      });

      it('never moves the cursor for an older period (a clock going backwards)', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 10);
        expect(await store.poll(q, at(P + 5), every(2))).toMatchObject({ tail: 10, cursor: 2 });
        expect(await store.poll(q, at(P + 4, 999), every(2))).toMatchObject({ tail: 10, cursor: 2 });
        expect(await store.poll(q, at(P), every(2))).toMatchObject({ tail: 10, cursor: 2 });
        expect(await store.join(q, at(P + 3), every(2))).toMatchObject({ ticket: 11, tail: 11, cursor: 2 });
        expect(await store.poll(q, at(P + 5, 999), every(2))).toMatchObject({ tail: 11, cursor: 2 });
        expect(await store.poll(q, at(P + 6), every(2))).toMatchObject({ tail: 11, cursor: 4 });
      });

      it('banks nothing over many quiet periods: the cursor stays within count of the tail', async () => {
        const store = createStore();
        const q = randomQueue();
        expect(await store.join(q, at(P), every(3))).toMatchObject({ ticket: 1, tail: 1, cursor: 3 });
        for (let p = P + 1; p <= P + 100; p += 1) {
          const s = await store.poll(q, at(p), every(3));
          expect(s.tail).toBe(1);
          expect(s.cursor).toBeLessThanOrEqual(s.tail + 3);
        }
        expect(await store.peek(q)).toEqual({ tail: 1, cursor: 4 });

        // A burst after the quiet hour: only the one period's quota gets in.
        const burst = await Promise.all(Array.from({ length: 20 }, () => store.join(q, at(P + 100, 1), every(3))));
        expect(burst.map((r) => r.ticket).sort((a, b) => a - b)).toEqual(range(2, 21));
        expect(await admittedTickets(store, q)).toEqual([1, 2, 3, 4]);
        expect(await store.poll(q, at(P + 101), every(3))).toMatchObject({ tail: 21, cursor: 7 });
      });

      it('moves nothing with count 0, and count 0 does not use up the period', async () => {
        const store = createStore();
        const q = randomQueue();
        for (let p = P; p < P + 20; p += 1) {
          await store.join(q, at(p), OFF);
          expect(await store.poll(q, at(p, 10), OFF)).toMatchObject({ tail: p - P + 1, cursor: 0 });
        }
        expect(await store.poll(q, at(P + 19, 20), every(2))).toMatchObject({ tail: 20, cursor: 2 });
      });

      it('keeps admitting, one period at a time, after the operator lengthens the period', async () => {
        const store = createStore();
        const q = randomQueue();
        const perSecond = rate({ count: 2, periodMs: 1_000 });
        const perMinute = rate({ count: 2, periodMs: 60_000 });
        expect(await store.join(q, 1_700_000_100_500, perSecond)).toMatchObject({ ticket: 1, tail: 1, cursor: 2 });
        await joinMany(store, q, 4, 1_700_000_100_600, perSecond);
        // Same minute as the admission that already ran: nothing more.
        expect(await store.poll(q, 1_700_000_130_000, perMinute)).toMatchObject({ tail: 5, cursor: 2 });
        // The next minute admits at once, even though its period index (28,333,336) is far below
        // the last per-second index (1,700,000,100).
        expect(await store.poll(q, 1_700_000_160_000, perMinute)).toMatchObject({ tail: 5, cursor: 4 });
        // Their holders show up (an unclaimed call would hand its admission on after 30 s). Not before
        // the walk-ins of 100.5 s and 100.6 s leave the minute's window: 2 a minute is 2 in any minute.
        expect(await store.claim(q, 3, 1_700_000_160_001, perMinute, 0)).toMatchObject({ claimed: false });
        for (const t of [3, 4]) expect(await store.claim(q, t, 1_700_000_160_601, perMinute, 0)).toMatchObject({ claimed: true });
        expect(await store.poll(q, 1_700_000_219_999, perMinute)).toMatchObject({ tail: 5, cursor: 4 });
        // And back to a short period: the next second admits.
        expect(await store.poll(q, 1_700_000_220_000, perSecond)).toMatchObject({ tail: 5, cursor: 6 });
      });

      it('moves the cursor exactly once for many concurrent polls in a new period', async () => {
        const store = createStore();
        const q = randomQueue();
        await Promise.all(Array.from({ length: 100 }, () => store.join(q, at(P), OFF)));

        const polls = await Promise.all(Array.from({ length: 200 }, (_, i) => store.poll(q, at(P, i), every(5))));
        expect(new Set(polls.map((s) => s.cursor))).toEqual(new Set([5]));
        expect(await store.peek(q)).toEqual({ tail: 100, cursor: 5 });

        // Joins while people wait leave the step to the polls, which make it exactly once.
        const joins = await Promise.all(Array.from({ length: 50 }, (_, i) => store.join(q, at(P + 1, i), every(5))));
        expect(joins.map((r) => r.ticket).sort((a, b) => a - b)).toEqual(range(101, 150));
        expect(new Set(joins.map((r) => r.cursor))).toEqual(new Set([5]));
        const later = await Promise.all(Array.from({ length: 200 }, (_, i) => store.poll(q, at(P + 1, 100 + i), every(5))));
        expect(new Set(later.map((s) => s.cursor))).toEqual(new Set([10]));
        expect(await store.peek(q)).toEqual({ tail: 150, cursor: 10 });
      });

      it('steps once in a burst of concurrent joins on an empty queue: exactly the count walk in, the earliest tickets', async () => {
        const store = createStore();
        const q = randomQueue();
        const joins = await Promise.all(Array.from({ length: 50 }, (_, i) => store.join(q, at(P, i), every(5))));
        const walkedIn = joins.filter((r) => r.claimed).map((r) => r.ticket).sort((a, b) => a - b);
        expect(walkedIn).toEqual(range(1, 5));
        expect(joins.filter((r) => !r.claimed).every((r) => r.ticket > 5 && r.cursor === 5)).toBe(true);
        expect(await store.peek(q)).toEqual({ tail: 50, cursor: 5 });
        // Their calls count once somebody holds them: five tickets called, all held.
        expect(await store.stats(q, at(P, 100), every(5))).toMatchObject({ admittedLastMinute: 5, admittedLast5Minutes: 5, reserved: 0 });
      });
    });

    describe('peek', () => {
      it('has no side effects', async () => {
        const store = createStore();
        const fresh = randomQueue();
        for (let i = 0; i < 3; i += 1) expect(await store.peek(fresh)).toEqual({ tail: 0, cursor: 0 });
        expect(await store.join(fresh, at(P), OFF)).toMatchObject({ ticket: 1, tail: 1, cursor: 0 });

        const q = randomQueue();
        await joinMany(store, q, 5);
        for (let i = 0; i < 5; i += 1) expect(await store.peek(q)).toEqual({ tail: 5, cursor: 0 });
        expect(await store.admit(q, 2, at(P), OFF)).toMatchObject({ tail: 5, cursor: 2, admitted: 2 });
        expect(await store.peek(q)).toEqual({ tail: 5, cursor: 2 });
        expect(await store.join(q, at(P), OFF)).toMatchObject({ ticket: 6, tail: 6, cursor: 2 });
      });
    });

    describe('isolation and input', () => {
      it('keeps queues apart: tickets, cursors and periods', async () => {
        const store = createStore();
        const a = randomQueue();
        const b = randomQueue();
        await joinMany(store, a, 3);
        await joinMany(store, b, 1);
        expect(await store.admit(a, 2, at(P), OFF)).toMatchObject({ tail: 3, cursor: 2, admitted: 2 });
        expect(await store.peek(b)).toEqual({ tail: 1, cursor: 0 });

        expect(await store.poll(a, at(P), every(1))).toMatchObject({ tail: 3, cursor: 3 });
        // The same period on another queue is that queue's own first call.
        expect(await store.poll(b, at(P), every(1))).toMatchObject({ tail: 1, cursor: 1 });
        expect(await store.join(b, at(P), every(1))).toMatchObject({ ticket: 2, tail: 2, cursor: 1 });
        expect(await store.peek(a)).toEqual({ tail: 3, cursor: 3 });
      });

      it.each(['', 'Bad', '-a', 'a}b', 'a{b}', 'a b', 'a'.repeat(33)])(
        'rejects the queue name %j on every method',
        async (queue) => {
          const store = createStore();
          const rejected = { code: 'ERR_STORE_ARGUMENT' };
          const policy = cap(5, 5);
          await expect(store.join(queue, at(P), OFF)).rejects.toMatchObject(rejected);
          await expect(store.poll(queue, at(P), OFF)).rejects.toMatchObject(rejected);
          await expect(store.claim(queue, 1, T0, policy, 0)).rejects.toMatchObject(rejected);
          await expect(store.touch(queue, 1, T0, policy, T0 + 1_000)).rejects.toMatchObject(rejected);
          await expect(store.leave(queue, 1, T0, policy, 0)).rejects.toMatchObject(rejected);
          await expect(store.admit(queue, 1, at(P), OFF)).rejects.toMatchObject(rejected);
          await expect(store.control(queue, { paused: true }, T0, policy)).rejects.toMatchObject(rejected);
          await expect(store.stats(queue, T0, policy)).rejects.toMatchObject(rejected);
          await expect(store.draw(queue, 1, T0, policy, 0)).rejects.toMatchObject(rejected);
          await expect(store.history(queue, T0)).rejects.toMatchObject(rejected);
          await expect(store.reset(queue, T0, policy)).rejects.toMatchObject(rejected);
          await expect(store.peek(queue)).rejects.toMatchObject(rejected);
          await expect(createVip(store, queue, vipHash(), { uses: 1, expiresAtMs: null }, T0)).rejects.toMatchObject(rejected);
          await expect(store.useVip(queue, vipHash(), T0)).rejects.toMatchObject(rejected);
        },
      );

      it('rejects bad time or admission settings on every method and changes nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const bad: Array<[number, AdmissionPolicy]> = [
          [Number.NaN, OFF],
          [-1, OFF],
          [Number.POSITIVE_INFINITY, OFF],
          [at(P), rate({ count: -1, periodMs: PERIOD_MS })],
          [at(P), rate({ count: 1.5, periodMs: PERIOD_MS })],
          [at(P), rate({ count: 2, periodMs: 0 })],
          [at(P), rate({ count: 2, periodMs: 2.5 })],
          [at(P), { ...every(2), thresholds: { maxActive: -1, maxNewPerMinute: 0 } }],
          [at(P), { ...every(2), thresholds: { maxActive: 1.5, maxNewPerMinute: 0 } }],
          [at(P), { ...every(2), thresholds: { maxActive: 0, maxNewPerMinute: Number.NaN } }],
          [at(P), { ...every(2), sessionMs: 0 }],
          [at(P), { ...cap(5, 0), sessionMs: 1.5 }],
          [at(P), { ...cap(5, 0), reservationMs: 0 }],
          [at(P), { ...cap(5, 0), reservationMs: -5 }],
        ];
        for (const [nowMs, policy] of bad) {
          const refused = StoreArgumentError;
          await expect(store.join(q, nowMs, policy)).rejects.toBeInstanceOf(refused);
          await expect(store.poll(q, nowMs, policy)).rejects.toBeInstanceOf(refused);
          await expect(store.claim(q, 1, nowMs, policy, 0)).rejects.toBeInstanceOf(refused);
          await expect(store.touch(q, 1, nowMs, policy, nowMs)).rejects.toBeInstanceOf(refused);
          await expect(store.leave(q, 1, nowMs, policy, 0)).rejects.toBeInstanceOf(refused);
          await expect(store.admit(q, 1, nowMs, policy)).rejects.toBeInstanceOf(refused);
          await expect(store.control(q, { paused: true }, nowMs, policy)).rejects.toBeInstanceOf(refused);
          await expect(store.stats(q, nowMs, policy)).rejects.toBeInstanceOf(refused);
          await expect(store.draw(q, 1, nowMs, policy, 0)).rejects.toBeInstanceOf(refused);
          await expect(store.reset(q, nowMs, policy)).rejects.toBeInstanceOf(refused);
        }
        expect(await store.peek(q)).toEqual({ tail: 0, cursor: 0 });
        // The rejected calls did not use up period P, nor pause the queue.
        expect(await store.join(q, at(P), every(2))).toMatchObject({ ticket: 1, tail: 1, cursor: 2, paused: false });
      });

      it('rejects bad tickets, waits, caps and graces and changes nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 0);
        await store.join(q, T0, policy);
        await store.join(q, T0, policy);
        const before = await store.stats(q, T0, policy);
        for (const ticket of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1' as unknown as number]) {
          await expect(store.claim(q, ticket, T0, policy, 0)).rejects.toBeInstanceOf(StoreArgumentError);
          await expect(store.touch(q, ticket, T0, policy, T0 + 1_000)).rejects.toBeInstanceOf(StoreArgumentError);
          await expect(store.leave(q, ticket, T0, policy, 0)).rejects.toBeInstanceOf(StoreArgumentError);
        }
        for (const waited of [Number.NaN, Number.POSITIVE_INFINITY, '5' as unknown as number]) {
          await expect(store.claim(q, 1, T0, policy, waited)).rejects.toBeInstanceOf(StoreArgumentError);
        }
        for (const until of [Number.NaN, -1]) {
          await expect(store.touch(q, 1, T0, policy, until)).rejects.toBeInstanceOf(StoreArgumentError);
        }
        for (const grace of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
          await expect(store.leave(q, 1, T0, policy, grace)).rejects.toBeInstanceOf(StoreArgumentError);
        }
        expect(await store.stats(q, T0, policy)).toEqual(before);
        // Ticket 1 still holds its slot: ticket 2 still waits.
        expect(await store.poll(q, T0 + 1, policy)).toMatchObject({ cursor: 1, active: 1 });
      });
    });

    describe('rate mode (no threshold in effect)', () => {
      it('reports the whole state: not paused, no thresholds, no slots', async () => {
        const store = createStore();
        const q = randomQueue();
        // The first visitor of a quiet queue is called by its own join's step: it walks in, claimed.
        expect(await store.join(q, at(P), every(2))).toEqual({
          ticket: 1,
          claimed: true,
          replayed: false,
          tail: 1,
          cursor: 2,
          paused: false,
          maxActive: 0,
          maxNewPerMinute: 0,
          active: 0,
          admittedLastMinute: 1,
          admittedLast5Minutes: 1,
          eventSize: 0,
          eventSeed: 0,
          waiting: 0,
          epoch: 0,
          // The first run on an absent state: seed 0 + now + 1.
          generation: at(P) + 1,
        });
      });

      it('claims without a slot exactly when the cursor has passed the ticket; touch is true, leave false', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 5);
        expect(await store.poll(q, at(P), every(2))).toMatchObject({ tail: 5, cursor: 2 });
        expect(await store.claim(q, 2, at(P, 1), every(2), 1_000)).toMatchObject({ claimed: true, cursor: 2, active: 0 });
        expect(await store.claim(q, 3, at(P, 2), every(2), 1_000)).toMatchObject({ claimed: false, cursor: 2 });
        // Claims do not run the period step: the next period's poll still moves the cursor.
        expect(await store.claim(q, 3, at(P + 1), every(2), 0)).toMatchObject({ claimed: false, cursor: 2 });
        expect(await store.poll(q, at(P + 1, 1), every(2))).toMatchObject({ cursor: 4 });
        expect(await store.touch(q, 1, at(P + 1, 2), every(2), at(P + 9))).toBe(true);
        expect(await store.leave(q, 1, at(P + 1, 3), every(2), 0)).toBe(false);
        // 1, 3 and 4 are called and not claimed yet: each holds an admission until its claim deadline.
        expect(await store.stats(q, at(P + 1, 4), every(2))).toMatchObject({ active: 0, reserved: 3, avgWaitSeconds: null });
      });

      it('counts the tickets called by period steps, walk-ins and explicit admits, over 60 s and 300 s, by 5-s bucket', async () => {
        const store = createStore();
        const q = randomQueue();
        // The first visitor of a quiet queue: the step calls 1..3 ahead of the tail; 1 exists.
        expect(await store.join(q, at(P), every(3))).toMatchObject({ cursor: 3, admittedLastMinute: 1 });
        // 2 and 3 were called before they existed: each counts when it is handed out; 4 waits.
        expect(await store.join(q, at(P, 1), every(3))).toMatchObject({ ticket: 2, admittedLastMinute: 2 });
        expect(await store.join(q, at(P, 2), every(3))).toMatchObject({ ticket: 3, admittedLastMinute: 3 });
        expect(await store.join(q, at(P, 3), every(3))).toMatchObject({ ticket: 4, admittedLastMinute: 3 });
        await joinMany(store, q, 6, at(P, 4), every(3));
        // The next period calls 4..6, all existing: calls count, claims add nothing. They claim once
        // the walk-ins of P (the rate window's step, 63 ms) have left the period's window.
        expect(await store.poll(q, at(P + 1), every(3))).toMatchObject({ tail: 10, cursor: 6, admittedLastMinute: 6 });
        for (const t of [4, 5, 6]) expect(await store.claim(q, t, at(P + 1, 100), every(3), 0)).toMatchObject({ claimed: true, admittedLastMinute: 6 });
        // An explicit admit in a later bucket (P + 10 .. P + 14).
        expect(await store.admit(q, 2, at(P + 10), every(3))).toMatchObject({ cursor: 8, admitted: 2, admittedLastMinute: 8 });
        for (const t of [7, 8]) expect(await store.claim(q, t, at(P + 10), every(3), 0)).toMatchObject({ admittedLastMinute: 8 });
        // A bucket counts while any of it is in the window: P's (P .. P + 4) until P + 65, the
        // admit's until P + 75; in the five minutes until P + 305 and P + 315.
        expect(await store.stats(q, at(P + 64, 999), every(3))).toMatchObject({ admittedLastMinute: 8, admittedLast5Minutes: 8 });
        expect(await store.stats(q, at(P + 65), every(3))).toMatchObject({ admittedLastMinute: 2, admittedLast5Minutes: 8 });
        expect(await store.stats(q, at(P + 75), every(3))).toMatchObject({ admittedLastMinute: 0, admittedLast5Minutes: 8 });
        expect(await store.stats(q, at(P + 304, 999), every(3))).toMatchObject({ admittedLastMinute: 0, admittedLast5Minutes: 8 });
        expect(await store.stats(q, at(P + 305), every(3))).toMatchObject({ admittedLastMinute: 0, admittedLast5Minutes: 2 });
        expect(await store.stats(q, at(P + 315), every(3))).toMatchObject({ admittedLastMinute: 0, admittedLast5Minutes: 0 });
      });

      it('counts a call made ahead of the tail only once its ticket is held, and never past the cursor', async () => {
        const store = createStore();
        const q = randomQueue();
        // The step calls 1..10 ahead of the tail; two tickets are held.
        await joinMany(store, q, 2, at(P), every(10));
        expect(await store.stats(q, at(P, 10), every(10))).toMatchObject({ tail: 2, cursor: 10, admittedLastMinute: 2 });
        // A bucket's calls are one range even when several runs call into it (a later step, an admit).
        await joinMany(store, q, 12, at(P, 20), every(10));
        // The next step calls 11..20, of which 11..14 exist; an admit finds nobody left to call.
        expect(await store.poll(q, at(P + 1), every(10))).toMatchObject({ tail: 14, cursor: 20, admittedLastMinute: 14 });
        expect(await store.admit(q, 5, at(P + 2), every(10))).toMatchObject({ admitted: 0, cursor: 20, admittedLastMinute: 14 });
        // The next arrival walks in under that call, and counts.
        expect(await store.join(q, at(P + 2, 1), every(10))).toMatchObject({ ticket: 15, claimed: true, admittedLastMinute: 15 });
      });

      it('pauses: no period step while paused (and the period is not used up); resuming runs it', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 10);
        expect(await store.control(q, { paused: true }, at(P), every(2))).toMatchObject({ paused: true, cursor: 0 });
        expect(await store.poll(q, at(P, 1), every(2))).toMatchObject({ paused: true, cursor: 0 });
        expect(await store.join(q, at(P + 1), every(2))).toMatchObject({ ticket: 11, cursor: 0 });
        // Explicit admits still work while paused.
        expect(await store.admit(q, 1, at(P + 1, 1), every(2))).toMatchObject({ cursor: 1, admitted: 1 });
        expect(await store.control(q, { paused: false }, at(P + 1, 2), every(2))).toMatchObject({ paused: false, cursor: 3 });
        expect(await store.poll(q, at(P + 1, 3), every(2))).toMatchObject({ cursor: 3 });
      });

      it('takes the period quota from a runtime control, as the thresholds, and stays in rate mode; null returns to the configured one', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 20);
        expect(await store.poll(q, at(P), every(2))).toMatchObject({ cursor: 2 });
        // Raised to 5: the next period calls 5, and the quota is reported; no threshold appears.
        expect(await store.control(q, { admitPerPeriod: 5 }, at(P, 1), every(2))).toMatchObject({ admitPerPeriod: 5, maxActive: 0, maxNewPerMinute: 0, cursor: 2 });
        expect(await store.poll(q, at(P + 1), every(2))).toMatchObject({ cursor: 7 });
        expect(await store.stats(q, at(P + 1, 1), every(2))).toMatchObject({ admitPerPeriod: 5, maxActive: 0, maxNewPerMinute: 0 });
        // Back to the configured 2.
        expect(await store.control(q, { admitPerPeriod: null }, at(P + 1, 2), every(2))).toMatchObject({ admitPerPeriod: 2 });
        expect(await store.poll(q, at(P + 2), every(2))).toMatchObject({ cursor: 9 });
        // A bad value is refused before anything is written.
        await expect(store.control(q, { admitPerPeriod: -1 }, at(P + 2, 1), every(2))).rejects.toThrow(/admitPerPeriod/);
        expect(await store.stats(q, at(P + 2, 2), every(2))).toMatchObject({ admitPerPeriod: 2, cursor: 9 });
      });
    });

    describe('phantoms: called tickets nobody claims give their admission to the next', () => {
      /**
       * The holders who show up: every real ticket the cursor has passed claims once, lowest first.
       * Returns the tickets that claimed now.
       */
      async function showUp(store: QueueStore, q: string, nowMs: number, policy: AdmissionPolicy, real: (t: number) => boolean, claimed: Set<number>): Promise<number[]> {
        const { cursor, tail } = await store.peek(q);
        const now: number[] = [];
        for (let t = 1; t <= Math.min(cursor, tail); t += 1) {
          if (!real(t) || claimed.has(t)) continue;
          const r = await store.claim(q, t, nowMs, policy, 0);
          expect(r.claimed).toBe(true);
          claimed.add(t);
          now.push(t);
        }
        return now;
      }

      it('rate mode: a period step lets in its count of people who show up, in ticket order, once the phantoms lapse', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy: AdmissionPolicy = { ...rate({ count: 5, periodMs: 60_000 }), reservationMs: 10_000 };
        const phantoms = new Set([1, 2, 3, 7]);
        const real = (t: number): boolean => !phantoms.has(t);
        const m0 = Math.ceil(T0 / 60_000) * 60_000;
        await joinMany(store, q, 20, m0 - 1_000, OFF);
        const claimed = new Set<number>();
        expect(await store.poll(q, m0, policy)).toMatchObject({ cursor: 5, admittedLastMinute: 5 });
        expect(await showUp(store, q, m0 + 100, policy, real, claimed)).toEqual([4, 5]);
        // Before the deadline nothing moves: 1..3 may still come.
        expect(await store.poll(q, m0 + 9_999, policy)).toMatchObject({ cursor: 5, admittedLastMinute: 5 });
        // 1..3 lapsed: 6..8 are called at once, in the same period (no new step).
        expect(await store.poll(q, m0 + 10_001, policy)).toMatchObject({ cursor: 8, admittedLastMinute: 5 });
        expect(await showUp(store, q, m0 + 10_100, policy, real, claimed)).toEqual([6, 8]);
        expect(await store.poll(q, m0 + 20_001, policy)).toMatchObject({ cursor: 9, admittedLastMinute: 5 });
        expect(await showUp(store, q, m0 + 20_100, policy, real, claimed)).toEqual([9]);
        // The period's 5 admissions went to 5 people who came, the first 5 real tickets; nobody later.
        expect([...claimed]).toEqual([4, 5, 6, 8, 9]);
        expect(await store.poll(q, m0 + 59_999, policy)).toMatchObject({ cursor: 9, admittedLastMinute: 5, active: 0 });
        expect(await store.stats(q, m0 + 59_999, policy)).toMatchObject({ reserved: 0 });
        // The next period calls the next 5, no more: the lapsed calls were spent, not banked.
        expect(await store.poll(q, m0 + 60_000, policy)).toMatchObject({ cursor: 14 });
      });

      it('explicit admit of N lets in N people who show up, skipping phantoms, never ahead of a waiting ticket', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy: AdmissionPolicy = { ...OFF, reservationMs: 10_000 };
        // Every third join timed out: its ticket was taken but nobody holds it.
        const real = (t: number): boolean => t % 3 !== 0;
        await joinMany(store, q, 40, T0, policy);
        expect(await store.admit(q, 10, T0, policy)).toMatchObject({ admitted: 10, cursor: 10 });
        const claimed = new Set<number>();
        let t = T0;
        for (let round = 0; round < 10; round += 1) {
          await showUp(store, q, t + 500, policy, real, claimed);
          t += 10_001;
          const s = await store.poll(q, t, policy);
          // Never past the tail: a lapsed call's admission goes to a ticket that exists.
          expect(s.cursor).toBeLessThanOrEqual(s.tail);
        }
        expect([...claimed]).toEqual(range(1, 40).filter(real).slice(0, 10));
        expect(await store.stats(q, t, policy)).toMatchObject({ reserved: 0, cursor: 14 });
      });

      it('property: whatever the phantoms and the admits, those let in are the earliest real holders, as many as were admitted', async () => {
        const policy: AdmissionPolicy = { ...OFF, reservationMs: 10_000 };
        const runs = name === 'MemoryQueueStore' ? 100 : 12;
        await fc.assert(
          fc.asyncProperty(
            fc.array(fc.boolean(), { minLength: 1, maxLength: 20 }),
            fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 3 }),
            async (holds, admits) => {
              const store = createStore();
              const q = randomQueue();
              const real = (t: number): boolean => holds[t - 1] === true;
              await joinMany(store, q, holds.length, T0, policy);
              const claimed = new Set<number>();
              let t = T0;
              let admitted = 0;
              for (const count of admits) {
                admitted += (await store.admit(q, count, t, policy)).admitted;
                // Rounds of: every real holder called so far claims, then the deadline passes.
                for (let round = 0; round <= holds.length; round += 1) {
                  await showUp(store, q, t + 1, policy, real, claimed);
                  t += 10_001;
                  const s = await store.poll(q, t, policy);
                  expect(s.cursor).toBeLessThanOrEqual(s.tail);
                }
              }
              const realTickets = range(1, holds.length).filter(real);
              expect([...claimed]).toEqual(realTickets.slice(0, Math.min(realTickets.length, admitted)));
            },
          ),
          { numRuns: runs, seed: 20_261_125 },
        );
      });

      it('rate mode: two claims of one ticket count once; a holder back after its deadline is let in', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy: AdmissionPolicy = { ...OFF, reservationMs: 10_000 };
        await joinMany(store, q, 4, T0, policy);
        await store.admit(q, 2, T0, policy);
        expect(await store.claim(q, 1, T0 + 100, policy, 0)).toMatchObject({ claimed: true, admittedLastMinute: 2 });
        // A second tab of ticket 1.
        expect(await store.claim(q, 1, T0 + 200, policy, 0)).toMatchObject({ claimed: true, admittedLastMinute: 2 });
        // 2 lapsed: 3 takes its admission.
        expect(await store.poll(q, T0 + 10_001, policy)).toMatchObject({ cursor: 3, admittedLastMinute: 2 });
        // 2 comes back late: still let in (it waited its turn). The figures count calls less lapsed
        // ones, so its lapsed call no longer counts and the late claim adds nothing.
        expect(await store.claim(q, 2, T0 + 11_000, policy, 0)).toMatchObject({ claimed: true, cursor: 3, admittedLastMinute: 2 });
        expect(await store.claim(q, 2, T0 + 11_001, policy, 0)).toMatchObject({ claimed: true, admittedLastMinute: 2 });
        // 4 was never called.
        expect(await store.claim(q, 4, T0 + 11_002, policy, 0)).toMatchObject({ claimed: false, admittedLastMinute: 2 });
      });

      it('rate mode: with nobody waiting a lapsed call is dropped, not banked for the next arrival', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy: AdmissionPolicy = { ...OFF, reservationMs: 10_000 };
        await joinMany(store, q, 3, T0, policy);
        await store.admit(q, 3, T0, policy);
        expect(await store.poll(q, T0 + 10_001, policy)).toMatchObject({ tail: 3, cursor: 3, admittedLastMinute: 0 });
        expect(await store.join(q, T0 + 10_002, policy)).toMatchObject({ ticket: 4, cursor: 3, claimed: false });
        expect(await store.stats(q, T0 + 10_003, policy)).toMatchObject({ reserved: 0 });
      });

      it('rate mode: paused, lapsed calls wait for the resume to hand their admissions on', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy: AdmissionPolicy = { ...OFF, reservationMs: 10_000 };
        await joinMany(store, q, 6, T0, policy);
        await store.admit(q, 2, T0, policy);
        await store.control(q, { paused: true }, T0 + 1, policy);
        expect(await store.poll(q, T0 + 10_001, policy)).toMatchObject({ cursor: 2 });
        expect(await store.control(q, { paused: false }, T0 + 20_000, policy)).toMatchObject({ cursor: 4 });
      });

      it('random rate mode: draws nobody collects in time are drawn again among the visitors present', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy: AdmissionPolicy = randomly({ ...OFF, reservationMs: 5_000 }, 42);
        const tickets = await joinMany(store, q, 6, T0, policy);
        expect(await store.admit(q, 2, T0, policy)).toMatchObject({ cursor: 2, admitted: 2, admittedLastMinute: 2 });
        const { reserved } = await store.stats(q, T0, policy);
        expect(reserved).toBe(2);
        // The two drawn never come to collect; the others are still present (presence lasts 10 s).
        expect(tickets).toHaveLength(6);
        const later = await store.poll(q, T0 + 5_000, randomly({ ...OFF, reservationMs: 5_000 }, 7));
        // Both lapsed: two more are drawn at once, and the figures count the two live draws only.
        expect(later).toMatchObject({ cursor: 4, admittedLastMinute: 2 });
        expect(await store.stats(q, T0 + 5_000, policy)).toMatchObject({ reserved: 2 });
      });

      it('capacity mode: lapsed phantoms are all replaced at once, and only people who show up hold slots', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(4, 0, { reservationMs: 10_000 });
        const phantoms = new Set([5, 6, 7]);
        const real = (t: number): boolean => !phantoms.has(t);
        // 1..4 walk in; 5..12 wait.
        await joinMany(store, q, 12, T0, policy);
        for (const t of [1, 2, 3, 4]) await store.leave(q, t, T0 + 1_000, policy, 0);
        expect(await store.peek(q)).toEqual({ tail: 12, cursor: 8 });
        const claimed = new Set<number>();
        for (const t of [8]) {
          expect(await store.claim(q, t, T0 + 1_500, policy, 0)).toMatchObject({ claimed: true });
          claimed.add(t);
        }
        // 5..7 hold their slots until their deadline, then hand them to 9..11 in one step.
        expect(await store.poll(q, T0 + 10_999, policy)).toMatchObject({ cursor: 8, active: 4 });
        expect(await store.poll(q, T0 + 11_001, policy)).toMatchObject({ cursor: 11, active: 4 });
        for (const t of [9, 10, 11]) {
          expect(await store.claim(q, t, T0 + 11_500, policy, 0)).toMatchObject({ claimed: true });
          claimed.add(t);
        }
        expect([...claimed].filter(real)).toEqual([8, 9, 10, 11]);
        // Arrivals: the walk-ins 1..4 and 8..11; the phantoms 5..7 count for nothing.
        expect(await store.stats(q, T0 + 11_600, policy)).toMatchObject({ active: 4, reserved: 0, admittedLastMinute: 8 });
      });
    });

    describe('capacity mode: slots', () => {
      it('walks visitors straight in while there is room and nobody waits, then queues them', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0);
        expect(await store.join(q, T0, policy)).toEqual({
          ticket: 1,
          claimed: true,
          replayed: false,
          tail: 1,
          cursor: 1,
          paused: false,
          maxActive: 2,
          maxNewPerMinute: 0,
          active: 1,
          admittedLastMinute: 1,
          admittedLast5Minutes: 1,
          eventSize: 0,
          eventSeed: 0,
          waiting: 0,
          epoch: 0,
          generation: T0 + 1,
        });
        expect(await store.join(q, T0 + 1, policy)).toMatchObject({ ticket: 2, claimed: true, cursor: 2, active: 2 });
        expect(await store.join(q, T0 + 2, policy)).toMatchObject({ ticket: 3, claimed: false, cursor: 2, active: 2 });
        expect(await store.join(q, T0 + 3, policy)).toMatchObject({ ticket: 4, claimed: false, cursor: 2, active: 2 });
        expect(await store.poll(q, T0 + 4, policy)).toMatchObject({ tail: 4, cursor: 2, active: 2 });
        // A ticket not yet called never claims, even when asking.
        expect(await store.claim(q, 3, T0 + 5, policy, 5)).toMatchObject({ claimed: false, cursor: 2, active: 2 });
        expect(await store.stats(q, T0 + 6, policy)).toMatchObject({ active: 2, reserved: 0, admittedLastMinute: 2, avgWaitSeconds: 0 });
      });

      it('frees a slot on leave with grace 0 and calls the next ticket into it at once', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0);
        await joinMany(store, q, 5, T0, policy);
        expect(await store.leave(q, 1, T0 + 1_000, policy, 0)).toBe(true);
        expect(await store.peek(q)).toEqual({ tail: 5, cursor: 3 });
        expect(await store.stats(q, T0 + 1_000, policy)).toMatchObject({ active: 2, reserved: 1 });
        // The reservation holds the room: a newcomer does not walk past the waiting tickets.
        expect(await store.join(q, T0 + 1_500, policy)).toMatchObject({ ticket: 6, claimed: false, cursor: 3 });
        expect(await store.claim(q, 3, T0 + 2_000, policy, 2_000)).toMatchObject({ claimed: true, cursor: 3, active: 2 });
        expect(await store.claim(q, 4, T0 + 2_000, policy, 2_000)).toMatchObject({ claimed: false, cursor: 3 });
        expect(await store.stats(q, T0 + 2_000, policy)).toMatchObject({ active: 2, reserved: 0 });
        // Leaving twice: the slot is gone, nothing more is freed.
        expect(await store.leave(q, 1, T0 + 3_000, policy, 0)).toBe(false);
        expect(await store.peek(q)).toEqual({ tail: 6, cursor: 3 });
        // Leaving a reservation frees it too.
        expect(await store.leave(q, 2, T0 + 4_000, policy, 0)).toBe(true);
        expect(await store.leave(q, 4, T0 + 4_000, policy, 0)).toBe(true);
        expect(await store.peek(q)).toEqual({ tail: 6, cursor: 5 });
      });

      it('lets a slot left with a grace lapse after the grace, unless touched', async () => {
        const store = createStore();
        const policy = cap(1, 0);
        const q = randomQueue();
        await joinMany(store, q, 2, T0, policy);
        expect(await store.leave(q, 1, T0, policy, 5_000)).toBe(true);
        expect(await store.poll(q, T0 + 4_999, policy)).toMatchObject({ cursor: 1, active: 1 });
        expect(await store.poll(q, T0 + 5_000, policy)).toMatchObject({ cursor: 2, active: 1 });
        expect(await store.touch(q, 1, T0 + 5_001, policy, T0 + 999_999)).toBe(false);

        const touched = randomQueue();
        await joinMany(store, touched, 2, T0, policy);
        expect(await store.leave(touched, 1, T0, policy, 5_000)).toBe(true);
        // The tab came back: the touch renews the slot past the grace.
        expect(await store.touch(touched, 1, T0 + 3_000, policy, T0 + 999_999)).toBe(true);
        expect(await store.poll(touched, T0 + 5_000, policy)).toMatchObject({ cursor: 1, active: 1 });
        expect(await store.poll(touched, T0 + 3_000 + SESSION_MS - 1, policy)).toMatchObject({ cursor: 1 });
        expect(await store.poll(touched, T0 + 3_000 + SESSION_MS, policy)).toMatchObject({ cursor: 2 });
        // A grace never lengthens a slot.
        const late = randomQueue();
        await joinMany(store, late, 2, T0, policy);
        expect(await store.leave(late, 1, T0 + SESSION_MS - 10, policy, 60_000)).toBe(true);
        expect(await store.poll(late, T0 + SESSION_MS, policy)).toMatchObject({ cursor: 2 });
      });

      it('expires a slot sessionMs after its last activity when nobody touches it', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 0, { sessionMs: 60_000 });
        await joinMany(store, q, 2, T0, policy);
        expect(await store.poll(q, T0 + 59_999, policy)).toMatchObject({ cursor: 1, active: 1 });
        expect(await store.stats(q, T0 + 60_000, policy)).toMatchObject({ cursor: 1, active: 0, reserved: 0 });
        expect(await store.poll(q, T0 + 60_000, policy)).toMatchObject({ cursor: 2, active: 1 });
        expect(await store.touch(q, 1, T0 + 60_001, policy, T0 + 999_999)).toBe(false);
      });

      it('renews a held slot on touch to now + sessionMs, capped at untilMs, and never creates one', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 0, { sessionMs: 60_000 });
        await joinMany(store, q, 2, T0, policy);
        expect(await store.touch(q, 1, T0 + 50_000, policy, Number.POSITIVE_INFINITY)).toBe(true);
        expect(await store.poll(q, T0 + 109_999, policy)).toMatchObject({ cursor: 1 });
        expect(await store.poll(q, T0 + 110_000, policy)).toMatchObject({ cursor: 2 });

        const capped = randomQueue();
        await joinMany(store, capped, 3, T0, policy);
        expect(await store.touch(capped, 1, T0 + 10_000, policy, T0 + 15_000)).toBe(true);
        expect(await store.poll(capped, T0 + 14_999, policy)).toMatchObject({ cursor: 1 });
        expect(await store.poll(capped, T0 + 15_000, policy)).toMatchObject({ cursor: 2, active: 1 });
        // Gone, reserved-but-unclaimed, never called, unknown: no slot is created.
        expect(await store.touch(capped, 1, T0 + 15_001, policy, T0 + 999_999)).toBe(false);
        expect(await store.touch(capped, 2, T0 + 15_001, policy, T0 + 999_999)).toBe(false);
        expect(await store.touch(capped, 3, T0 + 15_001, policy, T0 + 999_999)).toBe(false);
        expect(await store.touch(capped, 99, T0 + 15_001, policy, T0 + 999_999)).toBe(false);
        expect(await store.stats(capped, T0 + 15_002, policy)).toMatchObject({ active: 1, reserved: 1 });
        // A cap already past ends the slot: the touch answers false.
        expect(await store.claim(capped, 2, T0 + 16_000, policy, 16_000)).toMatchObject({ claimed: true });
        expect(await store.touch(capped, 2, T0 + 17_000, policy, T0 + 17_000)).toBe(false);
        expect(await store.poll(capped, T0 + 17_000, policy)).toMatchObject({ cursor: 3 });
      });

      it('claims idempotently: a second claim renews the slot and records no second admission', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 0, { sessionMs: 60_000 });
        await joinMany(store, q, 2, T0, policy);
        expect(await store.claim(q, 1, T0 + 30_000, policy, 0)).toMatchObject({ claimed: true, admittedLastMinute: 1, active: 1 });
        expect(await store.poll(q, T0 + 89_999, policy)).toMatchObject({ cursor: 1 });
        expect(await store.poll(q, T0 + 90_000, policy)).toMatchObject({ cursor: 2 });
      });
    });

    describe('capacity mode: exact limits', () => {
      it('gives 300 concurrent joins exactly maxActive walk-ins and never reports more slots', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(50, 0);
        const results = await Promise.all(Array.from({ length: 300 }, (_, i) => store.join(q, T0 + (i % 7), policy)));
        expect(results.map((r) => r.ticket).sort((a, b) => a - b)).toEqual(range(1, 300));
        const walkIns = results.filter((r) => r.claimed).map((r) => r.ticket).sort((a, b) => a - b);
        // Exactly 50, and they are the first 50: nobody walked past a waiting ticket.
        expect(walkIns).toEqual(range(1, 50));
        for (const r of results) expect(r.active).toBeLessThanOrEqual(50);
        expect(await store.stats(q, T0 + 10, policy)).toMatchObject({ tail: 300, cursor: 50, active: 50, reserved: 0 });
      });

      it('gives 200 concurrent joins exactly maxNewPerMinute walk-ins', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(0, 10);
        const results = await Promise.all(Array.from({ length: 200 }, () => store.join(q, T0, policy)));
        expect(results.filter((r) => r.claimed).map((r) => r.ticket).sort((a, b) => a - b)).toEqual(range(1, 10));
        for (const r of results) expect(r.admittedLastMinute).toBeLessThanOrEqual(10);
        expect(await store.poll(q, T0 + 59_999, policy)).toMatchObject({ cursor: 10, admittedLastMinute: 10 });
        // The minute after, the next ten are called (with reservations).
        expect(await store.poll(q, T0 + 60_000, policy)).toMatchObject({ cursor: 20, admittedLastMinute: 10, active: 20 });
      });

      it('keeps concurrent leaves, claims, joins and polls within maxActive', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(50, 0);
        await Promise.all(Array.from({ length: 200 }, () => store.join(q, T0, policy)));
        const t = T0 + 1_000;
        const calls: Array<Promise<unknown>> = [];
        for (let i = 1; i <= 50; i += 1) {
          calls.push(store.leave(q, i, t, policy, 0));
          calls.push(store.claim(q, 50 + i, t, policy, 1_000));
          calls.push(store.claim(q, 100 + i, t, policy, 1_000));
          calls.push(store.join(q, t, policy));
          calls.push(store.poll(q, t, policy));
        }
        const results = await Promise.all(calls);
        for (const r of results) if (typeof r === 'object' && r !== null) expect((r as QueueState).active).toBeLessThanOrEqual(50);
        const stats = await store.stats(q, t, policy);
        expect(stats).toMatchObject({ tail: 250, cursor: 100, active: 50 });
        // Tickets 51..100 were called into the 50 freed slots (claimed or still reserved); none after.
        expect(stats.reserved + (await Promise.all(range(51, 100).map((n) => store.touch(q, n, t, policy, t + 1)))).filter(Boolean).length).toBe(50);
      });

      it.each([20_240_601, 7, 2026])(
        'never admits more than maxNewPerMinute in any 60-s window over minutes of arrivals, claims and leaves (seed %i)',
        async (seed) => {
          const store = createStore();
          const q = randomQueue();
          const MAX_NEW = 10;
          const MAX_ACTIVE = 6;
          const policy = cap(MAX_ACTIVE, MAX_NEW, { sessionMs: 30_000, reservationMs: 20_000 });
          const random = seededRandom(seed);
          let now = T0;
          let cursor = 0;
          let busiestSlots = 0;
          let lateClaims = 0;
          let longestQueue = 0;
          const joinedAt = new Map<number, number>();
          const calledAt = new Map<number, number>();
          const claimedAt = new Map<number, number>();
          const abandoned = new Set<number>();
          const holders = new Set<number>();

          /** When each ticket's admission counts, as promised: at its claim (the visitor's arrival), in
           *  time or late; while its reservation is live, as an arrival still to come, i.e. at `until`
           *  itself whatever its call time; and never for a lapsed one. */
          const admissions = (until: number): number[] => {
            const times: number[] = [];
            for (const [ticket, called] of calledAt) {
              const claimed = claimedAt.get(ticket);
              const lapse = called + policy.reservationMs;
              if (claimed !== undefined) times.push(claimed);
              else if (until < lapse) times.push(until);
            }
            return times;
          };
          /** `counted`: the run counted its figures now (a join queued behind others reports the last count). */
          const observe = (s: QueueState, counted = true): void => {
            for (let t = cursor + 1; t <= s.cursor; t += 1) calledAt.set(t, now);
            cursor = Math.max(cursor, s.cursor);
            expect(s.active).toBeLessThanOrEqual(MAX_ACTIVE);
            busiestSlots = Math.max(busiestSlots, s.active);
            longestQueue = Math.max(longestQueue, s.tail - s.cursor);
            if (!counted) return;
            const times = admissions(now);
            expect(s.admittedLastMinute, `minute at +${now - T0}`).toBe(times.filter((a) => a > now - 60_000).length);
            expect(s.admittedLast5Minutes, `5 minutes at +${now - T0}`).toBe(times.filter((a) => a > now - 300_000).length);
          };

          while (now < T0 + 8 * 60_000) {
            now += Math.floor(random() * 4_000);
            const action = random();
            if (action < 0.4) {
              const r = await store.join(q, now, policy);
              joinedAt.set(r.ticket, now);
              // Others waiting ahead: the join took its number only (admission is the poll's).
              const queued = r.ticket > r.cursor + 1;
              observe(r, !queued);
              if (queued) expect(r.claimed).toBe(false);
              if (r.claimed) {
                claimedAt.set(r.ticket, now);
                holders.add(r.ticket);
              } else if (random() < 0.3) {
                abandoned.add(r.ticket);
              }
            } else if (action < 0.65) {
              // The first called holder comes back; now and then one who had left the page, late.
              const late = random() < 0.2;
              const ticket = [...calledAt.keys()].find((t) => !claimedAt.has(t) && abandoned.has(t) === late);
              if (ticket === undefined) continue;
              const lapse = (calledAt.get(ticket) ?? 0) + policy.reservationMs;
              const r = await store.claim(q, ticket, now, policy, now - (joinedAt.get(ticket) ?? now));
              if (now < lapse) expect(r.claimed, `claim of ${ticket} within its reservation`).toBe(true);
              if (r.claimed) {
                if (now >= lapse) lateClaims += 1;
                claimedAt.set(ticket, now);
                holders.add(ticket);
              }
              abandoned.delete(ticket);
              observe(r);
            } else if (action < 0.8) {
              const ticket = [...holders][Math.floor(random() * holders.size)];
              if (ticket === undefined) continue;
              holders.delete(ticket);
              const held = await store.leave(q, ticket, now, policy, 0);
              expect(held).toBe(now < (claimedAt.get(ticket) ?? 0) + policy.sessionMs);
              // leave answers a boolean; a poll at the same instant reads what its advance called.
              observe(await store.poll(q, now, policy));
            } else {
              observe(await store.poll(q, now, policy));
            }
          }

          const times = admissions(now).sort((a, b) => a - b);
          let busiestMinute = 0;
          for (const end of times) busiestMinute = Math.max(busiestMinute, times.filter((a) => a > end - 60_000 && a <= end).length);
          expect(busiestMinute).toBe(MAX_NEW);
          expect(busiestSlots).toBe(MAX_ACTIVE);
          expect(times.length).toBeGreaterThan(3 * MAX_NEW);
          // The run went through every path: a queue formed, reservations lapsed, late claims got in.
          // (Since admissions count at the claim, seed 20240601's run peaks at exactly MAX_ACTIVE waiting.)
          expect(longestQueue).toBeGreaterThanOrEqual(MAX_ACTIVE);
          expect([...calledAt.keys()].filter((t) => !claimedAt.has(t)).length).toBeGreaterThan(0);
          expect(lateClaims).toBeGreaterThan(0);
        },
      );
    });

    describe('capacity mode: arrivals per minute', () => {
      const sec = (second: number): number => T0 + second * 1_000;

      it('counts an admission at its claim: tickets called at 59 s and claimed at 61..65 s keep the minute full until 121..125 s', async () => {
        const store = createStore();
        const q = randomQueue();
        const LIMIT = 10;
        const policy = cap(0, LIMIT, { reservationMs: 20_000 });
        /** What the test itself saw: every moment a visitor got a slot (a claim answered true, a walk-in). */
        const arrivals: number[] = [];
        const calledAt = new Map<number, number>();
        const holding = new Set<number>();
        let cursor = 0;
        const observe = (r: QueueState, now: number): void => {
          for (let t = cursor + 1; t <= r.cursor; t += 1) calledAt.set(t, now);
          cursor = Math.max(cursor, r.cursor);
          expect(r.admittedLastMinute, `minute figure at ${(now - T0) / 1_000} s`).toBeLessThanOrEqual(LIMIT);
        };
        const claim = async (ticket: number, now: number): Promise<void> => {
          const r = await store.claim(q, ticket, now, policy, now - T0);
          expect(r.claimed, `claim of ${ticket} within its reservation at ${(now - T0) / 1_000} s`).toBe(true);
          arrivals.push(now);
          holding.add(ticket);
          observe(r, now);
        };

        await store.control(q, { paused: true }, sec(0), policy);
        await joinMany(store, q, LIMIT, sec(0), policy);
        observe(await store.control(q, { paused: false }, sec(59), policy), sec(59));
        expect(cursor).toBe(LIMIT);
        // The ten arrive two a second from 61 s: after 119 s their calls are more than a minute old.
        for (let t = 1; t <= LIMIT; t += 1) await claim(t, sec(61 + Math.floor((t - 1) / 2)));
        // Then one newcomer a second; each called ticket's holder claims the second after its call.
        // The waiting visitors' polls run admission (a join queued behind others does not).
        for (let second = 66; second <= 200; second += 1) {
          const now = sec(second);
          for (const [ticket, called] of calledAt) if (!holding.has(ticket) && called < now) await claim(ticket, now);
          observe(await store.poll(q, now, policy), now);
          const r = await store.join(q, now, policy);
          observe(r, now);
          if (r.claimed) {
            arrivals.push(now);
            holding.add(r.ticket);
          }
        }

        // Nobody arrives until the first of the ten has been in for a minute, and at no time do more
        // than LIMIT arrive within 60 s (by the claim times observed here, not the store's figures).
        expect(arrivals.filter((at) => at > sec(65) && at <= sec(121))).toEqual([]);
        expect(busiestMinute(arrivals)).toBe(LIMIT);
        expect(arrivals.length).toBeGreaterThan(2 * LIMIT);
        // The line kept moving: the 66..200 s newcomers arrived at the limit's pace.
        expect(arrivals.filter((at) => at > sec(121) && at <= sec(181))).toHaveLength(LIMIT);
      });

      it('counts a live reservation exactly once, however long it lasts: a 90-s reservation holds its share past the minute', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(0, 3, { reservationMs: 90_000 });
        const arrivals: number[] = [];
        const claim = async (ticket: number, second: number, claimed: boolean, cursor: number): Promise<void> => {
          const r = await store.claim(q, ticket, sec(second), policy, sec(second) - T0);
          expect(r, `claim of ${ticket} at ${second} s`).toMatchObject({ claimed, cursor, admittedLastMinute: 3 });
          if (r.claimed) arrivals.push(sec(second));
        };
        await store.control(q, { paused: true }, sec(0), policy);
        await joinMany(store, q, 6, sec(0), policy);
        expect(await store.control(q, { paused: false }, sec(0), policy)).toMatchObject({ cursor: 3, active: 3, admittedLastMinute: 3 });
        // A minute after the calls, the three reservations still hold the minute's budget.
        expect(await store.stats(q, sec(60), policy)).toMatchObject({ cursor: 3, reserved: 3, admittedLastMinute: 3, admittedLast5Minutes: 3 });
        expect(await store.poll(q, sec(60), policy)).toMatchObject({ cursor: 3, admittedLastMinute: 3, admittedLast5Minutes: 3 });
        await claim(1, 70, true, 3);
        await claim(2, 75, true, 3);
        expect(await store.poll(q, sec(90) - 1, policy)).toMatchObject({ cursor: 3, active: 3 });
        // 3 lapses unclaimed at 90 s: its share comes back and 4 is called into it.
        expect(await store.poll(q, sec(90), policy)).toMatchObject({ cursor: 4, active: 3, admittedLastMinute: 3 });
        await claim(4, 91, true, 4);
        // The late claim of 3 finds no room: 1, 2 and 4 arrived within the minute.
        await claim(3, 100, false, 4);
        // 1 arrived at 70 s and 2 at 75 s: their shares come back a minute after those arrivals.
        expect(await store.poll(q, sec(130) - 1, policy)).toMatchObject({ cursor: 4, admittedLastMinute: 3 });
        expect(await store.poll(q, sec(130), policy)).toMatchObject({ cursor: 5, admittedLastMinute: 3 });
        expect(await store.poll(q, sec(135), policy)).toMatchObject({ cursor: 6, admittedLastMinute: 3 });
        await claim(5, 136, true, 6);
        await claim(6, 136, true, 6);
        expect(arrivals).toEqual([sec(70), sec(75), sec(91), sec(136), sec(136)]);
        expect(busiestMinute(arrivals)).toBe(3);
        expect(await store.stats(q, sec(136), policy)).toMatchObject({ admittedLastMinute: 3, admittedLast5Minutes: 5, reserved: 0 });

        // Longer than the 300 s history: the call's entry is trimmed, the live reservation still counts
        // once, and its claim is recorded at the claim.
        const long = randomQueue();
        const slow = cap(0, 2, { reservationMs: 400_000 });
        await store.control(long, { paused: true }, sec(0), slow);
        await joinMany(store, long, 3, sec(0), slow);
        expect(await store.control(long, { paused: false }, sec(0), slow)).toMatchObject({ cursor: 2, admittedLastMinute: 2 });
        expect(await store.stats(long, sec(350), slow)).toMatchObject({ cursor: 2, reserved: 2, admittedLastMinute: 2, admittedLast5Minutes: 2 });
        expect(await store.poll(long, sec(350), slow)).toMatchObject({ cursor: 2, admittedLastMinute: 2, admittedLast5Minutes: 2 });
        expect(await store.claim(long, 1, sec(350), slow, 350_000)).toMatchObject({ claimed: true, cursor: 2, admittedLastMinute: 2, admittedLast5Minutes: 2 });
        expect(await store.poll(long, sec(400) - 1, slow)).toMatchObject({ cursor: 2 });
        expect(await store.poll(long, sec(400), slow)).toMatchObject({ cursor: 3, admittedLastMinute: 2, admittedLast5Minutes: 2 });
        expect(await store.poll(long, sec(410), slow)).toMatchObject({ cursor: 3, admittedLastMinute: 1, admittedLast5Minutes: 2 });
      });
    });

    describe('capacity mode: reservations', () => {
      it('lapses an unclaimed reservation after reservationMs, gives the slot back and calls the next ticket', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 0, { reservationMs: 10_000 });
        await joinMany(store, q, 2, T0, policy);
        expect(await store.leave(q, 1, T0 + 1_000, policy, 0)).toBe(true);
        expect(await store.stats(q, T0 + 10_999, policy)).toMatchObject({ cursor: 2, active: 1, reserved: 1 });
        expect(await store.join(q, T0 + 5_000, policy)).toMatchObject({ ticket: 3, claimed: false, cursor: 2 });
        expect(await store.poll(q, T0 + 10_999, policy)).toMatchObject({ cursor: 2 });
        expect(await store.poll(q, T0 + 11_000, policy)).toMatchObject({ cursor: 3, active: 1 });
        // The holder of 2 comes back late: no room (3's reservation holds it).
        expect(await store.claim(q, 2, T0 + 12_000, policy, 12_000)).toMatchObject({ claimed: false, cursor: 3, active: 1 });
        expect(await store.claim(q, 3, T0 + 12_000, policy, 7_000)).toMatchObject({ claimed: true, active: 1 });
        expect(await store.leave(q, 3, T0 + 13_000, policy, 0)).toBe(true);
        // Room, and nobody is waiting: the late claim takes it.
        expect(await store.claim(q, 2, T0 + 14_000, policy, 14_000)).toMatchObject({ claimed: true, active: 1 });
        expect(await store.stats(q, T0 + 14_000, policy)).toMatchObject({ active: 1, reserved: 0 });
      });

      it('gives the per-minute budget of a lapsed reservation back', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(0, 2, { reservationMs: 10_000 });
        await store.control(q, { paused: true }, T0, policy);
        await joinMany(store, q, 4, T0, policy);
        expect(await store.control(q, { paused: false }, T0, policy)).toMatchObject({ cursor: 2, active: 2, admittedLastMinute: 2 });
        expect(await store.claim(q, 1, T0 + 1_000, policy, 1_000)).toMatchObject({ claimed: true });
        // 2 lapses unclaimed: its admission is withdrawn, so 3 is called in the same minute.
        expect(await store.poll(q, T0 + 9_999, policy)).toMatchObject({ cursor: 2, admittedLastMinute: 2 });
        expect(await store.poll(q, T0 + 10_000, policy)).toMatchObject({ cursor: 3, admittedLastMinute: 2, admittedLast5Minutes: 2 });
        // The late claim of 2 would be a third admission in the minute: refused.
        expect(await store.claim(q, 2, T0 + 11_000, policy, 11_000)).toMatchObject({ claimed: false, admittedLastMinute: 2 });
        expect(await store.claim(q, 3, T0 + 12_000, policy, 12_000)).toMatchObject({ claimed: true, admittedLastMinute: 2 });
        // Admissions count at the claim (the arrival), not the call: 1, called at T0 and claimed at
        // T0 + 1 s, holds its share of the budget until T0 + 61 s.
        expect(await store.claim(q, 2, T0 + 60_999, policy, 60_999)).toMatchObject({ claimed: false, cursor: 3, admittedLastMinute: 2 });
        // A minute after 1 arrived its admission leaves the window: room for one more, and the late
        // claim takes it before 4 is called.
        expect(await store.claim(q, 2, T0 + 61_000, policy, 61_000)).toMatchObject({ claimed: true, cursor: 3, admittedLastMinute: 2 });
        expect(await store.poll(q, T0 + 61_001, policy)).toMatchObject({ cursor: 3 });
        // 3 arrived at T0 + 12 s (called at T0 + 10 s): its share comes back at T0 + 72 s.
        expect(await store.poll(q, T0 + 71_999, policy)).toMatchObject({ cursor: 3, admittedLastMinute: 2 });
        expect(await store.poll(q, T0 + 72_000, policy)).toMatchObject({ cursor: 4, admittedLastMinute: 2 });
      });

      it('admits exactly the room among concurrent late claims of lapsed reservations', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(5, 0, { reservationMs: 10_000 });
        await store.control(q, { paused: true }, T0, policy);
        await joinMany(store, q, 30, T0, policy);
        expect(await store.admit(q, 30, T0, policy)).toMatchObject({ cursor: 30, admitted: 30, active: 30 });
        const late = await Promise.all(range(1, 30).map((t) => store.claim(q, t, T0 + 10_000, policy, 10_000)));
        // Paused: no direct claims at all.
        expect(late.filter((r) => r.claimed)).toHaveLength(0);
        await store.control(q, { paused: false }, T0 + 10_000, policy);
        const resumed = await Promise.all(range(1, 30).map((t) => store.claim(q, t, T0 + 10_001, policy, 10_001)));
        expect(resumed.filter((r) => r.claimed)).toHaveLength(5);
        expect(await store.stats(q, T0 + 10_001, policy)).toMatchObject({ active: 5, reserved: 0 });
      });
    });

    describe('emergency switches', () => {
      it('open: a join takes no ticket and writes nothing; the state says open, also to polls and stats; normal again takes tickets on', async () => {
        const store = createStore();
        const q = randomQueue();
        for (const policy of [OFF, cap(1, 0)]) {
          await store.join(q, T0, policy);
          const opened = await store.control(q, { switch: 'open' }, T0 + 1, policy);
          expect(opened).toMatchObject({ switch: 'open', paused: false });
          const before = await store.peek(q);
          expect(await store.join(q, T0 + 2, policy)).toMatchObject({ ticket: 0, claimed: false, replayed: false, switch: 'open', tail: before.tail });
          expect(await store.peek(q)).toEqual(before);
          expect(await store.poll(q, T0 + 3, policy)).toMatchObject({ switch: 'open' });
          expect(await store.stats(q, T0 + 4, policy)).toMatchObject({ switch: 'open' });
          const normal = await store.control(q, { switch: 'normal' }, T0 + 5, policy);
          expect(normal.switch).toBeUndefined();
          expect((await store.join(q, T0 + 6, policy)).ticket).toBe(before.tail + 1);
        }
      });

      it('hold: nobody new gets in, not by the period, an explicit admit, a walk-in or the claim of a called ticket; normal resumes', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(3, 0);
        // Two walk in and a third is called before the switch; the room has one place left.
        await store.join(q, T0, policy);
        await store.join(q, T0 + 1, policy);
        await store.join(q, T0 + 2, policy);
        expect(await store.peek(q)).toEqual({ tail: 3, cursor: 3 });
        expect(await store.leave(q, 1, T0 + 3, policy, 0)).toBe(true);
        const held = await store.control(q, { switch: 'hold' }, T0 + 4, policy);
        expect(held).toMatchObject({ switch: 'hold', paused: true });
        // A newcomer does not walk in though there is room; an explicit admit lets nobody in.
        expect(await store.join(q, T0 + 5, policy)).toMatchObject({ ticket: 4, claimed: false, switch: 'hold' });
        expect(await store.admit(q, 5, T0 + 6, policy)).toMatchObject({ admitted: 0, cursor: 3 });
        // The third ticket was called (it holds a reservation) but does not get in while held.
        expect(await store.claim(q, 3, T0 + 7, policy, 7)).toMatchObject({ claimed: false, switch: 'hold' });
        expect(await store.poll(q, T0 + 8, policy)).toMatchObject({ cursor: 3, switch: 'hold' });
        // Rate mode too: no period step (the walk-in it would make) and no explicit admit while held.
        const r = randomQueue();
        const rate = { ...OFF, auto: { count: 5, periodMs: 60_000 } };
        await store.control(r, { switch: 'hold' }, T0, rate);
        expect(await store.join(r, T0 + 1, rate)).toMatchObject({ ticket: 1, claimed: false, cursor: 0 });
        const manual = randomQueue();
        await store.join(manual, T0, OFF);
        await store.control(manual, { switch: 'hold' }, T0 + 1, OFF);
        expect(await store.admit(manual, 1, T0 + 2, OFF)).toMatchObject({ admitted: 0, cursor: 0 });
        // Back to normal: the called ticket claims, admission resumes.
        expect((await store.control(q, { switch: 'normal' }, T0 + 9, policy)).switch).toBeUndefined();
        expect(await store.claim(q, 3, T0 + 10, policy, 10)).toMatchObject({ claimed: true });
        await store.control(manual, { switch: 'normal' }, T0 + 3, OFF);
        expect(await store.admit(manual, 1, T0 + 4, OFF)).toMatchObject({ admitted: 1, cursor: 1 });
      });

      it('refuses a switch it does not know, changing nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        await expect(store.control(q, { switch: 'closed' as never }, T0, OFF)).rejects.toThrow(/switch/);
        expect((await store.poll(q, T0 + 1, OFF)).switch).toBeUndefined();
      });
    });

    describe('capacity mode: controls', () => {
      it('pauses: nobody is called and nobody walks in; resuming calls at once', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(5, 0);
        expect(await store.control(q, { paused: true }, T0, policy)).toMatchObject({ paused: true, cursor: 0, maxActive: 5 });
        for (let i = 1; i <= 3; i += 1) {
          expect(await store.join(q, T0 + i, policy)).toMatchObject({ ticket: i, claimed: false, cursor: 0, paused: true });
        }
        expect(await store.poll(q, T0 + 10, policy)).toMatchObject({ cursor: 0, active: 0 });
        expect(await store.claim(q, 1, T0 + 11, policy, 11)).toMatchObject({ claimed: false, cursor: 0 });
        expect(await store.control(q, { paused: false }, T0 + 1_000, policy)).toMatchObject({ paused: false, cursor: 3, active: 3 });
        expect(await store.claim(q, 1, T0 + 1_001, policy, 1_001)).toMatchObject({ claimed: true });
        // A live reservation is still claimed while paused.
        await store.control(q, { paused: true }, T0 + 1_002, policy);
        expect(await store.claim(q, 2, T0 + 1_003, policy, 1_003)).toMatchObject({ claimed: true, paused: true });
        // Nobody is waiting and there is room, but a newcomer does not walk in while paused.
        expect(await store.join(q, T0 + 1_004, policy)).toMatchObject({ ticket: 4, claimed: false, cursor: 3 });
      });

      it('overrides thresholds at runtime, and null restores the configured ones', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0);
        await joinMany(store, q, 6, T0, policy);
        expect(await store.peek(q)).toEqual({ tail: 6, cursor: 2 });
        expect(await store.control(q, { maxActive: 4 }, T0 + 1, policy)).toMatchObject({ maxActive: 4, cursor: 4, active: 4 });
        expect(await store.control(q, { maxNewPerMinute: 5 }, T0 + 2, policy)).toMatchObject({ maxActive: 4, maxNewPerMinute: 5, cursor: 4 });
        expect(await store.control(q, { maxActive: 10 }, T0 + 3, policy)).toMatchObject({ maxActive: 10, cursor: 5, admittedLastMinute: 5 });
        expect(await store.control(q, { maxActive: null, maxNewPerMinute: null }, T0 + 4, policy)).toMatchObject({
          maxActive: 2,
          maxNewPerMinute: 0,
          cursor: 5,
          active: 5,
        });
        // Back at the configured 2: the three called in excess hold their reservations, nobody more is called.
        expect(await store.leave(q, 1, T0 + 5, policy, 0)).toBe(true);
        expect(await store.peek(q)).toEqual({ tail: 6, cursor: 5 });
        // An override of 0 for both switches the queue to rate mode; an override turns capacity mode on.
        expect(await store.control(q, { maxActive: 0 }, T0 + 6, policy)).toMatchObject({ maxActive: 0, maxNewPerMinute: 0 });
        expect(await store.leave(q, 2, T0 + 7, policy, 0)).toBe(false);
        const r = randomQueue();
        expect(await store.control(r, { maxActive: 1 }, at(P), OFF)).toMatchObject({ maxActive: 1 });
        expect(await store.join(r, at(P), OFF)).toMatchObject({ ticket: 1, claimed: true });
        expect(await store.join(r, at(P), OFF)).toMatchObject({ ticket: 2, claimed: false, cursor: 1 });
        expect(await store.control(r, { maxActive: null }, at(P), OFF)).toMatchObject({ maxActive: 0, cursor: 1 });
      });

      it.each<[string, unknown]>([
        ['a negative maxActive', { maxActive: -1 }],
        ['a fractional maxActive', { maxActive: 1.5 }],
        ['a NaN maxNewPerMinute', { maxNewPerMinute: Number.NaN }],
        ['an infinite maxNewPerMinute', { maxNewPerMinute: Number.POSITIVE_INFINITY }],
        ['a numeric string', { maxActive: '5' }],
        ['a non-boolean paused', { paused: 'yes' }],
        ['paused as 1', { paused: 1 }],
        ['an unknown field', { maxactive: 5 }],
        ['one bad field among good ones', { paused: true, maxActive: 3, maxNewPerMinute: -2 }],
        ['null', null],
        ['an array', []],
      ])('refuses %s and changes nothing', async (_label, change) => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 0);
        await joinMany(store, q, 3, T0, policy);
        const before = await store.stats(q, T0, policy);
        await expect(store.control(q, change as RuntimeControl, T0, policy)).rejects.toBeInstanceOf(StoreArgumentError);
        expect(await store.stats(q, T0, policy)).toEqual(before);
        expect(before).toMatchObject({ paused: false, maxActive: 1, cursor: 1 });
      });
    });

    describe('capacity mode: explicit admit and figures', () => {
      it('reserves the tickets an explicit admit calls, beyond the thresholds, never past the tail', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 1);
        await joinMany(store, q, 6, T0, policy);
        expect(await store.admit(q, 3, T0 + 1, policy)).toMatchObject({
          admitted: 3,
          tail: 6,
          cursor: 4,
          active: 4,
          admittedLastMinute: 4,
        });
        for (const t of [2, 3, 4]) expect(await store.claim(q, t, T0 + 2, policy, 2)).toMatchObject({ claimed: true });
        expect(await store.stats(q, T0 + 3, policy)).toMatchObject({ active: 4, reserved: 0 });
        expect(await store.admit(q, 100, T0 + 4, policy)).toMatchObject({ admitted: 2, cursor: 6 });
        expect(await store.admit(q, 1, T0 + 5, policy)).toMatchObject({ admitted: 0, cursor: 6 });
        // Automatic admission waits until usage is back under the thresholds: a newcomer waits.
        expect(await store.join(q, T0 + 6, policy)).toMatchObject({ ticket: 7, claimed: false, cursor: 6 });
        // Explicit reservations lapse like any other and give their budget back.
        expect(await store.stats(q, T0 + 4 + RESERVATION_MS, policy)).toMatchObject({ active: 4, reserved: 0, admittedLastMinute: 4 });
      });

      it('reports active, reserved, admissions over 60 s and 300 s and the average wait', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(10, 0, { sessionMs: 600_000 });
        await joinMany(store, q, 2, T0, policy); // two walk-ins, waits of 0
        await store.control(q, { paused: true }, T0, policy);
        await joinMany(store, q, 3, T0 + 1_000, policy);
        await store.control(q, { paused: false }, T0 + 10_000, policy); // 3, 4, 5 called
        expect(await store.stats(q, T0 + 11_000, policy)).toEqual({
          tail: 5,
          cursor: 5,
          paused: false,
          maxActive: 10,
          maxNewPerMinute: 0,
          active: 5,
          reserved: 3,
          admittedLastMinute: 5,
          admittedLast5Minutes: 5,
          avgWaitSeconds: 0,
          eventSize: 0,
          eventSeed: 0,
          waiting: 0,
          epoch: 0,
          generation: T0 + 1,
          admitPerPeriod: 0,
          // The sale's totals: the two walk-ins, waits of 0 (not yet in a minute's point: added by the read).
          totals: expect.objectContaining({ admitted: 2, waitSumMs: 0, waitBuckets: [2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] }),
        });
        await store.claim(q, 3, T0 + 12_000, policy, 11_000);
        await store.claim(q, 4, T0 + 12_000, policy, 11_049);
        const snapshot = await store.stats(q, T0 + 13_000, policy);
        // (0 + 0 + 11,000 + 11,049) / 4 ms = 5.51 s.
        expect(snapshot).toMatchObject({ active: 5, reserved: 1, admittedLastMinute: 5, avgWaitSeconds: 5.5 });
        // Both claims in the 15-s bucket; the longest wait exact.
        expect(snapshot.totals).toMatchObject({ admitted: 4, waitSumMs: 22_049, waitMaxMs: 11_049, waitBuckets: [2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], lapsed: 0 });
        // 5's reservation lapses: it no longer counts as a slot nor as an admission.
        expect(await store.stats(q, T0 + 30_000, policy)).toMatchObject({ active: 4, reserved: 0, admittedLastMinute: 4 });
        expect(await store.stats(q, T0 + 60_000, policy)).toMatchObject({ admittedLastMinute: 2, admittedLast5Minutes: 4 });
        expect(await store.stats(q, T0 + 300_000, policy)).toMatchObject({ admittedLast5Minutes: 2, avgWaitSeconds: 11 });
        expect(await store.stats(q, T0 + 312_000, policy)).toMatchObject({ admittedLast5Minutes: 0, avgWaitSeconds: null });
        // stats wrote nothing: the earlier figures read back unchanged.
        expect(await store.stats(q, T0 + 13_000, policy)).toEqual(snapshot);
      });

      it('records a wait of 0 for a walk-in and the given wait for a claim', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(1, 0);
        await joinMany(store, q, 2, T0, policy);
        await store.leave(q, 1, T0 + 1_000, policy, 0);
        await store.claim(q, 2, T0 + 2_000, policy, 4_000);
        expect(await store.stats(q, T0 + 2_000, policy)).toMatchObject({ avgWaitSeconds: 2 });
        // A negative wait (clocks of two POPs) counts as 0.
        await store.leave(q, 2, T0 + 3_000, policy, 0);
        await store.join(q, T0 + 3_000, policy);
        await store.claim(q, 1, T0 + 3_000, policy, -50);
        expect(await store.stats(q, T0 + 3_000, policy)).toMatchObject({ avgWaitSeconds: 1.3 });
      });
    });

    describe('capacity mode: queues', () => {
      it('keeps slots, reservations, controls and figures apart per queue', async () => {
        const store = createStore();
        const a = randomQueue();
        const b = randomQueue();
        const policy = cap(1, 0);
        await joinMany(store, a, 3, T0, policy);
        expect(await store.join(b, T0, policy)).toMatchObject({ ticket: 1, claimed: true, active: 1, admittedLastMinute: 1 });
        await store.control(a, { paused: true, maxActive: 5 }, T0 + 1, policy);
        expect(await store.poll(b, T0 + 2, policy)).toMatchObject({ paused: false, maxActive: 1, active: 1 });
        expect(await store.touch(b, 2, T0 + 3, policy, T0 + 999_999)).toBe(false);
        expect(await store.leave(b, 2, T0 + 3, policy, 0)).toBe(false);
        expect(await store.leave(a, 1, T0 + 4, policy, 0)).toBe(true);
        expect(await store.stats(a, T0 + 5, policy)).toMatchObject({ paused: true, maxActive: 5, active: 0, cursor: 1 });
        expect(await store.stats(b, T0 + 5, policy)).toMatchObject({ paused: false, active: 1, cursor: 1, tail: 1 });
      });
    });

    describe('events', () => {
      it.each<[string, AdmissionPolicy, number]>([
        ['rate', rate({ count: 3, periodMs: 60_000 }), 3],
        ['capacity (maxActive)', cap(5, 0), 5],
        ['capacity (maxNewPerMinute)', cap(0, 5), 5],
      ])('admits nobody before the start in %s mode: joins take contiguous tickets, no call moves the cursor', async (_mode, base, atStart) => {
        const store = createStore();
        const q = randomQueue();
        const policy = withEvent(base, S);
        const joins = [];
        for (let i = 0; i < 5; i += 1) joins.push(await store.join(q, S - 120_000 + i * 1_000, policy));
        expect(joins.map((j) => j.ticket)).toEqual(range(1, 5));
        for (const j of joins) expect(j).toMatchObject({ cursor: 0, claimed: false, active: 0, eventSize: 0, eventSeed: 0 });
        expect(await store.poll(q, S - 1, policy)).toMatchObject({ cursor: 0, active: 0 });
        expect(await store.claim(q, 1, S - 1, policy, 0)).toMatchObject({ claimed: false, cursor: 0, active: 0 });
        expect(await store.admit(q, 3, S - 1, policy)).toMatchObject({ admitted: 0, cursor: 0, active: 0 });
        expect(await store.control(q, { maxActive: null }, S - 1, policy)).toMatchObject({ cursor: 0, active: 0 });
        expect(await store.draw(q, 1, S - 1, policy, 0)).toMatchObject({ outcome: 'waiting', claimed: false, cursor: 0 });
        expect(await store.stats(q, S - 1, policy)).toMatchObject({ cursor: 0, active: 0, reserved: 0, admittedLast5Minutes: 0, eventSize: 0 });
        // At the start admission runs as usual; in rate mode S - 1 shares S's period, which the calls
        // before the start did not use up.
        expect(await store.poll(q, S, policy)).toMatchObject({ tail: 5, cursor: atStart, eventSize: 5 });
      });

      it('takes back what a period step called ahead of the tail before an event: the pre-queue does not walk in', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = rate({ count: 3, periodMs: 60_000 });
        expect(await store.join(q, S - 300_000, policy)).toMatchObject({ ticket: 1, cursor: 3 });
        const scheduled = withEvent(policy, S);
        expect(await store.join(q, S - 200_000, scheduled)).toMatchObject({ ticket: 2, cursor: 1, admittedLast5Minutes: 1 });
        expect(await store.join(q, S - 100_000, scheduled)).toMatchObject({ ticket: 3, cursor: 1, admittedLast5Minutes: 1 });
        expect(await store.claim(q, 2, S - 1, scheduled, 0)).toMatchObject({ claimed: false });
        expect(await store.poll(q, S, scheduled)).toMatchObject({ cursor: 4, eventSize: 3 });
      });

      it("freezes the pre-queue at the first call at or after the start, with that call's seed, and keeps it", async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = withEvent(cap(2, 0), S);
        const seeded = (seed: number): AdmissionPolicy => ({ ...policy, seed });
        await joinMany(store, q, 3, S - 10_000, seeded(11));
        expect(await store.stats(q, S - 1, seeded(12))).toMatchObject({ eventSize: 0, eventSeed: 0 });
        expect(await store.poll(q, S + 5, seeded(777))).toMatchObject({ tail: 3, cursor: 2, eventSize: 3, eventSeed: 777 });
        expect(await store.join(q, S + 6, seeded(888))).toMatchObject({ ticket: 4, eventSize: 3, eventSeed: 777 });
        expect(await store.claim(q, 1, S + 7, seeded(5), 0)).toMatchObject({ claimed: true, eventSize: 3, eventSeed: 777 });
        expect(await store.leave(q, 1, S + 8, seeded(6), 0)).toBe(true);
        expect(await store.admit(q, 1, S + 9, seeded(7))).toMatchObject({ eventSize: 3, eventSeed: 777 });
        expect(await store.draw(q, 4, S + 9, seeded(8), 0)).toMatchObject({ eventSize: 3, eventSeed: 777 });
        expect(await store.control(q, { paused: false }, S + 9, seeded(9))).toMatchObject({ eventSize: 3, eventSeed: 777 });
        expect(await store.stats(q, S + 10, seeded(10))).toMatchObject({ eventSize: 3, eventSeed: 777 });
        // A policy without the event reports none.
        expect(await store.stats(q, S + 10, cap(2, 0))).toMatchObject({ eventSize: 0, eventSeed: 0 });
      });

      it('freezes P = the tickets before a join exactly at the start, which gets ticket P + 1 and is admitted normally', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = withEvent(rate({ count: 5, periodMs: 60_000 }), S);
        await joinMany(store, q, 4, S - 50_000, policy);
        // The pre-queue waits, so the join leaves the period step to the first poll.
        expect(await store.join(q, S, { ...policy, seed: MAX_SEED })).toMatchObject({
          ticket: 5,
          tail: 5,
          cursor: 0,
          eventSize: 4,
          eventSeed: MAX_SEED,
        });
        expect(await store.poll(q, S + 1, policy)).toMatchObject({ tail: 5, cursor: 5, eventSize: 4, eventSeed: MAX_SEED });
      });

      it('freezes anew when the start is rescheduled', async () => {
        const store = createStore();
        const q = randomQueue();
        const first = withEvent(OFF, S);
        await joinMany(store, q, 3, S - 1_000, first);
        expect(await store.poll(q, S, { ...first, seed: 1 })).toMatchObject({ eventSize: 3, eventSeed: 1 });
        await joinMany(store, q, 2, S + 1_000, first);
        const later = withEvent(OFF, S + 600_000);
        // Before the new start nothing is frozen for it, and nobody is admitted.
        expect(await store.admit(q, 5, S + 2_000, { ...later, seed: 4 })).toMatchObject({ admitted: 0, cursor: 0, eventSize: 0, eventSeed: 0 });
        expect(await store.poll(q, S + 600_000, { ...later, seed: 2 })).toMatchObject({ eventSize: 5, eventSeed: 2 });
        expect(await store.admit(q, 2, S + 600_001, later)).toMatchObject({ admitted: 2, cursor: 2 });
        expect(await store.stats(q, S + 600_001, first)).toMatchObject({ eventSize: 0, eventSeed: 0 });
        // Back to the first start: the next writing call freezes for it again.
        expect(await store.poll(q, S + 600_002, { ...first, seed: 3 })).toMatchObject({ eventSize: 5, eventSeed: 3 });
      });

      it('reads the event without writing: stats neither freezes nor admits', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = withEvent(rate({ count: 2, periodMs: 60_000 }), S);
        await joinMany(store, q, 3, S - 1_000, policy);
        for (let i = 0; i < 3; i += 1) {
          expect(await store.stats(q, S + i, { ...policy, seed: 100 + i })).toMatchObject({ cursor: 0, eventSize: 0, eventSeed: 0 });
        }
        // The first writing call at the start freezes the pre-queue; the poll after it steps.
        await store.join(q, S + 5, { ...policy, seed: 9 });
        expect(await store.stats(q, S + 6, policy)).toMatchObject({ tail: 4, cursor: 0, eventSize: 3, eventSeed: 9 });
        await store.poll(q, S + 7, { ...policy, seed: 10 });
        expect(await store.stats(q, S + 8, policy)).toMatchObject({ tail: 4, cursor: 2, eventSize: 3, eventSeed: 9 });
      });

      it('random method: pre-queue joins enter the draw, nobody is drawn before the start, the present are drawn at it', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = withEvent(randomly(cap(10, 0)), S);
        for (let i = 1; i <= 4; i += 1) {
          expect(await store.join(q, S - 5_000, policy)).toMatchObject({ ticket: i, claimed: false, cursor: 0, waiting: i });
        }
        expect(await store.admit(q, 4, S - 4_000, policy)).toMatchObject({ admitted: 0, waiting: 4 });
        expect(await store.draw(q, 2, S - 3_000, policy, 0)).toMatchObject({ outcome: 'waiting', claimed: false, cursor: 0 });
        expect(await store.poll(q, S, { ...policy, seed: 3 })).toMatchObject({ cursor: 4, waiting: 0, active: 4, eventSize: 4, eventSeed: 3 });
      });
    });

    describe('random method', () => {
      it('draws only present visitors: one whose last poll is presenceMs old is never drawn', async () => {
        const store = createStore();
        const next = seededRandom(4_242);
        for (let trial = 0; trial < 8; trial += 1) {
          const q = randomQueue();
          await joinMany(store, q, 10, T0, randomly(OFF));
          const polled = range(1, 10).filter(() => next() < 0.5);
          for (const t of polled) {
            expect(await store.draw(q, t, T0 + 8_000, randomly(OFF), 0)).toMatchObject({ outcome: 'waiting', claimed: false });
          }
          // At T0 + presenceMs the others' last poll (their join at T0) is presenceMs old: out of the draw.
          expect(await store.stats(q, T0 + PRESENCE_MS, randomly(OFF))).toMatchObject({ waiting: polled.length });
          const admitted = await store.admit(q, 10, T0 + PRESENCE_MS, randomly(OFF, seedFrom(next)));
          expect(admitted).toMatchObject({ admitted: polled.length, cursor: polled.length, waiting: 0 });
          for (const t of range(1, 10)) {
            const d = await store.draw(q, t, T0 + PRESENCE_MS + 1, randomly(OFF), 0);
            expect(d.outcome, `ticket ${t}`).toBe(polled.includes(t) ? 'drawn' : 'unknown');
          }
        }
      });

      it.each(['rate', 'capacity'] as const)('never admits a ticket twice over a long run with many seeds (%s mode)', async (mode) => {
        const store = createStore();
        const q = randomQueue();
        const next = seededRandom(mode === 'rate' ? 11 : 12);
        const base = mode === 'rate' ? rate({ count: 2, periodMs: 1_000 }) : cap(4, 0, { sessionMs: 60_000, reservationMs: 3_000 });
        const policy = (): AdmissionPolicy => randomly(base, seedFrom(next));
        const admitted: number[] = [];
        const waiting = new Set<number>();
        const holding = new Set<number>();
        const gone: number[] = [];
        let issued = 0;
        for (let step = 0; step < 80; step += 1) {
          const now = T0 + step * 500;
          const arrivals = Math.floor(next() * 3);
          for (let i = 0; i < arrivals; i += 1) {
            const j = await store.join(q, now, policy());
            issued = j.ticket;
            if (j.claimed) {
              admitted.push(j.ticket);
              if (mode === 'capacity') holding.add(j.ticket);
              else gone.push(j.ticket);
            } else {
              waiting.add(j.ticket);
            }
          }
          for (const t of [...waiting]) {
            // Some give up: they stop polling and their presence lapses.
            if (next() < 0.05) {
              waiting.delete(t);
              continue;
            }
            const d = await store.draw(q, t, now + 1, policy(), 0);
            if (d.outcome === 'drawn') {
              admitted.push(t);
              waiting.delete(t);
              expect(d.claimed).toBe(mode === 'capacity');
              if (mode === 'capacity') holding.add(t);
              else gone.push(t);
            } else if (d.outcome === 'front') {
              // Rate mode: drawn, but the rate window is full; it keeps its draw and is collected on
              // a later poll.
              expect(mode, `ticket ${t}`).toBe('rate');
            } else {
              expect(d.outcome, `ticket ${t}`).toBe('waiting');
            }
          }
          for (const t of [...holding]) {
            if (next() < 0.3) {
              expect(await store.leave(q, t, now + 2, policy(), 0)).toBe(true);
              holding.delete(t);
              gone.push(t);
            }
          }
          // Whoever was let in and left (or was collected) asks again: never a second admission.
          const again = gone[Math.floor(next() * gone.length)];
          if (again !== undefined) {
            expect(await store.draw(q, again, now + 3, policy(), 0)).toMatchObject({ outcome: 'unknown', claimed: false });
          }
        }
        expect(new Set(admitted).size).toBe(admitted.length);
        expect(admitted.length).toBeGreaterThan(30);
        for (const t of admitted) expect(t).toBeLessThanOrEqual(issued);
      });

      it('rate mode draws min(count, present) once per period, and banks nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = randomly(every(3));
        // The first join of the queue runs the period step: it draws its own ticket and is let in.
        expect(await store.join(q, at(P), policy)).toMatchObject({ ticket: 1, claimed: true, cursor: 1, waiting: 0, admittedLastMinute: 1 });
        for (let t = 2; t <= 5; t += 1) expect(await store.join(q, at(P, t), policy)).toMatchObject({ ticket: t, claimed: false, cursor: 1 });
        expect(await store.poll(q, at(P, 500), policy)).toMatchObject({ cursor: 1, waiting: 4 });
        // Next period: 3 of the 4 are drawn (reserved, counted as admitted until they come or lapse).
        expect(await store.poll(q, at(P + 1), policy)).toMatchObject({ cursor: 4, waiting: 1, admittedLastMinute: 4 });
        expect(await store.poll(q, at(P + 1, 1), policy)).toMatchObject({ cursor: 4, waiting: 1 });
        expect(await store.poll(q, at(P + 2), policy)).toMatchObject({ cursor: 5, waiting: 0 });
        expect(await store.poll(q, at(P + 3), policy)).toMatchObject({ cursor: 5, waiting: 0 });
        for (let i = 0; i < 5; i += 1) expect(await store.join(q, at(P + 3, 1 + i), policy)).toMatchObject({ claimed: false, cursor: 5 });
        // Seven quiet periods later: one period's count, not seven.
        expect(await store.poll(q, at(P + 10), policy)).toMatchObject({ cursor: 8, waiting: 2 });
        // Paused: no draw, and the period is not used up.
        expect(await store.control(q, { paused: true }, at(P + 11), policy)).toMatchObject({ cursor: 8 });
        expect(await store.control(q, { paused: false }, at(P + 11, 1), policy)).toMatchObject({ cursor: 10, waiting: 0 });
      });

      it('capacity mode fills free room by drawing; a slot is taken through a reservation only, never directly', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = randomly(cap(3, 0, { sessionMs: 600_000 }));
        expect(await store.join(q, T0, policy)).toMatchObject({ ticket: 1, claimed: true, cursor: 1, active: 1 });
        await store.control(q, { paused: true }, T0, policy);
        for (let t = 2; t <= 6; t += 1) expect(await store.join(q, T0 + 1, policy)).toMatchObject({ ticket: t, claimed: false, cursor: 1 });
        expect(await store.control(q, { paused: false }, T0 + 2, policy)).toMatchObject({ cursor: 3, active: 3, waiting: 3 });
        const outcomes = [];
        for (let t = 2; t <= 6; t += 1) outcomes.push(await store.draw(q, t, T0 + 3, policy, 3));
        expect(outcomes.filter((d) => d.outcome === 'drawn' && d.claimed)).toHaveLength(2);
        expect(outcomes.filter((d) => d.outcome === 'waiting' && !d.claimed)).toHaveLength(3);
        expect(await store.stats(q, T0 + 4, policy)).toMatchObject({ active: 3, reserved: 0, waiting: 3, avgWaitSeconds: 0 });
        // A holder leaves: its room is drawn among the present at once.
        await store.leave(q, 1, T0 + 5, policy, 0);
        expect(await store.stats(q, T0 + 5, policy)).toMatchObject({ cursor: 4, active: 3, reserved: 1, waiting: 2 });
      });

      it('capacity mode: an undrawn ticket under the cursor never takes free room (nor does a lapsed reservation)', async () => {
        const store = createStore();
        const q = randomQueue();
        // A seed whose first draw among tickets 1, 2, 3 (all joined at T0) is not ticket 1.
        const seed = range(1, 100)
          .map((i) => i * 99_991_001)
          .find((s) => createDrawRng(s).nextRank(3) !== 0)!;
        const policy = randomly(cap(1, 0, { reservationMs: 5_000 }));
        await store.control(q, { paused: true }, T0, policy);
        await joinMany(store, q, 3, T0, policy);
        expect(await store.control(q, { paused: false }, T0 + 1, randomly(policy, seed))).toMatchObject({ cursor: 1, active: 1 });
        const drawn = createDrawRng(seed).nextRank(3) + 1;
        // Later: the reservation lapsed, and the others stopped polling. Room for one, nobody present.
        const later = T0 + PRESENCE_MS + 5_000;
        expect(await store.poll(q, later, policy)).toMatchObject({ cursor: 1, active: 0, waiting: 0 });
        // Ticket 1 <= cursor with room would take a slot directly in FIFO; here it does not, and
        // neither does the drawn ticket whose reservation lapsed.
        expect(await store.claim(q, 1, later + 1, policy, 0)).toMatchObject({ claimed: false, active: 0 });
        expect(await store.claim(q, drawn, later + 2, policy, 0)).toMatchObject({ claimed: false, active: 0 });
        expect(await store.draw(q, 1, later + 3, policy, 0)).toMatchObject({ outcome: 'unknown', claimed: false, active: 0 });
        expect(await store.draw(q, drawn, later + 4, policy, 0)).toMatchObject({ outcome: 'unknown', claimed: false, active: 0 });
      });

      it('explicit admit draws min(count, present), while paused too; each drawn visitor is let in once', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = randomly(OFF);
        await joinMany(store, q, 5, T0, policy);
        await store.control(q, { paused: true }, T0, policy);
        expect(await store.admit(q, 2, T0 + 1, randomly(OFF, 17))).toMatchObject({ admitted: 2, cursor: 2, waiting: 3, admittedLastMinute: 2 });
        expect(await store.admit(q, 10, T0 + 2, randomly(OFF, 18))).toMatchObject({ admitted: 3, cursor: 5, waiting: 0 });
        expect(await store.admit(q, 1, T0 + 3, policy)).toMatchObject({ admitted: 0, cursor: 5 });
        for (const t of range(1, 5)) {
          expect(await store.claim(q, t, T0 + 4, policy, 0)).toMatchObject({ claimed: true });
          expect(await store.draw(q, t, T0 + 4, policy, 4)).toMatchObject({ outcome: 'drawn', claimed: false });
          expect(await store.draw(q, t, T0 + 5, policy, 5)).toMatchObject({ outcome: 'unknown', claimed: false });
          expect(await store.claim(q, t, T0 + 5, policy, 0)).toMatchObject({ claimed: false });
        }
        expect(await store.stats(q, T0 + 6, policy)).toMatchObject({ reserved: 0, admittedLastMinute: 5, avgWaitSeconds: 0 });
      });

      it('answers unknown for a collected, a lapsed and a never-issued ticket, and puts none of them back in the draw', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = randomly(OFF);
        await joinMany(store, q, 3, T0, policy);
        await store.draw(q, 1, T0 + 5_000, policy, 0);
        await store.draw(q, 2, T0 + 5_000, policy, 0);
        // Ticket 3's last poll was its join at T0: at T0 + presenceMs it has lapsed.
        const later = T0 + PRESENCE_MS;
        expect(await store.admit(q, 1, later, randomly(OFF, 99))).toMatchObject({ admitted: 1, waiting: 1 });
        const collected = (await store.claim(q, 1, later, policy, 0)).claimed ? 1 : 2;
        const other = 3 - collected;
        expect(await store.draw(q, collected, later + 1, policy, 0)).toMatchObject({ outcome: 'drawn', waiting: 1 });
        expect(await store.draw(q, collected, later + 2, policy, 0)).toMatchObject({ outcome: 'unknown', waiting: 1 });
        expect(await store.draw(q, 3, later + 2, policy, 0)).toMatchObject({ outcome: 'unknown', waiting: 1 });
        expect(await store.draw(q, 99, later + 2, policy, 0)).toMatchObject({ outcome: 'unknown', waiting: 1, tail: 3 });
        for (const t of [collected, 3, 99]) {
          expect(await store.draw(q, t, later + 3, policy, 0)).toMatchObject({ outcome: 'unknown', waiting: 1 });
        }
        // Only the one still in the draw is drawn.
        expect(await store.admit(q, 10, later + 4, policy)).toMatchObject({ admitted: 1, cursor: 2, waiting: 0 });
        expect(await store.draw(q, other, later + 5, policy, 0)).toMatchObject({ outcome: 'drawn' });
      });

      it('FIFO: draw answers from the cursor, as claim does (drawn, front, waiting, unknown)', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 3, at(P), OFF);
        await store.admit(q, 1, at(P), OFF);
        expect(await store.draw(q, 1, at(P), OFF, 0)).toMatchObject({ outcome: 'drawn', claimed: false, waiting: 0 });
        expect(await store.draw(q, 3, at(P), OFF, 0)).toMatchObject({ outcome: 'waiting', claimed: false });
        expect(await store.draw(q, 4, at(P), OFF, 0)).toMatchObject({ outcome: 'unknown', claimed: false });

        const c = randomQueue();
        const policy = cap(1, 0);
        await joinMany(store, c, 2, T0, policy);
        expect(await store.draw(c, 1, T0 + 1, policy, 0)).toMatchObject({ outcome: 'drawn', claimed: true });
        expect(await store.draw(c, 2, T0 + 1, policy, 0)).toMatchObject({ outcome: 'waiting', claimed: false });
        await store.control(c, { paused: true }, T0 + 2, policy);
        await store.leave(c, 1, T0 + 2, policy, 0);
        await store.admit(c, 1, T0 + 3, policy);
        expect(await store.draw(c, 2, T0 + 4, policy, 4)).toMatchObject({ outcome: 'drawn', claimed: true, active: 1 });
        // Called, its reservation lapsed, paused: at the front but no slot.
        const d = randomQueue();
        await store.control(d, { paused: true }, T0, policy);
        await joinMany(store, d, 2, T0, policy);
        expect(await store.admit(d, 2, T0, policy)).toMatchObject({ cursor: 2 });
        expect(await store.draw(d, 2, T0 + RESERVATION_MS + 1, policy, 0)).toMatchObject({ outcome: 'front', claimed: false, active: 0 });
      });

      it('draws uniformly: a chi-square over the arrival positions passes at p = 0.001 (fixed seed)', async () => {
        // The memory store takes the full sample; Redis runs the same algorithm (the same-seed test
        // ties the two) and a smaller one, to stay fast.
        const { positions, trials, critical } =
          name === 'MemoryQueueStore' ? { positions: 40, trials: 4_000, critical: CHI_SQUARE_P001[39] } : { positions: 10, trials: 300, critical: CHI_SQUARE_P001[9] };
        const store = createStore();
        const q = randomQueue();
        // Present for the whole run; each draw is collected at once, so no reservation piles up.
        const policy = (seed = 0): AdmissionPolicy => ({ ...OFF, reservationMs: 1, method: 'random', presenceMs: 3_600_000, seed });
        const next = seededRandom(20_251_122);
        // The visitors in the draw, oldest poll first: Redis's order, as every time here is distinct.
        const present: number[] = [];
        for (let i = 0; i < positions; i += 1) present.push((await store.join(q, T0 + i, policy())).ticket);
        const counts = new Array<number>(positions).fill(0);
        const seeds: number[] = [];
        for (let k = 0; k < trials; k += 1) {
          const now = T0 + 1_000 + 2 * k;
          const seed = seedFrom(next);
          seeds.push(seed);
          expect(await store.admit(q, 1, now, policy(seed))).toMatchObject({ admitted: 1, waiting: positions - 1 });
          const claims = await Promise.all(present.map((t) => store.claim(q, t, now, policy(), 0)));
          const drawn = claims.flatMap((c, i) => (c.claimed ? [i] : []));
          expect(drawn).toHaveLength(1);
          const rank = drawn[0]!;
          counts[rank]! += 1;
          // The drawn visitor collects its admission (a draw left uncollected would be drawn again).
          expect(await store.draw(q, present[rank]!, now, policy(), 0)).toMatchObject({ outcome: 'drawn' });
          // The drawn visitor is replaced by a new arrival, at the back of the line.
          present.splice(rank, 1);
          present.push((await store.join(q, now + 1, policy())).ticket);
        }
        // The test has teeth: ranks skewed to early arrivals (u² instead of u) fail the same threshold.
        const skewed = new Array<number>(positions).fill(0);
        for (const seed of seeds) skewed[Math.floor(((seed % 1_000_003) / 1_000_003) ** 2 * positions)]! += 1;
        expect(chiSquare(skewed)).toBeGreaterThan(critical);
        expect(chiSquare(counts), counts.join(' ')).toBeLessThan(critical);
        // CPU-bound (thousands of joins): up to 21 s per store with both cores busy; the bound only ends a stuck run.
      }, 120_000);
    });

    describe('history', () => {
      it('comes with the figures in one stats call when asked (the admin panel), exactly as history answers it', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 3, MIN0 + 1_000, OFF);
        for (let i = 0; i < 3; i += 1) await store.poll(q, MIN0 + i * 60_000 + 5_000, OFF);
        const plain = await store.stats(q, MIN0 + 180_001, OFF);
        expect(plain.history).toBeUndefined();
        const panel = await store.stats(q, MIN0 + 180_001, OFF, { history: true });
        const { history, ...figures } = panel;
        expect(figures).toEqual(plain);
        expect(history).toEqual(await store.history(q, MIN0 + 180_001));
        expect(history).toHaveLength(3);
        // Nothing recorded yet: an empty history, not a missing one.
        expect((await store.stats(randomQueue(), MIN0, OFF, { history: true })).history).toEqual([]);
      });

      it("records one point per minute, the state the minute's first writing call but a join returned, oldest first", async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0);
        const point = (s: QueueState, atMs: number) => ({
          atMs,
          tail: s.tail,
          cursor: s.cursor,
          waiting: Math.max(0, s.tail - s.cursor),
          active: s.active,
          admittedLastMinute: s.admittedLastMinute,
        });
        expect(await store.history(q, MIN0)).toEqual([]);
        // A join is the hottest call: it writes no point (minute 0 has none).
        await store.join(q, MIN0 + 5_000, policy);
        await joinMany(store, q, 3, MIN0 + 6_000, policy);
        expect(await store.history(q, MIN0 + 7_000)).toEqual([]);
        const s2 = await store.poll(q, MIN0 + 60_010, policy);
        await store.join(q, MIN0 + 61_000, policy);
        await store.stats(q, MIN0 + 120_000, policy);
        await store.leave(q, 1, MIN0 + 180_000, policy, 0);
        await store.touch(q, 2, MIN0 + 180_000, policy, MIN0 + 900_000);
        const s4 = await store.admit(q, 1, MIN0 + 240_000, policy);
        const s5 = await store.claim(q, 3, MIN0 + 300_000, policy, 0);
        const s6 = await store.control(q, { paused: true }, MIN0 + 360_000, policy);
        const s7 = await store.draw(q, 5, MIN0 + 420_000, policy, 0);
        expect(s2.tail - s2.cursor).toBe(2);
        expect(await store.history(q, MIN0 + 420_001)).toEqual([
          point(s2, MIN0 + 60_000),
          point(s4, MIN0 + 240_000),
          point(s5, MIN0 + 300_000),
          point(s6, MIN0 + 360_000),
          point(s7, MIN0 + 420_000),
        ]);
      });

      it('records the present visitors as waiting in random mode', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = randomly(OFF);
        expect(await store.join(q, MIN0 + 55_000, policy)).toMatchObject({ waiting: 1 });
        await joinMany(store, q, 2, MIN0 + 56_000, policy);
        expect(await store.poll(q, MIN0 + 57_000, policy)).toMatchObject({ waiting: 3 });
        const s = await store.admit(q, 1, MIN0 + 60_000, randomly(OFF, 3));
        expect(s).toMatchObject({ tail: 3, cursor: 1, waiting: 2 });
        expect(await store.history(q, MIN0 + 60_001)).toEqual([
          { atMs: MIN0, tail: 3, cursor: 0, waiting: 3, active: 0, admittedLastMinute: 0 },
          { atMs: MIN0 + 60_000, tail: 3, cursor: 1, waiting: 2, active: 1, admittedLastMinute: 1 },
        ]);
      });

      it('keeps the last hour: older points are trimmed, and a read returns only the last hour', async () => {
        const store = createStore();
        const q = randomQueue();
        for (let i = 0; i <= 61; i += 1) await store.poll(q, MIN0 + i * 60_000 + 7, OFF);
        const minutes = (points: readonly HistoryPoint[]): number[] => points.map((p) => (p.atMs - MIN0) / 60_000);
        // The 62nd write trimmed minutes 0 and 1 (more than an hour before it).
        expect(minutes(await store.history(q, MIN0 + 61 * 60_000 + 8))).toEqual(range(2, 61));
        expect(minutes(await store.history(q, MIN0 + 90 * 60_000))).toEqual(range(31, 61));
        expect(await store.history(q, MIN0 + 200 * 60_000)).toEqual([]);
      });
    });

    describe('reset', () => {
      it('empties the line, keeps the tail, held slots, controls and VIP codes; the epoch becomes now', async () => {
        const store = createStore();
        const q = randomQueue();
        const h = vipHash();
        const policy = withEvent(randomly(cap(2, 0)), T0 + 1_000);
        await joinMany(store, q, 5, T0, policy);
        await store.control(q, { maxNewPerMinute: 9 }, T0, policy);
        expect(await store.poll(q, T0 + 1_000, { ...policy, seed: 5 })).toMatchObject({ eventSize: 5, eventSeed: 5, cursor: 2, waiting: 3 });
        await store.draw(q, 1, T0 + 1_001, policy, 1_000);
        await store.control(q, { paused: true }, T0 + 1_002, policy);
        expect(await createVip(store, q, h, { uses: 2, expiresAtMs: null }, T0)).toBe(true);
        const before = await store.stats(q, T0 + 4_999, policy);
        // Slots held (not reservations) stay: their holders' access tokens still pass.
        const seated = before.active - before.reserved;
        const emptied = {
          tail: 5,
          cursor: 5,
          paused: true,
          maxActive: 2,
          maxNewPerMinute: 9,
          active: seated,
          admittedLastMinute: 0,
          admittedLast5Minutes: 0,
          eventSize: 0,
          eventSeed: 0,
          waiting: 0,
          epoch: T0 + 5_000,
          generation: before.generation,
        };
        expect(await store.reset(q, T0 + 5_000, policy)).toEqual({ ...emptied, applied: true });
        expect(await store.stats(q, T0 + 5_001, policy)).toEqual({ ...emptied, reserved: 0, avgWaitSeconds: null, admitPerPeriod: 0, totals: expect.objectContaining({ admitted: 1 }) });
        expect(await store.peek(q)).toEqual({ tail: 5, cursor: 5 });
        expect(await store.history(q, T0 + 5_001)).toEqual([]);
        expect(await store.useVip(q, h, T0 + 5_002)).toEqual({ ok: true, remaining: 1 });
        // The event froze before the reset; the next call freezes again, for the new line.
        expect(await store.control(q, { paused: false }, T0 + 6_000, { ...policy, seed: 8 })).toMatchObject({ eventSize: 5, eventSeed: 8, epoch: T0 + 5_000 });
        // Numbers are never handed out twice: the next ticket follows the old tail.
        expect(await store.join(q, T0 + 6_001, policy)).toMatchObject({ ticket: 6, claimed: seated < 2, epoch: T0 + 5_000 });
        expect(await store.history(q, T0 + 6_002)).toHaveLength(1);
      });

      it('applies once: a reset that expects an epoch no longer current changes nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 3, T0, OFF);
        expect(await store.reset(q, T0 + 1, OFF, 0)).toMatchObject({ applied: true, epoch: T0 + 1, tail: 3, cursor: 3 });
        await joinMany(store, q, 2, T0 + 2, OFF);
        // The same request again (a retry after a timeout): the epoch moved, nothing is emptied.
        expect(await store.reset(q, T0 + 3, OFF, 0)).toMatchObject({ applied: false, epoch: T0 + 1, tail: 5, cursor: 3 });
        expect(await store.reset(q, T0 + 4, OFF, T0 + 1)).toMatchObject({ applied: true, epoch: T0 + 4, tail: 5, cursor: 5 });
        await expect(store.reset(q, T0 + 5, OFF, -1)).rejects.toBeInstanceOf(StoreArgumentError);
        expect(await store.stats(q, T0 + 6, OFF)).toMatchObject({ epoch: T0 + 4 });
      });

      it('voids tickets from before: unknown to draw, and new tickets come after every old number', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 3, T0, randomly(OFF));
        await store.reset(q, T0 + 1, randomly(OFF));
        expect(await store.draw(q, 2, T0 + 2, randomly(OFF), 0)).toMatchObject({ outcome: 'unknown', waiting: 0, epoch: T0 + 1 });
        expect(await store.join(q, T0 + 3, randomly(OFF))).toMatchObject({ ticket: 4, waiting: 1 });
        expect(await store.admit(q, 5, T0 + 4, randomly(OFF))).toMatchObject({ admitted: 1 });

        const c = randomQueue();
        const policy = cap(1, 0);
        await joinMany(store, c, 3, T0, policy);
        // Ticket 1 walked in and holds the only slot; 2 and 3 wait.
        expect(await store.reset(c, T0 + 1, policy)).toMatchObject({ tail: 3, cursor: 3, active: 1, epoch: T0 + 1 });
        // The seated visitor still counts: nobody new gets its room, old or new number.
        expect(await store.claim(c, 3, T0 + 2, policy, 0)).toMatchObject({ claimed: false, active: 1 });
        expect(await store.join(c, T0 + 3, policy)).toMatchObject({ ticket: 4, claimed: false, active: 1 });
        // When it leaves, the room goes to the first ticket after the reset.
        expect(await store.leave(c, 1, T0 + 4, policy, 0)).toBe(true);
        expect(await store.poll(c, T0 + 5, policy)).toMatchObject({ cursor: 4, active: 1 });
        expect(await store.claim(c, 4, T0 + 6, policy, 0)).toMatchObject({ claimed: true, active: 1 });
      });
    });

    describe('generations (the store lost its state)', () => {
      it('keeps its generation while the state lives, and reports it from every call', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0);
        expect((await store.stats(q, T0, policy)).generation).toBe(0);
        const { generation } = await store.join(q, T0, { ...policy, seed: 41 });
        expect(generation).toBe(41 + T0 + 1);
        expect(await store.poll(q, T0 + 1, { ...policy, seed: 99 })).toMatchObject({ generation });
        expect(await store.reset(q, T0 + 2, policy)).toMatchObject({ generation });
        expect(await store.admit(q, 1, T0 + 3, policy)).toMatchObject({ generation });
        expect(await store.stats(q, T0 + 4, policy)).toMatchObject({ generation });
      });

      it('refuses the tickets of another generation; re-registers its holders under members of their own', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0, { sessionMs: 60_000 });
        // The old life: tickets 1 and 2 were seated, under generation OLD (the store has forgotten).
        const OLD = 77;
        // The new life: tickets 1, 2 (walk-ins), 3 waiting.
        await joinMany(store, q, 3, T0, policy);
        const gen = (await store.stats(q, T0, policy)).generation;
        expect(gen).not.toBe(OLD);
        // An old waiting ticket 3 cannot take the new ticket 3's place, nor be drawn as it.
        expect(await store.claim(q, 3, T0 + 1, policy, 0, OLD)).toMatchObject({ claimed: false, active: 2 });
        expect(await store.draw(q, 3, T0 + 1, policy, 0, OLD)).toMatchObject({ outcome: 'unknown', claimed: false });
        // An old holder of ticket 1 refreshes: it gets a slot of its own, and the new 1 keeps its.
        expect(await store.touch(q, 1, T0 + 2, policy, Number.MAX_SAFE_INTEGER, OLD)).toBe(true);
        expect(await store.stats(q, T0 + 3, policy)).toMatchObject({ active: 3 });
        // The new 1 leaving frees its own slot only; the old holder's stays counted.
        expect(await store.leave(q, 1, T0 + 4, policy, 0)).toBe(true);
        expect(await store.poll(q, T0 + 5, policy)).toMatchObject({ active: 2, cursor: 2 });
        expect(await store.touch(q, 1, T0 + 6, policy, Number.MAX_SAFE_INTEGER, OLD)).toBe(true);
        // The old holder leaving frees its slot: ticket 3 is called into it.
        expect(await store.leave(q, 1, T0 + 7, policy, 0, OLD)).toBe(true);
        expect(await store.leave(q, 1, T0 + 8, policy, 0, OLD)).toBe(false);
        expect(await store.poll(q, T0 + 9, policy)).toMatchObject({ cursor: 3, active: 2 });
        // The current generation (or none, a token from before generations) is the ticket's own.
        expect(await store.claim(q, 3, T0 + 10, policy, 0, gen)).toMatchObject({ claimed: true });
        expect(await store.touch(q, 3, T0 + 11, policy, Number.MAX_SAFE_INTEGER)).toBe(true);
        await expect(store.touch(q, 3, T0 + 12, policy, Number.MAX_SAFE_INTEGER, -1)).rejects.toBeInstanceOf(StoreArgumentError);
      });
    });

    describe('controls a POP remembers, restored when the state is found lost', () => {
      it('brings hold back in the call that finds the state absent: that join takes a ticket and nobody is admitted; stats say when and what', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = { ...rate({ count: 5, periodMs: 60_000 }), restore: { switch: 'hold' as const, paused: false } };
        const joined = await store.join(q, T0, policy);
        // Rate mode would have let this first join walk in; hold keeps it waiting, and calls nobody.
        expect(joined).toMatchObject({ ticket: 1, claimed: false, paused: true, switch: 'hold', cursor: 0 });
        expect(await store.admit(q, 3, T0 + 1, policy)).toMatchObject({ admitted: 0, switch: 'hold' });
        expect(await store.stats(q, T0 + 2, policy)).toMatchObject({ switch: 'hold', lostState: { atMs: T0, restored: ['hold'] } });
        // While the state lives, what a POP remembers changes nothing: the operator's normal stands.
        await store.control(q, { switch: 'normal' }, T0 + 3, policy);
        expect(await store.poll(q, T0 + 4, policy)).not.toHaveProperty('switch');
        expect(await store.join(q, T0 + 5, policy)).toMatchObject({ ticket: 2 });
      });

      it('brings open and a pause back, in any writing call; a POP that remembers nothing restores nothing', async () => {
        const store = createStore();
        const opened = randomQueue();
        const open = { ...rate({ count: 5, periodMs: 60_000 }), restore: { switch: 'open' as const, paused: true } };
        // A poll is the first call after the loss: switched open (no ticket taken by the next join), and paused underneath.
        expect(await store.poll(opened, T0, open)).toMatchObject({ switch: 'open', paused: false });
        expect(await store.join(opened, T0 + 1, open)).toMatchObject({ ticket: 0, claimed: false, switch: 'open' });
        await store.control(opened, { switch: 'normal' }, T0 + 2, open);
        expect(await store.stats(opened, T0 + 3, open)).toMatchObject({ paused: true, lostState: { atMs: T0, restored: ['open', 'paused'] } });
        // Remembered as normal: the loss is still recorded, with nothing restored.
        const normal = randomQueue();
        const remembered = { ...rate({ count: 5, periodMs: 60_000 }), restore: { switch: undefined, paused: false } };
        expect(await store.join(normal, T0, remembered)).toMatchObject({ ticket: 1, claimed: true });
        expect(await store.stats(normal, T0 + 1, remembered)).toMatchObject({ lostState: { atMs: T0, restored: [] } });
        // A brand-new queue (no POP remembers it): no mark at all.
        const fresh = randomQueue();
        await store.join(fresh, T0, rate({ count: 5, periodMs: 60_000 }));
        expect(await store.stats(fresh, T0 + 1, rate({ count: 5, periodMs: 60_000 }))).not.toHaveProperty('lostState');
      });

      it('tells a recovery window from the operator’s pause, so a POP never remembers the window as a pause', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0);
        const held = await store.join(q, T0, policy, { recoverMs: 10_000, recoverIfNew: true });
        expect(held).toMatchObject({ paused: true, recovering: true });
        expect(await store.poll(q, T0 + 10_001, policy)).not.toHaveProperty('recovering');
        await store.control(q, { paused: true }, T0 + 10_002, policy);
        expect(await store.poll(q, T0 + 10_003, policy)).toMatchObject({ paused: true });
        expect(await store.poll(q, T0 + 10_003, policy)).not.toHaveProperty('recovering');
      });

      it('refuses a malformed restore before anything is written', async () => {
        const store = createStore();
        const q = randomQueue();
        const bad = { ...rate({ count: 5, periodMs: 60_000 }), restore: { switch: 'closed', paused: false } } as unknown as AdmissionPolicy;
        await expect(store.join(q, T0, bad)).rejects.toBeInstanceOf(StoreArgumentError);
        expect((await store.stats(q, T0, rate({ count: 5, periodMs: 60_000 }))).generation).toBe(0);
      });
    });

    describe('join keys: a join whose answer was lost, retried', () => {
      /** A fresh join key; `slot` fixes its first three hex digits (the ring slot it lands in). */
      const key = (slot?: string): string => (slot ?? '') + randomUUID().replace(/-/g, '').slice(0, 16 - (slot?.length ?? 0));

      it('answers the ticket the key took, takes nothing new, and a new key gets the next number', async () => {
        const store = createStore();
        const q = randomQueue();
        const k1 = key();
        await joinMany(store, q, 2, at(P), OFF);
        expect(await store.join(q, at(P, 1), OFF, { joinKey: k1 })).toMatchObject({ ticket: 3, tail: 3, claimed: false, replayed: false });
        expect(await store.join(q, at(P, 2), OFF, { joinKey: k1 })).toMatchObject({ ticket: 3, tail: 3, claimed: false, replayed: true });
        expect(await store.join(q, at(P, 3), OFF, { joinKey: key() })).toMatchObject({ ticket: 4, tail: 4, replayed: false });
        // Still the same ticket at the end of the ten minutes, a new one after.
        expect(await store.join(q, at(P, 1) + 599_999, OFF, { joinKey: k1 })).toMatchObject({ ticket: 3, replayed: true });
        expect(await store.join(q, at(P, 1) + 600_000, OFF, { joinKey: k1 })).toMatchObject({ ticket: 5, replayed: false });
      });

      it('capacity mode: a walk-in retried keeps its one slot, counted once; the room stays exact', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(2, 0);
        const k1 = key();
        expect(await store.join(q, T0, policy, { joinKey: k1 })).toMatchObject({ ticket: 1, claimed: true, active: 1, admittedLastMinute: 1 });
        // The answer was lost; the retry is the same visitor: still in, still one slot, one arrival.
        expect(await store.join(q, T0 + 1_000, policy, { joinKey: k1 })).toMatchObject({ ticket: 1, claimed: true, replayed: true, active: 1, admittedLastMinute: 1 });
        expect(await store.join(q, T0 + 2_000, policy, { joinKey: k1 })).toMatchObject({ ticket: 1, claimed: true, active: 1, tail: 1 });
        // So the second seat is still free for somebody else, and the third visitor waits.
        expect(await store.join(q, T0 + 3_000, policy, { joinKey: key() })).toMatchObject({ ticket: 2, claimed: true, active: 2 });
        const third = key();
        expect(await store.join(q, T0 + 4_000, policy, { joinKey: third })).toMatchObject({ ticket: 3, claimed: false, active: 2 });
        // A queued ticket retried is still queued (the caller settles it as any waiting ticket).
        expect(await store.join(q, T0 + 5_000, policy, { joinKey: third })).toMatchObject({ ticket: 3, claimed: false, replayed: true, active: 2, tail: 3 });
        // The retried walk-in's slot was renewed by its retry: it outlives the other walk-in's.
        // (its first expiry was T0 + SESSION_MS, its last renewal T0 + 2 s).
        expect(await store.poll(q, T0 + 1_500 + SESSION_MS, policy)).toMatchObject({ cursor: 2, active: 2 });
        // When it lapses, its seat goes to the next ticket, which is reserved for it.
        expect(await store.poll(q, T0 + 2_500 + SESSION_MS, policy)).toMatchObject({ cursor: 3, active: 2 });
      });

      it('rate mode: a walk-in retried stays admitted and is counted once', async () => {
        const store = createStore();
        const q = randomQueue();
        const k1 = key();
        const first = await store.join(q, at(P), every(3), { joinKey: k1 });
        expect(first).toMatchObject({ ticket: 1, claimed: true, replayed: false });
        const again = await store.join(q, at(P, 10), every(3), { joinKey: k1 });
        expect(again).toMatchObject({ ticket: 1, claimed: true, replayed: true, cursor: first.cursor, admittedLastMinute: first.admittedLastMinute });
        // The period's other two calls are still there for the next two visitors, not a third.
        expect(await store.join(q, at(P, 20), every(3), { joinKey: key() })).toMatchObject({ ticket: 2, claimed: true });
        expect(await store.join(q, at(P, 30), every(3), { joinKey: key() })).toMatchObject({ ticket: 3, claimed: true });
        expect(await store.join(q, at(P, 40), every(3), { joinKey: key() })).toMatchObject({ ticket: 4, claimed: false });
      });

      it('random method: a retried ticket is the same one, still in the draw', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = randomly(OFF);
        const k1 = key();
        expect(await store.join(q, at(P), policy, { joinKey: k1 })).toMatchObject({ ticket: 1, waiting: 1 });
        await store.join(q, at(P, 1), policy);
        // Presence renewed by the retry: still in the draw after the first join's presence would lapse.
        expect(await store.join(q, at(P, 9_000), policy, { joinKey: k1 })).toMatchObject({ ticket: 1, replayed: true, waiting: 2, tail: 2 });
        expect(await store.stats(q, at(P, 15_000), policy)).toMatchObject({ waiting: 1 });
        expect(await store.draw(q, 1, at(P, 15_000), policy, 0)).toMatchObject({ outcome: 'waiting' });
      });

      it('forgets a key after a reset, and when a later key lands in its slot of the ring', async () => {
        const store = createStore();
        const q = randomQueue();
        const k1 = key('abc');
        expect(await store.join(q, at(P), OFF, { joinKey: k1 })).toMatchObject({ ticket: 1 });
        const state = await store.stats(q, at(P, 1), OFF);
        await store.reset(q, at(P, 2), OFF, state.epoch);
        // The reset voided ticket 1: the retry gets a new number, never ticket 1 again.
        expect(await store.join(q, at(P, 3), OFF, { joinKey: k1 })).toMatchObject({ ticket: 2, replayed: false });
        expect(await store.join(q, at(P, 4), OFF, { joinKey: k1 })).toMatchObject({ ticket: 2, replayed: true });
        // Another key in slot abc overwrites the entry; a key in another slot does not.
        expect(await store.join(q, at(P, 5), OFF, { joinKey: key('abd') })).toMatchObject({ ticket: 3 });
        expect(await store.join(q, at(P, 6), OFF, { joinKey: k1 })).toMatchObject({ ticket: 2, replayed: true });
        expect(await store.join(q, at(P, 7), OFF, { joinKey: key('abc') })).toMatchObject({ ticket: 4 });
        expect(await store.join(q, at(P, 8), OFF, { joinKey: k1 })).toMatchObject({ ticket: 5, replayed: false });
      });

      it('refuses a malformed key, changing nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        await store.join(q, at(P), OFF);
        for (const bad of ['ABCDEF0123456789', 'abc', 'abcdef01234567890', 'abcdef012345678g', '', ' abcdef012345678']) {
          if (bad === '') continue;
          await expect(store.join(q, at(P, 1), OFF, { joinKey: bad })).rejects.toBeInstanceOf(StoreArgumentError);
        }
        expect(await store.peek(q)).toEqual({ tail: 1, cursor: 0 });
      });
    });

    describe('recovery after a lost state', () => {
      it('holds new admissions in capacity mode for the window the first evidence opens, once per generation', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(5, 0);
        // A brand-new queue admits at once: nothing says a state was lost.
        expect(await store.join(q, T0, policy)).toMatchObject({ ticket: 1, claimed: true, paused: false });
        // A visitor from a lost generation rejoins: the window opens, nobody new walks in.
        expect(await store.join(q, T0 + 1, policy, { recoverMs: 10_000 })).toMatchObject({ ticket: 2, claimed: false, paused: true, active: 1 });
        expect(await store.join(q, T0 + 2, policy)).toMatchObject({ ticket: 3, claimed: false, paused: true });
        // A later rejoin does not stretch it; an old holder refreshes into the count meanwhile.
        expect(await store.join(q, T0 + 5_000, policy, { recoverMs: 10_000 })).toMatchObject({ ticket: 4, claimed: false, paused: true });
        expect(await store.touch(q, 9, T0 + 6_000, policy, Number.MAX_SAFE_INTEGER, 12_345)).toBe(true);
        expect(await store.stats(q, T0 + 9_999, policy)).toMatchObject({ paused: true, active: 2 });
        // Explicit admits still work while it is open.
        expect(await store.admit(q, 1, T0 + 7_000, policy)).toMatchObject({ admitted: 1, cursor: 2 });
        // At its end the room left (5 - 1 seated - 1 old holder - 1 reserved = 2) is handed out, and
        // the window never opens again in this generation (the house is full, not paused).
        expect(await store.poll(q, T0 + 10_001, policy)).toMatchObject({ paused: false, cursor: 4, active: 5 });
        expect(await store.join(q, T0 + 10_002, policy, { recoverMs: 10_000 })).toMatchObject({ ticket: 5, claimed: false, paused: false });
        // Rate mode has no slots to count: nothing is held.
        const r = randomQueue();
        await joinMany(store, r, 2, T0, OFF);
        expect(await store.join(r, T0 + 1, every(3), { recoverMs: 10_000 })).toMatchObject({ paused: false });
        await expect(store.join(r, T0 + 2, OFF, { recoverMs: -5 })).rejects.toBeInstanceOf(StoreArgumentError);
      });

      it('with recoverIfNew, opens the window only in the join that finds the state absent, before it could walk in', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(5, 0);
        // The state exists (this queue has a generation): recoverIfNew changes nothing.
        expect(await store.join(q, T0, policy)).toMatchObject({ ticket: 1, claimed: true });
        expect(await store.join(q, T0 + 1, policy, { recoverMs: 10_000, recoverIfNew: true })).toMatchObject({ ticket: 2, claimed: true, paused: false });
        // An absent state (another queue stands for a lost one here): the window opens in the very
        // join that creates the generation, so the join itself is held.
        const lost = randomQueue();
        expect(await store.join(lost, T0 + 2, policy, { recoverMs: 10_000, recoverIfNew: true })).toMatchObject({ ticket: 1, claimed: false, paused: true });
        expect(await store.join(lost, T0 + 3, policy)).toMatchObject({ ticket: 2, claimed: false, paused: true });
        expect(await store.poll(lost, T0 + 10_002, policy)).toMatchObject({ paused: false, cursor: 2, active: 2 });
        // Without recoverIfNew a state found absent is a new queue: nothing held.
        expect(await store.join(randomQueue(), T0, policy, { recoverIfNew: true })).toMatchObject({ ticket: 1, claimed: true, paused: false });
      });

      it('with a floor above the ticket in the same generation (a rolled-back store), starts a new generation above the floor', async () => {
        const store = createStore();
        const q = randomQueue();
        const policy = cap(5, 0);
        const first = await store.join(q, T0, policy);
        await joinMany(store, q, 3, T0 + 1, policy);
        const gen = first.generation;
        // A floor the store is at or above, or of another generation, changes nothing.
        expect(await store.join(q, T0 + 2, policy, { recoverMs: 10_000, recoverIfNew: true, floor: { tail: 4, generation: gen } })).toMatchObject({ ticket: 5, generation: gen, paused: false });
        expect(await store.join(q, T0 + 3, policy, { recoverMs: 10_000, recoverIfNew: true, floor: { tail: 90, generation: gen + 1 } })).toMatchObject({ ticket: 6, generation: gen });
        // The POP saw tail 40 in this generation: ticket 7 would be a number handed out before.
        const healed = await store.join(q, T0 + 4, policy, { recoverMs: 10_000, recoverIfNew: true, floor: { tail: 40, generation: gen } });
        // The numbers below the floor are nobody's now: the cursor moves up to it.
        expect(healed).toMatchObject({ ticket: 41, tail: 41, cursor: 40, claimed: false, paused: true });
        expect(healed.generation).not.toBe(gen);
        expect(await store.join(q, T0 + 5, policy)).toMatchObject({ ticket: 42, generation: healed.generation, paused: true });
        // Tickets of the old generation are refused (their numbers may be held twice).
        expect(await store.claim(q, 1, T0 + 6, policy, 0, gen)).toMatchObject({ claimed: false });
        // Without a window the generation still changes; rate mode holds nobody.
        const r = randomQueue();
        const r1 = await store.join(r, T0, every(3));
        expect(await store.join(r, T0 + 1, every(3), { floor: { tail: 9, generation: r1.generation } })).toMatchObject({ ticket: 10, paused: false });
        // The random method: the number the visitor is given, above the floor, is the one in the
        // draw (its poll finds it waiting), not the one the rolled-back tail would have given.
        const d = randomQueue();
        const drawn = randomly(OFF);
        const d1 = await store.join(d, T0, drawn);
        const lifted = await store.join(d, T0 + 1, drawn, { floor: { tail: 20, generation: d1.generation } });
        expect(lifted).toMatchObject({ ticket: 21, claimed: false, waiting: 1 });
        expect(await store.draw(d, 21, T0 + 2, drawn, 0, lifted.generation)).toMatchObject({ outcome: 'waiting' });
        expect(await store.draw(d, 2, T0 + 2, drawn, 0, lifted.generation)).toMatchObject({ outcome: 'unknown' });
        await expect(store.join(r, T0 + 2, OFF, { floor: { tail: -1, generation: 1 } })).rejects.toBeInstanceOf(StoreArgumentError);
        await expect(store.join(r, T0 + 2, OFF, { floor: { tail: 1, generation: 0 } })).rejects.toBeInstanceOf(StoreArgumentError);
      });
    });

    describe('idempotent admits', () => {
      it('admits once per key: a repeat replays the recorded count and admits nobody', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 10, T0, OFF);
        expect(await store.admit(q, 3, T0 + 1, OFF, 'op-1')).toMatchObject({ admitted: 3, replayed: false, cursor: 3 });
        expect(await store.admit(q, 3, T0 + 2, OFF, 'op-1')).toMatchObject({ admitted: 3, replayed: true, cursor: 3 });
        // Even with another count: the key is the operation.
        expect(await store.admit(q, 5, T0 + 3, OFF, 'op-1')).toMatchObject({ admitted: 3, replayed: true, cursor: 3 });
        expect(await store.admit(q, 2, T0 + 4, OFF, 'op-2')).toMatchObject({ admitted: 2, replayed: false, cursor: 5 });
        expect(await store.admit(q, 1, T0 + 5, OFF)).toMatchObject({ admitted: 1, replayed: false, cursor: 6 });
        // Concurrent repeats of one key admit once.
        const results = await Promise.all(Array.from({ length: 20 }, () => store.admit(q, 1, T0 + 6, OFF, 'op-3')));
        expect(results.filter((r) => !r.replayed)).toHaveLength(1);
        expect(await store.peek(q)).toEqual({ tail: 10, cursor: 7 });
        await expect(store.admit(q, 1, T0, OFF, 'bad key')).rejects.toBeInstanceOf(StoreArgumentError);
        await expect(store.admit(q, 1, T0, OFF, '')).rejects.toBeInstanceOf(StoreArgumentError);
        expect(await store.peek(q)).toEqual({ tail: 10, cursor: 7 });
        // Keys are forgotten IDEMPOTENCY_MS after their admit (by the callers' clock, on both stores).
        expect(await store.admit(q, 1, T0 + 1 + 600_000 - 1, OFF, 'op-1')).toMatchObject({ admitted: 3, replayed: true, cursor: 7 });
        expect(await store.admit(q, 1, T0 + 1 + 600_000, OFF, 'op-1')).toMatchObject({ admitted: 1, replayed: false, cursor: 8 });
      });

      it('remembers every key of its 10 minutes however many admits come between: 1,500 keys, one admit each', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 1_600, T0, OFF);
        // An origin letting one visitor in per freed seat, a UUID key each (as the edge makes them).
        const keys = Array.from({ length: 1_500 }, () => randomUUID());
        for (const [i, key] of keys.entries()) await store.admit(q, 1, T0 + i * 100, OFF, key);
        expect(await store.peek(q)).toEqual({ tail: 1_600, cursor: 1_500 });
        // Retries of the first, a middle and the last, within 10 minutes of each: all replay.
        for (const i of [0, 750, 1_499]) {
          expect(await store.admit(q, 1, T0 + 149_950 + i, OFF, keys[i]!), `key ${i}`).toMatchObject({ admitted: 1, replayed: true, cursor: 1_500 });
        }
        expect(await store.peek(q)).toEqual({ tail: 1_600, cursor: 1_500 });
      });

      it('a replay says the count the key was first used with, whatever the count asked now', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 20, T0, OFF);
        expect(await store.admit(q, 5, T0, OFF, 'batch-1')).toMatchObject({ admitted: 5, replayed: false, asked: 5 });
        expect(await store.admit(q, 5, T0 + 1, OFF, 'batch-1')).toMatchObject({ admitted: 5, replayed: true, asked: 5, cursor: 5 });
        expect(await store.admit(q, 7, T0 + 2, OFF, 'batch-1')).toMatchObject({ admitted: 5, replayed: true, asked: 5, cursor: 5 });
        // A call that found fewer waiting than it asked for records what it asked.
        expect(await store.admit(q, 100, T0 + 3, OFF, 'batch-2')).toMatchObject({ admitted: 15, replayed: false, asked: 100 });
        expect(await store.admit(q, 100, T0 + 4, OFF, 'batch-2')).toMatchObject({ admitted: 15, replayed: true, asked: 100 });
      });

      it('a slot of the ring keeps its newest IDEMPOTENCY_SLOT_KEEP keys: the key pushed out admits again', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 100, T0, OFF);
        // Keys that all fall in one slot of the ring (the hash both stores use).
        const same: string[] = [];
        for (let n = 0; same.length < IDEMPOTENCY_SLOT_KEEP + 1; n += 1) if (idempotencySlot(`op-${n}`) === idempotencySlot('op-0')) same.push(`op-${n}`);
        for (const [i, key] of same.entries()) expect(await store.admit(q, 1, T0 + i, OFF, key)).toMatchObject({ replayed: false });
        const cursor = IDEMPOTENCY_SLOT_KEEP + 1;
        expect(await store.admit(q, 1, T0 + 100, OFF, same[1]!)).toMatchObject({ replayed: true, cursor });
        expect(await store.admit(q, 1, T0 + 101, OFF, same.at(-1)!)).toMatchObject({ replayed: true, cursor });
        expect(await store.admit(q, 1, T0 + 102, OFF, same[0]!)).toMatchObject({ replayed: false, cursor: cursor + 1 });
      });
    });

    describe('new policy fields', () => {
      it('rejects a bad seed, method, presence or event start on every method and changes nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const bad: AdmissionPolicy[] = [
          { ...OFF, seed: -1 },
          { ...OFF, seed: 1.5 },
          { ...OFF, seed: MAX_SEED + 1 },
          { ...OFF, seed: Number.NaN },
          { ...OFF, seed: '5' as unknown as number },
          { ...OFF, method: 'lottery' as 'random' },
          { ...OFF, method: '' as 'random' },
          { ...OFF, method: 'random', presenceMs: 0 },
          { ...OFF, presenceMs: -1 },
          { ...OFF, method: 'random', presenceMs: 1.5 },
          { ...OFF, method: 'random', presenceMs: Number.POSITIVE_INFINITY },
          { ...OFF, eventStartMs: -1 },
          { ...OFF, eventStartMs: 1.5 },
          { ...OFF, eventStartMs: Number.NaN },
          { ...OFF, eventStartMs: Number.POSITIVE_INFINITY },
        ];
        for (const policy of bad) {
          const refused = StoreArgumentError;
          const label = JSON.stringify(policy);
          await expect(store.join(q, T0, policy), label).rejects.toBeInstanceOf(refused);
          await expect(store.poll(q, T0, policy), label).rejects.toBeInstanceOf(refused);
          await expect(store.claim(q, 1, T0, policy, 0), label).rejects.toBeInstanceOf(refused);
          await expect(store.touch(q, 1, T0, policy, T0), label).rejects.toBeInstanceOf(refused);
          await expect(store.leave(q, 1, T0, policy, 0), label).rejects.toBeInstanceOf(refused);
          await expect(store.admit(q, 1, T0, policy), label).rejects.toBeInstanceOf(refused);
          await expect(store.control(q, { paused: true }, T0, policy), label).rejects.toBeInstanceOf(refused);
          await expect(store.stats(q, T0, policy), label).rejects.toBeInstanceOf(refused);
          await expect(store.draw(q, 1, T0, policy, 0), label).rejects.toBeInstanceOf(refused);
          await expect(store.reset(q, T0, policy), label).rejects.toBeInstanceOf(refused);
        }
        for (const ticket of [0, 1.5, Number.NaN]) await expect(store.draw(q, ticket, T0, OFF, 0)).rejects.toBeInstanceOf(StoreArgumentError);
        await expect(store.draw(q, 1, T0, OFF, Number.NaN)).rejects.toBeInstanceOf(StoreArgumentError);
        for (const nowMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) await expect(store.history(q, nowMs)).rejects.toBeInstanceOf(StoreArgumentError);
        await expect(store.history('Bad', T0)).rejects.toBeInstanceOf(StoreArgumentError);
        expect(await store.peek(q)).toEqual({ tail: 0, cursor: 0 });
        expect(await store.history(q, T0)).toEqual([]);
        expect(await store.stats(q, T0, OFF)).toMatchObject({ paused: false, epoch: 0, eventSize: 0 });
      });

      it('accepts the defaults explicitly: FIFO, presence 30 s, seed 0, no event', async () => {
        const store = createStore();
        const q = randomQueue();
        const explicit: AdmissionPolicy = { ...every(2), method: 'fifo', presenceMs: 30_000, seed: 0, eventStartMs: 0 };
        expect(await store.join(q, at(P), explicit)).toMatchObject({ ticket: 1, cursor: 2, waiting: 0, eventSize: 0, eventSeed: 0 });
        // The random method's presence default: a visitor that joined 29.999 s ago is still present.
        const r = randomQueue();
        await store.join(r, T0, { ...OFF, method: 'random' });
        expect(await store.stats(r, T0 + DEFAULT_PRESENCE_MS - 1, { ...OFF, method: 'random' })).toMatchObject({ waiting: 1 });
        expect(await store.stats(r, T0 + DEFAULT_PRESENCE_MS, { ...OFF, method: 'random' })).toMatchObject({ waiting: 0 });
      });
    });

    describe('VIP codes', () => {
      it.each([1, 7, 99])('admits exactly %i of 100 concurrent uses, each remaining count once', async (uses) => {
        const store = createStore();
        const q = randomQueue();
        const h = vipHash();
        expect(await createVip(store, q, h, { uses, expiresAtMs: T0 + 60_000 }, T0)).toBe(true);
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => store.useVip(q, h, T0 + (i % 5))));
        const admitted = results.filter((r) => r.ok);
        expect(admitted).toHaveLength(uses);
        // Every remaining count from uses - 1 down to 0 exactly once: no two callers spent the same use.
        expect(admitted.map((r) => (r.ok ? r.remaining : -1)).sort((a, b) => a - b)).toEqual(range(0, uses - 1));
        expect(results.filter((r) => !r.ok)).toEqual(Array.from({ length: 100 - uses }, () => ({ ok: false, reason: 'used_up' })));
        expect(await store.useVip(q, h, T0 + 10)).toEqual({ ok: false, reason: 'used_up' });
      });

      it('counts one use per call and keeps a used-up code as used up, not unknown', async () => {
        const store = createStore();
        const q = randomQueue();
        const h = vipHash();
        expect(await createVip(store, q, h, { uses: 3, expiresAtMs: null }, T0)).toBe(true);
        expect(await store.useVip(q, h, T0 + 1)).toEqual({ ok: true, remaining: 2 });
        expect(await store.useVip(q, h, T0 + 2)).toEqual({ ok: true, remaining: 1 });
        expect(await store.useVip(q, h, T0 + 3)).toEqual({ ok: true, remaining: 0 });
        for (let i = 0; i < 3; i += 1) expect(await store.useVip(q, h, T0 + 4 + i)).toEqual({ ok: false, reason: 'used_up' });
        // A code nobody created is unknown, in a queue with codes and in one without.
        expect(await store.useVip(q, vipHash(), T0 + 10)).toEqual({ ok: false, reason: 'unknown' });
        expect(await store.useVip(randomQueue(), vipHash(), T0 + 10)).toEqual({ ok: false, reason: 'unknown' });
        // The largest allowed count is accepted.
        const big = vipHash();
        expect(await createVip(store, q, big, { uses: 1_000_000, expiresAtMs: null }, T0)).toBe(true);
        expect(await store.useVip(q, big, T0 + 1)).toEqual({ ok: true, remaining: 999_999 });
      });

      it('honours the expiry: usable before it, expired from it on, and an expired try spends nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const h = vipHash();
        const expiry = T0 + 60_000;
        expect(await createVip(store, q, h, { uses: 5, expiresAtMs: expiry }, T0)).toBe(true);
        expect(await store.useVip(q, h, T0)).toEqual({ ok: true, remaining: 4 });
        expect(await store.useVip(q, h, expiry - 1)).toEqual({ ok: true, remaining: 3 });
        expect(await store.useVip(q, h, expiry)).toEqual({ ok: false, reason: 'expired' });
        expect(await store.useVip(q, h, expiry + 3_600_000)).toEqual({ ok: false, reason: 'expired' });
        // Concurrent tries after the expiry take nothing either.
        const late = await Promise.all(Array.from({ length: 20 }, () => store.useVip(q, h, expiry + 1)));
        expect(late).toEqual(Array.from({ length: 20 }, () => ({ ok: false, reason: 'expired' })));
        // Asked with an earlier time (another POP's clock), the code still has its 3 uses.
        expect(await store.useVip(q, h, expiry - 2)).toEqual({ ok: true, remaining: 2 });

        // Expired and used up: expired is reported first.
        const spent = vipHash();
        expect(await createVip(store, q, spent, { uses: 1, expiresAtMs: T0 + 1 }, T0)).toBe(true);
        expect(await store.useVip(q, spent, T0)).toEqual({ ok: true, remaining: 0 });
        expect(await store.useVip(q, spent, T0)).toEqual({ ok: false, reason: 'used_up' });
        expect(await store.useVip(q, spent, T0 + 1)).toEqual({ ok: false, reason: 'expired' });
      });

      it('refuses to create a hash that exists, in any state, and changes nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const h = vipHash();
        const expiry = T0 + 60_000;
        expect(await createVip(store, q, h, { uses: 3, expiresAtMs: expiry }, T0)).toBe(true);
        expect(await store.useVip(q, h, T0 + 1)).toEqual({ ok: true, remaining: 2 });
        expect(await createVip(store, q, h, { uses: 10, expiresAtMs: null }, T0 + 2)).toBe(false);
        expect(await createVip(store, q, h, { uses: 3, expiresAtMs: expiry }, T0 + 2)).toBe(false);
        // Neither the count nor the expiry changed.
        expect(await store.useVip(q, h, T0 + 3)).toEqual({ ok: true, remaining: 1 });
        expect(await store.useVip(q, h, expiry)).toEqual({ ok: false, reason: 'expired' });
        // Expired: still there, still refused.
        expect(await createVip(store, q, h, { uses: 10, expiresAtMs: expiry + 60_000 }, expiry + 1)).toBe(false);
        expect(await store.useVip(q, h, expiry - 1)).toEqual({ ok: true, remaining: 0 });
        // Used up: still there, still refused, still used up.
        expect(await createVip(store, q, h, { uses: 10, expiresAtMs: null }, T0 + 4)).toBe(false);
        expect(await store.useVip(q, h, T0 + 5)).toEqual({ ok: false, reason: 'used_up' });
      });

      it('lets exactly one of 20 concurrent creates of one hash through', async () => {
        const store = createStore();
        const q = randomQueue();
        const h = vipHash();
        const created = await Promise.all(range(1, 20).map((uses) => createVip(store, q, h, { uses, expiresAtMs: null }, T0)));
        expect(created.filter(Boolean)).toHaveLength(1);
        // The code is the winner's: as many uses as the one create that returned true gave it.
        const winner = created.indexOf(true) + 1;
        expect(await store.useVip(q, h, T0 + 1)).toEqual({ ok: true, remaining: winner - 1 });
      });

      it('makes a batch of codes in one call: each created unless it exists, flags in order, each usable on its own', async () => {
        const store = createStore();
        const q = randomQueue();
        const existing = vipHash();
        expect(await createVip(store, q, existing, { uses: 1, expiresAtMs: null }, T0)).toBe(true);
        const fresh = Array.from({ length: 98 }, () => vipHash());
        // A hash that exists already, 98 new ones, and one of them again at the end.
        const batch = [existing, ...fresh, fresh[0]!];
        const created = await store.createVips(q, batch, { uses: 2, expiresAtMs: T0 + 60_000 }, T0);
        expect(created).toEqual([false, ...fresh.map(() => true), false]);
        // The existing code kept its own single use; every new one has the batch's two.
        expect(await store.useVip(q, existing, T0 + 1)).toEqual({ ok: true, remaining: 0 });
        for (const h of fresh) expect(await store.useVip(q, h, T0 + 1)).toEqual({ ok: true, remaining: 1 });
        expect(await store.useVip(q, fresh[5]!, T0 + 60_000)).toEqual({ ok: false, reason: 'expired' });
      });

      it.each<[string, unknown]>([
        ['no hashes', []],
        ['101 hashes (one more than an operator may ask for)', Array.from({ length: 101 }, () => 'a'.repeat(64))],
        ['one bad hash among good ones', ['a'.repeat(64), 'NOT-A-HASH', 'b'.repeat(64)]],
        ['not a list', 'a'.repeat(64)],
      ])('refuses a batch of %s and writes nothing', async (_label, hashes) => {
        const store = createStore();
        const q = randomQueue();
        await expect(store.createVips(q, hashes as string[], { uses: 1, expiresAtMs: null }, T0)).rejects.toBeInstanceOf(StoreArgumentError);
        expect(await store.useVip(q, 'a'.repeat(64), T0)).toEqual({ ok: false, reason: 'unknown' });
        expect(await store.useVip(q, 'b'.repeat(64), T0)).toEqual({ ok: false, reason: 'unknown' });
      });

      it('keeps codes apart per queue', async () => {
        const store = createStore();
        const a = randomQueue();
        const b = randomQueue();
        const h = vipHash();
        expect(await createVip(store, a, h, { uses: 2, expiresAtMs: null }, T0)).toBe(true);
        expect(await store.useVip(b, h, T0 + 1)).toEqual({ ok: false, reason: 'unknown' });
        // The same hash is a separate code in another queue.
        expect(await createVip(store, b, h, { uses: 1, expiresAtMs: T0 + 1_000 }, T0)).toBe(true);
        expect(await store.useVip(b, h, T0 + 2)).toEqual({ ok: true, remaining: 0 });
        expect(await store.useVip(b, h, T0 + 3)).toEqual({ ok: false, reason: 'used_up' });
        expect(await store.useVip(a, h, T0 + 2_000)).toEqual({ ok: true, remaining: 1 });
        expect(await store.useVip(b, h, T0 + 2_000)).toEqual({ ok: false, reason: 'expired' });
        // VIP codes leave the queue's own state alone.
        expect(await store.peek(a)).toEqual({ tail: 0, cursor: 0 });
        expect(await store.stats(b, T0 + 2_000, cap(1, 0))).toMatchObject({ tail: 0, cursor: 0, active: 0, admittedLastMinute: 0 });
      });

      const good = vipHash();
      it.each<[string, string, unknown, number]>([
        ['an upper-case hash', good.toUpperCase(), { uses: 1, expiresAtMs: null }, T0],
        ['a 63-digit hash', good.slice(1), { uses: 1, expiresAtMs: null }, T0],
        ['a 65-digit hash', `${good}0`, { uses: 1, expiresAtMs: null }, T0],
        ['a non-hex hash', `${good.slice(1)}g`, { uses: 1, expiresAtMs: null }, T0],
        ['a 0x hash', `0x${good.slice(2)}`, { uses: 1, expiresAtMs: null }, T0],
        ['an empty hash', '', { uses: 1, expiresAtMs: null }, T0],
        ['a hash that is no string', 123 as unknown as string, { uses: 1, expiresAtMs: null }, T0],
        ['uses 0', good, { uses: 0, expiresAtMs: null }, T0],
        ['uses -1', good, { uses: -1, expiresAtMs: null }, T0],
        ['uses 1.5', good, { uses: 1.5, expiresAtMs: null }, T0],
        ['uses 1,000,001', good, { uses: 1_000_001, expiresAtMs: null }, T0],
        ['uses NaN', good, { uses: Number.NaN, expiresAtMs: null }, T0],
        ['uses Infinity', good, { uses: Number.POSITIVE_INFINITY, expiresAtMs: null }, T0],
        ['uses as a string', good, { uses: '5', expiresAtMs: null }, T0],
        ['no uses', good, { expiresAtMs: null }, T0],
        ['an expiry in the past', good, { uses: 1, expiresAtMs: T0 - 1 }, T0],
        ['an expiry of now', good, { uses: 1, expiresAtMs: T0 }, T0],
        ['a fractional expiry', good, { uses: 1, expiresAtMs: T0 + 1.5 }, T0],
        ['an infinite expiry', good, { uses: 1, expiresAtMs: Number.POSITIVE_INFINITY }, T0],
        ['an expiry as a string', good, { uses: 1, expiresAtMs: String(T0 + 60_000) }, T0],
        ['no expiry field', good, { uses: 1 }, T0],
        ['a misspelt expiry field', good, { uses: 1, expiresAt: T0 + 60_000 }, T0],
        ['an extra field', good, { uses: 1, expiresAtMs: null, queue: 'x' }, T0],
        ['a null code', good, null, T0],
        ['an array', good, [1, null], T0],
        ['a NaN time', good, { uses: 1, expiresAtMs: null }, Number.NaN],
        ['a negative time', good, { uses: 1, expiresAtMs: null }, -1],
      ])('refuses to create a code with %s and writes nothing', async (_label, hash, code, nowMs) => {
        const store = createStore();
        const q = randomQueue();
        await expect(createVip(store, q, hash, code as VipCode, nowMs)).rejects.toBeInstanceOf(StoreArgumentError);
        // Nothing under the good hash (nor a normalised copy of a bad one).
        expect(await store.useVip(q, good, T0)).toEqual({ ok: false, reason: 'unknown' });
        expect(await createVip(store, q, good, { uses: 2, expiresAtMs: T0 + 60_000 }, T0)).toBe(true);
        expect(await store.useVip(q, good, T0)).toEqual({ ok: true, remaining: 1 });
      });

      it('refuses to use a code with a bad hash or time and spends nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const h = vipHash();
        await createVip(store, q, h, { uses: 2, expiresAtMs: null }, T0);
        for (const hash of [h.toUpperCase(), h.slice(1), `${h}0`, '', null as unknown as string]) {
          await expect(store.useVip(q, hash, T0)).rejects.toBeInstanceOf(StoreArgumentError);
        }
        for (const nowMs of [Number.NaN, -1, Number.POSITIVE_INFINITY, '1' as unknown as number]) {
          await expect(store.useVip(q, h, nowMs)).rejects.toBeInstanceOf(StoreArgumentError);
        }
        expect(await store.useVip(q, h, T0)).toEqual({ ok: true, remaining: 1 });
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------

describe('MemoryQueueStore', () => {
  describeQueueStoreContract('MemoryQueueStore', () => new MemoryQueueStore());

  it('keeps separate instances separate', async () => {
    const q = randomQueue();
    await new MemoryQueueStore().join(q, at(P), OFF);
    expect(await new MemoryQueueStore().peek(q)).toEqual({ tail: 0, cursor: 0 });
  });

  it('forgets VIP codes when their Redis key\'s TTL would have run out, and then they can be created again', async () => {
    const store = new MemoryQueueStore();
    const q = randomQueue();
    const open = vipHash();
    const dated = vipHash();
    const expiry = T0 + 60_000;
    expect(await createVip(store, q, open, { uses: 2, expiresAtMs: null }, T0)).toBe(true);
    expect(await createVip(store, q, dated, { uses: 2, expiresAtMs: expiry }, T0)).toBe(true);
    expect(await store.useVip(q, open, T0 + VIP_TTL_MS - 1)).toEqual({ ok: true, remaining: 1 });
    expect(await store.useVip(q, dated, expiry + VIP_KEEP_EXPIRED_MS - 1)).toEqual({ ok: false, reason: 'expired' });
    expect(await store.useVip(q, open, T0 + VIP_TTL_MS)).toEqual({ ok: false, reason: 'unknown' });
    expect(await store.useVip(q, dated, expiry + VIP_KEEP_EXPIRED_MS)).toEqual({ ok: false, reason: 'unknown' });
    const later = T0 + VIP_TTL_MS;
    expect(await createVip(store, q, open, { uses: 1, expiresAtMs: null }, later)).toBe(true);
    expect(await store.useVip(q, open, later)).toEqual({ ok: true, remaining: 0 });
  });

  it('imports nothing from node:* or @upstash at run time, so it also runs in the Fastly engine', () => {
    for (const file of ['src/store/memory-store.ts', 'src/store/scripts.ts']) {
      const source = readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
      const runtimeImports = [...source.matchAll(/^import\s+(?!type\s)[^;]*?from\s+'([^']+)'/gms)].map((m) => m[1]);
      expect(runtimeImports.filter((from) => from?.startsWith('node:') || from?.startsWith('@upstash'))).toEqual([]);
    }
  });
});

describe('UpstashQueueStore through the bridge on a real redis-server', () => {
  const token = `test-token-${randomUUID()}`;
  let server: Awaited<ReturnType<typeof startRedisServer>>;
  let bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  let redis: Redis;
  let direct: IORedis;

  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: server.url, token });
    // The project's options, minus retries: a test must see the first failure.
    redis = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
    direct = new IORedis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    await direct.connect();
  });

  afterAll(async () => {
    direct?.disconnect();
    await bridge?.close();
    await server?.stop();
  });

  afterEach(() => {
    vi.restoreAllMocks();
  });

  const newStore = (client: UpstashScriptClient = redis, keyPrefix = `wrt-${randomUUID().slice(0, 8)}`) =>
    new UpstashQueueStore({ redis: client, keyPrefix });

  describeQueueStoreContract('UpstashQueueStore', () => newStore());
  // The Fastly build's client: @upstash/redis's HTTP client without its Redis class (src/store/upstash-http.ts),
  // made as src/platform/fastly.ts makes it, minus retries like the client above.
  describeQueueStoreContract('UpstashQueueStore (HTTP client alone, as on Fastly)', () =>
    newStore(createUpstashScriptClient({ ...createUpstashClientOptions({ url: bridge.url, token, retries: 0 }), backend: 'upstash' })),
  );

  describe('scripts', () => {
    it('pins each SHA-1 to node:crypto and to SCRIPT LOAD through the bridge', async () => {
      expect(STORE_SCRIPTS.map((s) => s.name).sort()).toEqual(
        ['admit', 'audit_append', 'audit_read', 'claim', 'control', 'create_vip', 'draw', 'history', 'join', 'leave', 'peek', 'poll', 'record', 'reset', 'stats', 'touch', 'use_vip'],
      );
      for (const script of STORE_SCRIPTS) {
        expect(script.sha1, script.name).toBe(createHash('sha1').update(script.text).digest('hex'));
        expect(await redis.scriptLoad(script.text), script.name).toBe(script.sha1);
      }
    });

    it('start with the allow-key-locking shebang, touch only KEYS, and read no clock or randomness', () => {
      // Helpers whose first parameter is a key; their every call must pass a key bound from KEYS.
      const KEY_HELPERS = ['count_after', 'trim', 'zrem_many', 'read_history'];
      const POLICY_KEYS = ['K_ACTIVE', 'K_RESERVED', 'K_ADMITS', 'K_WAITS', 'K_CTL', 'K_WAITING'];
      for (const { name, text } of STORE_SCRIPTS) {
        expect(text.split('\n')[0], name).toBe('#!lua flags=allow-key-locking');
        // Keys are bound once, from KEYS and nowhere else, in the order the store passes them.
        const bound = [...text.matchAll(/^local (K_\w+(?:, K_\w+)*) = (KEYS\[\d+\](?:, KEYS\[\d+\])*)$/gm)].flatMap(([, names, sources]) => {
          const n = names!.split(', ');
          const k = sources!.split(', ');
          return n.map((key, i) => [key, k[i]] as const);
        });
        const keyNames = new Set(bound.map(([key]) => key));
        const bindings = text.match(/^\s*(?:local\s+)?K_\w+(?:\s*,\s*K_\w+)*\s*=[^=]/gm)?.length;
        if (name === 'create_vip' || name === 'use_vip') {
          expect(bound, name).toEqual([['K_VIP', 'KEYS[1]']]);
          expect(bindings, `${name}: K_VIP bound once`).toBe(1);
          expect(text, `${name}: no other KEYS`).not.toMatch(/KEYS\[(?!1\])/);
        } else if (name === 'audit_append') {
          expect(bound, name).toEqual([['K_AUDIT', 'KEYS[1]'], ['K_MERGE', 'KEYS[2]']]);
          expect(bindings, `${name}: K_AUDIT, K_MERGE bound once`).toBe(1);
        } else if (name === 'audit_read') {
          expect(bound, name).toEqual([['K_AUDIT', 'KEYS[1]']]);
          expect(bindings, `${name}: K_AUDIT bound once`).toBe(1);
        } else if (name === 'history' || name === 'record') {
          expect(bound, name).toEqual([['K_CTL', 'KEYS[1]']]);
          expect(bindings, `${name}: K_CTL bound once`).toBe(1);
          expect(text, `${name}: no other KEYS`).not.toMatch(/KEYS\[(?!1\])/);
        } else if (name !== 'peek') {
          expect(bound, name).toEqual(POLICY_KEYS.map((key, i) => [key, `KEYS[${i + 1}]`]));
          // …and never reassigned.
          expect(bindings, `${name}: K_* bound once`).toBe(2);
        }
        const keyArgs = new Set([...keyNames, 'key', 'KEYS[1]', 'KEYS[2]']);
        const calls = [...text.matchAll(/redis\.p?call\(\s*'(\w+)'\s*,\s*([^,)]+)/g)];
        expect(calls.length, name).toBeGreaterThan(0);
        expect(text.match(/redis\.p?call\(/g)?.length, `${name}: every call parsed`).toBe(calls.length);
        for (const [, command, firstArg] of calls) {
          expect(keyArgs.has(firstArg!.trim()), `${name}: ${command} ${firstArg}`).toBe(true);
        }
        // `key` as a first argument only inside the helpers, and the helpers only ever get bound keys
        // (or, in a `for _, key in ipairs({...})`, a list of bound keys).
        for (const helper of KEY_HELPERS) {
          for (const [, arg] of text.matchAll(new RegExp(`\\b${helper}\\(([^,)]*)`, 'g'))) {
            expect(keyArgs.has(arg!.trim()), `${name}: ${helper}(${arg})`).toBe(true);
          }
        }
        for (const [, list] of text.matchAll(/for _, key in ipairs\(\{([^}]*)\}\)/g)) {
          for (const key of list!.split(',')) expect(keyNames.has(key.trim()), `${name}: loop over ${key}`).toBe(true);
        }
        expect(text, name).not.toMatch(/\bTIME\b|math\.random|RANDOMKEY|SRANDMEMBER|SPOP|no-writes/i);
      }
    });

    it('lays out keys as <prefix>:{<queue>}:… under one hash tag', async () => {
      const prefix = `wrt-${randomUUID().slice(0, 8)}`;
      const store = newStore(redis, prefix);
      const q = randomQueue();
      const base = `${prefix}:{${q}}`;
      expect(await store.peek(q)).toEqual({ tail: 0, cursor: 0 });
      expect(await store.stats(q, T0, cap(1, 0))).toMatchObject({ tail: 0, cursor: 0, active: 0 });
      expect(await direct.keys(`${prefix}:*`)).toEqual([]);
      await store.join(q, at(P, 250), every(4));
      // A walk-in join writes ctl alone: the first run on an absent state wrote its generation (seed
      // 0 + now + 1); ctl also holds the tail, the cursor, the start (ms) of the period that
      // admitted and that step's calls in their 5-s bucket, so one HMGET reads them all. Rate FIFO's
      // own fields (see scripts.ts, Rate window): the lapse frontier, the run that called 1..4 and
      // when, the walk-in in the rate window, and ticket 1 in the claimed bitmap (base 0, bit 1).
      expect((await direct.keys(`${prefix}:*`)).sort()).toEqual([`${base}:ctl`]);
      const bucket = Math.floor(at(P, 250) / 5_000);
      expect(await direct.hgetall(`${base}:ctl`)).toEqual({
        gen: String(at(P, 250) + 1),
        tail: '1',
        cursor: '4',
        period: String(at(P)),
        [`c${bucket % 61}`]: `${bucket * 5_000}:1:4:0`,
        lp: '0',
        rq: `${at(P, 250)}:4`,
        rw: `${at(P, 250)}:1`,
        rc: '0:02',
        // The sale's totals (see TOTALS_LENGTH): the walk-in, let in after a wait of 0 (the first bucket).
        rt: totalsText({ admitted: 1, bucket: 0 }),
      });
      // A later step calls existing tickets, writing no reservation: rate FIFO's figures are the call
      // buckets, its claims the bitmap (and the rate window). Nothing but ctl, ever.
      await joinMany(store, q, 5, at(P, 300), every(4));
      await store.poll(q, at(P + 1), every(4));
      // 5 claims once the walk-ins 1..4 (at 250..300 ms) have left the period's window.
      expect(await store.claim(q, 5, at(P + 1, 1), every(4), 0)).toMatchObject({ claimed: false });
      expect(await store.claim(q, 5, at(P + 1, 400), every(4), 0)).toMatchObject({ claimed: true });
      const ctl = await direct.hgetall(`${base}:ctl`);
      expect(ctl).toMatchObject({ cursor: '8', rq: `${at(P, 250)}:4,${at(P + 1)}:8`, rc: '0:3e', rw: `${at(P + 1, 400)}:1` });
      expect((await direct.keys(`${prefix}:*`)).sort()).toEqual([`${base}:ctl`]);
      expect(await direct.exists(`${base}:admits`)).toBe(0);

      const c = randomQueue();
      const cb = `${prefix}:{${c}}`;
      const policy = cap(1, 0, { reservationMs: 10_000 });
      await store.control(c, { maxNewPerMinute: 7 }, T0, policy);
      await joinMany(store, c, 2, T0, policy);
      await store.leave(c, 1, T0 + 1_000, policy, 0);
      // The slot 1 held is gone; its arrival stays in the active set, at -1 - its arrival ms (slots
      // are at their expiry, >= 0), its wait (0) in its member; 2 is reserved. No admits or waits set.
      expect((await direct.keys(`${prefix}:{${c}}*`)).sort()).toEqual(
        ['active', 'ctl', 'reserved'].map((k) => `${cb}:${k}`),
      );
      expect(await direct.zrange(`${cb}:reserved`, 0, -1, 'WITHSCORES')).toEqual(['2', String(T0 + 11_000)]);
      // A walk-in's arrival is marked `w`: its join counted it in the totals (see walk_in).
      expect(await direct.zrange(`${cb}:active`, 0, -1, 'WITHSCORES')).toEqual(['1w:0', String(-1 - T0)]);
      // The control wrote the minute's history point into ctl's slot of its minute.
      const minute = Math.floor(T0 / 60_000) * 60_000;
      expect(await direct.hgetall(`${cb}:ctl`)).toEqual({
        max_new_per_minute: '7',
        gen: String(T0 + 1),
        tail: '2',
        cursor: '2',
        hist: String(minute),
        // The point: the state, the epoch (0) and the controls (0), then the totals as they stood.
        [`h${(minute / 60_000) % RECORD_SLOTS}`]: `${minute}:0:0:0:0:0:0:0:${totalsText({})}`,
        // The walk-in counted itself (its join writes ctl anyway); capacity mode's other arrivals
        // are added to the totals by the minute's point, from here on.
        rt: totalsText({ admitted: 1, bucket: 0 }),
        rf: String(T0),
        // Capacity mode wrote a reservation (2's): its claim counts nowhere until a point adds it,
        // whatever the mode then (see mark_uncounted).
        ru: '1',
        // The point's cursor, so the next minute's point can tell a room stuck full (see
        // recount_if_stuck): 0 then.
        ps: '0',
        // The book: one seat stored (2's reservation: no reservation can lapse before T0 + 11 s, and
        // no slot is stored); each window counts 1's arrival (listed, at T0) and 2's reservation,
        // read first at T0.
        seat: `1:${T0 + 11_000}:`,
        w1: `${T0 - 60_000}:2:${T0}:${T0}`,
        w5: `${T0 - 300_000}:2:${T0}:${T0}`,
      });
      await store.claim(c, 2, T0 + 2_000, policy, 1_500);
      // The claim wrote 2's slot and its arrival (with its wait) in one ZADD, and took its
      // reservation out; the book does not move (a reservation becomes an arrival).
      expect(await direct.zrange(`${cb}:active`, 0, -1, 'WITHSCORES')).toEqual(
        ['2:1500', String(-1 - (T0 + 2_000)), '1w:0', String(-1 - T0), '2', String(T0 + 2_000 + SESSION_MS)],
      );
      expect(await direct.exists(`${cb}:reserved`)).toBe(0);
      expect(await direct.hget(`${cb}:ctl`, 'w1')).toBe(`${T0 - 60_000}:2:${T0}:${T0}`);
    });

    it('keeps each VIP code in one hash under the queue\'s hash tag, with a TTL relative to the caller\'s clock', async () => {
      const prefix = `wrt-${randomUUID().slice(0, 8)}`;
      const store = newStore(redis, prefix);
      const q = randomQueue();
      const dated = vipHash();
      const open = vipHash();
      const base = `${prefix}:{${q}}`;
      // T0 is years in the past for redis-server: an absolute PEXPIREAT would drop these keys at once.
      expect(await createVip(store, q, dated, { uses: 2, expiresAtMs: T0 + 60_000 }, T0)).toBe(true);
      expect(await createVip(store, q, open, { uses: 1, expiresAtMs: null }, T0)).toBe(true);
      expect((await direct.keys(`${prefix}:*`)).sort()).toEqual([`${base}:vip:${dated}`, `${base}:vip:${open}`].sort());
      expect(await direct.hgetall(`${base}:vip:${dated}`)).toEqual({ left: '2', exp: String(T0 + 60_000) });
      expect(await direct.hgetall(`${base}:vip:${open}`)).toEqual({ left: '1' });
      const datedTtl = await direct.pttl(`${base}:vip:${dated}`);
      expect(datedTtl).toBeLessThanOrEqual(60_000 + VIP_KEEP_EXPIRED_MS);
      expect(datedTtl).toBeGreaterThan(60_000 + VIP_KEEP_EXPIRED_MS - 10_000);
      const openTtl = await direct.pttl(`${base}:vip:${open}`);
      expect(openTtl).toBeLessThanOrEqual(VIP_TTL_MS);
      expect(openTtl).toBeGreaterThan(VIP_TTL_MS - 10_000);
      // Used up: the key stays, at 0 and with its TTL, so the code reads as used up.
      expect(await store.useVip(q, open, T0 + 1)).toEqual({ ok: true, remaining: 0 });
      expect(await direct.hgetall(`${base}:vip:${open}`)).toEqual({ left: '0' });
      expect(await direct.pttl(`${base}:vip:${open}`)).toBeGreaterThan(VIP_TTL_MS - 10_000);
      // Refused uses and creates write nothing.
      await store.useVip(q, dated, T0 + 60_000);
      await store.useVip(q, vipHash(), T0);
      await createVip(store, q, dated, { uses: 9, expiresAtMs: null }, T0);
      expect(await direct.hgetall(`${base}:vip:${dated}`)).toEqual({ left: '2', exp: String(T0 + 60_000) });
      expect(await direct.keys(`${prefix}:*`)).toHaveLength(2);
      // When Redis drops the key, the code is unknown (and can be created again).
      await direct.del(`${base}:vip:${dated}`);
      expect(await store.useVip(q, dated, T0)).toEqual({ ok: false, reason: 'unknown' });
    });

    it('keeps the waiting set, the history, the frozen event and the epoch as documented', async () => {
      const prefix = `wrt-${randomUUID().slice(0, 8)}`;
      const store = newStore(redis, prefix);
      const q = randomQueue();
      const base = `${prefix}:{${q}}`;
      const policy = withEvent(randomly(OFF), MIN0 + 1_000, 7);
      await store.join(q, MIN0 + 500, policy);
      const gen = String(7 + MIN0 + 500 + 1);
      // A join writes no history point; no cursor before the start. The first run (a new generation)
      // starts the book (see scripts.ts, Book): nothing stored, both windows empty from its now; and
      // the presence count: members of the waiting set, and a score at or before the lowest.
      const book = { seat: '0::', w1: `${MIN0 + 500 - 60_000}:0:${MIN0 + 500}:`, w5: `${MIN0 + 500 - 300_000}:0:${MIN0 + 500}:` };
      expect(await direct.hgetall(`${base}:ctl`)).toEqual({ gen, tail: '1', ...book, pres: `1:${MIN0 + 500}` });
      await store.join(q, MIN0 + 1_000, policy);
      expect(await direct.hgetall(`${base}:ctl`)).toEqual({ gen, tail: '2', ...book, pres: `2:${MIN0 + 500}`, ev_start: String(MIN0 + 1_000), ev_size: '1', ev_seed: '7' });
      expect(await direct.zrange(`${base}:waiting`, 0, -1, 'WITHSCORES')).toEqual(['1', String(MIN0 + 500), '2', String(MIN0 + 1_000)]);
      await store.draw(q, 1, MIN0 + 2_000, policy, 0);
      expect(await direct.zrange(`${base}:waiting`, 0, -1, 'WITHSCORES')).toEqual(['2', String(MIN0 + 1_000), '1', String(MIN0 + 2_000)]);
      // The minute's first call but a join (the draw): tail 2, cursor 0, 2 present, no slot, nobody admitted.
      // The point lives in ctl's slot of its minute.
      const slot = (minute: number): string => `h${Math.floor(minute / 60_000) % RECORD_SLOTS}`;
      expect(await direct.hget(`${base}:ctl`, slot(MIN0))).toBe(`${MIN0}:2:0:2:0:0:0:0:${totalsText({})}`);
      // A writing call removes lapsed presence; stats does not.
      await store.stats(q, MIN0 + 1_000 + PRESENCE_MS, policy);
      expect(await direct.zcard(`${base}:waiting`)).toBe(2);
      await store.poll(q, MIN0 + 1_000 + PRESENCE_MS, policy);
      expect(await direct.zrange(`${base}:waiting`, 0, -1)).toEqual(['1']);
      // Seven days of minute slots, reused round-robin: 62 minutes take 62 slots; the hour's history
      // reads the last hour's.
      for (let i = 1; i <= 61; i += 1) await store.poll(q, MIN0 + i * 60_000, OFF);
      const fields = await direct.hgetall(`${base}:ctl`);
      expect(Object.keys(fields).filter((f) => /^h\d+$/.test(f))).toHaveLength(62);
      expect(fields[slot(MIN0 + 120_000)]).toBe(`${MIN0 + 120_000}:2:0:2:0:0:0:0:${totalsText({})}`);
      expect(fields[slot(MIN0)]?.startsWith(`${MIN0}:`)).toBe(true);
      expect((await store.history(q, MIN0 + 61 * 60_000 + 1)).map((p) => p.atMs)).toEqual(range(2, 61).map((i) => MIN0 + i * 60_000));
      // Reset keeps the tail (the cursor moves up to it) and ctl, with the epoch and without the
      // frozen event; the line's keys go.
      await store.control(q, { maxActive: 3 }, MIN0 + 3_700_000, policy);
      await store.reset(q, MIN0 + 3_700_001, policy);
      expect((await direct.keys(`${prefix}:*`)).sort()).toEqual([`${base}:ctl`]);
      // The sale's record and totals stay (a reset is one event in the sale); the reset added every
      // arrival it took out to the totals, so none is left for a point to add (ru '0').
      const kept = await direct.hgetall(`${base}:ctl`);
      expect(Object.fromEntries(Object.entries(kept).filter(([f]) => !/^(h\d+|rt|rf)$/.test(f)))).toEqual({ gen, tail: '2', cursor: '2', max_active: '3', epoch: String(MIN0 + 3_700_001), pres: '0:', ru: '0', ps: '0' });
      expect(Object.keys(kept).filter((f) => /^h\d+$/.test(f))).toHaveLength(62);
      expect(await store.history(q, MIN0 + 3_700_002)).toEqual([]);
    });

    it('draws the same tickets as the memory store for the same seeds, in ZSET order (score, then member bytes)', async () => {
      // Tickets 1..12 join at the same time, so their order is "1" < "10" < "11" < "12" < "2" < … < "9".
      const tied = [1, 10, 11, 12, 2, 3, 4, 5, 6, 7, 8, 9];
      const order = [...tied, ...range(13, 25)];
      // A first seed whose rank tells byte order from numeric order.
      const first = range(1, 1_000)
        .map((i) => i * 7_777_777_777)
        .find((seed) => {
          const rank = createDrawRng(seed).nextRank(order.length);
          return order[rank] !== rank + 1;
        })!;
      const scenario = async (store: QueueStore): Promise<unknown[]> => {
        const q = 'same-seed';
        const next = seededRandom(77);
        const policy = (seed = 0): AdmissionPolicy => randomly(OFF, seed);
        const log: unknown[] = [];
        const reserved = async (now: number): Promise<number[]> => {
          const claims = await Promise.all(range(1, 25).map((t) => store.claim(q, t, now, policy(), 0)));
          return claims.flatMap((c, i) => (c.claimed ? [i + 1] : []));
        };
        for (let t = 1; t <= 25; t += 1) await store.join(q, t <= 12 ? T0 : T0 + 1_000, policy());
        log.push(await store.admit(q, 1, T0 + 1_500, policy(first)), await reserved(T0 + 1_500));
        for (let step = 0; step < 12; step += 1) {
          const now = T0 + 2_000 + step * 500;
          for (let i = 0; i < 3; i += 1) log.push(await store.draw(q, 1 + Math.floor(next() * 25), now, policy(seedFrom(next)), 0));
          log.push(await store.admit(q, 1 + Math.floor(next() * 3), now, policy(seedFrom(next))), await reserved(now));
        }
        return log;
      };
      const memory = await scenario(new MemoryQueueStore());
      const upstash = await scenario(newStore());
      expect(upstash).toEqual(memory);
      expect(upstash[1]).toEqual([order[createDrawRng(first).nextRank(order.length)]]);
      expect((upstash.at(-2) as { cursor: number }).cursor).toBeGreaterThan(10);
    });

    it('uses the prefix "wr" by default', async () => {
      const q = randomQueue();
      await new UpstashQueueStore({ redis }).join(q, at(P), OFF);
      expect(await direct.hget(`wr:{${q}}:ctl`, 'tail')).toBe('1');
    });

    it('refuse a foreign caller\'s bad arguments inside Lua too, changing nothing', async () => {
      const q = randomQueue();
      const keys = ['active', 'reserved', 'admits', 'waits', 'ctl', 'waiting', 'history'].map(
        (k) => `wrt-x:{${q}}:${k}`,
      );
      const control = STORE_SCRIPTS.find((s) => s.name === 'control')!;
      const good = [String(T0), '0', '1000', '1', '0', '60000', '20000', '0', '0', '0', '30000'];
      await expect(redis.evalsha(control.sha1, keys, [...good, '1', '-1', ''])).rejects.toThrow(/ARGV\[13\]/);
      await expect(redis.evalsha(control.sha1, keys, [...good, 'yes', '', ''])).rejects.toThrow(/ARGV\[12\]/);
      await expect(redis.evalsha(control.sha1, keys, ['1e999', ...good.slice(1), '', '', ''])).rejects.toThrow(/ARGV\[1\]/);
      // The policy's new fields: event start, seed (0..2^48-1), method (0/1), presence (>= 1 in random).
      const withPolicy = (i: number, v: string): string[] => good.map((g, j) => (j === i - 1 ? v : g));
      for (const [i, v] of [
        [8, '-1'],
        [8, '1.5'],
        [9, '281474976710656'],
        [9, '-1'],
        [10, '2'],
        [10, 'random'],
      ] as const) {
        await expect(redis.evalsha(control.sha1, keys, [...withPolicy(i, v), '1', '', '']), `ARGV[${i}] ${v}`).rejects.toThrow(new RegExp(`ARGV\\[${i}\\]`));
      }
      await expect(redis.evalsha(control.sha1, keys, [...withPolicy(10, '1').map((g, j) => (j === 10 ? '0' : g)), '1', '', ''])).rejects.toThrow(/ARGV\[11\]/);
      expect(await direct.keys(`wrt-x:{${q}}:*`)).toEqual([]);

      const vip = [`wrt-x:{${q}}:vip:${vipHash()}`];
      const create = STORE_SCRIPTS.find((s) => s.name === 'create_vip')!;
      const use = STORE_SCRIPTS.find((s) => s.name === 'use_vip')!;
      for (const [argv, arg] of [
        [[String(T0), '0', ''], 2],
        [[String(T0), '1000001', ''], 2],
        [[String(T0), '1.5', ''], 2],
        [[String(T0), '1', String(T0)], 3],
        [[String(T0), '1', 'never'], 3],
        [['-1', '1', ''], 1],
      ] as const) {
        await expect(redis.evalsha(create.sha1, vip, [...argv]), argv.join(' ')).rejects.toThrow(new RegExp(`ARGV\\[${arg}\\]`));
      }
      await expect(redis.evalsha(use.sha1, vip, ['x'])).rejects.toThrow(/ARGV\[1\]/);
      expect(await direct.keys(`wrt-x:{${q}}:*`)).toEqual([]);
      // A key that is not a VIP code's hash is a loud error, not a use.
      await direct.hset(vip[0]!, 'left', 'lots');
      await expect(redis.evalsha(use.sha1, vip, [String(T0)])).rejects.toThrow(/is not a VIP code/);
      expect(await direct.hgetall(vip[0]!)).toEqual({ left: 'lots' });
    });
  });

  describe('round trips', () => {
    it('makes exactly one request to the bridge per store call', async () => {
      const store = newStore();
      const q = randomQueue();
      await store.join(randomQueue(), at(P), OFF); // warm: every script is cached by now or by the loop below
      for (const script of STORE_SCRIPTS) await redis.scriptLoad(script.text);

      const fetchSpy = vi.spyOn(globalThis, 'fetch');
      const requests = (): string[] =>
        fetchSpy.mock.calls
          .map(([input]) => (typeof input === 'string' ? input : input instanceof URL ? input.href : input.url))
          .filter((url) => url.startsWith(bridge.url));

      await store.join(q, at(P), every(2));
      expect(requests()).toHaveLength(1);
      await store.poll(q, at(P + 1), every(2));
      expect(requests()).toHaveLength(2);
      await store.admit(q, 1, at(P + 1), every(2));
      expect(requests()).toHaveLength(3);
      await store.peek(q);
      expect(requests()).toHaveLength(4);
      const policy = cap(1, 0);
      await store.control(q, { maxActive: 1 }, T0, policy);
      await store.claim(q, 1, T0, policy, 0);
      await store.touch(q, 1, T0, policy, T0 + 1_000);
      await store.leave(q, 1, T0, policy, 0);
      await store.stats(q, T0, policy);
      expect(requests()).toHaveLength(9);
      // Single commands go to `/`, not `/pipeline` (auto-pipelining is off).
      expect(new Set(requests().map((url) => new URL(url).pathname))).toEqual(new Set(['/']));
      // join admitted 2, the next period's poll 1 more (capped at tail + count), admit none.
      expect(await store.peek(q)).toEqual({ tail: 1, cursor: 3 });
    });

    it('makes exactly one request per draw, history and reset call', async () => {
      const store = newStore();
      const q = randomQueue();
      for (const script of STORE_SCRIPTS) await redis.scriptLoad(script.text);
      await store.join(q, T0, randomly(OFF));
      const fetchSpy = vi.spyOn(globalThis, 'fetch');
      expect(await store.draw(q, 1, T0, randomly(OFF), 0)).toMatchObject({ outcome: 'waiting' });
      expect(fetchSpy).toHaveBeenCalledTimes(1);
      expect(await store.history(q, T0)).toHaveLength(1);
      expect(fetchSpy).toHaveBeenCalledTimes(2);
      expect(await store.reset(q, T0, randomly(OFF))).toMatchObject({ tail: 1, cursor: 1, epoch: T0, applied: true });
      expect(fetchSpy).toHaveBeenCalledTimes(3);
      // Refused arguments never reach the network.
      await expect(store.draw(q, 0, T0, OFF, 0)).rejects.toBeInstanceOf(StoreArgumentError);
      await expect(store.reset(q, T0, { ...OFF, seed: -1 })).rejects.toBeInstanceOf(StoreArgumentError);
      await expect(store.history(q, Number.NaN)).rejects.toBeInstanceOf(StoreArgumentError);
      expect(fetchSpy).toHaveBeenCalledTimes(3);
    });

    it('makes exactly one request per VIP call', async () => {
      const store = newStore();
      const q = randomQueue();
      const h = vipHash();
      for (const script of STORE_SCRIPTS) await redis.scriptLoad(script.text);
      const fetchSpy = vi.spyOn(globalThis, 'fetch');
      expect(await createVip(store, q, h, { uses: 1, expiresAtMs: null }, T0)).toBe(true);
      expect(fetchSpy).toHaveBeenCalledTimes(1);
      expect(await store.useVip(q, h, T0)).toEqual({ ok: true, remaining: 0 });
      expect(await store.useVip(q, h, T0)).toEqual({ ok: false, reason: 'used_up' });
      expect(fetchSpy).toHaveBeenCalledTimes(3);
      // Refused arguments never reach the network.
      await expect(store.useVip(q, 'nope', T0)).rejects.toBeInstanceOf(StoreArgumentError);
      await expect(createVip(store, q, h, { uses: 0, expiresAtMs: null }, T0)).rejects.toBeInstanceOf(StoreArgumentError);
      expect(fetchSpy).toHaveBeenCalledTimes(3);
    });

    it('replays a key recorded before counts were (an entry without `#count`), saying the count is unknown (0)', async () => {
      const prefix = `wrt-${randomUUID().slice(0, 8)}`;
      const store = newStore(redis, prefix);
      const q = randomQueue();
      await joinMany(store, q, 10, T0, OFF);
      expect(await store.admit(q, 2, T0, OFF, 'old-key')).toMatchObject({ replayed: false, asked: 2 });
      // The entry as the admit script wrote it until 27 November 2026.
      const ctl = `${prefix}:{${q}}:ctl`;
      const field = `i${idempotencySlot('old-key')}`;
      expect(await direct.hget(ctl, field)).toBe(`old-key=2@${T0 + 600_000}#2`);
      await direct.hset(ctl, field, `old-key=2@${T0 + 600_000}`);
      expect(await store.admit(q, 9, T0 + 1, OFF, 'old-key')).toMatchObject({ admitted: 2, replayed: true, asked: 0, cursor: 2 });
    });

    it('falls back to EVAL on NOSCRIPT after SCRIPT FLUSH, then goes back to EVALSHA', async () => {
      const calls: string[] = [];
      const spy: UpstashScriptClient = {
        evalsha: ((...args: Parameters<UpstashScriptClient['evalsha']>) => {
          calls.push(`evalsha ${args[0]}`);
          return redis.evalsha(...args);
        }) as UpstashScriptClient['evalsha'],
        eval: ((...args: Parameters<UpstashScriptClient['eval']>) => {
          calls.push(`eval ${createHash('sha1').update(args[0]).digest('hex')}`);
          return redis.eval(...args);
        }) as UpstashScriptClient['eval'],
      };
      const store = newStore(spy);
      const q = randomQueue();
      const join = STORE_SCRIPTS.find((s) => s.name === 'join')!;

      expect(await direct.call('SCRIPT', 'FLUSH')).toBe('OK');
      const fetchSpy = vi.spyOn(globalThis, 'fetch');

      expect(await store.join(q, at(P), OFF)).toMatchObject({ ticket: 1, tail: 1, cursor: 0 });
      expect(calls).toEqual([`evalsha ${join.sha1}`, `eval ${join.sha1}`]);
      expect(fetchSpy).toHaveBeenCalledTimes(2);

      expect(await store.join(q, at(P), OFF)).toMatchObject({ ticket: 2, tail: 2, cursor: 0 });
      expect(calls).toEqual([`evalsha ${join.sha1}`, `eval ${join.sha1}`, `evalsha ${join.sha1}`]);
      expect(fetchSpy).toHaveBeenCalledTimes(3);
    });

    it('does not fall back to EVAL when only an error page mentions NOSCRIPT', async () => {
      // A proxy in front of the store answers 500 with a page of its own, as the real client reads it.
      const pages = await new Promise<import('node:http').Server>((resolve) => {
        const server = createHttpServer((_req, res) => res.writeHead(500, { 'content-type': 'text/html' }).end('<p>NOSCRIPT upstream said so</p>'));
        server.listen(0, '127.0.0.1', () => resolve(server));
      });
      let requests = 0;
      pages.on('request', () => (requests += 1));
      try {
        const url = `http://127.0.0.1:${(pages.address() as AddressInfo).port}`;
        const store = newStore(createUpstashScriptClient({ ...createUpstashClientOptions({ url, token, retries: 0 }), backend: 'upstash' }));
        await expect(store.join(randomQueue(), at(P), OFF)).rejects.toThrow(/Unable to parse response body: <p>NOSCRIPT/);
        expect(requests).toBe(1);
      } finally {
        await new Promise((resolve) => pages.close(resolve));
      }
    });

    it('does not fall back to EVAL on other errors', async () => {
      let evals = 0;
      const failing = {
        evalsha: async () => {
          throw new Error('ERR wrong number of arguments, command was: ["evalsha"]');
        },
        eval: async () => {
          evals += 1;
          return [1, 1];
        },
      } as unknown as UpstashScriptClient;
      await expect(newStore(failing).join(randomQueue(), at(P), OFF)).rejects.toThrow(/wrong number of arguments/);
      expect(evals).toBe(0);
    });

    it('surfaces a failure of the fallback EVAL itself', async () => {
      const failing = {
        evalsha: async () => {
          throw new Error('NOSCRIPT No matching script. Please use EVAL.');
        },
        eval: async () => {
          throw new Error('ERR Unexpected flag in script shebang: allow-key-locking');
        },
      } as unknown as UpstashScriptClient;
      await expect(newStore(failing).poll(randomQueue(), at(P), OFF)).rejects.toThrow(/Unexpected flag/);
    });
  });

  describe('replies', () => {
    const replying = (reply: unknown): UpstashScriptClient =>
      ({ evalsha: async () => reply, eval: async () => reply }) as unknown as UpstashScriptClient;
    // tail, cursor, paused, maxActive, maxNewPerMinute, active, admitted 1 min, admitted 5 min,
    // event size, event seed, waiting, epoch, generation, holes (a string: none)
    const STATE = [7, 3, 1, 50, 10, 4, 2, 5, 6, 281_474_976_710_655, 9, T0, 12_345, ''];
    const STATE_OBJECT = {
      tail: 7,
      cursor: 3,
      paused: true,
      maxActive: 50,
      maxNewPerMinute: 10,
      active: 4,
      admittedLastMinute: 2,
      admittedLast5Minutes: 5,
      eventSize: 6,
      eventSeed: 281_474_976_710_655,
      waiting: 9,
      epoch: T0,
      generation: 12_345,
    };

    it('accepts integers sent as numbers or as numeric strings, and reads each script\'s extras', async () => {
      const q = randomQueue();
      expect(await newStore(replying([...STATE.map(String), '7', 1, 0])).join(q, at(P), OFF)).toEqual({ ...STATE_OBJECT, ticket: 7, claimed: true, replayed: false });
      // A replayed join answers an earlier ticket (at most the tail).
      expect(await newStore(replying([...STATE, 3, 0, '1'])).join(q, at(P), OFF)).toEqual({ ...STATE_OBJECT, ticket: 3, claimed: false, replayed: true });
      expect(await newStore(replying(STATE)).poll(q, at(P), OFF)).toEqual(STATE_OBJECT);
      expect(await newStore(replying([...STATE, '0'])).claim(q, 1, T0, cap(1, 0), 0)).toEqual({ ...STATE_OBJECT, claimed: false });
      expect(await newStore(replying([...STATE, 2, 0, 1])).admit(q, 1, at(P), OFF)).toEqual({ ...STATE_OBJECT, admitted: 2, replayed: false, asked: 1 });
      expect(await newStore(replying([...STATE, 2, '1', '5'])).admit(q, 1, at(P), OFF, 'k')).toEqual({ ...STATE_OBJECT, admitted: 2, replayed: true, asked: 5 });
      // The reply of an admit script from before the count was recorded has no room for it: refused.
      await expect(newStore(replying([...STATE, 2, 0])).admit(q, 1, at(P), OFF)).rejects.toBeInstanceOf(StoreReplyError);
      expect(await newStore(replying([...STATE, 25])).control(q, { paused: true }, T0, cap(1, 0))).toEqual({ ...STATE_OBJECT, admitPerPeriod: 25 });
      // The period quota in effect follows the controls' state: without it the reply is not the control script's.
      await expect(newStore(replying(STATE)).control(q, { paused: true }, T0, cap(1, 0))).rejects.toBeInstanceOf(StoreReplyError);
      expect(await newStore(replying([...STATE, 3, 1_234, 4, '', '', 0, ''])).stats(q, T0, cap(1, 0))).toEqual({ ...STATE_OBJECT, reserved: 3, avgWaitSeconds: 0.3, admitPerPeriod: 0, totals: emptyTotals() });
      // The totals: TOTALS_LENGTH counts, or the reply is not the script's.
      expect((await newStore(replying([...STATE, 3, 0, 0, '', '', 0, totalsText({ admitted: 2, bucket: 3 })])).stats(q, T0, cap(1, 0))).totals).toMatchObject({ admitted: 2, waitBuckets: [0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0] });
      await expect(newStore(replying([...STATE, 3, 0, 0, '', '', 0, '1:2'])).stats(q, T0, cap(1, 0))).rejects.toBeInstanceOf(StoreReplyError);
      expect(await newStore(replying([...STATE, 3, 0, 0, '', '', 0, ''])).stats(q, T0, cap(1, 0))).toMatchObject({ avgWaitSeconds: null });
      // The lost-state mark: when, and what was restored; a mark of another shape is not the script's.
      expect((await newStore(replying([...STATE, 3, 0, 0, '', `${T0}:hold,paused`, 0, ''])).stats(q, T0, cap(1, 0))).lostState).toEqual({ atMs: T0, restored: ['hold', 'paused'] });
      expect((await newStore(replying([...STATE, 3, 0, 0, '', `${T0}:`, 0, ''])).stats(q, T0, cap(1, 0))).lostState).toEqual({ atMs: T0, restored: [] });
      await expect(newStore(replying([...STATE, 3, 0, 0, '', `${T0}:closed`, 0, ''])).stats(q, T0, cap(1, 0))).rejects.toBeInstanceOf(StoreReplyError);
      // Reported holes above the cursor: the state carries them as ranges.
      expect(await newStore(replying([...STATE.slice(0, 13), '4-5,7-7'])).poll(q, at(P), OFF)).toEqual({ ...STATE_OBJECT, holes: [{ from: 4, to: 5 }, { from: 7, to: 7 }] });
      // Paused by a recovery window alone (mode 4): paused, and said to be recovering.
      expect(await newStore(replying([...STATE.slice(0, 2), 4, ...STATE.slice(3)])).poll(q, at(P), OFF)).toEqual({ ...STATE_OBJECT, paused: true, recovering: true });
      // The adaptive controller's fields (see parseAdaptiveStatus).
      const controller = `a|40|1:10:90:5:20||||${T0}:30:40:h;${T0 + 1}:40:30:s`;
      expect((await newStore(replying([...STATE, 3, 0, 0, controller, '', 0, ''])).stats(q, T0, cap(1, 0))).adaptive).toEqual({
        enabled: true,
        source: 'config',
        knob: 'max_active',
        value: 40,
        pinned: false,
        min: 10,
        max: 90,
        errorPercent: 5,
        slowPercent: 20,
        signals: null,
        moves: [
          { atMs: T0, from: 30, to: 40, reason: 'healthy' },
          { atMs: T0 + 1, from: 40, to: 30, reason: 'slow' },
        ],
      });
      // Without them the reply is not the stats script's.
      await expect(newStore(replying([...STATE, 3, 0, 0, '', ''])).stats(q, T0, cap(1, 0))).rejects.toBeInstanceOf(StoreReplyError);
      await expect(newStore(replying([...STATE, 3, 0, 0, '', '', 'x'])).stats(q, T0, cap(1, 0))).rejects.toBeInstanceOf(StoreReplyError);
      await expect(newStore(replying([...STATE, 3, 0, 0])).stats(q, T0, cap(1, 0))).rejects.toBeInstanceOf(StoreReplyError);
      await expect(newStore(replying([...STATE, 3, 0, 0, ''])).stats(q, T0, cap(1, 0))).rejects.toBeInstanceOf(StoreReplyError);
      expect(await newStore(replying(['1'])).touch(q, 1, T0, cap(1, 0), T0)).toBe(true);
      expect(await newStore(replying([0])).leave(q, 1, T0, cap(1, 0), 0)).toBe(false);
      expect(await newStore(replying([5, '2', ''])).peek(q)).toEqual({ tail: 5, cursor: 2 });
      expect(await newStore(replying([9, 2, '4-6'])).peek(q)).toEqual({ tail: 9, cursor: 2, holes: [{ from: 4, to: 6 }] });
      // A peek's holes are ranges above its cursor, as a state's are.
      for (const bad of [[5, 2], [5, 2, 3], [9, 2, '2-6'], [9, 2, 'x'], [9, 2, '6-4'], [9, 2, '', '']]) {
        await expect(newStore(replying(bad)).peek(q)).rejects.toBeInstanceOf(StoreReplyError);
      }
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['an aborted request', 'Aborted'],
      ['too short', STATE.slice(1)],
      ['too long', [...STATE, 1]],
      ['a non-numeric string', [...STATE.slice(0, 12), 'x', '']],
      ['holes that are not a string', [...STATE.slice(0, 13), 0]],
      ['holes not of ranges', [...STATE.slice(0, 13), '4-']],
      ['holes at the cursor or below', [...STATE.slice(0, 13), '3-4']],
      ['holes out of order', [...STATE.slice(0, 13), '6-7,4-5']],
      ['holes that overlap', [...STATE.slice(0, 13), '4-6,6-7']],
      ['a hole range backwards', [...STATE.slice(0, 13), '5-4']],
      ['a fraction', [1.5, ...STATE.slice(1)]],
      ['a negative', [-1, ...STATE.slice(1)]],
      ['an object', { result: STATE }],
      ['an unsafe integer', ['99999999999999999', ...STATE.slice(1)]],
      ['a controls mode other than 0-4 (normal, paused, hold, open, recovering)', [7, 3, 5, ...STATE.slice(3)]],
      ['more admitted in the minute than in five', [7, 3, 0, 50, 10, 4, 6, 5, ...STATE.slice(8)]],
    ])('throws StoreReplyError on %s', async (_label, reply) => {
      const store = newStore(replying(reply));
      await expect(store.poll(randomQueue(), at(P), OFF)).rejects.toBeInstanceOf(StoreReplyError);
      await expect(store.peek(randomQueue())).rejects.toMatchObject({ code: 'ERR_STORE_REPLY' });
    });

    it.each<[string, unknown]>([
      ['claimed 2', [...STATE, 7, 2, 0]],
      ['claimed missing', [...STATE, 7]],
      ['replayed missing', [...STATE, 7, 1]],
      ['replayed 2', [...STATE, 7, 1, 2]],
      ['a new ticket other than the tail', [...STATE, 6, 1, 0]],
      ['a replayed ticket above the tail', [...STATE, 8, 1, 1]],
      ['ticket 0', [...STATE, 0, 0, 1]],
      ['ticket 0 while not switched open', [...STATE, 0, 0, 0]],
      ['ticket 0 claimed, switched open', [...STATE.slice(0, 2), 3, ...STATE.slice(3), 0, 1, 0]],
    ])('throws StoreReplyError on a join reply with %s', async (_label, reply) => {
      await expect(newStore(replying(reply)).join(randomQueue(), at(P), OFF)).rejects.toBeInstanceOf(StoreReplyError);
    });

    it('reads draw, reset and history replies', async () => {
      const q = randomQueue();
      const draw = (reply: unknown) => newStore(replying(reply)).draw(q, 1, T0, cap(1, 0), 0);
      expect(await draw([...STATE, 1, 1])).toEqual({ ...STATE_OBJECT, outcome: 'drawn', claimed: true });
      expect(await draw([...STATE, '1', '0'])).toEqual({ ...STATE_OBJECT, outcome: 'drawn', claimed: false });
      expect(await draw([...STATE, 0, 0])).toMatchObject({ outcome: 'waiting', claimed: false });
      expect(await draw([...STATE, 2, 0])).toMatchObject({ outcome: 'front', claimed: false });
      expect(await draw([...STATE, 3, 0])).toMatchObject({ outcome: 'unknown', claimed: false });
      expect(await newStore(replying([...STATE, 1])).reset(q, T0, OFF)).toEqual({ ...STATE_OBJECT, applied: true });
      expect(await newStore(replying([...STATE, 0])).reset(q, T0, OFF, T0 - 1)).toEqual({ ...STATE_OBJECT, applied: false });
      await expect(newStore(replying(STATE)).reset(q, T0, OFF)).rejects.toBeInstanceOf(StoreReplyError);
      expect(await newStore(replying([`${MIN0}:5:2:3:1:2`, `${MIN0 + 60_000}:6:3:3:0:1`])).history(q, T0)).toEqual([
        { atMs: MIN0, tail: 5, cursor: 2, waiting: 3, active: 1, admittedLastMinute: 2 },
        { atMs: MIN0 + 60_000, tail: 6, cursor: 3, waiting: 3, active: 0, admittedLastMinute: 1 },
      ]);
      expect(await newStore(replying([])).history(q, T0)).toEqual([]);
    });

    it.each<[string, unknown]>([
      ['an unknown outcome', [...STATE, 4, 0]],
      ['claimed while waiting', [...STATE, 0, 1]],
      ['claimed at the front', [...STATE, 2, 1]],
      ['claimed missing', [...STATE, 1]],
      ['a short state', [...STATE.slice(1), 1, 1]],
    ])('throws StoreReplyError on a draw reply with %s', async (_label, reply) => {
      await expect(newStore(replying(reply)).draw(randomQueue(), 1, T0, cap(1, 0), 0)).rejects.toBeInstanceOf(StoreReplyError);
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['a string', `${MIN0}:1:1:1:1:1`],
      ['a number as a member', [5]],
      ['a missing field', [`${MIN0}:1:2:3:4`]],
      ['an extra field', [`${MIN0}:1:2:3:4:5:6`]],
      ['a negative', [`${MIN0}:-1:2:3:4:5`]],
      ['a minute off its boundary', [`${MIN0 + 1}:1:2:3:4:5`]],
      ['minutes out of order', [`${MIN0 + 60_000}:1:2:3:4:5`, `${MIN0}:1:2:3:4:5`]],
      ['a minute twice', [`${MIN0}:1:2:3:4:5`, `${MIN0}:1:2:3:4:5`]],
    ])('throws StoreReplyError on a history reply with %s', async (_label, reply) => {
      await expect(newStore(replying(reply)).history(randomQueue(), T0)).rejects.toBeInstanceOf(StoreReplyError);
    });

    it('reads VIP replies: created, and a use\'s status and remaining count', async () => {
      const q = randomQueue();
      const h = vipHash();
      expect(await createVip(newStore(replying([1])), q, h, { uses: 1, expiresAtMs: null }, T0)).toBe(true);
      expect(await createVip(newStore(replying(['0'])), q, h, { uses: 1, expiresAtMs: null }, T0)).toBe(false);
      expect(await newStore(replying([0, 4])).useVip(q, h, T0)).toEqual({ ok: true, remaining: 4 });
      expect(await newStore(replying(['0', '0'])).useVip(q, h, T0)).toEqual({ ok: true, remaining: 0 });
      expect(await newStore(replying([1, 0])).useVip(q, h, T0)).toEqual({ ok: false, reason: 'unknown' });
      expect(await newStore(replying(['2', '0'])).useVip(q, h, T0)).toEqual({ ok: false, reason: 'expired' });
      expect(await newStore(replying([3, 0])).useVip(q, h, T0)).toEqual({ ok: false, reason: 'used_up' });
    });

    it.each<[string, unknown]>([
      ['an unknown status', [4, 0]],
      ['a refusal with a count', [3, 1]],
      ['more left than a code can have', [0, 1_000_000]],
      ['a negative count', [0, -1]],
      ['too short', [0]],
      ['too long', [0, 1, 0]],
      ['null', null],
    ])('throws StoreReplyError on a use_vip reply with %s', async (_label, reply) => {
      await expect(newStore(replying(reply)).useVip(randomQueue(), vipHash(), T0)).rejects.toBeInstanceOf(StoreReplyError);
    });

    it('throws StoreReplyError on a create_vip reply that is not 0 or 1', async () => {
      await expect(createVip(newStore(replying([2])), randomQueue(), vipHash(), { uses: 1, expiresAtMs: null }, T0)).rejects.toBeInstanceOf(StoreReplyError);
      await expect(createVip(newStore(replying([1, 1])), randomQueue(), vipHash(), { uses: 1, expiresAtMs: null }, T0)).rejects.toBeInstanceOf(StoreReplyError);
    });

    it('throws StoreReplyError on a touch or leave reply that is not 0 or 1', async () => {
      await expect(newStore(replying([2])).touch(randomQueue(), 1, T0, cap(1, 0), T0)).rejects.toBeInstanceOf(StoreReplyError);
      await expect(newStore(replying([1, 1])).leave(randomQueue(), 1, T0, cap(1, 0), 0)).rejects.toBeInstanceOf(StoreReplyError);
    });
  });

  describe('client options', () => {
    it('are the documented ones and fit both the Node and the Fastly client', () => {
      const options = createUpstashClientOptions({ url: 'https://example.upstash.io', token: 't' });
      expect(options).toMatchObject({
        enableTelemetry: false,
        enableAutoPipelining: false,
        responseEncoding: false,
        automaticDeserialization: false,
        retry: { retries: 1 },
      });
      expect(options.retry.backoff(0)).toBe(50);
      expect(options.retry.backoff(5)).toBe(50);
      // Type-level: the same options (plus `backend`) are a valid Fastly client config.
      const fastly: RedisConfigFastly = { ...options, backend: 'upstash' };
      expect(fastly.backend).toBe('upstash');
      expect(() => createUpstashClientOptions({ url: 'example', token: 't' })).toThrow(RangeError);
      expect(() => createUpstashClientOptions({ url: 'https://x', token: '' })).toThrow(RangeError);
      expect(() => createUpstashClientOptions({ url: 'https://x', token: 't', retries: 10 })).toThrow(RangeError);
    });

    it('rejects a bad key prefix when the store is built', () => {
      expect(() => new UpstashQueueStore({ redis, keyPrefix: 'a{b}' })).toThrow(StoreArgumentError);
      expect(() => new UpstashQueueStore({ redis, keyPrefix: '' })).toThrow(StoreArgumentError);
    });
  });
});

describe('the Redis store (ioredis, straight to a real redis-server, no bridge)', () => {
  let server: Awaited<ReturnType<typeof startRedisServer>>;
  let conn: RedisConnection;
  let direct: IORedis;

  beforeAll(async () => {
    server = await startRedisServer();
    conn = connectRedis({ urls: [server.url], cluster: false }, { timeoutMs: 2_000, retries: 0 });
    expect(await waitUntilReady(conn, 5_000)).toBe(true);
    direct = new IORedis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  });

  afterAll(async () => {
    conn?.disconnect();
    direct?.disconnect();
    await server?.stop();
  });

  const newStore = (keyPrefix = `wrr-${randomUUID().slice(0, 8)}`) => createRedisQueueStore({ redis: conn, keyPrefix });

  describeQueueStoreContract('RedisQueueStore', () => newStore());

  /** Calls of a command since the server started, from INFO commandstats. */
  const calls = async (command: string): Promise<number> => {
    const info = await direct.info('commandstats');
    return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  };

  it('maps each pinned SHA-1 to the SHA-1 of its script without Upstash’s flag, which is what SCRIPT LOAD answers', async () => {
    // The queue's scripts and the webhook outbox's (src/store/outbox.ts).
    expect(REDIS_SCRIPT_SHAS.size).toBe(STORE_SCRIPTS.length + OUTBOX_SCRIPTS.length);
    for (const script of [...STORE_SCRIPTS, ...OUTBOX_SCRIPTS]) {
      const adapted = adaptScript(script.text);
      expect(adapted.split('\n')[0], script.name).toBe('#!lua');
      expect(adapted.slice(adapted.indexOf('\n')), script.name).toBe(script.text.slice(script.text.indexOf('\n')));
      const sha = REDIS_SCRIPT_SHAS.get(script.sha1);
      expect(sha, script.name).not.toBe(script.sha1);
      expect(await direct.script('LOAD', adapted), script.name).toBe(sha);
    }
    // Redis 7 itself refuses the text as pinned: the reason for the mapping.
    await expect(direct.script('LOAD', STORE_SCRIPTS[0]!.text)).rejects.toThrow(/Unexpected flag in script shebang: allow-key-locking/);
  });

  it('runs a script by one EVALSHA; only a Redis without it (flushed) takes one EVAL, which caches it again', async () => {
    const store = newStore();
    const q = randomQueue();
    await direct.script('FLUSH');
    const [eval0, evalsha0] = [await calls('eval'), await calls('evalsha')];
    expect((await store.join(q, at(P), every(1))).ticket).toBe(1);
    expect([(await calls('eval')) - eval0, (await calls('evalsha')) - evalsha0]).toEqual([1, 1]);
    expect((await store.join(q, at(P), every(1))).ticket).toBe(2);
    await store.poll(q, at(P + 1), every(1));
    await store.poll(q, at(P + 2), every(1));
    // Three more calls, three EVALSHAs (join cached, poll's first one missed once), EVAL only for poll's miss.
    expect([(await calls('eval')) - eval0, (await calls('evalsha')) - evalsha0]).toEqual([2, 4]);
    expect(await store.peek(q)).toMatchObject({ tail: 2 });
  });

  it('shares queues between two connections, as two Node hosts do', async () => {
    const other = connectRedis({ urls: [server.url], cluster: false }, { timeoutMs: 2_000, retries: 0 });
    try {
      expect(await waitUntilReady(other, 5_000)).toBe(true);
      const prefix = `wrr-${randomUUID().slice(0, 8)}`;
      const a = createRedisQueueStore({ redis: conn, keyPrefix: prefix });
      const b = createRedisQueueStore({ redis: other, keyPrefix: prefix });
      const q = randomQueue();
      const tickets = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).join(q, at(P), OFF)));
      expect(new Set(tickets.map((t) => t.ticket)).size).toBe(20);
      await a.admit(q, 5, at(P), OFF);
      expect(await b.peek(q)).toEqual({ tail: 20, cursor: 5 });
    } finally {
      other.disconnect();
    }
  });

  it('fails fast when Redis is down: no offline queue, the call rejects well before the store timeout', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: p } = probe.address() as AddressInfo;
        probe.close(() => resolve(p));
      });
    });
    const down = connectRedis({ urls: [`redis://127.0.0.1:${port}`], cluster: false }, { timeoutMs: 5_000, retries: 1 });
    down.on('error', () => {});
    try {
      // Refused, not timed out: it did not wait for the store timeout (an offline queue would have
      // held the command until then), and that holds however slow the machine, unlike a stopwatch.
      const refused = await createRedisQueueStore({ redis: down })
        .join(randomQueue(), at(P), OFF)
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      expect(refused).toBeInstanceOf(Error);
      expect((refused as Error).message).not.toMatch(/timed out/i);
    } finally {
      down.disconnect();
    }
  });

  it('gives up on a Redis that does not answer at the store timeout; the command it sent runs at most once', async () => {
    const slow = connectRedis({ urls: [server.url], cluster: false }, { timeoutMs: 300, retries: 1 });
    try {
      expect(await waitUntilReady(slow, 5_000)).toBe(true);
      const prefix = `wrr-${randomUUID().slice(0, 8)}`;
      const store = createRedisQueueStore({ redis: slow, keyPrefix: prefix });
      const q = randomQueue();
      // The join script is cached (a join on another queue), so the join below is one EVALSHA; a
      // peek would not do, as it runs another script: alone (-t) the join's NOSCRIPT came back late.
      await store.join(randomQueue(), at(P), OFF);
      // Redis holds every client's commands (ours included) for 1.5 s: a store that hangs.
      await direct.call('CLIENT', 'PAUSE', '1500', 'ALL');
      const started = Date.now();
      // Timed out (so before the pause ended and Redis answered), and not before the store timeout.
      await expect(store.join(q, at(P), OFF)).rejects.toThrow(/timed out/i);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      // The join reached Redis and ran once the pause ended (as an Upstash request aborted late may):
      // wait for that (a deadline, not a fixed time), then it ran once, never resent.
      const reader = createRedisQueueStore({ redis: conn, keyPrefix: prefix });
      await expect.poll(async () => (await reader.peek(q)).tail, { timeout: 15_000, interval: 50 }).toBeGreaterThanOrEqual(1);
      expect(await reader.peek(q)).toEqual({ tail: 1, cursor: 0 });
    } finally {
      slow.disconnect();
    }
  });

  it('parses REDIS_URL: one URL, or a cluster’s nodes separated by commas; anything else is a clear problem', () => {
    expect(parseRedisUrls('redis://127.0.0.1:6379')).toEqual(['redis://127.0.0.1:6379']);
    expect(parseRedisUrls('redis://a:7000, rediss://u:p@b:7001')).toEqual(['redis://a:7000', 'rediss://u:p@b:7001']);
    expect(parseRedisUrls(undefined)).toMatch(/is required with WR_STORE=redis/);
    expect(parseRedisUrls(' ')).toMatch(/is required/);
    expect(parseRedisUrls('127.0.0.1:6379')).toMatch(/"127.0.0.1:6379".*redis:\/\//);
    expect(parseRedisUrls('http://x:1')).toMatch(/redis:\/\/ or rediss:\/\//);
    expect(parseRedisUrls('redis://a:1,nope')).toMatch(/is not a URL: "nope"/);
  });
});

describe('the Redis store on a Redis Cluster (three masters)', () => {
  let cluster: Awaited<ReturnType<typeof startRedisCluster>>;
  let conn: RedisConnection;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    // The contract is not about timeouts: 1,000 joins at once on a busy machine took over 2 s once.
    conn = connectRedis({ urls: cluster.urls, cluster: true }, { timeoutMs: 15_000, retries: 1 });
    expect(await waitUntilReady(conn, 10_000)).toBe(true);
  });

  afterAll(async () => {
    conn?.disconnect();
    await cluster?.stop();
  });

  describeQueueStoreContract('RedisQueueStore on a cluster', () => createRedisQueueStore({ redis: conn, keyPrefix: `wrc-${randomUUID().slice(0, 8)}` }));

  it('spreads queues over the nodes, each queue’s keys in its one slot', async () => {
    const store = createRedisQueueStore({ redis: conn, keyPrefix: 'wrc-spread' });
    for (let i = 0; i < 24; i++) await store.admit(`spread-${i}`, 1, at(P), every(1));
    for (let i = 0; i < 24; i++) await store.join(`spread-${i}`, at(P), every(1));
    const sizes = await Promise.all(
      cluster.nodes.map(async (node) => {
        const one = new IORedis(node.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
        try {
          return await one.dbsize();
        } finally {
          one.disconnect();
        }
      }),
    );
    // 24 queues land on more than one master (all on one would be a chance of 3 × 3^-24).
    expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(1);
    for (let i = 0; i < 24; i++) expect(await store.peek(`spread-${i}`)).toMatchObject({ tail: 1 });
  });

  it('a one-node seed list with cluster on finds the others (a configuration endpoint)', async () => {
    const seeded = connectRedis({ urls: [cluster.urls[0]!], cluster: true }, { timeoutMs: 2_000, retries: 1 });
    try {
      expect(await waitUntilReady(seeded, 10_000)).toBe(true);
      const store = createRedisQueueStore({ redis: seeded, keyPrefix: 'wrc-spread' });
      for (let i = 0; i < 24; i++) expect(await store.peek(`spread-${i}`)).toMatchObject({ tail: 1 });
    } finally {
      seeded.disconnect();
    }
  });
});
