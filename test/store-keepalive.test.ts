/**
 * A store front that drops idle keep-alive connections without a word (Upstash does after a while;
 * so do NATs and balancers): the next call sent on such a connection goes nowhere and times out.
 * The Node host in Upstash mode, through the real bridge over a real redis-server, behind a front
 * that plays that: a connection idle for IDLE_DROP_MS is forgotten, and the client's next bytes on
 * it are swallowed.
 *
 * Without a cap, Node's fetch keeps idle connections for as long as the server's Keep-Alive hint
 * says (the bridge's: 5 s), and a join after an idle spell is sent on a dead one and times out
 * (the visitor gets the holding page without a ticket; a timed-out call is not retried). capIdleConnections (the Node host
 * calls it at start, STORE_KEEPALIVE_MS) closes idle connections on our side first, so the same
 * join opens a fresh one and takes its ticket.
 */
import net from 'node:net';
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHost, type RunningServer } from '../src/node/host';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { buildWaitingRoom } from '../src/node/waiting-room';
import { capIdleConnections, createNodeUpstashOptions } from '../src/platform/node';
import { UpstashQueueStore } from '../src/store/upstash-store';
import { BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { HttpVisitor } from './support/stack';

const IDLE_DROP_MS = 1_500;

/** A TCP front before `target` that forgets connections idle for IDLE_DROP_MS: no FIN, and what the client sends on them later goes nowhere. */
function startDroppingFront(target: URL): Promise<{ url: string; dropped(): number; close(): Promise<void> }> {
  let dropped = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    let last = Date.now();
    let dead = false;
    const touch = (): void => {
      last = Date.now();
    };
    const timer = setInterval(() => {
      if (!dead && Date.now() - last >= IDLE_DROP_MS) {
        dead = true;
        upstream.destroy();
      }
    }, 100);
    client.on('data', (chunk) => {
      if (dead) {
        // What a NAT or a balancer that forgot the connection does: nothing reaches the store, nothing comes back.
        dropped += 1;
        return;
      }
      touch();
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      touch();
      if (!dead) client.write(chunk);
    });
    const end = (): void => {
      clearInterval(timer);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    client.on('error', end);
    upstream.on('error', () => {
      if (!dead) end();
    });
    upstream.on('close', () => {
      if (!dead) end();
    });
  });
  return new Promise((ready) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      ready({ url: `http://127.0.0.1:${port}`, dropped: () => dropped, close: () => new Promise((done) => server.close(() => done())) });
    }),
  );
}

describe('the Node host on a store front that drops idle connections (Upstash mode)', () => {
  let redis: RedisServer;
  let bridge: UpstashBridge;
  let front: Awaited<ReturnType<typeof startDroppingFront>>;
  let room: RunningServer;
  beforeAll(async () => {
    redis = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: redis.url, token: BASE_SECRETS['upstash_token']! });
    front = await startDroppingFront(new URL(bridge.url));
    const built = buildWaitingRoom({
      settings: source({ ...BASE_SETTINGS, upstash_url: front.url, admit_per_period: '0', ticket_limit: '0', store_timeout_ms: '2000', store_retries: '1' }),
      secrets: source(BASE_SECRETS),
      originUrl: 'http://127.0.0.1:9',
      logger: new MemoryLogger(),
      store: (config, secrets) =>
        new UpstashQueueStore({ redis: new Redis(createNodeUpstashOptions({ url: config.upstashUrl!, token: secrets.upstashToken!, retries: config.storeRetries, timeoutMs: config.storeTimeoutMs })) }),
    });
    room = await startHost(built.handler);
  }, 60_000);
  afterAll(async () => {
    await room?.close();
    await front?.close();
    await bridge?.close();
    await redis?.stop();
  });

  /** A round of joins at once (which leaves that many connections in the pool), then one after an idle spell: did it get a ticket? */
  async function joinAfterIdle(): Promise<boolean> {
    const crowd = await Promise.all(Array.from({ length: 8 }, async () => {
      const visitor = new HttpVisitor(room.url);
      await visitor.get('/');
      return visitor.claims['t'];
    }));
    expect(crowd.every((t) => typeof t === 'number' && t > 0)).toBe(true);
    const droppedBefore = front.dropped();
    // Idle past the front's drop, within the bridge's Keep-Alive hint (5 s).
    await new Promise((resolve) => setTimeout(resolve, IDLE_DROP_MS + 1_000));
    const late = new HttpVisitor(room.url);
    await late.get('/');
    const ticket = late.claims['t'];
    console.info(`join after idle: ticket ${String(ticket)}, calls the front swallowed meanwhile: ${front.dropped() - droppedBefore}`);
    return typeof ticket === 'number' && ticket > 0;
  }

  it('without a cap a join after an idle spell fails on dead connections; with STORE_KEEPALIVE_MS below the front\'s drop it takes its ticket', async () => {
    // The fixture reproduces the fault: the join's call goes to a connection the front forgot.
    expect(await joinAfterIdle()).toBe(false);
    expect(front.dropped()).toBeGreaterThanOrEqual(1);
    // The cap the Node host sets at start, here below the front's drop.
    expect(capIdleConnections('500')).toEqual({ ok: true, ms: 500 });
    for (let round = 0; round < 3; round += 1) expect(await joinAfterIdle()).toBe(true);
  }, 60_000);

  it('refuses a STORE_KEEPALIVE_MS it cannot use, naming it', () => {
    expect(capIdleConnections('50')).toEqual({ ok: false, problem: 'STORE_KEEPALIVE_MS must be a whole number of ms from 100 to 600000, got "50"' });
    expect(capIdleConnections('2s')).toMatchObject({ ok: false });
  });
});
