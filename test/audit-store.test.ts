/**
 * The audit trail's storage on every store (in memory, Upstash through the bridge, Redis, and Redis
 * Cluster) over a real redis-server: the same answers call by call, newest first, capped at AUDIT_MAX_ENTRIES,
 * kept AUDIT_KEEP_MS after the last change, left by a reset, bad arguments refused before anything
 * is written, a run of merged entries (the origin's admits of a minute) kept as one; and what it
 * costs as Upstash bills it (INFO commandstats): an append 4 commands (5 at the cap), a merged one
 * 5, a read 2, a visitor's join none more than before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAudit, encodeAuditEntry, type AuditEntry } from '../src/core/audit';
import { AUDIT_ENTRY_MAX_BYTES, AUDIT_KEEP_MS, AUDIT_MAX_ENTRIES, type AdmissionPolicy, type QueueStore } from '../src/core/ports';
import { MemoryQueueStore } from '../src/store/memory-store';
import { connectRedis, createRedisQueueStore, waitUntilReady, type RedisConnection } from '../src/store/redis-store';
import { startRedisCluster } from './support/redis-server';
import { StoreArgumentError } from '../src/store/scripts';
import { parseCommandstats } from './support/command-stats';
import { expectSameOnEveryStore, useEveryStore } from './support/every-store';

const T0 = 1_800_000_000_000;
/** Admission by hand: a join only takes a ticket. */
const POLICY: AdmissionPolicy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };

const entry = (n: number, actor = 'otto'): string =>
  encodeAuditEntry({ atMs: T0 + n * 1000, actor, role: 'operator', client: '203.0.113.9', action: 'admit', change: `Let ${n} in.`, after: { admitted: n } } satisfies AuditEntry);

/** What an error is, for comparing stores: its class and message. */
const failure = async (call: () => Promise<unknown>): Promise<string> => {
  try {
    await call();
    return 'no error';
  } catch (error) {
    return `${error instanceof StoreArgumentError ? 'argument' : 'other'}: ${(error as Error).message}`;
  }
};

describe('the audit trail on every store', () => {
  const stores = useEveryStore();

  it('answers the same on every store: newest first, the limit, queues apart, bad arguments refused', async () => {
    const answers = await expectSameOnEveryStore(stores, async (store) => {
      const out: unknown[] = [];
      out.push(await store.readAudit('q1', 10, T0));
      for (let n = 1; n <= 4; n++) out.push(await store.appendAudit('q1', entry(n), T0 + n));
      out.push(await store.appendAudit('q2', entry(9, 'ada'), T0));
      out.push(await store.readAudit('q1', 10, T0 + 10));
      out.push(await store.readAudit('q1', 2, T0 + 10));
      out.push(await store.readAudit('q2', 10, T0 + 10));
      // Non-ASCII text round-trips as written.
      out.push(await store.appendAudit('q2', '{"w":"Änderung · 変更"}', T0));
      out.push((await store.readAudit('q2', 1, T0))[0]);
      // Refused before anything is written, the same way on every store.
      out.push(await failure(() => store.appendAudit('q1', '', T0)));
      out.push(await failure(() => store.appendAudit('q1', 'x'.repeat(AUDIT_ENTRY_MAX_BYTES + 1), T0)));
      out.push(await failure(() => store.readAudit('q1', 0, T0)));
      out.push(await failure(() => store.readAudit('q1', AUDIT_MAX_ENTRIES + 1, T0)));
      out.push(await failure(() => store.readAudit('bad queue name', 1, T0)));
      out.push((await store.readAudit('q1', 10, T0 + 10)).length);
      return out;
    });
    expect(answers[0]).toEqual([]);
    expect(answers.slice(1, 6)).toEqual([1, 2, 3, 4, 1].map((kept) => ({ kept, merged: false })));
    expect(answers[6]).toEqual([entry(4), entry(3), entry(2), entry(1)]);
    expect(answers[7]).toEqual([entry(4), entry(3)]);
    expect(answers[8]).toEqual([entry(9, 'ada')]);
    expect(answers[10]).toBe('{"w":"Änderung · 変更"}');
    expect(answers.slice(11, 16).every((a) => typeof a === 'string' && a.startsWith('argument: '))).toBe(true);
    expect(answers[16]).toBe(4);
  });

  it('keeps the newest AUDIT_MAX_ENTRIES, on every store', async () => {
    await expectSameOnEveryStore(stores, async (store) => {
      const lengths: number[] = [];
      for (let n = 1; n <= AUDIT_MAX_ENTRIES + 3; n++) lengths.push((await store.appendAudit('cap', `e${n}`, T0)).kept);
      const kept = await store.readAudit('cap', AUDIT_MAX_ENTRIES, T0);
      expect(lengths.at(-1)).toBe(AUDIT_MAX_ENTRIES);
      expect(kept).toHaveLength(AUDIT_MAX_ENTRIES);
      expect([kept[0], kept.at(-1)]).toEqual([`e${AUDIT_MAX_ENTRIES + 3}`, 'e4']);
      return [lengths.at(-1), kept[0], kept.at(-1)];
    });
  }, 60_000);

  it('keeps a run of one merge tag as one entry with its sum and length; another entry or tag starts anew (every store)', async () => {
    const answers = await expectSameOnEveryStore(stores, async (store) => {
      const merge = (tag: string, add: number) => ({ tag, add });
      const out: unknown[] = [];
      out.push(await store.appendAudit('m', 'origin: #SUM# in #CALLS#', T0, merge('api-admit:1', 3)));
      out.push(await store.appendAudit('m', 'origin: #SUM# in #CALLS#', T0, merge('api-admit:1', 0)));
      out.push(await store.appendAudit('m', 'origin: #SUM# in #CALLS# (last)', T0, merge('api-admit:1', 4)));
      out.push(await store.readAudit('m', 10, T0));
      // A new minute's tag starts its own entry.
      out.push(await store.appendAudit('m', 'origin: #SUM# in #CALLS#', T0, merge('api-admit:2', 5)));
      // A person's entry ends the run: the same tag after it starts anew.
      out.push(await store.appendAudit('m', 'otto paused', T0));
      out.push(await store.appendAudit('m', 'origin: #SUM# in #CALLS#', T0, merge('api-admit:2', 1)));
      out.push(await store.readAudit('m', 10, T0));
      out.push(await failure(() => store.appendAudit('m', 'x', T0, merge('', 1))));
      out.push(await failure(() => store.appendAudit('m', 'x', T0, merge('a\tb', 1))));
      out.push(await failure(() => store.appendAudit('m', 'x', T0, merge('t', -1))));
      out.push(await failure(() => store.appendAudit('m', 'x', T0, merge('t', 1.5))));
      return out;
    });
    expect(answers.slice(0, 3)).toEqual([{ kept: 1, merged: false }, { kept: 0, merged: true }, { kept: 0, merged: true }]);
    expect(answers[3]).toEqual(['origin: 7 in 3 (last)']);
    expect(answers[7]).toEqual(['origin: 1 in 1', 'otto paused', 'origin: 5 in 1', 'origin: 7 in 3 (last)']);
    expect(answers.slice(8).every((a) => typeof a === 'string' && a.startsWith('argument: '))).toBe(true);
  });

  it('survives a reset of the queue, which empties the line only', async () => {
    await expectSameOnEveryStore(stores, async (store) => {
      await store.join('r', T0, POLICY);
      await store.appendAudit('r', entry(1), T0);
      const reset = await store.reset('r', T0 + 1000, POLICY);
      return [reset.applied, await store.readAudit('r', 5, T0 + 2000)];
    });
  });

  it('lives AUDIT_KEEP_MS after its last entry (Redis: the key\'s expiry; memory: the same rule)', async () => {
    const prefix = `wr-ttl${Date.now() % 100000}`;
    const redis = stores.redis(prefix);
    await redis.appendAudit('t', entry(1), T0);
    const ttl = await stores.connection().pttl(`${prefix}:{t}:audit`);
    expect(ttl).toBeGreaterThan(AUDIT_KEEP_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(AUDIT_KEEP_MS);
    const memory = new MemoryQueueStore();
    await memory.appendAudit('t', entry(1), T0);
    await memory.appendAudit('t', entry(2), T0 + 1000);
    expect(await memory.readAudit('t', 5, T0 + 1000 + AUDIT_KEEP_MS - 1)).toHaveLength(2);
    expect(await memory.readAudit('t', 5, T0 + 1000 + AUDIT_KEEP_MS)).toEqual([]);
  });

  it('readAudit gives a window of the trail, oldest first', async () => {
    for (const store of [stores.memory(), stores.upstash(), stores.redis()] as QueueStore[]) {
      for (let n = 1; n <= 5; n++) await store.appendAudit('w', entry(n), T0 + n * 1000);
      const window = await readAudit(store, 'w', T0 + 2000, T0 + 5000);
      expect(window.map((e) => e.change)).toEqual(['Let 2 in.', 'Let 3 in.', 'Let 4 in.']);
      expect(window[0]).toMatchObject({ actor: 'otto', role: 'operator', client: '203.0.113.9', action: 'admit', after: { admitted: 2 } });
    }
  });

  it('costs an append 4 billed commands (a merged one 5) and a read 2, and a visitor\'s join nothing more', async () => {
    const direct = stores.connection();
    const store = stores.redis();
    const measure = async (call: () => Promise<unknown>): Promise<{ scripts: number; billed: number }> => {
      await direct.config('RESETSTAT');
      await call();
      return parseCommandstats(await direct.info('commandstats'), new Set(['config', 'info']));
    };
    // Loaded first, so that a NOSCRIPT fallback is not counted.
    await store.appendAudit('c', entry(1), T0);
    await store.readAudit('c', 1, T0);
    await store.join('c', T0, POLICY);
    expect(await measure(() => store.appendAudit('c', entry(2), T0))).toEqual({ scripts: 1, billed: 4 });
    // The origin's admits: the first of a minute 5 (GET, LPUSH, SET, PEXPIRE), the others 5 (GET, LSET, SET, PEXPIRE).
    expect(await measure(() => store.appendAudit('c', entry(3), T0, { tag: 'api-admit:9', add: 1 }))).toEqual({ scripts: 1, billed: 5 });
    expect(await measure(() => store.appendAudit('c', entry(3), T0, { tag: 'api-admit:9', add: 1 }))).toEqual({ scripts: 1, billed: 5 });
    expect(await measure(() => store.readAudit('c', 20, T0))).toEqual({ scripts: 1, billed: 2 });
    const joinBefore = await measure(() => store.join('c', T0 + 1, POLICY));
    for (let n = 0; n < 3; n++) await store.appendAudit('c', entry(n), T0);
    expect(await measure(() => store.join('c', T0 + 2, POLICY))).toEqual(joinBefore);
  });
});

describe('the audit trail on Redis Cluster', () => {
  let cluster: Awaited<ReturnType<typeof startRedisCluster>>;
  let conn: RedisConnection;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    conn = connectRedis({ urls: cluster.urls, cluster: true }, { timeoutMs: 2_000, retries: 1 });
    expect(await waitUntilReady(conn, 10_000)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    conn?.disconnect();
    await cluster?.stop();
  });

  it('answers as the in-memory store does, the trail and its merge key in the queue\'s one slot (a cross-slot script would fail), for queues in several slots', async () => {
    const run = async (store: QueueStore, queue: string): Promise<unknown[]> => [
      await store.appendAudit(queue, entry(1), T0),
      await store.appendAudit(queue, 'origin: #SUM# in #CALLS#', T0, { tag: 'api-admit:1', add: 2 }),
      await store.appendAudit(queue, 'origin: #SUM# in #CALLS#', T0, { tag: 'api-admit:1', add: 3 }),
      await store.readAudit(queue, 10, T0),
    ];
    const redis = createRedisQueueStore({ redis: conn, keyPrefix: `wrc-${Date.now() % 100000}` });
    // Queue names whose hash tags fall in different slots (most on different nodes of three).
    for (const queue of ['alpha', 'beta', 'gamma', 'delta']) expect(await run(redis, queue)).toEqual(await run(new MemoryQueueStore(), queue));
  });
});
