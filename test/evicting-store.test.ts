/**
 * A sale on a database that evicts: a real redis-server with a small `maxmemory` and
 * `allkeys-random` (any key may go, the queue's own included, as Upstash's eviction does once the
 * volatile keys are not enough), filled by another tenant's writes while the sale runs. Whatever key
 * goes (ctl: a lost state; `active`, `reserved` or `waiting` alone: see forgotten-keys), no call
 * fails but for the database's own refusal when it is full (OOM: a store error, asked again), the
 * room never holds more than max_active slots, and the line empties: everyone who came is let in
 * once the other tenant stops. Virtual time through the real scripts, so nothing depends
 * on the machine's speed; which keys go is Redis's draw, so the test asserts only what must hold
 * for any of them, and prints how many of the queue's keys were lost. Without the draw's recount
 * (draws.lua) the random run fails at the first draw after `waiting` goes. The capacity run loses
 * ctl so often that a new generation usually clears the book before a stuck room shows:
 * forgotten-keys.test.ts takes that case on its own.
 */
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdmissionPolicy, QueueStore } from '../src/core/ports';
import { createRedisQueueStore } from '../src/store/redis-store';
import { startRedisServer, type RedisServer } from './support/redis-server';

const T0 = Date.UTC(2026, 10, 29, 8, 0, 0);
const Q = 'default';
const VISITORS = 120;
/** The other tenant writes a 100 KB value every 10 s for the first 10 minutes. */
const JUNK_UNTIL_S = 600;
const END_S = 1_800;

let server: RedisServer;
let direct: IORedis;

beforeAll(async () => {
  server = await startRedisServer();
  direct = new IORedis(server.url);
  await direct.config('SET', 'maxmemory-policy', 'allkeys-random');
});

afterAll(async () => {
  direct?.disconnect();
  await server?.stop();
});

/** Caps memory a little above what is used now: every 100 KB the other tenant writes evicts something. */
async function tighten(): Promise<void> {
  const used = Number(/used_memory:(\d+)/.exec(await direct.info('memory'))?.[1]);
  await direct.config('SET', 'maxmemory', String(used + 400_000));
}

interface Waiting {
  readonly ticket: number;
  readonly generation: number;
  readonly joinedMs: number;
}

/** A call the full database refused (Redis's OOM answer when eviction could not make room in time): the edge's store error. */
function refusedForMemory(error: unknown): boolean {
  return error instanceof Error && /\bOOM\b/.test(error.message);
}

/**
 * Runs the sale: a visitor every 300 / VISITORS seconds of the first 5 minutes, each waiting
 * visitor asks once a second (capacity: claims once called; random: its draw), and a visitor whose
 * ticket belongs to a lost state joins again, as the edge makes it. A call the full database
 * refuses (OOM) is a store error: the visitor asks again the next second, as the holding page
 * makes it; any other error fails the test. Returns the visitors let in, those still waiting or
 * still to get a ticket at the end, the most live slots seen, the queue keys seen gone from one
 * second to the next, Redis's evictions and the refused calls.
 */
async function runSale(store: QueueStore, policy: AdmissionPolicy, prefix: string) {
  const random = policy.method === 'random';
  const keys = ['ctl', 'active', 'reserved', 'waiting'].map((k) => `${prefix}:{${Q}}:${k}`);
  const lost = new Map<string, number>();
  let present = new Set<string>();
  let waiting: Waiting[] = [];
  let toJoin: number[] = [];
  let letIn = 0;
  let mostSlots = 0;
  let refused = 0;
  let junk = 0;
  const attempt = async <T>(run: () => Promise<T>): Promise<T | undefined> => {
    try {
      return await run();
    } catch (error) {
      if (!refusedForMemory(error)) throw error;
      refused++;
      return undefined;
    }
  };
  const every = Math.floor(300 / VISITORS);
  for (let s = 0; s <= END_S; s++) {
    const now = T0 + s * 1_000;
    if (s < 300 && s % every === 0 && s / every < VISITORS) toJoin.push(now);
    const stillToJoin: number[] = [];
    for (const joinedMs of toJoin) {
      const joined = await attempt(() => store.join(Q, now, policy));
      if (joined === undefined) stillToJoin.push(joinedMs);
      else if (joined.claimed) letIn++;
      else waiting.push({ ticket: joined.ticket, generation: joined.generation, joinedMs });
    }
    toJoin = stillToJoin;
    const state = await attempt(() => store.poll(Q, now, policy));
    const still: Waiting[] = [];
    for (const w of waiting) {
      if (state === undefined) {
        still.push(w);
        continue;
      }
      if (w.generation !== state.generation) {
        // A ticket of a lost state: the edge gives its holder a new one.
        toJoin.push(w.joinedMs);
        continue;
      }
      if (random) {
        const drawn = await attempt(() => store.draw(Q, w.ticket, now, policy, now - w.joinedMs, w.generation));
        if (drawn?.outcome === 'drawn') letIn++;
        else if (drawn?.outcome === 'unknown') toJoin.push(w.joinedMs);
        else still.push(w);
        continue;
      }
      if (w.ticket <= state.cursor) {
        const claimed = await attempt(() => store.claim(Q, w.ticket, now, policy, now - w.joinedMs, w.generation));
        if (claimed?.claimed === true) {
          letIn++;
          continue;
        }
      }
      still.push(w);
    }
    waiting = still;
    if (policy.thresholds.maxActive > 0) mostSlots = Math.max(mostSlots, await direct.zcount(keys[1]!, `(${now}`, '+inf'));
    if (s < JUNK_UNTIL_S && s % 10 === 0) await attempt(() => direct.set(`tenant:${junk++}`, 'x'.repeat(100_000)));
    const nowPresent = new Set<string>();
    for (const [i, exists] of (await Promise.all(keys.map((k) => direct.exists(k)))).entries()) if (exists === 1) nowPresent.add(keys[i]!);
    for (const k of present) {
      const name = k.slice(k.lastIndexOf(':') + 1);
      if (!nowPresent.has(k)) lost.set(name, (lost.get(name) ?? 0) + 1);
    }
    present = nowPresent;
  }
  const evicted = Number(/evicted_keys:(\d+)/.exec(await direct.info('stats'))?.[1]);
  return { letIn, left: waiting.length + toJoin.length, mostSlots, lost: Object.fromEntries(lost), evicted, refused };
}

/** A queue under `prefix` whose state exists, memory capped just above it, then the sale. */
async function saleOn(prefix: string, policy: AdmissionPolicy): ReturnType<typeof runSale> {
  const store = createRedisQueueStore({ redis: direct, keyPrefix: prefix });
  await store.poll(Q, T0 - 1_000, policy);
  await tighten();
  return runSale(store, policy, prefix);
}

describe('a sale on a database that evicts keys at random (allkeys-random, maxmemory)', () => {
  it('capacity mode: no call fails but for the full database\'s refusals, never more than max_active slots, and everyone is let in once the evictions stop', async () => {
    const policy: AdmissionPolicy = { auto: { count: 0, periodMs: 1_000 }, thresholds: { maxActive: 10, maxNewPerMinute: 0 }, sessionMs: 30_000, reservationMs: 10_000 };
    const result = await saleOn('evict-capacity', policy);
    console.log(`capacity: ${JSON.stringify(result)}`);
    expect(result.evicted).toBeGreaterThan(0);
    expect(result.mostSlots).toBeLessThanOrEqual(10);
    expect(result.left).toBe(0);
    expect(result.letIn).toBe(VISITORS);
  });

  it('random method: no call fails but for the full database\'s refusals, and everyone is drawn once the evictions stop', async () => {
    await direct.config('SET', 'maxmemory', '0');
    await direct.flushall();
    const policy: AdmissionPolicy = { auto: { count: 2, periodMs: 10_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 10_000, method: 'random', presenceMs: 30_000, seed: 11 };
    const result = await saleOn('evict-random', policy);
    console.log(`random: ${JSON.stringify(result)}`);
    expect(result.evicted).toBeGreaterThan(0);
    expect(result.left).toBe(0);
    expect(result.letIn).toBe(VISITORS);
  });
});
