/**
 * What adaptive admission costs the store, counted as Upstash bills (INFO commandstats on a real
 * redis-server through the bridge): no store call of its own in any request class, and within a
 * call no command but the report's write, which rides in the call's one HSET or, when the call
 * writes nothing else, is one HSET at most once per AC_STEP_MS per POP.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdmissionPolicy, OriginReport } from '../src/core/ports';
import { startUpstashBridge } from '../src/node/upstash-bridge';
import { AC_STEP_MS } from '../src/store/adaptive';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { billedCommands } from './support/command-stats';
import { startRedisServer, type RedisServer } from './support/redis-server';

const T0 = 1_700_000_000_000;
const RATE: AdmissionPolicy = { auto: { count: 5, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 10_000 };
const report = (pop: string): OriginReport => ({ pop, requests: 120, errors: 1, slow: 3 });
const adaptive = (pop?: string): AdmissionPolicy => ({ ...RATE, adaptive: { enabled: true, min: 2, max: 80, errorPercent: 2, slowPercent: 10, ...(pop !== undefined && { report: report(pop) }) } });

describe('adaptive admission costs no store call and at most one HSET per POP per step', () => {
  let server: RedisServer;
  let bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  let direct: IORedis;
  let store: UpstashQueueStore;
  let requests = 0;

  beforeAll(async () => {
    const token = `t-${randomUUID()}`;
    server = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: server.url, token });
    const client = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
    // Round trips: what reaches the bridge.
    const counting = {
      evalsha: (...args: Parameters<typeof client.evalsha>) => {
        requests += 1;
        return client.evalsha(...args);
      },
      eval: (...args: Parameters<typeof client.eval>) => {
        requests += 1;
        return client.eval(...args);
      },
    };
    direct = new IORedis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    await direct.connect();
    store = new UpstashQueueStore({ redis: counting as never, keyPrefix: `wrc-${randomUUID().slice(0, 8)}` });
    // Every script cached, so no NOSCRIPT is counted.
    await store.join('warm', T0, adaptive('w'));
    await store.poll('warm', T0, adaptive('w'));
  });
  afterAll(async () => {
    direct?.disconnect();
    await bridge?.close();
    await server?.stop();
  });

  /** Billed commands and round trips of one call. */
  const cost = async (run: () => Promise<unknown>): Promise<{ billed: number; trips: number }> => {
    const before = requests;
    const billed = await billedCommands(direct, run);
    return { billed, trips: requests - before };
  };

  it('joins and polls: the same round trips, a join the same commands, a poll at most one HSET more', async () => {
    const plain = `p-${randomUUID().slice(0, 6)}`;
    const tuned = `a-${randomUUID().slice(0, 6)}`;
    // The same history on both queues: generation written, a period step, the minute's point.
    for (const [q, policy] of [[plain, RATE], [tuned, adaptive('pop-a')]] as const) {
      await store.poll(q, T0 - 60_000, policy);
      for (let i = 0; i < 30; i++) await store.join(q, T0, policy);
      await store.poll(q, T0 + 1, policy);
    }
    // Queued joins, each carrying this POP's report (due or not: the join writes its tail anyway).
    const join = await cost(() => store.join(plain, T0 + AC_STEP_MS + 2, RATE));
    const joinTuned = await cost(() => store.join(tuned, T0 + AC_STEP_MS + 2, adaptive('pop-a')));
    expect(joinTuned).toEqual(join);
    // A poll that writes nothing: the report not due yet (pop-a wrote one at AC_STEP_MS + 2) costs nothing.
    const poll = await cost(() => store.poll(plain, T0 + AC_STEP_MS + 3, RATE));
    const pollTuned = await cost(() => store.poll(tuned, T0 + AC_STEP_MS + 3, adaptive('pop-a')));
    expect(pollTuned).toEqual(poll);
    // Another POP's first report (and the step it allows) is one HSET more, in the same round trip.
    const pollNew = await cost(() => store.poll(tuned, T0 + 2 * AC_STEP_MS + 4, adaptive('pop-b')));
    const pollPlain = await cost(() => store.poll(plain, T0 + 2 * AC_STEP_MS + 4, RATE));
    expect(pollNew.trips).toBe(1);
    expect(pollNew.billed).toBeLessThanOrEqual(pollPlain.billed + 1);
    console.log(`adaptive admission, billed commands (round trips): join ${join.billed} (${join.trips}) → ${joinTuned.billed} (${joinTuned.trips}); poll ${poll.billed} → ${pollTuned.billed}; poll with a due report ${pollPlain.billed} → ${pollNew.billed}`);
  });
});
