/**
 * What each request class costs in billed commands (the script plus every command inside it, as
 * Upstash bills), measured with INFO commandstats on a real redis-server through the Upstash REST
 * bridge. Printed as a table for docs/capacity-and-cost.md and the issue; the assertions hold only the promises
 * about where admission work goes: a join pays nothing for called tickets that wait for their claim.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdmissionPolicy, QueueStore } from '../src/core/ports';
import { startUpstashBridge } from '../src/node/upstash-bridge';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { billedCommands } from './support/command-stats';
import { startRedisServer } from './support/redis-server';

const T0 = 1_700_000_000_000;
const RATE: AdmissionPolicy = {
  auto: { count: 5, periodMs: 60_000 },
  thresholds: { maxActive: 0, maxNewPerMinute: 0 },
  sessionMs: 600_000,
  reservationMs: 10_000,
};
/** Every join the handler makes carries a key (see JoinOptions.joinKey): measured the same way. */
const keyed = (): { joinKey: string } => ({ joinKey: randomUUID().replace(/-/g, '').slice(0, 16) });
const CAPACITY: AdmissionPolicy = { ...RATE, auto: { count: 0, periodMs: 1_000 }, thresholds: { maxActive: 5, maxNewPerMinute: 0 } };

describe('billed commands per request class (Upstash store, real redis-server)', () => {
  const token = `test-token-${randomUUID()}`;
  let server: Awaited<ReturnType<typeof startRedisServer>>;
  let bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  let direct: IORedis;
  let store: QueueStore;
  const rows: string[] = [];

  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: server.url, token });
    const redis = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
    direct = new IORedis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    await direct.connect();
    store = new UpstashQueueStore({ redis, keyPrefix: `wrb-${randomUUID().slice(0, 8)}` });
    // Load every script once, so that no NOSCRIPT miss is counted below.
    const warm = `warm-${randomUUID().slice(0, 8)}`;
    for (const policy of [RATE, CAPACITY]) {
      await store.join(warm, T0, policy);
      await store.poll(warm, T0, policy);
      await store.claim(warm, 1, T0, policy, 0);
      await store.admit(warm, 1, T0, policy);
      await store.stats(warm, T0, policy, { history: true });
    }
  });

  afterAll(async () => {
    console.log(['| request | billed commands | budget |', '| --- | ---: | ---: |', ...rows].join('\n'));
    direct?.disconnect();
    await bridge?.close();
    await server?.stop();
  });

  /** `budget`: issue 13's ceiling for the class, asserted; none where the class has no budget yet. */
  const measure = async (label: string, run: () => Promise<unknown>, budget?: number): Promise<number> => {
    const n = await billedCommands(direct, run);
    rows.push(`| ${label} | ${n} | ${budget === undefined ? '—' : `≤ ${budget}`} |`);
    if (budget !== undefined) expect(n, label).toBeLessThanOrEqual(budget);
    return n;
  };

  it('rate mode: every class at or under its budget', async () => {
    const q = `r-${randomUUID().slice(0, 8)}`;
    // The queue's generation exists (the first run of a state writes it once: one HSET more).
    await store.poll(q, T0 - 60_000, RATE);
    const firstKey = keyed();
    await measure('rate: join, first of the period on an empty queue (the step, a walk-in)', () => store.join(q, T0, RATE, firstKey), 3);
    await measure('rate: join retried with its key (its answer was lost): the same ticket', () => store.join(q, T0 + 1, RATE, firstKey), 3);
    await measure('rate: join, walk-in (called before it existed)', () => store.join(q, T0 + 1, RATE, keyed()), 3);
    for (let i = 0; i < 3; i += 1) await store.join(q, T0 + 2, RATE, keyed());
    const quiet = await measure('rate: join, queued', () => store.join(q, T0 + 3, RATE, keyed()), 3);
    for (let i = 0; i < 20; i += 1) await store.join(q, T0 + 4, RATE, keyed());
    // The minute's first writing call but a join writes its history point, once a minute.
    await measure("rate: poll, the minute's first (its history point: one HSET)", () => store.poll(q, T0 + 5, RATE), 4);
    await measure('rate: poll (cache miss), no step', () => store.poll(q, T0 + 6, RATE), 4);
    // The next period starts at `step` (periods are aligned to the epoch), in the same minute.
    const step = Math.ceil((T0 + 1) / 60_000) * 60_000;
    await store.poll(q, step - 1, RATE);
    // A 60-s period starts with a minute: its step and the minute's history point come together.
    await measure("rate: poll (cache miss) that runs the period step and the minute's history point", () => store.poll(q, step + 1, RATE), 5);
    await measure('rate: poll (cache miss), no step', () => store.poll(q, step + 2, RATE), 4);
    const busy = await measure('rate: join, queued, 5 calls awaiting their claim', () => store.join(q, step + 3, RATE, keyed()), 3);
    await measure('rate: claim of a called ticket', () => store.claim(q, 10, step + 4, RATE, 0), 4);
    await measure('rate: second claim of the same ticket', () => store.claim(q, 10, step + 5, RATE, 0), 4);
    // 4 of the 5 calls lapse unclaimed (reservationMs 10 s): as many next tickets are called at once.
    await measure('rate: poll (cache miss), 4 lapsed calls replaced', () => store.poll(q, step + 10_001, RATE), 5);
    await measure('rate: admit 10 (no idempotency key)', () => store.admit(q, 10, step + 10_002, RATE), 4);
    await measure('rate: admit 10 with an idempotency key', () => store.admit(q, 10, step + 10_003, RATE, 'bill-1'), 4);
    await measure('rate: stats (figures only)', () => store.stats(q, step + 10_004, RATE), 3);
    await measure('rate: the admin panel: stats with the history (the page, and each live poll)', () => store.stats(q, step + 10_005, RATE, { history: true }), 4);
    // Calls waiting for their claim cost a join nothing.
    expect(busy).toBe(quiet);
  });

  it('capacity mode', async () => {
    const q = `c-${randomUUID().slice(0, 8)}`;
    const walkInKey = keyed();
    await measure('capacity: join, walk-in', () => store.join(q, T0, CAPACITY, walkInKey));
    await measure('capacity: join retried with its key: the same walk-in, its slot renewed', () => store.join(q, T0 + 1, CAPACITY, walkInKey));
    for (let i = 0; i < 10; i += 1) await store.join(q, T0 + 1, CAPACITY, keyed());
    await measure('capacity: join, waiting', () => store.join(q, T0 + 2, CAPACITY, keyed()));
    await store.leave(q, 1, T0 + 3, CAPACITY, 0);
    await measure('capacity: poll (cache miss)', () => store.poll(q, T0 + 4, CAPACITY));
    await measure('capacity: claim of a called ticket', () => store.claim(q, 6, T0 + 5, CAPACITY, 0));
    await measure('capacity: poll (cache miss), lapsed reservation replaced', () => store.poll(q, T0 + 10_004, CAPACITY));
    await measure('capacity: admit 3', () => store.admit(q, 3, T0 + 10_005, CAPACITY));
  });

  it('random method', async () => {
    const q = `d-${randomUUID().slice(0, 8)}`;
    const RANDOM: AdmissionPolicy = { ...RATE, method: 'random', seed: 1, presenceMs: 30_000 };
    await store.join(q, T0, RANDOM, keyed());
    await measure('random: join, first (nobody waiting: the period step draws it)', () => store.join(q, T0 + 1, RANDOM, keyed()));
    for (let i = 0; i < 10; i += 1) await store.join(q, T0 + 2, RANDOM, keyed());
    await measure('random: join, others waiting (the draws are the polls\')', () => store.join(q, T0 + 3, RANDOM, keyed()));
    await measure('random: a waiting visitor\'s poll (a draw)', () => store.draw(q, 12, T0 + 4, RANDOM, 0));
  });
});
