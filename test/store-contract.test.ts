/**
 * One contract for every QueueStore: the same suite runs against the in-memory store and against the
 * Upstash store talking to a real redis-server through the local Upstash REST bridge, so the two
 * cannot drift apart. Upstash-only promises (pinned hashes, NOSCRIPT fallback, one request per call)
 * follow the contract.
 */

import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from '@upstash/redis';
import type { RedisConfigFastly } from '@upstash/redis/fastly';
import IORedis from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AutoAdmission, QueueStore } from '../src/core/ports';
import { startUpstashBridge } from '../src/node/upstash-bridge';
import { MemoryQueueStore } from '../src/store/memory-store';
import { STORE_SCRIPTS, StoreArgumentError } from '../src/store/scripts';
import {
  StoreReplyError,
  UpstashQueueStore,
  createUpstashClientOptions,
  type UpstashScriptClient,
} from '../src/store/upstash-store';
import { startRedisServer } from './support/redis-server';

const PERIOD_MS = 1_000;
/** A period index far from 0, so period arithmetic runs on realistic epoch-ms magnitudes. */
const P = 1_700_000_000;
/** A time inside period `p`; `offset` stays within the period. */
const at = (p: number, offset = 0): number => p * PERIOD_MS + offset;
const OFF: AutoAdmission = { count: 0, periodMs: PERIOD_MS };
const every = (count: number): AutoAdmission => ({ count, periodMs: PERIOD_MS });

const randomQueue = (): string => `q-${randomUUID().slice(0, 12)}`;
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

async function joinMany(store: QueueStore, queue: string, n: number, nowMs = at(P), auto = OFF): Promise<number[]> {
  const tickets: number[] = [];
  for (let i = 0; i < n; i += 1) tickets.push((await store.join(queue, nowMs, auto)).ticket);
  return tickets;
}

/** Tickets in 1..tail that may enter now. */
async function admittedTickets(store: QueueStore, queue: string): Promise<number[]> {
  const { tail, cursor } = await store.peek(queue);
  return range(1, tail).filter((t) => t <= cursor);
}

function describeQueueStoreContract(name: string, createStore: () => QueueStore): void {
  describe(`${name}: QueueStore contract`, () => {
    describe('tickets', () => {
      it('starts a fresh queue at tail 0, cursor 0 and hands out tickets from 1', async () => {
        const store = createStore();
        const q = randomQueue();
        expect(await store.peek(q)).toEqual({ tail: 0, cursor: 0 });
        expect(await store.join(q, at(P), OFF)).toEqual({ ticket: 1, tail: 1, cursor: 0 });
        expect(await store.join(q, at(P), OFF)).toEqual({ ticket: 2, tail: 2, cursor: 0 });
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

        expect(await store.admit(q, 4)).toEqual({ tail: 10, cursor: 4, admitted: 4 });
        expect(await admittedTickets(store, q)).toEqual([1, 2, 3, 4]);

        expect(await store.admit(q, 3)).toEqual({ tail: 10, cursor: 7, admitted: 3 });
        expect(await admittedTickets(store, q)).toEqual(range(1, 7));

        expect(await store.admit(q, 100)).toEqual({ tail: 10, cursor: 10, admitted: 3 });
        expect(await store.admit(q, 1)).toEqual({ tail: 10, cursor: 10, admitted: 0 });

        // Nothing was banked by the over-large admit: later visitors wait.
        expect(await store.join(q, at(P), OFF)).toEqual({ ticket: 11, tail: 11, cursor: 10 });
        await store.join(q, at(P), OFF);
        expect(await store.admit(q, 5)).toEqual({ tail: 12, cursor: 12, admitted: 2 });
      });

      it('admits nobody on an empty queue and banks nothing for later', async () => {
        const store = createStore();
        const q = randomQueue();
        expect(await store.admit(q, 5)).toEqual({ tail: 0, cursor: 0, admitted: 0 });
        expect(await store.join(q, at(P), OFF)).toEqual({ ticket: 1, tail: 1, cursor: 0 });
      });

      it('never over-admits under concurrent admits', async () => {
        const store = createStore();
        const q = randomQueue();
        await Promise.all(Array.from({ length: 50 }, () => store.join(q, at(P), OFF)));
        const results = await Promise.all(Array.from({ length: 20 }, () => store.admit(q, 5)));
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
        expect(await store.join(q, at(P), every(5))).toEqual({ ticket: 1, tail: 1, cursor: 5 });
        expect(await store.admit(q, 3)).toEqual({ tail: 1, cursor: 5, admitted: 0 });
      });

      it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])(
        'rejects count %s and changes nothing',
        async (count) => {
          const store = createStore();
          const q = randomQueue();
          await joinMany(store, q, 3);
          await expect(store.admit(q, count)).rejects.toMatchObject({ code: 'ERR_STORE_ARGUMENT' });
          expect(await store.peek(q)).toEqual({ tail: 3, cursor: 0 });
        },
      );
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

      it('moves the cursor by count on the first call of a period only', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 10);

        expect(await store.poll(q, at(P), every(2))).toEqual({ tail: 10, cursor: 2 });
        expect(await store.poll(q, at(P, 999), every(2))).toEqual({ tail: 10, cursor: 2 });
        expect(await store.join(q, at(P, 500), every(2))).toEqual({ ticket: 11, tail: 11, cursor: 2 });

        expect(await store.poll(q, at(P + 1), every(2))).toEqual({ tail: 11, cursor: 4 });
        expect(await store.poll(q, at(P + 1, 1), every(2))).toEqual({ tail: 11, cursor: 4 });
        // Skipped periods do not add up: the next call moves by one period's count.
        expect(await store.join(q, at(P + 5), every(2))).toEqual({ ticket: 12, tail: 12, cursor: 6 });
        expect(await admittedTickets(store, q)).toEqual(range(1, 6));
      });

      it('never moves the cursor for an older period (a clock going backwards)', async () => {
        const store = createStore();
        const q = randomQueue();
        await joinMany(store, q, 10);
        expect(await store.poll(q, at(P + 5), every(2))).toEqual({ tail: 10, cursor: 2 });
        expect(await store.poll(q, at(P + 4, 999), every(2))).toEqual({ tail: 10, cursor: 2 });
        expect(await store.poll(q, at(P), every(2))).toEqual({ tail: 10, cursor: 2 });
        expect(await store.join(q, at(P + 3), every(2))).toEqual({ ticket: 11, tail: 11, cursor: 2 });
        expect(await store.poll(q, at(P + 5, 999), every(2))).toEqual({ tail: 11, cursor: 2 });
        expect(await store.poll(q, at(P + 6), every(2))).toEqual({ tail: 11, cursor: 4 });
      });

      it('banks nothing over many quiet periods: the cursor stays within count of the tail', async () => {
        const store = createStore();
        const q = randomQueue();
        expect(await store.join(q, at(P), every(3))).toEqual({ ticket: 1, tail: 1, cursor: 3 });
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
        expect(await store.poll(q, at(P + 101), every(3))).toEqual({ tail: 21, cursor: 7 });
      });

      it('moves nothing with count 0, and count 0 does not use up the period', async () => {
        const store = createStore();
        const q = randomQueue();
        for (let p = P; p < P + 20; p += 1) {
          await store.join(q, at(p), OFF);
          expect(await store.poll(q, at(p, 10), OFF)).toEqual({ tail: p - P + 1, cursor: 0 });
        }
        expect(await store.poll(q, at(P + 19, 20), every(2))).toEqual({ tail: 20, cursor: 2 });
      });

      it('keeps admitting, one period at a time, after the operator lengthens the period', async () => {
        const store = createStore();
        const q = randomQueue();
        const perSecond = { count: 2, periodMs: 1_000 };
        const perMinute = { count: 2, periodMs: 60_000 };
        expect(await store.join(q, 1_700_000_100_500, perSecond)).toEqual({ ticket: 1, tail: 1, cursor: 2 });
        await joinMany(store, q, 4, 1_700_000_100_600, perSecond);
        // Same minute as the admission that already ran: nothing more.
        expect(await store.poll(q, 1_700_000_130_000, perMinute)).toEqual({ tail: 5, cursor: 2 });
        // The next minute admits at once, even though its period index (28,333,336) is far below
        // the last per-second index (1,700,000,100).
        expect(await store.poll(q, 1_700_000_160_000, perMinute)).toEqual({ tail: 5, cursor: 4 });
        expect(await store.poll(q, 1_700_000_219_999, perMinute)).toEqual({ tail: 5, cursor: 4 });
        // And back to a short period: the next second admits.
        expect(await store.poll(q, 1_700_000_220_000, perSecond)).toEqual({ tail: 5, cursor: 6 });
      });

      it('moves the cursor exactly once for many concurrent polls in a new period', async () => {
        const store = createStore();
        const q = randomQueue();
        await Promise.all(Array.from({ length: 100 }, () => store.join(q, at(P), OFF)));

        const polls = await Promise.all(Array.from({ length: 200 }, (_, i) => store.poll(q, at(P, i), every(5))));
        expect(new Set(polls.map((s) => s.cursor))).toEqual(new Set([5]));
        expect(await store.peek(q)).toEqual({ tail: 100, cursor: 5 });

        const joins = await Promise.all(Array.from({ length: 50 }, (_, i) => store.join(q, at(P + 1, i), every(5))));
        expect(joins.map((r) => r.ticket).sort((a, b) => a - b)).toEqual(range(101, 150));
        expect(new Set(joins.map((r) => r.cursor))).toEqual(new Set([10]));
        expect(await store.peek(q)).toEqual({ tail: 150, cursor: 10 });
      });
    });

    describe('peek', () => {
      it('has no side effects', async () => {
        const store = createStore();
        const fresh = randomQueue();
        for (let i = 0; i < 3; i += 1) expect(await store.peek(fresh)).toEqual({ tail: 0, cursor: 0 });
        expect(await store.join(fresh, at(P), OFF)).toEqual({ ticket: 1, tail: 1, cursor: 0 });

        const q = randomQueue();
        await joinMany(store, q, 5);
        for (let i = 0; i < 5; i += 1) expect(await store.peek(q)).toEqual({ tail: 5, cursor: 0 });
        expect(await store.admit(q, 2)).toEqual({ tail: 5, cursor: 2, admitted: 2 });
        expect(await store.peek(q)).toEqual({ tail: 5, cursor: 2 });
        expect(await store.join(q, at(P), OFF)).toEqual({ ticket: 6, tail: 6, cursor: 2 });
      });
    });

    describe('isolation and input', () => {
      it('keeps queues apart: tickets, cursors and periods', async () => {
        const store = createStore();
        const a = randomQueue();
        const b = randomQueue();
        await joinMany(store, a, 3);
        await joinMany(store, b, 1);
        expect(await store.admit(a, 2)).toEqual({ tail: 3, cursor: 2, admitted: 2 });
        expect(await store.peek(b)).toEqual({ tail: 1, cursor: 0 });

        expect(await store.poll(a, at(P), every(1))).toEqual({ tail: 3, cursor: 3 });
        // The same period on another queue is that queue's own first call.
        expect(await store.poll(b, at(P), every(1))).toEqual({ tail: 1, cursor: 1 });
        expect(await store.join(b, at(P), every(1))).toEqual({ ticket: 2, tail: 2, cursor: 1 });
        expect(await store.peek(a)).toEqual({ tail: 3, cursor: 3 });
      });

      it.each(['', 'Bad', '-a', 'a}b', 'a{b}', 'a b', 'a'.repeat(33)])(
        'rejects the queue name %j on every method',
        async (queue) => {
          const store = createStore();
          const rejected = { code: 'ERR_STORE_ARGUMENT' };
          await expect(store.join(queue, at(P), OFF)).rejects.toMatchObject(rejected);
          await expect(store.poll(queue, at(P), OFF)).rejects.toMatchObject(rejected);
          await expect(store.admit(queue, 1)).rejects.toMatchObject(rejected);
          await expect(store.peek(queue)).rejects.toMatchObject(rejected);
        },
      );

      it('rejects bad time or automatic-admission settings and changes nothing', async () => {
        const store = createStore();
        const q = randomQueue();
        const bad: Array<[number, AutoAdmission]> = [
          [Number.NaN, OFF],
          [-1, OFF],
          [Number.POSITIVE_INFINITY, OFF],
          [at(P), { count: -1, periodMs: PERIOD_MS }],
          [at(P), { count: 1.5, periodMs: PERIOD_MS }],
          [at(P), { count: 2, periodMs: 0 }],
          [at(P), { count: 2, periodMs: 2.5 }],
        ];
        for (const [nowMs, auto] of bad) {
          await expect(store.join(q, nowMs, auto)).rejects.toBeInstanceOf(StoreArgumentError);
          await expect(store.poll(q, nowMs, auto)).rejects.toBeInstanceOf(StoreArgumentError);
        }
        expect(await store.peek(q)).toEqual({ tail: 0, cursor: 0 });
        // The rejected calls did not use up period P either.
        expect(await store.join(q, at(P), every(2))).toEqual({ ticket: 1, tail: 1, cursor: 2 });
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

  describe('scripts', () => {
    it('pins each SHA-1 to node:crypto and to SCRIPT LOAD through the bridge', async () => {
      expect(STORE_SCRIPTS.map((s) => s.name).sort()).toEqual(['admit', 'join', 'peek', 'poll']);
      for (const script of STORE_SCRIPTS) {
        expect(script.sha1, script.name).toBe(createHash('sha1').update(script.text).digest('hex'));
        expect(await redis.scriptLoad(script.text), script.name).toBe(script.sha1);
      }
    });

    it('start with the allow-key-locking shebang, touch only KEYS, and read no clock or randomness', () => {
      for (const { name, text } of STORE_SCRIPTS) {
        expect(text.split('\n')[0], name).toBe('#!lua flags=allow-key-locking');
        const calls = [...text.matchAll(/redis\.call\(\s*'(\w+)'\s*,\s*([^,)]+)/g)];
        expect(calls.length, name).toBeGreaterThan(0);
        for (const [, command, firstArg] of calls) {
          expect(['GET', 'SET', 'INCR'], `${name}: ${command}`).toContain(command);
          // Either KEYS[n] itself or the `key` parameter of read_int, which is only ever given KEYS[n].
          expect(['key', 'KEYS[1]', 'KEYS[2]', 'KEYS[3]'], `${name}: ${command} ${firstArg}`).toContain(firstArg?.trim());
        }
        for (const [, arg] of text.matchAll(/read_int\(([^)]*)\)/g)) {
          expect(['key', 'KEYS[1]', 'KEYS[2]', 'KEYS[3]'], `${name}: read_int(${arg})`).toContain(arg);
        }
        expect(text, name).not.toMatch(/\bTIME\b|math\.random|RANDOMKEY|SRANDMEMBER|SPOP|no-writes/i);
      }
    });

    it('lays out keys as <prefix>:{<queue>}:tail|cursor|period under one hash tag', async () => {
      const prefix = `wrt-${randomUUID().slice(0, 8)}`;
      const store = newStore(redis, prefix);
      const q = randomQueue();
      expect(await store.peek(q)).toEqual({ tail: 0, cursor: 0 });
      expect(await direct.keys(`${prefix}:*`)).toEqual([]);
      await store.join(q, at(P, 250), every(4));
      expect((await direct.keys(`${prefix}:*`)).sort()).toEqual(
        [`${prefix}:{${q}}:cursor`, `${prefix}:{${q}}:period`, `${prefix}:{${q}}:tail`],
      );
      expect(await direct.mget(`${prefix}:{${q}}:tail`, `${prefix}:{${q}}:cursor`)).toEqual(['1', '4']);
      // The period key holds the start (ms) of the period that admitted.
      expect(await direct.get(`${prefix}:{${q}}:period`)).toBe(String(at(P)));
    });

    it('uses the prefix "wr" by default', async () => {
      const q = randomQueue();
      await new UpstashQueueStore({ redis }).join(q, at(P), OFF);
      expect(await direct.get(`wr:{${q}}:tail`)).toBe('1');
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
      await store.admit(q, 1);
      expect(requests()).toHaveLength(3);
      await store.peek(q);
      expect(requests()).toHaveLength(4);
      // Single commands go to `/`, not `/pipeline` (auto-pipelining is off).
      expect(requests().map((url) => new URL(url).pathname)).toEqual(['/', '/', '/', '/']);
      // join admitted 2, the next period's poll 1 more (capped at tail + count), admit none.
      expect(await store.peek(q)).toEqual({ tail: 1, cursor: 3 });
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

      expect(await store.join(q, at(P), OFF)).toEqual({ ticket: 1, tail: 1, cursor: 0 });
      expect(calls).toEqual([`evalsha ${join.sha1}`, `eval ${join.sha1}`]);
      expect(fetchSpy).toHaveBeenCalledTimes(2);

      expect(await store.join(q, at(P), OFF)).toEqual({ ticket: 2, tail: 2, cursor: 0 });
      expect(calls).toEqual([`evalsha ${join.sha1}`, `eval ${join.sha1}`, `evalsha ${join.sha1}`]);
      expect(fetchSpy).toHaveBeenCalledTimes(3);
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

    it('accepts integers sent as numbers or as numeric strings', async () => {
      expect(await newStore(replying(['7', 3])).join(randomQueue(), at(P), OFF)).toEqual({ ticket: 7, tail: 7, cursor: 3 });
      expect(await newStore(replying([5, '2', '1'])).admit(randomQueue(), 1)).toEqual({ tail: 5, cursor: 2, admitted: 1 });
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['an aborted request', 'Aborted'],
      ['too short', [1]],
      ['too long', [1, 2, 3]],
      ['a non-numeric string', [1, 'x']],
      ['a fraction', [1.5, 2]],
      ['a negative', [-1, 2]],
      ['an object', { result: [1, 2] }],
      ['an unsafe integer', ['99999999999999999', 1]],
    ])('throws StoreReplyError on %s', async (_label, reply) => {
      const store = newStore(replying(reply));
      await expect(store.poll(randomQueue(), at(P), OFF)).rejects.toBeInstanceOf(StoreReplyError);
      await expect(store.peek(randomQueue())).rejects.toMatchObject({ code: 'ERR_STORE_REPLY' });
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
