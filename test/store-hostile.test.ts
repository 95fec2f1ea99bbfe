/**
 * The store turning hostile, end to end through the real `@upstash/redis` client, the bridge and a
 * real redis-server: a reset during a full site, the store losing its state (FLUSHALL, as a restart
 * without persistence or a failover leaves it), and a store that stops answering (a proxy in front
 * of the bridge that holds requests). What must hold: never more holders than the capacity, no two
 * holders of one number, "admit N" lets in at most N, no visitor 5xx, no request outliving its
 * timeout, and an operator's admit applied once or not at all, with the answer saying which.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { callStore } from '../src/core/store-call';
import { startDemoOrigin } from '../src/node/demo-origin';
import type { RunningServer } from '../src/node/host';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { createNodeUpstashOptions } from '../src/platform/node';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { API_TOKEN, BASE_SECRETS, BASE_SETTINGS, ManualClock, MemoryLogger, cookieFrom, payloadOf, source } from './support/fixtures';
import { startRedisServer, startRedisServerOnPort, type RedisServer } from './support/redis-server';

const TOKEN = BASE_SECRETS['upstash_token']!;
const CLIENT = { address: '198.51.100.7', pop: 'test' };

let redis: RedisServer;
let bridge: UpstashBridge;
let origin: RunningServer;
let direct: IORedis;

beforeAll(async () => {
  redis = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: redis.url, token: TOKEN });
  origin = await startDemoOrigin();
  direct = new IORedis(redis.url, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  direct?.disconnect();
  await Promise.allSettled([bridge?.close(), origin?.close()]);
  await redis?.stop();
});

afterEach(async () => {
  await direct.flushall();
});

/**
 * The waiting room on a manual clock, its store through `url` (the bridge, or a proxy before it),
 * and one cookie per visitor.
 */
function room(settings: Record<string, string>, url = bridge.url) {
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  const built = buildWaitingRoom({
    // Every visitor here is one address (CLIENT): no per-client ticket limit.
    // A short store timeout only where a test makes the store late or gone (its own bridge or a
    // proxy): on the shared bridge a busy machine's slow answer is not what these tests are about
    // (300 ms there once left 2 of 20 walk-ins on the holding page in a two-worker run).
    settings: source({ ...BASE_SETTINGS, upstash_url: url, store_timeout_ms: url === bridge.url ? '15000' : '300', ticket_limit: '0', ...settings }),
    secrets: source(BASE_SECRETS),
    originUrl: origin.url,
    logger,
    clock,
    store: (config, secrets) =>
      new UpstashQueueStore({
        redis: new Redis(createNodeUpstashOptions({ url: config.upstashUrl!, token: secrets.upstashToken!, retries: 0, timeoutMs: config.storeTimeoutMs })),
      }),
  });
  const jar = new Map<number, string>();
  /** One page view of visitor `v`; whether it reached the origin. */
  async function view(v: number): Promise<{ status: number; passed: boolean }> {
    const cookie = jar.get(v);
    const response = await built.handler(new Request('http://shop.test/', { headers: cookie === undefined ? {} : { cookie: `waiting_room=${cookie}` } }), CLIENT);
    const next = cookieFrom(response);
    if (next !== undefined) jar.set(v, next);
    await response.arrayBuffer();
    return { status: response.status, passed: response.headers.get('x-origin') === 'demo' };
  }
  /** Every visitor's view in turn: who reached the origin, and every status. */
  async function round(visitors: readonly number[]): Promise<{ passed: number[]; statuses: number[] }> {
    const passed: number[] = [];
    const statuses: number[] = [];
    for (const v of visitors) {
      const r = await view(v);
      statuses.push(r.status);
      if (r.passed) passed.push(v);
    }
    return { passed, statuses };
  }
  /** The (generation, ticket) each visitor holding an access token holds. */
  function holders(visitors: readonly number[]): string[] {
    return visitors
      .map((v) => jar.get(v))
      .filter((c): c is string => c !== undefined)
      .map((c) => payloadOf(c))
      .filter((p) => p['k'] === 'a')
      .map((p) => `${String(p['gen'] ?? 0)}:${String(p['t'])}`);
  }
  function waitingTicket(v: number): number | undefined {
    const c = jar.get(v);
    if (c === undefined) return undefined;
    const p = payloadOf(c);
    return p['k'] === 'w' ? (p['t'] as number) : undefined;
  }
  async function api(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = { authorization: `Bearer ${API_TOKEN}`, ...(init.headers as Record<string, string> | undefined) };
    return built.handler(new Request(`http://shop.test/__wr/api/${path}`, { method: 'POST', ...init, headers }), CLIENT);
  }
  /** The claims of visitor `v`'s cookie, unverified (for assertions). */
  function token(v: number): Record<string, unknown> | undefined {
    const c = jar.get(v);
    return c === undefined ? undefined : payloadOf(c);
  }
  return { clock, logger, view, round, holders, waitingTicket, token, api };
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('a reset during a full site', () => {
  it('never lets more than max_active hold slots, and no two holders share a number', async () => {
    const r = room({ max_active: '20', activity_refresh_seconds: '5' });
    const everyone = range(1, 40);
    // 40 visitors: the first 20 walk in, 20 wait.
    const first = await r.round(everyone);
    expect(first.passed).toHaveLength(20);
    const seated = new Set(first.passed);
    // The operator resets the line in the middle of it.
    const reset = await r.api('reset', { body: JSON.stringify({ confirm: 'default' }) });
    expect(reset.status).toBe(200);
    // 40 s of everyone browsing, a view each per second, and 10 newcomers.
    let most = 0;
    const all = range(1, 50);
    for (let s = 1; s <= 40; s += 1) {
      r.clock.advance(1_000);
      const { passed, statuses } = await r.round(s >= 5 ? all : everyone);
      most = Math.max(most, passed.length);
      expect(statuses.every((status) => status < 500)).toBe(true);
      const held = r.holders(all);
      expect(new Set(held).size).toBe(held.length);
    }
    expect(most).toBeLessThanOrEqual(20);
    // Those seated before the reset kept their access the whole time.
    const last = await r.round([...seated]);
    expect(last.passed).toHaveLength(20);
    const stats = (await (await r.api('state', { method: 'GET' })).json()) as { active_sessions: number };
    expect(stats.active_sessions).toBeLessThanOrEqual(20);
  });
});

describe('the store loses its state', () => {
  it('capacity: no duplicate holder, admitted visitors keep passing, no 5xx, no overshoot after one refresh interval', async () => {
    const r = room({ max_active: '20', activity_refresh_seconds: '5' });
    const everyone = range(1, 40);
    const first = await r.round(everyone);
    expect(first.passed).toHaveLength(20);
    const seated = first.passed;
    await direct.flushall();
    const all = range(1, 60);
    const counted: number[] = [];
    const statsOf = async () => (await (await r.api('state', { method: 'GET' })).json()) as { active_sessions: number };
    for (let s = 1; s <= 30; s += 1) {
      r.clock.advance(1_000);
      const { passed, statuses } = await r.round(s >= 2 ? all : everyone);
      expect(statuses.every((status) => status < 500)).toBe(true);
      // Those admitted before the loss keep passing: their token is self-contained.
      for (const v of seated) expect(passed).toContain(v);
      const held = r.holders(all);
      expect(new Set(held).size).toBe(held.length);
      // The first rejoining visitor told the store its state was lost: nobody new is let in until
      // every old holder has refreshed its slot into the count, so capacity holds throughout.
      expect(passed.length).toBeLessThanOrEqual(20);
      counted.push((await statsOf()).active_sessions);
    }
    // Every old holder is counted again within one refresh interval (5 s), and stays counted.
    expect(counted.slice(6).every((n) => n === 20)).toBe(true);
    // When holders leave, the room goes to those waiting (old and new alike).
    console.info(`store lost: slots counted per second after the loss: ${counted.join(', ')}`);
    // About 5 s idle, 11.5 s with both cores busy: the bound only ends a stuck run.
  }, 120_000);

  it('capacity: newcomers arriving before any old visitor returns do not overfill the site either', async () => {
    const r = room({ max_active: '20', activity_refresh_seconds: '5' });
    const seated = range(1, 20);
    expect((await r.round(seated)).passed).toEqual(seated);
    await direct.flushall();
    // Twenty newcomers come first, every second, then the seated visitors browse on. Nothing the
    // newcomers carry says a state was lost; the POP that served the queue knows it did.
    const newcomers = range(101, 120);
    const onSite: number[] = [];
    for (let s = 1; s <= 15; s += 1) {
      r.clock.advance(1_000);
      const { passed, statuses } = await r.round([...newcomers, ...seated]);
      expect(statuses.every((status) => status < 500)).toBe(true);
      for (const v of seated) expect(passed).toContain(v);
      expect(passed.length, `second ${s}`).toBeLessThanOrEqual(20);
      onSite.push(passed.length);
    }
    const stats = (await (await r.api('state', { method: 'GET' })).json()) as { active_sessions: number };
    expect(stats.active_sessions).toBe(20);
    console.info(`store lost, newcomers first: on the site per second: ${onSite.join(', ')}`);
  });

  it('capacity with lost_state_sign = cookie: an emptied store is taken for a new queue until a cookie of the old one shows', async () => {
    const r = room({ max_active: '20', activity_refresh_seconds: '5', lost_state_sign: 'cookie' });
    expect((await r.round(range(1, 20))).passed).toEqual(range(1, 20));
    await direct.flushall();
    r.clock.advance(1_000);
    // Emptied on purpose between events: the next visitors walk straight in.
    expect((await r.round(range(101, 105))).passed).toEqual(range(101, 105));
  });

  it('rate: a rolled-back store (a failover that kept the generation) hands out no number twice, and "admit N" lets in N', async () => {
    const r = room({ admit_per_period: '0', state_cache_seconds: '2' });
    const old = range(1, 10);
    await r.round(old);
    // Their polls fill the POP's cache: it has seen tail 10.
    r.clock.advance(500);
    await r.round(old);
    const oldGen = r.token(1)!['gen'];
    // The last five joins never reached the replica that took over: the tail is back at 5.
    await direct.hset('wr:{default}:ctl', 'tail', '5');
    const newcomers = range(11, 15);
    const arrivals = await r.round(newcomers);
    expect(arrivals.statuses.every((status) => status < 500)).toBe(true);
    // The first join saw it (its ticket was at or below the tail the POP had seen): a new
    // generation, numbers above 10, none of them an old visitor's.
    const fresh = newcomers.map((v) => r.token(v)!);
    expect(fresh.map((p) => p['t'])).toEqual(range(11, 15));
    expect(new Set(fresh.map((p) => p['gen'])).size).toBe(1);
    expect(fresh[0]!['gen']).not.toBe(oldGen);
    // Once the POP's cache holds the new state, the old visitors rejoin behind the newcomers.
    r.clock.advance(2_500);
    const again = await r.round(old);
    expect(again.statuses.every((status) => status < 500)).toBe(true);
    const all = [...newcomers, ...old];
    const numbers = all.map((v) => `${String(r.token(v)!['gen'])}:${String(r.token(v)!['t'])}`);
    expect(new Set(numbers).size).toBe(numbers.length);
    const response = await r.api('admit?count=6');
    expect(((await response.json()) as { admitted: number }).admitted).toBe(6);
    r.clock.advance(2_500);
    const after = await r.round(all);
    expect(after.passed).toEqual([...newcomers, 1]);
    const held = r.holders(all);
    expect(new Set(held).size).toBe(held.length);
  });

  it('rate: "admit N" lets in at most N people, and old waiting visitors rejoin behind those who arrived first', async () => {
    const r = room({ admit_per_period: '0', state_cache_seconds: '0' });
    const old = range(1, 40);
    await r.round(old);
    const admit = async (count: number) => {
      const response = await r.api(`admit?count=${count}`);
      expect(response.status).toBe(200);
      return (await response.json()) as { admitted: number };
    };
    await admit(10);
    r.clock.advance(1_000);
    const before = await r.round(old);
    expect(before.passed).toEqual(range(1, 10));

    await direct.flushall();
    // 15 newcomers arrive, then the old visitors poll again (they poll every refresh_seconds).
    const newcomers = range(101, 115);
    r.clock.advance(1_000);
    const arrivals = await r.round(newcomers);
    expect(arrivals.statuses.every((status) => status < 500)).toBe(true);
    r.clock.advance(1_000);
    const again = await r.round(old);
    expect(again.statuses.every((status) => status < 500)).toBe(true);
    // Admitted visitors keep passing; the old waiting visitors took new tickets behind the newcomers.
    expect(again.passed).toEqual(range(1, 10));
    const newcomerTickets = newcomers.map((v) => r.waitingTicket(v)!);
    const rejoined = range(11, 40).map((v) => r.waitingTicket(v)!);
    expect(Math.max(...newcomerTickets)).toBeLessThan(Math.min(...rejoined));
    expect(new Set([...newcomerTickets, ...rejoined]).size).toBe(45);
    // Rejoined in the order they polled: their old order is kept among themselves.
    expect(rejoined).toEqual([...rejoined].sort((a, b) => a - b));

    const result = await admit(20);
    expect(result.admitted).toBe(20);
    r.clock.advance(1_000);
    const after = await r.round([...newcomers, ...old]);
    const newlyIn = after.passed.filter((v) => !range(1, 10).includes(v));
    expect(newlyIn.length).toBeLessThanOrEqual(20);
    expect(newlyIn).toEqual([...newcomers, ...range(11, 15)]);
    const held = r.holders([...newcomers, ...old]);
    expect(new Set(held).size).toBe(held.length);
  });
});

/**
 * An HTTP proxy before the bridge that can stop answering: `hang` holds requests without
 * forwarding them (the store never sees them); `late` forwards at once but answers only after
 * `lateMs` (the store applied it, the answer comes too late); `late` with `once` does that to the next
 * request only, then passes. The store gets forwarded requests one at a time, in the order they came,
 * so a retry never overtakes its first attempt however slow the machine. Counts its open sockets, and
 * among them those that carry a held request (the client has not let go of it).
 */
async function startProxy(target: string) {
  const sockets = new Set<Socket>();
  const holding = new Set<Socket>();
  let held = 0;
  let mode: 'pass' | 'hang' | 'late' = 'pass';
  let lateMs = 0;
  let lateOnce = false;
  let forwarded = 0;
  // Forwarded requests not answered to the client yet (late ones included), and the store's queue.
  let inFlight = 0;
  let storeTurn: Promise<unknown> = Promise.resolve();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (mode === 'hang') {
        held += 1;
        holding.add(req.socket);
        return;
      }
      const current = mode;
      if (current === 'late' && lateOnce) mode = 'pass';
      forwarded += 1;
      inFlight += 1;
      const stored = storeTurn.then(async () => {
        const answer = await fetch(target + (req.url ?? '/'), {
          method: req.method,
          headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' },
          body: Buffer.concat(chunks),
        });
        return { status: answer.status, text: await answer.text() };
      });
      storeTurn = stored.catch(() => undefined);
      void stored
        .then(async ({ status, text }) => {
          if (current === 'late') await sleep(lateMs);
          if (!res.destroyed) res.writeHead(status, { 'content-type': 'application/json' }).end(text);
        })
        .catch(() => res.destroy())
        .finally(() => (inFlight -= 1));
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      holding.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    open: () => sockets.size,
    /** Open sockets whose request is held (hang mode), and how many requests were held in all. */
    holding: () => holding.size,
    held: () => held,
    forwarded: () => forwarded,
    /** Forwarded requests whose answer (late or not) has not gone back yet. */
    inFlight: () => inFlight,
    set(next: 'pass' | 'hang' | 'late', ms = 0, once = false) {
      mode = next;
      lateMs = ms;
      lateOnce = once;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('redis-server stopped, then started again with its data gone', () => {
  it('capacity: no visitor 5xx while it is down, the seated keep passing, and no overshoot once it is back', async () => {
    const own = await startRedisServer();
    const ownBridge = await startUpstashBridge({ redisUrl: own.url, token: TOKEN });
    let again: RedisServer | undefined;
    try {
      const r = room({ max_active: '20', activity_refresh_seconds: '5' }, ownBridge.url);
      const seated = range(1, 20);
      expect((await r.round(seated)).passed).toEqual(seated);
      // No persistence (--save '', no AOF): what it held is gone with the process.
      await own.stop();
      const newcomers = range(101, 120);
      for (let s = 1; s <= 3; s += 1) {
        r.clock.advance(1_000);
        const { passed, statuses } = await r.round([...newcomers, ...seated]);
        expect(statuses.every((status) => status < 500), `down, second ${s}`).toBe(true);
        // The seated pass on their self-contained tokens (their refresh fails quietly); nobody new.
        expect(passed).toEqual(seated);
      }
      again = await startRedisServerOnPort(own.port);
      // The bridge reconnects by itself; wait (real time) until a store call goes through.
      const probe = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: ownBridge.url, token: TOKEN, retries: 0 })) });
      const deadline = Date.now() + 10_000;
      for (;;) {
        const ok = await probe.peek('default').then(
          () => true,
          () => false,
        );
        if (ok) break;
        if (Date.now() > deadline) throw new Error('the bridge did not reconnect to the restarted redis-server');
        await sleep(100);
      }
      const onSite: number[] = [];
      for (let s = 1; s <= 15; s += 1) {
        r.clock.advance(1_000);
        const { passed, statuses } = await r.round([...newcomers, ...seated]);
        expect(statuses.every((status) => status < 500), `back, second ${s}`).toBe(true);
        for (const v of seated) expect(passed).toContain(v);
        expect(passed.length, `back, second ${s}`).toBeLessThanOrEqual(20);
        onSite.push(passed.length);
      }
      const stats = (await (await r.api('state', { method: 'GET' })).json()) as { active_sessions: number };
      expect(stats.active_sessions).toBe(20);
      const held = r.holders([...newcomers, ...seated]);
      expect(new Set(held).size).toBe(held.length);
      console.info(`redis restarted empty: on the site per second once back: ${onSite.join(', ')}`);
    } finally {
      await ownBridge.close();
      await again?.stop();
      await own.stop();
    }
    // About 18 s idle, 22 s with both cores busy (the bridge's reconnect and 18 rounds): the bound only ends a stuck run.
  }, 120_000);
});

describe('a store that stops answering', () => {
  it('aborts every call at its timeout: sockets do not pile up', async () => {
    const proxy = await startProxy(bridge.url);
    try {
      proxy.set('hang');
      const policy = { auto: { count: 0, periodMs: 1000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 60_000, reservationMs: 10_000 };
      const clock = { now: () => Date.now() };
      const burst = async (store: UpstashQueueStore) => {
        const outcomes = await Promise.all(range(1, 40).map(() => callStore(() => store.poll('default', Date.now(), policy), 150, clock)));
        expect(outcomes.every((o) => !o.ok && o.reason === 'timeout')).toBe(true);
      };
      // Conditions with a deadline, not a fixed wait: a request is let go of (or reaches the proxy)
      // when the event loop gets to it, which on a busy machine can be long after its call timed out.
      // The deadline only bounds a failure; a pass does not depend on how fast the machine is.
      const SETTLE = { timeout: 10_000, interval: 20 };
      const state = (p: typeof proxy) => `${p.holding()} held requests still open, ${p.open()} open sockets, ${p.held()} requests held in all`;
      const aborting = new UpstashQueueStore({ redis: new Redis(createNodeUpstashOptions({ url: proxy.url, token: TOKEN, retries: 0, timeoutMs: 150 })) });
      for (let i = 1; i <= 4; i += 1) {
        await burst(aborting);
        // Each call's request was aborted with it (the client closed its connection), so the hanging
        // store is left holding none of them, burst after burst. The client may keep up to a burst's
        // worth of idle connections for reuse (they carry no request and close at its keep-alive).
        await expect
          .poll(() => proxy.holding() === 0 && proxy.open() <= 40, { ...SETTLE, message: `aborted calls, burst ${i}: ${state(proxy)}` })
          .toBe(true);
      }
      // The timed-out calls did reach the hanging store: "none held" is not for want of requests.
      expect(proxy.held(), state(proxy)).toBeGreaterThan(0);
      // The same without the abort (the timeout only raced): every abandoned request keeps its socket.
      const other = await startProxy(bridge.url);
      try {
        other.set('hang');
        const racing = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: other.url, token: TOKEN, retries: 0 })) });
        for (const expected of [40, 80]) {
          await burst(racing);
          // 80 after the second burst: none of the first burst's 40 was let go of in the meantime.
          await expect.poll(() => other.holding(), { ...SETTLE, message: `not aborted: ${state(other)}` }).toBe(expected);
        }
        expect(other.open()).toBe(80);
        console.info(`hanging store: of 160 aborted calls ${proxy.held()} reached it and none is held open; of 80 calls not aborted, ${other.holding()} held open`);
      } finally {
        await other.close();
      }
    } finally {
      await proxy.close();
    }
  });

  it('applies a timed-out admit once: the answer says so, and a retry with the same key admits nobody more', async () => {
    const proxy = await startProxy(bridge.url);
    try {
      const r = room({ admit_per_period: '0' }, proxy.url);
      await r.round(range(1, 30));
      const cursor = async () => Number((await direct.hget('wr:{default}:ctl', 'cursor')) ?? 0);
      const admit = (count: number, key: string) => r.api(`admit?count=${count}`, { headers: { 'idempotency-key': key } });

      // The store applies it but answers too late, for the first try and the retry alike.
      const forwardedBefore = proxy.forwarded();
      proxy.set('late', 1_000);
      const unknown = await admit(5, 'op-late');
      expect(unknown.status).toBe(503);
      expect(await unknown.json()).toMatchObject({ applied: 'unknown', idempotency_key: 'op-late' });
      // Until every forwarded request has its (late) answer, the store may still be working on one.
      await expect.poll(() => proxy.inFlight(), { timeout: 15_000, message: 'late answers still on their way' }).toBe(0);
      // Both requests reached the store; it admitted once.
      expect(proxy.forwarded() - forwardedBefore).toBe(2);
      expect(await cursor()).toBe(5);
      proxy.set('pass');
      const retried = await admit(5, 'op-late');
      expect(retried.status).toBe(200);
      expect(await retried.json()).toMatchObject({ applied: true, replayed: true, admitted: 5, cursor: 5 });
      expect(await cursor()).toBe(5);

      // The store never sees the first attempts (they hang): not applied, and the retry applies it once.
      proxy.set('hang');
      const lost = await admit(3, 'op-hang');
      expect(lost.status).toBe(503);
      expect(await lost.json()).toMatchObject({ applied: 'unknown' });
      expect(await cursor()).toBe(5);
      proxy.set('pass');
      const applied = await admit(3, 'op-hang');
      expect(await applied.json()).toMatchObject({ applied: true, replayed: false, admitted: 3, cursor: 8 });
      expect(await (await admit(3, 'op-hang')).json()).toMatchObject({ replayed: true, admitted: 3, cursor: 8 });

      // Only the first answer is late: the handler's own retry learns it was applied.
      proxy.set('late', 400, true);
      const once = await admit(2, 'op-once');
      expect(once.status).toBe(200);
      expect(await once.json()).toMatchObject({ applied: true, replayed: true, admitted: 2, cursor: 10 });
      await expect.poll(() => proxy.inFlight(), { timeout: 15_000, message: 'the late answer still on its way' }).toBe(0);
      expect(await cursor()).toBe(10);
    } finally {
      await proxy.close();
    }
  });
});
