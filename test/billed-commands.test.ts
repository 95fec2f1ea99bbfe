/**
 * What each request class costs in billed commands (the script plus every command inside it, as
 * Upstash bills), measured with INFO commandstats on a real redis-server through the Upstash REST
 * bridge. Printed as a table for the README and the issue; the assertions hold only the promises
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
    }
  });

  afterAll(async () => {
    console.log(['| request | billed commands |', '| --- | --- |', ...rows].join('\n'));
    direct?.disconnect();
    await bridge?.close();
    await server?.stop();
  });

  const measure = async (label: string, run: () => Promise<unknown>): Promise<number> => {
    const n = await billedCommands(direct, run);
    rows.push(`| ${label} | ${n} |`);
    return n;
  };

  it('rate mode', async () => {
    const q = `r-${randomUUID().slice(0, 8)}`;
    await measure('rate: join, first of the period (step, walk-in)', () => store.join(q, T0, RATE));
    await measure('rate: join, walk-in (called before it existed)', () => store.join(q, T0 + 1, RATE));
    for (let i = 0; i < 3; i += 1) await store.join(q, T0 + 2, RATE);
    const quiet = await measure('rate: join, waiting, no live call', () => store.join(q, T0 + 3, RATE));
    for (let i = 0; i < 20; i += 1) await store.join(q, T0 + 4, RATE);
    await measure('rate: poll (cache miss), period step', () => store.poll(q, T0 + 60_000, RATE));
    await measure('rate: poll (cache miss), no step', () => store.poll(q, T0 + 60_001, RATE));
    const busy = await measure('rate: join, waiting, 5 calls awaiting their claim', () => store.join(q, T0 + 60_002, RATE));
    await measure('rate: claim of a called ticket', () => store.claim(q, 10, T0 + 60_003, RATE, 0));
    await measure('rate: second claim of the same ticket', () => store.claim(q, 10, T0 + 60_004, RATE, 0));
    await measure('rate: poll (cache miss), 4 lapsed calls replaced', () => store.poll(q, T0 + 70_001, RATE));
    await measure('rate: admit 10', () => store.admit(q, 10, T0 + 70_002, RATE));
    // Calls waiting for their claim cost a join nothing.
    expect(busy).toBe(quiet);
  });

  it('capacity mode', async () => {
    const q = `c-${randomUUID().slice(0, 8)}`;
    await measure('capacity: join, walk-in', () => store.join(q, T0, CAPACITY));
    for (let i = 0; i < 10; i += 1) await store.join(q, T0 + 1, CAPACITY);
    await measure('capacity: join, waiting', () => store.join(q, T0 + 2, CAPACITY));
    await store.leave(q, 1, T0 + 3, CAPACITY, 0);
    await measure('capacity: poll (cache miss)', () => store.poll(q, T0 + 4, CAPACITY));
    await measure('capacity: claim of a called ticket', () => store.claim(q, 6, T0 + 5, CAPACITY, 0));
    await measure('capacity: poll (cache miss), lapsed reservation replaced', () => store.poll(q, T0 + 10_004, CAPACITY));
    await measure('capacity: admit 3', () => store.admit(q, 3, T0 + 10_005, CAPACITY));
  });
});
