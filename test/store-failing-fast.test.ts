/**
 * A store that fails fast (Upstash answering 429 once a database is over its request limit, or a
 * proxy's error page) must not draw more calls than a healthy one: the per-POP cache remembers the
 * failure for a cache lifetime, as it remembers a state, so the waiting crowd's polls do not all go
 * back to a store that is already refusing them. Through the handler and the real Upstash store,
 * against a real redis-server behind the REST bridge, with an HTTP front that can be told to fail.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Handler } from '../src/core/handler';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { createNodeUpstashOptions } from '../src/platform/node';
import { UpstashQueueStore } from '../src/store/upstash-store';
import { cookieFrom, ManualClock, MemoryLogger, payloadOf, testHandler } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';

const TOKEN = 'failing-fast-test-token';
const SITE = 'https://shop.example';

/** In front of the bridge: passes requests on, or answers them itself with `failure` while it is set. */
interface Front {
  readonly url: string;
  requests: number;
  failure: { status: number; body: string } | undefined;
  close(): Promise<void>;
}

async function startFront(target: string): Promise<Front> {
  const front: Front = { url: '', requests: 0, failure: undefined, close: async () => {} };
  const server = http.createServer((req, res) => {
    front.requests += 1;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (front.failure !== undefined) {
        res.writeHead(front.failure.status, { 'content-type': 'application/json' }).end(front.failure.body);
        return;
      }
      const headers = { ...req.headers };
      delete headers.host;
      fetch(`${target}${req.url ?? '/'}`, { method: req.method, headers: headers as Record<string, string>, body: Buffer.concat(chunks) })
        .then(async (answer) => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(Buffer.from(await answer.arrayBuffer())))
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(front, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

let redis: RedisServer;
let bridge: UpstashBridge;
let front: Front;
beforeAll(async () => {
  redis = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: redis.url, token: TOKEN });
  front = await startFront(bridge.url);
});
afterAll(async () => {
  await front?.close();
  await bridge?.close();
  await redis?.stop();
});

let rooms = 0;
function room(settings: Record<string, string>): { handler: Handler; clock: ManualClock; logger: MemoryLogger } {
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  const store = new UpstashQueueStore({ redis: new Redis(createNodeUpstashOptions({ url: front.url, token: TOKEN, retries: 0, timeoutMs: 2_000 })) });
  const handler = testHandler({ queue_name: `fast${++rooms}`, admit_per_period: '0', ticket_limit: '0', ...settings }, { store, clock, logger });
  return { handler, clock, logger };
}

describe('a store that fails fast', () => {
  it('draws no more calls from a waiting crowd than a healthy store: one per cache lifetime, and the pages stay 200', async () => {
    const r = room({ state_cache_seconds: '5', refresh_seconds: '5' });
    const tickets: string[] = [];
    for (let i = 0; i < 100; i += 1) tickets.push(cookieFrom(await r.handler(new Request(`${SITE}/`), { address: `198.51.100.${i}`, pop: 'TST' }))!);
    const poll = (i: number) => r.handler(new Request(`${SITE}/`, { headers: { cookie: `waiting_room=${tickets[i]!}` } }), { address: `198.51.100.${i}`, pop: 'TST' });
    /** Three cache lifetimes of the whole crowd polling; the store requests they made. */
    const rounds = async (): Promise<{ requests: number; statuses: Set<number> }> => {
      const before = front.requests;
      const statuses = new Set<number>();
      for (let round = 0; round < 3; round += 1) {
        for (let i = 0; i < tickets.length; i += 1) statuses.add((await poll(i)).status);
        r.clock.advance(5_000);
      }
      return { requests: front.requests - before, statuses };
    };
    const healthy = await rounds();
    expect(healthy.requests).toBeLessThanOrEqual(4);
    front.failure = { status: 429, body: JSON.stringify({ error: 'ERR max requests limit exceeded. Limit: 10000, Usage: 10000' }) };
    try {
      const failing = await rounds();
      expect(failing.requests).toBeLessThanOrEqual(healthy.requests + 1);
      expect([...failing.statuses]).toEqual([200]);
      // Every poll answered from the remembered failure still says why, for the log.
      const last = r.logger.last!;
      expect(last).toMatchObject({ decision: 'unavailable', cache: 'hit' });
      expect(last.store_error).toContain('max requests limit exceeded');
    } finally {
      front.failure = undefined;
    }
    // Once the store answers again, the next cache lifetime brings the state back.
    r.clock.advance(5_000);
    const recovered = await poll(0);
    expect(recovered.status).toBe(200);
    expect(r.logger.last).toMatchObject({ decision: 'waiting' });
  });

  it('visitors who arrived during the outage ask for their ticket again once per cache lifetime, not once per retry each', async () => {
    const r = room({ state_cache_seconds: '5', refresh_seconds: '5' });
    front.failure = { status: 429, body: JSON.stringify({ error: 'ERR max requests limit exceeded. Limit: 10000, Usage: 10000' }) };
    const pending: string[] = [];
    try {
      // 50 arrivals: each first join asks the store (an arrival), and each gets a pending join instead of a ticket.
      const before = front.requests;
      for (let i = 0; i < 50; i += 1) {
        const answer = await r.handler(new Request(`${SITE}/`), { address: `203.0.113.${i}`, pop: 'TST' });
        expect(answer.status).toBe(200);
        pending.push(cookieFrom(answer)!);
      }
      const arrivals = front.requests - before;
      expect(arrivals).toBeLessThanOrEqual(50);
      // Each page retries its join three times per lifetime, for three lifetimes.
      const retries = front.requests;
      for (let lifetime = 0; lifetime < 3; lifetime += 1) {
        for (let round = 0; round < 3; round += 1) {
          for (const [i, cookie] of pending.entries()) {
            const answer = await r.handler(new Request(`${SITE}/`, { headers: { cookie: `waiting_room=${cookie}` } }), { address: `203.0.113.${i}`, pop: 'TST' });
            expect(answer.status).toBe(200);
            expect(r.logger.last).toMatchObject({ decision: 'unavailable' });
          }
        }
        r.clock.advance(5_000);
      }
      // 450 retries; before this, each was a call.
      expect(front.requests - retries).toBeLessThanOrEqual(3 + 1);
    } finally {
      front.failure = undefined;
    }
    // The store is back: one lifetime on, a retry gets its ticket.
    r.clock.advance(5_000);
    const back = await r.handler(new Request(`${SITE}/`, { headers: { cookie: `waiting_room=${pending[0]!}` } }), { address: '203.0.113.0', pop: 'TST' });
    expect(payloadOf(cookieFrom(back)!)).toMatchObject({ k: 'w', t: expect.any(Number) });
    expect(r.logger.last).toMatchObject({ decision: 'waiting', reason: 'join_retried' });
  });

  it('with the cache off (state_cache_seconds = 0), every poll asks the store, as it does when healthy', async () => {
    const r = room({ state_cache_seconds: '0' });
    const ticket = cookieFrom(await r.handler(new Request(`${SITE}/`), { address: '198.51.100.1', pop: 'TST' }))!;
    front.failure = { status: 500, body: '<html>bad gateway</html>' };
    try {
      const before = front.requests;
      for (let i = 0; i < 5; i += 1) expect((await r.handler(new Request(`${SITE}/`, { headers: { cookie: `waiting_room=${ticket}` } }), { address: '198.51.100.1', pop: 'TST' })).status).toBe(200);
      expect(front.requests - before).toBe(5);
    } finally {
      front.failure = undefined;
    }
  });
});
