/**
 * Webhooks in the core (src/core/webhooks.ts, webhook-targets.ts): the signature a receiver checks,
 * the `webhooks` setting's errors, the events found in the states the store returns (injected
 * clock), deliveries retried with backoff until the receiver takes them, and the billed cost of a
 * visitor's join, poll and claim with webhooks on, measured against a real redis-server.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, parseSecrets, type Config } from '../src/core/config';
import type { AdmissionPolicy, QueueState, QueueStore, WebhookSender } from '../src/core/ports';
import { controlEvents, createWebhooks, WEBHOOK_EVENTS, retryDelayMs, signatureHeader, STALL_MS, stateEvents, verifySignature, type LineMemory } from '../src/core/webhooks';
import { startUpstashBridge } from '../src/node/upstash-bridge';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { billedCommands } from './support/command-stats';
import { BASE_SECRETS, ManualClock, MemoryLogger, source } from './support/fixtures';
import { startRedisServer } from './support/redis-server';

const SECRET = 'whsec-test-0123456789abcdefghijklmnopqrstuv';

describe('the signature', () => {
  it('is the HMAC-SHA256 of "<t>.<body>" in hex, as node:crypto makes it', async () => {
    const body = '{"id":"x","type":"queue.reset"}';
    const expected = createHmac('sha256', SECRET).update(`1700000000.${body}`).digest('hex');
    expect(await signatureHeader(SECRET, 1_700_000_000, body)).toBe(`t=1700000000,v1=${expected}`);
  });

  it('verifies a fresh delivery and refuses a replay, a changed body, another key and a malformed header', async () => {
    const body = '{"a":1}';
    const header = await signatureHeader(SECRET, 1_000_000, body);
    expect(await verifySignature(SECRET, header, body, 1_000_100)).toEqual({ ok: true, timestamp: 1_000_000 });
    expect(await verifySignature(SECRET, header, body, 1_000_301)).toEqual({ ok: false, reason: 'stale' });
    expect(await verifySignature(SECRET, header, '{"a":2}', 1_000_000)).toEqual({ ok: false, reason: 'bad_signature' });
    expect(await verifySignature(`${SECRET}x`, header, body, 1_000_000)).toEqual({ ok: false, reason: 'bad_signature' });
    // The timestamp is signed too: moving it forward to pass the window breaks the signature.
    expect(await verifySignature(SECRET, header.replace('t=1000000', 't=1000290'), body, 1_000_300)).toEqual({ ok: false, reason: 'bad_signature' });
    for (const bad of [undefined, '', 'v1=00', `t=1,v1=${'g'.repeat(64)}`, `${header},extra`]) {
      expect(await verifySignature(SECRET, bad, body, 1_000_000)).toEqual({ ok: false, reason: 'malformed' });
    }
  });
});

describe('the webhooks setting and its secret', () => {
  const problems = (webhooks: string): string[] => {
    try {
      parseConfig(source({ webhooks }));
      return [];
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      return error.problems.map((p) => `${p.key}: ${p.message}`);
    }
  };

  it('takes URLs and backends with their events', () => {
    const config = parseConfig(source({ webhooks: JSON.stringify([{ name: 'ops', url: 'https://hooks.example/wr', backend: 'hooks', path: '/wr?x=1', events: ['switch.changed', 'line.drained'] }, { name: 'all', url: 'http://127.0.0.1:9/', events: ['*'], queues: ['sale'] }]) }));
    expect(config.webhooks[0]).toEqual({ name: 'ops', url: 'https://hooks.example/wr', backend: 'hooks', path: '/wr?x=1', events: ['switch.changed', 'line.drained'], queues: [] });
    expect(config.webhooks[1]!.events).toHaveLength(9);
    expect(parseConfig(source({})).webhooks).toEqual([]);
  });

  it('names every mistake by its place', () => {
    expect(problems('{')).toEqual([expect.stringMatching(/^webhooks: must be JSON/)]);
    expect(problems('{}')).toEqual([expect.stringMatching(/^webhooks: must be a JSON array/)]);
    expect(
      problems(
        JSON.stringify([
          { name: 'Bad Name', url: 'ftp://x', events: ['switch.change'] },
          { name: 'b', events: [] },
          { name: 'c', url: 'https://user:pw@x.example/', events: ['*'], colour: 'red' },
          { name: 'c', path: '/x', events: ['*'] },
        ]),
      ),
    ).toEqual([
      'webhooks[0].name: must be 1-32 of a-z, 0-9, _ and -',
      'webhooks[0].url: must be an http:// or https:// URL without credentials (the request is signed instead)',
      expect.stringMatching(/^webhooks\[0\]\.events\[0\]: is not an event; one of switch\.changed/),
      'webhooks[1]: needs "url" (the Node host) or "backend" with "path" (Fastly), or both',
      expect.stringMatching(/^webhooks\[1\]\.events: must be a non-empty array/),
      expect.stringMatching(/^webhooks\[2\]\.colour: is not a webhook field/),
      'webhooks[2].url: must be an http:// or https:// URL without credentials (the request is signed instead)',
      'webhooks[3].name: repeats the name c',
      'webhooks[3].path: goes with "backend" (on Fastly); on the Node host put the path in "url"',
      'webhooks[3]: needs "url" (the Node host) or "backend" with "path" (Fastly), or both',
    ]);
  });

  it('refuses a short or guessable webhook_secret, or one that is another secret', () => {
    const refused = (value: string): string | undefined => {
      try {
        parseSecrets(source({ ...BASE_SECRETS, webhook_secret: value }));
        return undefined;
      } catch (error) {
        return (error as ConfigError).problems.find((p) => p.key === 'webhook_secret')?.message;
      }
    };
    expect(refused('short-secret')).toMatch(/at least 32/);
    expect(refused('a'.repeat(40))).toBeDefined();
    expect(refused(`${BASE_SECRETS['signing_keys']!.slice(3)}`)).toMatch(/signing key/);
    expect(refused(SECRET)).toBeUndefined();
  });
});

const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);
const CONFIG = parseConfig(source({ queue_name: 'sale' }));
const state = (over: Partial<QueueState>): QueueState => ({
  tail: 0,
  cursor: 0,
  paused: false,
  maxActive: 0,
  maxNewPerMinute: 0,
  active: 0,
  admittedLastMinute: 0,
  admittedLast5Minutes: 0,
  eventSize: 0,
  eventSeed: 0,
  waiting: 0,
  epoch: 0,
  generation: 7,
  ...over,
});

/** Feeds states one after another, as one POP's looks, and returns the types found at each. */
function looks(config: Readonly<Config>, steps: readonly [number, Partial<QueueState>][]): string[][] {
  let memory: LineMemory | undefined;
  return steps.map(([atMs, over]) => {
    const seen = stateEvents('sale', config, state(over), memory, atMs);
    memory = seen.memory;
    return seen.found.map((f) => f.type);
  });
}

describe('events found in the states the store returns', () => {
  it('the line drained: once people waited and none do, not after a reset, not for a line never seen', () => {
    expect(looks(CONFIG, [[T0, { tail: 10, cursor: 4 }], [T0 + 1000, { tail: 12, cursor: 12 }], [T0 + 2000, { tail: 12, cursor: 12 }]])).toEqual([[], ['line.drained'], []]);
    expect(looks(CONFIG, [[T0, { tail: 10, cursor: 4 }], [T0 + 1000, { tail: 10, cursor: 10, epoch: T0 + 500 }]])).toEqual([[], []]);
    expect(looks(CONFIG, [[T0, { tail: 10, cursor: 10 }]])).toEqual([[]]);
  });

  it('the drained event of one line has a guard on the last ticket seen waiting and an id from the state', () => {
    let memory: LineMemory | undefined;
    memory = stateEvents('sale', CONFIG, state({ tail: 10, cursor: 4 }), memory, T0).memory;
    const found = stateEvents('sale', CONFIG, state({ tail: 12, cursor: 12 }), memory, T0 + 1).found;
    expect(found).toEqual([{ type: 'line.drained', id: 'sale:line.drained:7:0:12', details: { tail: 12, cursor: 12 }, guard: { name: 'drained', above: 10, set: 12 } }]);
  });

  it(`admission stalled: people wait and the cursor stood still for ${STALL_MS / 60_000} minutes, unless paused or held`, () => {
    const waiting = { tail: 10, cursor: 4 };
    expect(looks(CONFIG, [[T0, waiting], [T0 + STALL_MS - 1, waiting], [T0 + STALL_MS, waiting]])).toEqual([[], [], ['admission.stalled']]);
    // The cursor moved meanwhile: the clock starts again.
    expect(looks(CONFIG, [[T0, waiting], [T0 + 60_000, { tail: 11, cursor: 5 }], [T0 + STALL_MS, { tail: 11, cursor: 5 }]])).toEqual([[], [], []]);
    expect(looks(CONFIG, [[T0, waiting], [T0 + STALL_MS, { ...waiting, paused: true }]])).toEqual([[], []]);
    expect(looks(CONFIG, [[T0, waiting], [T0 + STALL_MS, { ...waiting, switch: 'hold', paused: true }]])).toEqual([[], []]);
    // Someone was let in over the last five minutes (capacity mode's claims, say): no stall.
    expect(looks(CONFIG, [[T0, waiting], [T0 + STALL_MS, { ...waiting, admittedLast5Minutes: 2 }]])).toEqual([[], []]);
  });

  it('the event opened and closed, told within the hour after, with ids every POP makes alike', () => {
    const event = parseConfig(source({ queue_name: 'sale', event_start: new Date(T0).toISOString(), event_end: new Date(T0 + 7_200_000).toISOString() }));
    expect(stateEvents('sale', event, state({}), undefined, T0 - 1).found).toEqual([]);
    expect(stateEvents('sale', event, state({ eventSize: 40 }), undefined, T0 + 5).found.map((f) => f.id)).toEqual([`sale:event.opened:${T0}`]);
    expect(stateEvents('sale', event, state({}), undefined, T0 + 3_600_000).found).toEqual([]);
    expect(stateEvents('sale', event, state({}), undefined, T0 + 7_200_000).found.map((f) => f.id)).toEqual([`sale:event.closed:${T0 + 7_200_000}`]);
  });

  it('the store lost its state: a new generation, or what the stats say', () => {
    let memory = stateEvents('sale', CONFIG, state({ generation: 7 }), undefined, T0).memory;
    expect(stateEvents('sale', CONFIG, state({ generation: 9 }), memory, T0 + 1).found.map((f) => f.id)).toEqual(['sale:store.state_lost:9']);
    memory = undefined;
    const stats = { ...state({ generation: 9 }), lostState: { atMs: T0, restored: ['hold' as const] } };
    expect(stateEvents('sale', CONFIG, stats, memory, T0 + 1).found).toEqual([
      { type: 'store.state_lost', id: 'sale:store.state_lost:9', details: { at: new Date(T0).toISOString(), restored: ['hold'] } },
    ]);
  });

  it('an operator\'s switch or pause is an event only when it changed something', () => {
    const before = state({ paused: false });
    expect(controlEvents('sale', { switch: 'hold' }, before, state({ switch: 'hold', paused: true }), T0).map((f) => [f.type, f.details])).toEqual([['switch.changed', { from: 'normal', to: 'hold' }]]);
    expect(controlEvents('sale', { switch: 'hold' }, state({ switch: 'hold', paused: true }), state({ switch: 'hold', paused: true }), T0)).toEqual([]);
    expect(controlEvents('sale', { paused: true }, before, state({ paused: true }), T0).map((f) => f.type)).toEqual(['queue.paused']);
    expect(controlEvents('sale', { paused: false }, before, state({}), T0)).toEqual([]);
    expect(controlEvents('sale', { paused: false }, state({ paused: true }), state({}), T0).map((f) => f.type)).toEqual(['queue.resumed']);
    // The state before could not be read: the change is told all the same.
    expect(controlEvents('sale', { switch: 'open' }, undefined, state({ switch: 'open' }), T0).map((f) => f.details)).toEqual([{ from: null, to: 'open' }]);
  });
});

describe('deliveries', () => {
  const RATE: AdmissionPolicy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 10_000 };

  it('are retried with backoff until the receiver takes them, each signed, the same id every time', async () => {
    const clock = new ManualClock(T0);
    const inner = new MemoryQueueStore();
    const received: { headers: Record<string, string>; body: string }[] = [];
    let failures = 2;
    const sender: WebhookSender = {
      async send(_target, body, headers) {
        received.push({ headers: { ...headers }, body });
        if (failures > 0) {
          failures -= 1;
          return 503;
        }
        return 204;
      },
    };
    const work: Promise<void>[] = [];
    const logger = new MemoryLogger();
    const hooks = createWebhooks({
      targets: [{ name: 'ops', url: 'http://receiver.test/', events: ['queue.reset'], queues: [] }],
      configs: new Map([['sale', CONFIG]]),
      outbox: inner.outbox,
      sender,
      secret: async () => SECRET,
      cache: new MemoryStateCache(clock),
      clock,
      logger,
      defer: (w) => work.push(w()),
      storeTimeoutMs: 1_000,
    });
    const store: QueueStore = hooks.watch(inner);
    await store.join('sale', clock.now(), RATE);
    const reset = await store.reset('sale', clock.now(), RATE);
    await Promise.all(work.splice(0));
    expect(received).toHaveLength(1);
    // Due again only after its backoff: a look before then sends nothing.
    clock.advance(retryDelayMs(1) - 1);
    await store.stats('sale', clock.now(), RATE);
    await Promise.all(work.splice(0));
    expect(received).toHaveLength(1);
    clock.advance(1);
    await store.stats('sale', clock.now(), RATE);
    await Promise.all(work.splice(0));
    clock.advance(retryDelayMs(2));
    await store.poll('sale', clock.now(), RATE);
    await Promise.all(work.splice(0));
    expect(received.map((r) => r.headers['x-wr-delivery-attempt'])).toEqual(['1', '2', '3']);
    const ids = received.map((r) => r.headers['x-wr-event-id']);
    expect(new Set(ids)).toEqual(new Set([`sale:queue.reset:${reset.generation}:${reset.epoch}`]));
    for (const r of received) {
      const t = Number(/^t=(\d+)/.exec(r.headers['x-wr-signature']!)![1]);
      expect(await verifySignature(SECRET, r.headers['x-wr-signature'], r.body, t)).toMatchObject({ ok: true });
      expect(JSON.parse(r.body)).toMatchObject({ type: 'queue.reset', queue: 'sale', details: { epoch: reset.epoch } });
    }
    // Taken: nothing more is sent, however long and often one looks.
    clock.advance(3_600_000);
    await store.stats('sale', clock.now(), RATE);
    await Promise.all(work.splice(0));
    expect(received).toHaveLength(3);
    expect(logger.records.filter((r) => r.decision === 'webhook_failed')).toHaveLength(2);
  });
});

describe('billed commands of a visitor with webhooks on (real redis-server, Upstash store)', () => {
  const token = `test-token-${randomUUID()}`;
  let server: Awaited<ReturnType<typeof startRedisServer>>;
  let bridge: Awaited<ReturnType<typeof startUpstashBridge>>;
  let direct: IORedis;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: server.url, token });
    redis = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
    direct = new IORedis(server.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    direct?.disconnect();
    await bridge?.close();
    await server?.stop();
  });

  it('two POPs that see the same events record and deliver each once, under one id', async () => {
    const RATE: AdmissionPolicy = { auto: { count: 0, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 10_000 };
    const keyPrefix = `wrd-${randomUUID().slice(0, 8)}`;
    const clock = new ManualClock(T0);
    const delivered: string[] = [];
    const work: Promise<void>[] = [];
    const event = parseConfig(source({ queue_name: 'sale', event_start: new Date(T0 + 60_000).toISOString() }));
    // Two POPs: a store client and a cache each, one Redis.
    const pops = [0, 1].map(() => {
      const inner = new UpstashQueueStore({ redis, keyPrefix });
      return createWebhooks({
        targets: [{ name: 'ops', url: 'http://127.0.0.1:9/', events: WEBHOOK_EVENTS, queues: [] }],
        configs: new Map([['sale', event]]),
        outbox: inner.outbox,
        sender: { send: async (_t, _body, headers) => (delivered.push(headers['x-wr-event-id']!), 204) },
        secret: async () => SECRET,
        cache: new MemoryStateCache(clock),
        clock,
        logger: new MemoryLogger(),
        defer: (w) => work.push(w()),
        storeTimeoutMs: 1_000,
      }).watch(inner);
    });
    const both = async (call: (store: QueueStore) => Promise<unknown>): Promise<void> => {
      for (const pop of pops) await call(pop);
      await Promise.all(work.splice(0));
    };
    for (let i = 0; i < 4; i += 1) await pops[0]!.join('sale', clock.now(), RATE);
    await both((pop) => pop.poll('sale', clock.now(), RATE));
    // The event opens: both POPs see it.
    clock.advance(60_000);
    await both((pop) => pop.poll('sale', clock.now(), RATE));
    // POP 0 lets everyone in, and then each POP sees the line empty.
    await pops[0]!.admit('sale', 4, clock.now(), RATE);
    await Promise.all(work.splice(0));
    await both((pop) => pop.poll('sale', clock.now(), RATE));
    // The store forgets everything; both POPs find a new generation.
    await direct.flushall();
    clock.advance(1_000);
    await both((pop) => pop.poll('sale', clock.now(), RATE));
    await both((pop) => pop.stats('sale', clock.now(), RATE));
    const types = delivered.map((id) => id.split(':')[1]).sort();
    expect(types).toEqual(['event.opened', 'line.drained', 'store.state_lost']);
    expect(new Set(delivered).size).toBe(delivered.length);
  });

  it('join, poll and claim cost what they cost without webhooks, the work after the response included', async () => {
    const RATE: AdmissionPolicy = { auto: { count: 2, periodMs: 60_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 10_000 };
    const clock = new ManualClock(T0);
    const costs = async (watched: boolean): Promise<number[]> => {
      const inner = new UpstashQueueStore({ redis, keyPrefix: `wrw-${randomUUID().slice(0, 8)}` });
      const work: Promise<void>[] = [];
      const store = watched
        ? createWebhooks({
            targets: [{ name: 'ops', url: 'http://127.0.0.1:9/', events: WEBHOOK_EVENTS, queues: [] }],
            configs: new Map([['sale', CONFIG]]),
            outbox: inner.outbox,
            sender: { send: async () => 204 },
            secret: async () => SECRET,
            cache: new MemoryStateCache(clock),
            clock,
            logger: new MemoryLogger(),
            defer: (w) => work.push(w()),
            storeTimeoutMs: 1_000,
          }).watch(inner)
        : inner;
      const measured = (call: () => Promise<unknown>) =>
        billedCommands(direct, async () => {
          await call();
          await Promise.all(work.splice(0));
        });
      const now = clock.now();
      // Warm: the scripts loaded, a line of five with two called.
      for (let i = 0; i < 5; i += 1) await store.join('sale', now, RATE);
      await store.poll('sale', now, RATE);
      await Promise.all(work.splice(0));
      return [
        await measured(() => store.join('sale', now + 1_000, RATE)),
        await measured(() => store.poll('sale', now + 2_000, RATE)),
        await measured(() => store.poll('sale', now + 3_000, RATE)),
        await measured(() => store.claim('sale', 1, now + 4_000, RATE, 4_000)),
      ];
    };
    await costs(false); // loads every script, so no NOSCRIPT miss is counted below
    const bare = await costs(false);
    const watched = await costs(true);
    console.log(`billed commands join, poll, poll, claim: without webhooks ${bare.join(', ')}; with ${watched.join(', ')}`);
    expect(watched).toEqual(bare);
  });
});
