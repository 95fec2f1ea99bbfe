/**
 * session_max_seconds through the handler, with an injected clock, in rate mode and in capacity
 * mode, on the in-memory store and on the real store (redis-server behind the Upstash REST bridge,
 * through @upstash/redis): an active visitor keeps access until the maximum counted from its
 * admission, however often its token is renewed, and queues again after it.
 */
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig, parseSecrets } from '../src/core/config';
import { createHandler, type Handler } from '../src/core/handler';
import type { QueueStore } from '../src/core/ports';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { signToken } from '../src/core/tokens';
import { MemoryQueueStore } from '../src/store/memory-store';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { BASE_SECRETS, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, payloadOf, RecordingOrigin, source } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';

const SITE = 'https://shop.example';
const CLIENT = { address: '192.0.2.45', pop: 'TST' };
const TOKEN = 'session-max-test-token';

interface Rig {
  handler: Handler;
  queue: string;
  store: FaultyStore;
  clock: ManualClock;
  logger: MemoryLogger;
}

let counter = 0;

function rig(makeStore: () => QueueStore, settings: Record<string, string>): Rig {
  const store = new FaultyStore(makeStore());
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  // Each rig gets a queue of its own, so rigs on one Redis do not share counters.
  const queue = `smax${++counter}`;
  const config = parseConfig(source({ ...BASE_SETTINGS, queue_name: queue, queue_timeout_seconds: '600', ...settings }));
  const handler = createHandler({
    config,
    secrets: parseSecrets(source(BASE_SECRETS)),
    store,
    origin: new RecordingOrigin(),
    logger,
    clock,
    cache: new MemoryStateCache(clock),
  });
  return { handler, queue, store, clock, logger };
}

class Visitor {
  cookie: string | undefined;
  constructor(private readonly r: Rig) {}
  async visit(): Promise<Response> {
    const headers: Record<string, string> = this.cookie === undefined ? {} : { cookie: `waiting_room=${this.cookie}` };
    const response = await this.r.handler(new Request(`${SITE}/page`, { headers }), CLIENT);
    this.cookie = cookieFrom(response) ?? this.cookie;
    return response;
  }
  get claims(): Record<string, unknown> {
    return payloadOf(this.cookie ?? '..');
  }
}

type StoreKind = { name: string; make: () => QueueStore };
const memory: StoreKind = { name: 'memory store', make: () => new MemoryQueueStore() };
let redisServer: RedisServer | undefined;
let bridge: UpstashBridge | undefined;
let shared: UpstashQueueStore | undefined;
const redisStore: StoreKind = { name: 'real store (redis-server)', make: () => shared! };

beforeAll(async () => {
  redisServer = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: redisServer.url, token: TOKEN });
  shared = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: TOKEN, retries: 0 })) });
});
afterAll(async () => {
  await bridge?.close();
  await redisServer?.stop();
});

// One walk-in per long period (rate) or one slot (capacity): whoever comes after the first visitor
// waits, so a visitor whose session ended is held, not let straight back in.
const MODES: { mode: string; settings: Record<string, string> }[] = [
  { mode: 'rate mode', settings: { admit_per_period: '1', admit_period_seconds: '3600' } },
  { mode: 'capacity mode', settings: { max_active: '1', activity_refresh_seconds: '10' } },
];

describe.each([memory, redisStore])('session_max_seconds on the $name', (kind) => {
  describe.each(MODES)('in $mode', ({ settings }) => {
    it('keeps an active visitor in until the maximum from admission, then holds it with a new ticket', async () => {
      const r = rig(kind.make, { ...settings, session_seconds: '60', session_max_seconds: '90' });
      const v = new Visitor(r);
      expect((await v.visit()).headers.get('x-origin')).toBe('yes');
      expect(v.claims).toMatchObject({ k: 'a', t: 1 });
      // Someone waits behind: when v's session ends and the room frees, that visitor goes first.
      const behind = new Visitor(r);
      expect((await behind.visit()).headers.get('x-origin')).toBeNull();
      const admittedAt = Number(v.claims['iat']);
      expect(v.claims['s']).toBe(admittedAt);
      const renewed: unknown[] = [];
      // Active every 15 s: each renewal slides the inactivity timeout but not the maximum.
      for (let at = 15; at <= 75; at += 15) {
        r.clock.advance(15_000);
        const response = await v.visit();
        expect(response.headers.get('x-origin'), `at ${at} s`).toBe('yes');
        if (cookieFrom(response) !== undefined) renewed.push(v.claims['iat']);
        expect((await behind.visit()).headers.get('x-origin')).toBeNull();
        expect(v.claims['s']).toBe(admittedAt);
        expect(Number(v.claims['exp'])).toBeLessThanOrEqual(admittedAt + 90);
      }
      expect(renewed.length).toBeGreaterThan(0);
      // At 89 s the session still holds; at 90 s it is over although the visitor never went idle.
      r.clock.advance(14_000);
      expect((await v.visit()).headers.get('x-origin')).toBe('yes');
      r.clock.advance(1_000);
      const after = await v.visit();
      expect(after.headers.get('x-origin')).toBeNull();
      expect(after.status).toBe(200);
      expect(v.claims).toMatchObject({ k: 'w', t: 3 });
      expect(r.logger.records.some((l) => l.decision === 'waiting' && l.ticket === 3)).toBe(true);
    });

    it('a copied access token passes from any address (a bearer credential), without a store call each, until its session ends for every copy', async () => {
      const r = rig(kind.make, { ...settings, session_seconds: '60', session_max_seconds: '90' });
      const v = new Visitor(r);
      expect((await v.visit()).headers.get('x-origin')).toBe('yes');
      const copied = v.cookie!;
      const fromAddress = (i: number) => r.handler(new Request(`${SITE}/page`, { headers: { cookie: `waiting_room=${copied}` } }), { address: `198.51.100.${i}`, pop: 'TST' });
      const calls = r.store.calls;
      for (let i = 1; i <= 50; i += 1) expect((await fromAddress(i)).headers.get('x-origin'), `copy ${i}`).toBe('yes');
      // In capacity mode a copy may refresh the one slot (once per activity_refresh_seconds): never a call per copy.
      expect(r.store.calls - calls).toBeLessThanOrEqual(1);
      // Past the maximum the token is nothing: each copy is a newcomer, with a ticket of its own.
      r.clock.advance(90_000);
      for (let i = 1; i <= 5; i += 1) {
        const answer = await fromAddress(i);
        const ticket = cookieFrom(answer);
        expect(ticket, `copy ${i} after the maximum`).toBeDefined();
        expect(payloadOf(ticket!)['t'], `copy ${i} after the maximum`).not.toBe(1);
        expect(r.logger.last?.decision).not.toBe('access');
      }
    });

    it('still admits at 64 s but not at 91 s with a 90 s maximum when the visitor polls often', async () => {
      const r = rig(kind.make, { ...settings, session_seconds: '30', session_max_seconds: '90', activity_refresh_seconds: '10' });
      const v = new Visitor(r);
      await v.visit();
      const behind = new Visitor(r);
      await behind.visit();
      for (let at = 8; at <= 88; at += 8) {
        r.clock.advance(8_000);
        expect((await v.visit()).headers.get('x-origin'), `at ${at} s`).toBe('yes');
        expect((await behind.visit()).headers.get('x-origin')).toBeNull();
      }
      r.clock.advance(3_000);
      expect((await v.visit()).headers.get('x-origin')).toBeNull();
      expect(v.claims['k']).toBe('w');
    });
  });
});

describe('session_max_seconds for tokens issued without a session start', () => {
  it('counts the maximum from the token issue time, and renewals carry that start on', async () => {
    const r = rig(memory.make, { admit_per_period: '1', admit_period_seconds: '3600', session_seconds: '60', session_max_seconds: '90' });
    // An access token as a VIP link issues it: no `s`, issued now.
    const secrets = parseSecrets(source(BASE_SECRETS));
    const iat = Math.floor(r.clock.now() / 1000);
    // The period's one walk-in is taken, so a visitor who has to queue again waits.
    await new Visitor(r).visit();
    const v = new Visitor(r);
    v.cookie = await signToken(secrets.keyRing, { q: r.queue, k: 'a', t: 0, iat, exp: iat + 60, j: iat });
    for (let at = 20; at <= 80; at += 20) {
      r.clock.advance(20_000);
      expect((await v.visit()).headers.get('x-origin'), `at ${at} s`).toBe('yes');
    }
    expect(v.claims['s']).toBe(iat);
    r.clock.advance(10_000);
    expect((await v.visit()).headers.get('x-origin')).toBeNull();
  });
});
