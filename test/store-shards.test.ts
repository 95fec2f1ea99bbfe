/**
 * One queue over two databases (`store_shards = 2`, src/store/sharded-store.ts): two real
 * redis-servers, each reached by the real @upstash/redis client through the REST bridge, under a
 * ShardedStore. The store on its own (tickets per database, exact period admission and `admit N`,
 * controls everywhere and restored after one database's flush, a database down), then through the
 * service (the visitor's database in its token, a database down never a 5xx, config errors).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, parseSecrets, upstashShardProblems } from '../src/core/config';
import { adminFigures } from '../src/core/admin-view';
import { admissionPolicy } from '../src/core/context';
import type { AdmissionPolicy, QueueStore } from '../src/core/ports';
import { rememberControls } from '../src/core/remembered-controls';
import { createService } from '../src/core/service';
import { signToken, parseKeyRing } from '../src/core/tokens';
import { waitingOf } from '../src/core/types';
import { MemoryFailureLimiter } from '../src/platform/memory-limiter';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { ShardedStore, evenShare, proportionalShares, shardKey } from '../src/store/sharded-store';
import { UpstashQueueStore } from '../src/store/upstash-store';
import { API_TOKEN, BASE_SECRETS, BASE_SETTINGS, KEY_1, ManualClock, MemoryLogger, RecordingOrigin, cookieFrom, payloadOf, source } from './support/fixtures';
import { useUpstashDatabases } from './support/upstash-databases';

const QUEUE = 'default';
const T0 = Date.UTC(2026, 10, 29, 4, 0, 0);

const databases = useUpstashDatabases(2);

/** A ShardedStore over the two databases, under a prefix of its own. */
function sharded(): { store: ShardedStore; parts: QueueStore[] } {
  const keyPrefix = `wr-${randomUUID().slice(0, 8)}`;
  const parts = databases.map((d) => new UpstashQueueStore({ redis: d.client, keyPrefix }));
  return { store: new ShardedStore(parts), parts };
}

function policy(settings: Record<string, string>): AdmissionPolicy {
  return admissionPolicy(parseConfig(source({ ...BASE_SETTINGS, store_shards: '2', ...settings })));
}

const on = (p: AdmissionPolicy, shard: number): AdmissionPolicy => ({ ...p, shard });

describe('splitting', () => {
  it('splits a count evenly, the remainder turning with the period, and by waiting with the largest remainder', () => {
    // 5 over 2: 3 + 2, then 2 + 3: exactly 5 each period.
    expect([0, 1].map((s) => evenShare(5, 2, s, 0))).toEqual([3, 2]);
    expect([0, 1].map((s) => evenShare(5, 2, s, 1))).toEqual([2, 3]);
    for (let first = 0; first < 3; first++) expect([0, 1, 2].reduce((a, s) => a + evenShare(7, 3, s, first), 0)).toBe(7);
    expect(proportionalShares(6, [7, 3])).toEqual([4, 2]);
    expect(proportionalShares(5, [1, 1])).toEqual([3, 2]);
    expect(proportionalShares(3, [0, 0])).toEqual([0, 0]);
    expect(shardKey('k', 1)).toBe('k:1');
    expect(shardKey('x'.repeat(64), 1)).toMatch(/^x{51}~[0-9a-f]{8}:1$/);
  });
});

describe('ShardedStore on two redis-servers', () => {
  it('gives each database its own tickets, and the figures summed', async () => {
    const { store } = sharded();
    const p = policy({ admit_per_period: '0' });
    const a = [await store.join(QUEUE, T0, on(p, 0)), await store.join(QUEUE, T0, on(p, 0)), await store.join(QUEUE, T0, on(p, 0))];
    const b = [await store.join(QUEUE, T0, on(p, 1)), await store.join(QUEUE, T0, on(p, 1))];
    expect(a.map((r) => r.ticket)).toEqual([1, 2, 3]);
    expect(b.map((r) => r.ticket)).toEqual([1, 2]);
    const stats = await store.stats(QUEUE, T0, p);
    expect([stats.tail, stats.cursor]).toEqual([5, 0]);
    expect(await store.peek(QUEUE)).toEqual({ tail: 5, cursor: 0 });
  });

  it('leaves the holes of ticket blocks out of the waiting count summed over both', async () => {
    const { store } = sharded();
    const p = policy({ admit_per_period: '0' });
    for (const shard of [0, 1]) {
      // A block of 10 (1-10), of which 3-10 are reported as holes on the next join (11).
      const block = await store.join(QUEUE, T0, on(p, shard), { block: { size: 10 } });
      await store.join(QUEUE, T0 + 1, on(p, shard), { block: { size: 1, holes: { epoch: block.epoch, generation: block.generation, ranges: [{ from: 3, to: 10 }] } } });
    }
    const stats = await store.stats(QUEUE, T0 + 2, p);
    expect([stats.tail, stats.cursor]).toEqual([22, 0]);
    // 1, 2 and 11 on each database hold somebody: 6 waiting, not 22.
    expect(waitingOf(stats, false)).toBe(6);
  });

  it('a retry of admit N that emptied every line replays it: the same count, replayed, nobody more let in', async () => {
    const { store, parts } = sharded();
    const p = policy({ admit_per_period: '0' });
    for (let i = 0; i < 4; i++) await store.join(QUEUE, T0, on(p, 0));
    for (let i = 0; i < 2; i++) await store.join(QUEUE, T0, on(p, 1));
    expect(await store.admit(QUEUE, 10, T0 + 1, p, 'op-all')).toMatchObject({ admitted: 6, replayed: false });
    // Every line is empty now: no database has a share, and each is asked for 0 with its key.
    const again = await store.admit(QUEUE, 10, T0 + 2, p, 'op-all');
    expect([again.admitted, again.replayed]).toEqual([6, true]);
    // A newcomer since is not let in by the retry.
    await store.join(QUEUE, T0 + 3, on(p, 0));
    expect(await store.admit(QUEUE, 10, T0 + 4, p, 'op-all')).toMatchObject({ admitted: 6, replayed: true });
    expect((await Promise.all(parts.map((s) => s.peek(QUEUE)))).map((x) => [x.tail, x.cursor])).toEqual([[5, 4], [2, 2]]);
    // A first call with nobody waiting anywhere lets in 0 and is no replay; its retry is.
    const { store: empty } = sharded();
    expect(await empty.admit(QUEUE, 3, T0, p, 'op-none')).toMatchObject({ admitted: 0, replayed: false });
    expect(await empty.admit(QUEUE, 3, T0 + 1, p, 'op-none')).toMatchObject({ admitted: 0, replayed: true });
  });

  it('admit N splits by the real visitors waiting: a database\'s holes weigh nothing', async () => {
    const { store, parts } = sharded();
    const p = policy({ admit_per_period: '0' });
    // Database 0: 1 and 52 hold somebody, 2-51 are a block's rest reported as holes. Database 1: 10 people.
    const block = await store.join(QUEUE, T0, on(p, 0), { block: { size: 51 } });
    await store.join(QUEUE, T0 + 1, on(p, 0), { block: { size: 1, holes: { epoch: block.epoch, generation: block.generation, ranges: [{ from: 2, to: 51 }] } } });
    for (let i = 0; i < 10; i++) await store.join(QUEUE, T0 + 1, on(p, 1));
    expect(await parts[0]!.peek(QUEUE)).toEqual({ tail: 52, cursor: 0, holes: [{ from: 2, to: 51 }] });
    // Summed: the 50 holes as one range above the summed cursor, as the summed state has them.
    expect(await store.peek(QUEUE)).toEqual({ tail: 62, cursor: 0, holes: [{ from: 1, to: 50 }] });
    const admitted = await store.admit(QUEUE, 6, T0 + 2, p, 'op-holes');
    expect(admitted.admitted).toBe(6);
    // 2 and 10 real visitors: 1 and 5 of the 6. Weighed by numbers (52 and 10) it would be 5 and 1,
    // database 0 running out after its 2 and the rest carried over: cursors 52 and 4.
    // (Database 0's cursor passes the holes right after the one it let in: 51.)
    expect((await Promise.all(parts.map((s) => s.peek(QUEUE)))).map((x) => x.cursor)).toEqual([51, 5]);
  });

  it('lets in exactly admit_per_period a period over both, the extra one turning between them', async () => {
    const { store, parts } = sharded();
    const p = policy({ admit_per_period: '5', admit_period_seconds: '1' });
    const start = Math.ceil(T0 / 1000) * 1000;
    for (let i = 0; i < 20; i++) for (const shard of [0, 1]) await store.join(QUEUE, start - 500, on({ ...p, auto: { ...p.auto, count: 0 } }, shard));
    const perPeriod: number[][] = [];
    for (let period = 0; period < 4; period++) {
      const at = start + period * 1000 + 10;
      for (const shard of [0, 1]) await store.poll(QUEUE, at, on(p, shard));
      perPeriod.push(await Promise.all(parts.map(async (s) => (await s.peek(QUEUE)).cursor)));
    }
    // Cumulative cursors: each period's 5 split 3/2 or 2/3, in turn.
    const steps = perPeriod.map((c, i) => c.map((v, s) => v - (i === 0 ? 0 : perPeriod[i - 1]![s]!)));
    for (const step of steps) expect(step[0]! + step[1]!).toBe(5);
    expect(new Set(steps.map((s) => s.join('/')))).toEqual(new Set(['3/2', '2/3']));
  });

  it('admit N lets in exactly N across the databases, split by who waits, and a retry with the key lets in nobody more', async () => {
    const { store, parts } = sharded();
    const p = policy({ admit_per_period: '0' });
    for (let i = 0; i < 7; i++) await store.join(QUEUE, T0, on(p, 0));
    for (let i = 0; i < 3; i++) await store.join(QUEUE, T0, on(p, 1));
    const first = await store.admit(QUEUE, 6, T0 + 1, p, 'op-1');
    expect(first.admitted).toBe(6);
    expect(first.replayed).toBe(false);
    expect((await Promise.all(parts.map((s) => s.peek(QUEUE)))).map((x) => x.cursor)).toEqual([4, 2]);
    const again = await store.admit(QUEUE, 6, T0 + 2, p, 'op-1');
    expect(again.admitted).toBe(6);
    expect(again.replayed).toBe(true);
    expect((await store.peek(QUEUE)).cursor).toBe(6);
    // More than wait: everyone waiting, never past a tail.
    const rest = await store.admit(QUEUE, 100, T0 + 3, p, 'op-2');
    expect(rest.admitted).toBe(4);
    expect(await store.peek(QUEUE)).toEqual({ tail: 10, cursor: 10 });
  });

  it('capacity mode: max_active split so that the databases together never hold more than it', async () => {
    const { store } = sharded();
    const p = policy({ max_active: '3' });
    const held = [0, 0];
    for (let i = 0; i < 5; i++) {
      for (const shard of [0, 1]) {
        const joined = await store.join(QUEUE, T0 + i, on(p, shard));
        if (joined.claimed) held[shard]! += 1;
      }
    }
    // 3 over two databases: 2 and 1 slots, walked in at their joins; everyone else waits.
    expect(held).toEqual([2, 1]);
    const stats = await store.stats(QUEUE, T0 + 10, p);
    expect([stats.maxActive, stats.active]).toEqual([3, 3]);
    // The operator raises it to 4: 2 and 2, so one more of the second database's line is let in.
    await store.control(QUEUE, { maxActive: 4 }, T0 + 20, p);
    await store.poll(QUEUE, T0 + 21, on(p, 1));
    const after = await store.stats(QUEUE, T0 + 22, p);
    expect([after.maxActive, after.active]).toEqual([4, 4]);
  });

  it('pauses and switches every database, splits runtime values exactly, refuses one below a database each', async () => {
    const { store, parts } = sharded();
    const p = policy({ admit_per_period: '4' });
    const paused = await store.control(QUEUE, { paused: true }, T0, p);
    expect(paused.paused).toBe(true);
    for (const part of parts) expect((await part.stats(QUEUE, T0, p)).paused).toBe(true);
    const hold = await store.control(QUEUE, { switch: 'hold' }, T0, p);
    expect(hold.switch).toBe('hold');
    for (const part of parts) expect((await part.stats(QUEUE, T0, p)).switch).toBe('hold');
    const rate = await store.control(QUEUE, { switch: 'normal', admitPerPeriod: 7 }, T0, p);
    expect(rate.admitPerPeriod).toBe(7);
    expect(await Promise.all(parts.map(async (s) => (await s.stats(QUEUE, T0, p)).admitPerPeriod))).toEqual([4, 3]);
    await expect(store.control(QUEUE, { admitPerPeriod: 1 }, T0, p)).rejects.toThrow(/admit_per_period 1 is below the 2 databases/);
    expect((await store.stats(QUEUE, T0, p)).admitPerPeriod).toBe(7);
  });

  it('resets every database once, the one that lost its state too, and a retry with the same epoch changes nothing', async () => {
    const { store, parts } = sharded();
    const p = policy({ admit_per_period: '0' });
    for (const shard of [0, 1, 1]) await store.join(QUEUE, T0, on(p, shard));
    await store.reset(QUEUE, T0 + 1, p);
    expect((await store.stats(QUEUE, T0 + 2, p)).epoch).toBe(T0 + 1);
    // The second database forgets everything, and a visitor joins it again.
    await databases[1]!.direct.flushall();
    await store.join(QUEUE, T0 + 3, on(p, 1));
    const read = await store.stats(QUEUE, T0 + 4, p);
    const reset = await store.reset(QUEUE, T0 + 5, p, read.epoch);
    expect(reset.applied).toBe(true);
    expect(await Promise.all(parts.map(async (x) => (await x.stats(QUEUE, T0 + 6, p)).epoch))).toEqual([T0 + 5, T0 + 5]);
    const retry = await store.reset(QUEUE, T0 + 7, p, read.epoch);
    expect(retry.applied).toBe(false);
    expect(await Promise.all(parts.map(async (x) => (await x.stats(QUEUE, T0 + 8, p)).epoch))).toEqual([T0 + 5, T0 + 5]);
  });

  it('restores the pause on a database that forgot it (FLUSHALL), from what its visitors\' calls saw', async () => {
    const { store } = sharded();
    const clock = new ManualClock(T0);
    const cache = new MemoryStateCache(clock);
    const remembered = rememberControls(store, cache, () => clock.now());
    const p = policy({ admit_per_period: '4' });
    await remembered.join(QUEUE, T0, on(p, 1));
    await remembered.control(QUEUE, { paused: true }, T0, p);
    // A visitor of the second database sees the pause, and its POP remembers it for that database.
    expect((await remembered.poll(QUEUE, T0 + 1, on(p, 1))).paused).toBe(true);
    await databases[1]!.direct.flushall();
    const after = await remembered.poll(QUEUE, T0 + 2, on(p, 1));
    expect(after.paused).toBe(true);
    expect((await store.stats(QUEUE, T0 + 3, p)).paused).toBe(true);
  });

  it('with one database down, an operator\'s call fails naming it and the other database still serves', async () => {
    const { store } = sharded();
    const p = policy({ admit_per_period: '4' });
    databases[1]!.server.pause();
    try {
      await expect(withDeadline(store.stats(QUEUE, T0, p))).rejects.toThrow(/database 2/);
      const joined = await store.join(QUEUE, T0, on(p, 0));
      expect(joined.ticket).toBe(1);
    } finally {
      databases[1]!.server.resume();
    }
  });
});

/** The bridge waits on a frozen Redis: a deadline of our own, as the handler's store timeout is. */
function withDeadline<T>(call: Promise<T>, ms = 2_000): Promise<T> {
  return Promise.race([call, new Promise<T>((_, reject) => setTimeout(() => reject(new Error('database 2 did not answer')), ms))]);
}

describe('the service over two databases', () => {
  function service(store: QueueStore, settings: Record<string, string> = {}) {
    const clock = new ManualClock(T0);
    return {
      clock,
      service: createService(source({ ...BASE_SETTINGS, store_shards: '2', admit_per_period: '0', store_timeout_ms: '15000', ...settings }), source(BASE_SECRETS), {
        store,
        origin: new RecordingOrigin(),
        logger: new MemoryLogger(),
        clock,
        cache: new MemoryStateCache(clock),
        authLimiter: new MemoryFailureLimiter(clock),
        ticketLimiter: new MemoryFailureLimiter(clock),
      }),
    };
  }
  const get = (handler: (r: Request, c: { address: string; pop: string }) => Promise<Response>, cookie?: string) =>
    handler(new Request('https://shop.example/', cookie === undefined ? {} : { headers: { cookie } }), { address: '192.0.2.1', pop: 'test' });

  it('spreads new visitors over both databases, each token naming its own (none for the first), and keeps them there', async () => {
    const { store, parts } = sharded();
    const { service: s } = service(store, { ticket_limit: '0' });
    const seen: { sh: unknown; t: unknown; cookie: string }[] = [];
    // Without ticket blocks each join picks a database at random: 40 visitors reach both.
    for (let i = 0; i < 40; i++) {
      const response = await get(s.handler);
      expect(response.status).toBe(200);
      const cookie = cookieFrom(response)!;
      const claims = payloadOf(cookie);
      seen.push({ sh: claims['sh'], t: claims['t'], cookie });
    }
    expect(new Set(seen.map((v) => v.sh))).toEqual(new Set([undefined, 1]));
    const tails = await Promise.all(parts.map(async (x) => (await x.peek(QUEUE)).tail));
    expect(tails[0]).toBe(seen.filter((v) => v.sh === undefined).length);
    expect(tails[1]).toBe(seen.filter((v) => v.sh === 1).length);
    // Tickets are unique within each database.
    for (const sh of [undefined, 1]) {
      const tickets = seen.filter((v) => v.sh === sh).map((v) => v.t);
      expect(new Set(tickets).size).toBe(tickets.length);
    }
    // A visitor of the second database keeps its ticket there on its next poll (no new ticket anywhere).
    const second = seen.find((v) => v.sh === 1)!;
    const again = await get(s.handler, `waiting_room=${second.cookie}`);
    expect(payloadOf(cookieFrom(again)!)).toMatchObject({ sh: 1, t: second.t });
    expect((await store.peek(QUEUE)).tail).toBe(40);
    // The API's figures: the sums, and each database's.
    const stats = await s.handler(new Request('https://shop.example/__wr/api/stats', { headers: { authorization: `Bearer ${API_TOKEN}` } }), { address: '192.0.2.1', pop: 'test' });
    expect(await stats.json()).toMatchObject({ tail: 40, cursor: 0, databases: [{ tail: tails[0], cursor: 0 }, { tail: tails[1], cursor: 0 }] });
    // The console shows each database's figure beside the sum.
    const figures = adminFigures(await store.stats(QUEUE, T0, policy({ admit_per_period: '0' })), parseConfig(source({ ...BASE_SETTINGS, store_shards: '2' })), T0);
    expect(figures.tail).toBe(`40 (${tails[0]} + ${tails[1]} in 2 databases)`);
  });

  it('with ticket blocks, an instance sends all its new visitors to its one database, in arrival order', async () => {
    const { store, parts } = sharded();
    const { service: s } = service(store, { ticket_limit: '0', ticket_blocks: '20', state_cache_seconds: '5' });
    const seen: { sh: unknown; t: unknown }[] = [];
    for (let i = 0; i < 30; i++) {
      const claims = payloadOf(cookieFrom(await get(s.handler))!);
      seen.push({ sh: claims['sh'], t: claims['t'] });
    }
    const home = seen[0]!.sh;
    expect(seen.every((v) => v.sh === home)).toBe(true);
    const tails = await Promise.all(parts.map(async (x) => (await x.peek(QUEUE)).tail));
    // The home database took every number; the other none.
    const [mine, other] = home === undefined ? tails : [tails[1]!, tails[0]!];
    expect(other).toBe(0);
    expect(mine).toBeGreaterThanOrEqual(30);
    const tickets = seen.map((v) => Number(v.t));
    expect(tickets).toEqual([...tickets].sort((a, b) => a - b));
    expect(new Set(tickets).size).toBe(30);
  });

  it('treats a token naming a database the queue does not have as invalid: a new ticket, no 5xx', async () => {
    const { store } = sharded();
    const { service: s } = service(store);
    const ring = parseKeyRing(`k1:${KEY_1}`);
    const now = Math.floor(T0 / 1000);
    const forged = await signToken(ring, { q: QUEUE, k: 'w', t: 1, iat: now, exp: now + 60, j: now, sh: 5 });
    const response = await get(s.handler, `waiting_room=${forged}`);
    expect(response.status).toBe(200);
    expect((await store.peek(QUEUE)).tail).toBe(1);
  });

  it('a database down gives its visitors the holding page, never a 5xx, and the other database\'s visitors are served', async () => {
    const { store } = sharded();
    // A short store timeout here only, where one database is frozen: elsewhere a busy machine's slow
    // answer is not what the tests are about.
    const { service: s } = service(store, { ticket_limit: '0', store_timeout_ms: '300' });
    const cookies: Record<string, string> = {};
    for (let i = 0; i < 30 && Object.keys(cookies).length < 2; i++) {
      const cookie = cookieFrom(await get(s.handler))!;
      cookies[String(payloadOf(cookie)['sh'] ?? 0)] ??= cookie;
    }
    databases[1]!.server.pause();
    try {
      const down = await get(s.handler, `waiting_room=${cookies['1']!}`);
      expect(down.status).toBe(200);
      expect(payloadOf(cookieFrom(down)!)).toMatchObject({ sh: 1 });
      const up = await get(s.handler, `waiting_room=${cookies['0']!}`);
      expect(up.status).toBe(200);
      expect(payloadOf(cookieFrom(up)!)['sh']).toBeUndefined();
    } finally {
      databases[1]!.server.resume();
    }
  });
});

describe('store_shards settings', () => {
  const problems = (settings: Record<string, string>) => {
    try {
      parseConfig(source({ ...BASE_SETTINGS, ...settings }));
      return [];
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      return error.problems.map((p) => `${p.key}: ${p.message}`);
    }
  };
  it('refuses what several databases cannot do, with a clear error', () => {
    expect(problems({ store_shards: '2' })).toEqual([]);
    expect(problems({ store_shards: '9' })[0]).toMatch(/^store_shards: /);
    expect(problems({ store_shards: '2', queue_method: 'random' })).toEqual([expect.stringMatching(/^store_shards: must be 1 with queue_method = random/)]);
    expect(problems({ store_shards: '2', event_start: '2026-12-01T09:00:00Z' })).toEqual([expect.stringMatching(/^store_shards: must be 1 with a scheduled event/)]);
    expect(problems({ store_shards: '2', admit_per_period: '10', adaptive_admission: 'on' })).toEqual([expect.stringMatching(/^store_shards: must be 1 with adaptive_admission/)]);
    expect(problems({ store_shards: '3', admit_per_period: '2' })).toEqual([expect.stringMatching(/^admit_per_period: must be 0 or at least 3/)]);
    expect(problems({ store_shards: '2', max_active: '1' })).toEqual([expect.stringMatching(/^max_active: must be 0 or at least 2/)]);
    expect(problems({ upstash_shard_urls: 'https://a.example,ftp://b.example' })).toEqual([expect.stringMatching(/^upstash_shard_urls: must be http\(s\) URLs/)]);
  });

  it('on Upstash, needs store_shards − 1 URLs and as many tokens, naming what disagrees', () => {
    const config = parseConfig(source({ ...BASE_SETTINGS, store_shards: '3', upstash_shard_urls: 'https://two.example, https://three.example' }));
    expect(config.upstashShardUrls).toEqual(['https://two.example', 'https://three.example']);
    const secrets = parseSecrets(source({ ...BASE_SECRETS, upstash_shard_tokens: 'token-two, token-three' }));
    expect(secrets.upstashShardTokens).toEqual(['token-two', 'token-three']);
    expect(upstashShardProblems(config, secrets.upstashShardTokens)).toEqual([]);
    expect(upstashShardProblems(config, ['token-two']).map((p) => p.key)).toEqual(['upstash_shard_tokens']);
    const fewer = parseConfig(source({ ...BASE_SETTINGS, store_shards: '3', upstash_shard_urls: 'https://two.example' }));
    expect(upstashShardProblems(fewer, secrets.upstashShardTokens)).toEqual([{ key: 'upstash_shard_urls', message: 'names 1 database, but store_shards = 3 needs 2 besides upstash_url' }]);
  });
});
