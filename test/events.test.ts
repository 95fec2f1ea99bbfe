/**
 * Scheduled events and the random method through the handler, with an injected clock and seeded
 * randomness, on the in-memory store and on the real store (redis-server behind the Upstash REST
 * bridge, through @upstash/redis): the pre-queue forms before the start, the shuffle at the start
 * is a permutation that differs from arrival order, the start admits by the new order, the end
 * closes or opens the gate, and random draws are spread across the visitors still polling.
 */
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets, type Config } from '../src/core/config';
import { admissionPolicy, createHandler, type Handler } from '../src/core/handler';
import type { QueueStore } from '../src/core/ports';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { BASE_SECRETS, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, payloadOf, RecordingOrigin, source } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { seededRandom } from './support/seeded-random';

const SITE = 'https://shop.example';
const CLIENT = { address: '192.0.2.44', pop: 'TST' };
const START = Date.UTC(2026, 10, 22, 12, 10, 0);
const END = Date.UTC(2026, 10, 22, 13, 0, 0);

interface Rig {
  handler: Handler;
  config: Config;
  store: FaultyStore;
  origin: RecordingOrigin;
  clock: ManualClock;
}

let counter = 0;

function rig(makeStore: () => QueueStore, settings: Record<string, string>, clock = new ManualClock(), seed = 42): Rig {
  const store = new FaultyStore(makeStore());
  const origin = new RecordingOrigin();
  // Each rig gets a queue of its own, so rigs on one Redis do not share counters.
  const config = parseConfig(source({ ...BASE_SETTINGS, queue_name: `ev${++counter}`, ...settings }));
  const random = seededRandom(seed);
  const handler = createHandler({
    config,
    secrets: parseSecrets(source(BASE_SECRETS)),
    store,
    origin,
    logger: new MemoryLogger(),
    clock,
    cache: new MemoryStateCache(clock),
    randomSeed: () => Math.floor(random() * 2 ** 48),
  });
  return { handler, config, store, origin, clock };
}

/** A browser: keeps its cookie, asks for pages or for the status JSON. */
class Visitor {
  cookie: string | undefined;
  constructor(
    private readonly r: Rig,
    readonly arrival: number,
  ) {}
  private headers(): Record<string, string> {
    return this.cookie === undefined ? {} : { cookie: `waiting_room=${this.cookie}` };
  }
  async visit(path = '/'): Promise<Response> {
    const response = await this.r.handler(new Request(`${SITE}${path}`, { headers: this.headers() }), CLIENT);
    this.cookie = cookieFrom(response) ?? this.cookie;
    return response;
  }
  async status(): Promise<Record<string, unknown>> {
    const response = await this.r.handler(new Request(`${SITE}/__wr/status?queue=${this.r.config.queueName}`, { headers: this.headers() }), CLIENT);
    this.cookie = cookieFrom(response) ?? this.cookie;
    return (await response.json()) as Record<string, unknown>;
  }
  get claims(): Record<string, unknown> {
    return payloadOf(this.cookie ?? '..');
  }
}

/** Spearman's rank correlation of two orderings of the same n items. */
function spearman(a: readonly number[], b: readonly number[]): number {
  const n = a.length;
  let d2 = 0;
  for (let i = 0; i < n; i++) d2 += (a[i]! - b[i]!) ** 2;
  return 1 - (6 * d2) / (n * (n * n - 1));
}

type StoreKind = { name: string; make: () => QueueStore };

const memory: StoreKind = { name: 'memory store', make: () => new MemoryQueueStore() };
let redisServer: RedisServer | undefined;
let bridge: UpstashBridge | undefined;
let shared: UpstashQueueStore | undefined;
const redisStore: StoreKind = { name: 'real store (redis-server)', make: () => shared! };

beforeAll(async () => {
  redisServer = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: redisServer.url, token: 'events-test-token' });
  shared = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: 'events-test-token', retries: 0 })) });
});
afterAll(async () => {
  await bridge?.close();
  await redisServer?.stop();
});

describe.each([memory, redisStore])('a scheduled event on the $name', (kind) => {
  // Visitors' pages refresh their ticket while they wait; a test that jumps ahead keeps tickets long enough.
  const eventSettings = { event_start: new Date(START).toISOString(), event_end: new Date(END).toISOString(), queue_timeout_seconds: '3600' };

  it('forms a pre-queue before the start: pre-queue page, tickets taken, nobody admitted', async () => {
    const r = rig(kind.make, { ...eventSettings, admit_per_period: '100', admit_period_seconds: '1' });
    const visitors = Array.from({ length: 30 }, (_, i) => new Visitor(r, i + 1));
    for (const v of visitors) {
      const response = await v.visit('/');
      expect(response.status).toBe(200);
      const html = await response.text();
      expect(html).toContain('The line opens at 12:10');
      expect(html).toContain('data-state="prequeue"');
      expect(response.headers.get('refresh')).not.toBeNull();
    }
    expect(visitors.map((v) => v.claims['t'])).toEqual(visitors.map((v) => v.arrival));
    // Time passes, still before the start: polls cost nothing and admit nobody, even at 100 a second.
    r.clock.advance(5 * 60_000);
    const callsBefore = r.store.calls;
    for (const v of visitors) expect(await v.status()).toMatchObject({ state: 'prequeue', starts_in_seconds: 300, order: 'shuffle' });
    expect(r.store.calls).toBe(callsBefore);
    expect(r.origin.requests).toHaveLength(0);
    const admitted = await r.store.admit(r.config.queueName, 10, r.clock.now(), admissionPolicy(r.config));
    expect(admitted.admitted).toBe(0);
    expect(admitted.cursor).toBe(0);
    // Programs get the same in JSON, with when to come back.
    const json = await r.handler(new Request(`${SITE}/`, { headers: { accept: 'application/json', cookie: `waiting_room=${visitors[0]!.cookie}` } }), CLIENT);
    expect(json.headers.get('retry-after')).not.toBeNull();
    expect(await json.json()).toMatchObject({ status: 'prequeue', ticket: 1, starts_at: new Date(START).toISOString() });
  });

  it('shuffles the pre-queue at the start into a permutation that differs from arrival, and admits by it', async () => {
    const r = rig(kind.make, eventSettings);
    const visitors = Array.from({ length: 120 }, (_, i) => new Visitor(r, i + 1));
    for (const v of visitors) await v.visit('/');
    r.clock.ms = START + 1500;
    const places: number[] = [];
    for (const v of visitors) {
      const s = await v.status();
      expect(s['state']).toBe('waiting');
      places.push(s['place'] as number);
    }
    // Every visitor has exactly one place, and every place 1..120 one visitor.
    expect([...places].sort((a, b) => a - b)).toEqual(visitors.map((v) => v.arrival));
    // The order is not arrival order: few fixed points, no rank correlation to speak of.
    expect(places.filter((p, i) => p === i + 1).length).toBeLessThan(6);
    expect(Math.abs(spearman(places, visitors.map((v) => v.arrival)))).toBeLessThan(0.3);
    // A visitor who arrives after the start queues behind the whole pre-queue.
    const late = new Visitor(r, 121);
    await late.visit('/');
    expect((await late.status())['place']).toBe(121);
    // Letting 40 in admits exactly the visitors holding places 1..40.
    await r.store.admit(r.config.queueName, 40, r.clock.now(), admissionPolicy(r.config));
    const through: number[] = [];
    for (const [i, v] of visitors.entries()) {
      const before = r.origin.requests.length;
      await v.visit('/');
      if (r.origin.requests.length > before) through.push(places[i]!);
    }
    expect(through.sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  it('keeps arrival order when configured, and fills capacity by it at the start', async () => {
    const r = rig(kind.make, { ...eventSettings, event_order: 'arrival', max_active: '25' });
    const visitors = Array.from({ length: 60 }, (_, i) => new Visitor(r, i + 1));
    for (const v of visitors) await v.visit('/');
    expect(r.origin.requests).toHaveLength(0);
    r.clock.ms = START;
    const through: number[] = [];
    for (const v of visitors) {
      const before = r.origin.requests.length;
      await v.visit('/');
      if (r.origin.requests.length > before) through.push(v.arrival);
    }
    expect(through).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
  });

  it('computes the same places on every POP from the frozen seed', async () => {
    const popA = rig(kind.make, eventSettings, new ManualClock(), 1);
    // A second POP: the same queue and store, a cache and a random source of its own.
    const popB = createHandler({
      config: popA.config,
      secrets: parseSecrets(source(BASE_SECRETS)),
      store: popA.store,
      origin: new RecordingOrigin(),
      logger: new MemoryLogger(),
      clock: popA.clock,
      cache: new MemoryStateCache(popA.clock),
      randomSeed: () => 7,
    });
    const visitors = Array.from({ length: 40 }, (_, i) => new Visitor(popA, i + 1));
    for (const v of visitors) await v.visit('/');
    popA.clock.ms = START + 10;
    const places = new Set<unknown>();
    for (const v of visitors) {
      const a = await v.status();
      const response = await popB(new Request(`${SITE}/__wr/status?queue=${popA.config.queueName}`, { headers: { cookie: `waiting_room=${v.cookie}` } }), CLIENT);
      expect(((await response.json()) as Record<string, unknown>)['place']).toBe(a['place']);
      places.add(a['place']);
    }
    expect(places.size).toBe(40);
  });

  it('after the end shows "event over" to those not admitted, keeps admitted sessions, and can let everyone through', async () => {
    const r = rig(kind.make, { ...eventSettings, event_order: 'arrival' });
    const inside = new Visitor(r, 1);
    const outside = new Visitor(r, 2);
    await inside.visit('/');
    await outside.visit('/');
    r.clock.ms = END - 60_000;
    await r.store.admit(r.config.queueName, 1, r.clock.now(), admissionPolicy(r.config));
    await inside.visit('/');
    expect(inside.claims['k']).toBe('a');
    r.clock.ms = END + 1000;
    const over = await outside.visit('/');
    expect(over.status).toBe(410);
    expect(await over.text()).toContain('This event has ended');
    expect(await outside.status()).toMatchObject({ state: 'over' });
    const newcomer = await r.handler(new Request(`${SITE}/`, { headers: { accept: 'application/json' } }), CLIENT);
    expect(newcomer.status).toBe(410);
    expect(await newcomer.json()).toMatchObject({ status: 'over' });
    const before = r.origin.requests.length;
    expect((await inside.visit('/')).status).toBe(200);
    expect(r.origin.requests.length).toBe(before + 1);

    const open = rig(kind.make, { ...eventSettings, event_after: 'pass' }, new ManualClock(END + 5000));
    const calls = open.store.calls;
    const response = await open.handler(new Request(`${SITE}/`), CLIENT);
    expect(response.status).toBe(200);
    expect(open.origin.requests).toHaveLength(1);
    expect(open.store.calls).toBe(calls);
  });
});

describe.each([memory, redisStore])('the random method on the $name', (kind) => {
  it('draws among the visitors still polling, admits each once, and ignores arrival order', async () => {
    const r = rig(kind.make, { queue_method: 'random', admit_per_period: '3', admit_period_seconds: '10', refresh_seconds: '5' }, new ManualClock(), 99);
    // The first period's step runs at the first join: the first few walk in. Then 60 wait.
    const visitors = Array.from({ length: 60 }, (_, i) => new Visitor(r, i + 1));
    for (const v of visitors) await v.visit('/');
    const order: number[] = [];
    const admittedOnce = new Map<number, number>();
    for (const v of visitors) if (v.claims['k'] === 'a') order.push(v.arrival);
    // Ten of them stop polling: they must never be drawn.
    const gone = new Set(visitors.slice(20, 30).map((v) => v.arrival));
    for (let round = 0; round < 40 && order.length < 50; round++) {
      r.clock.advance(5000);
      for (const v of visitors) {
        if (gone.has(v.arrival) || v.claims['k'] === 'a') continue;
        const s = await v.status();
        if (s['state'] === 'admitted') {
          order.push(v.arrival);
          admittedOnce.set(v.arrival, (admittedOnce.get(v.arrival) ?? 0) + 1);
        } else {
          expect(s).toMatchObject({ state: 'waiting', method: 'random', place: null });
          expect(s['in_draw']).toBeGreaterThan(0);
        }
      }
    }
    expect(order).toHaveLength(50);
    expect(new Set(order).size).toBe(50);
    for (const arrival of order) expect(gone.has(arrival)).toBe(false);
    for (const count of admittedOnce.values()) expect(count).toBe(1);
    // Drawn, not called in order: the admission order is far from arrival order.
    const arrivalsInOrder = [...order].sort((a, b) => a - b);
    expect(order).not.toEqual(arrivalsInOrder);
    const ranks = order.map((a) => arrivalsInOrder.indexOf(a) + 1);
    expect(Math.abs(spearman(ranks, ranks.map((_, i) => i + 1)))).toBeLessThan(0.5);
  });
});
