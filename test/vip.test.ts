/**
 * VIP codes through the handler: made by the admin API, used by following a link, spent exactly as
 * many times as they allow — also when 100 visitors use one at once on the real store.
 */
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_VIP_CODES, parseVipRequest } from '../src/core/admin';
import { parseConfig, parseSecrets } from '../src/core/config';
import { createHandler, type Handler } from '../src/core/handler';
import type { QueueStore } from '../src/core/ports';
import { createVipCode, hashVipCode, normalizeVipCode } from '../src/core/vip';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { MemoryStateCache } from '../src/platform/memory-cache';
import { MemoryQueueStore } from '../src/store/memory-store';
import { VIP_MAX_BATCH } from '../src/store/scripts';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { API_TOKEN, BASE_SECRETS, BASE_SETTINGS, cookieFrom, FaultyStore, ManualClock, MemoryLogger, payloadOf, RecordingOrigin, source } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';

const SITE = 'https://shop.example';
const CLIENT = { address: '198.51.100.7', pop: 'TST' };

function build(store: QueueStore, clock = new ManualClock(), settings: Record<string, string> = {}): { handler: Handler; origin: RecordingOrigin; logger: MemoryLogger; clock: ManualClock } {
  const origin = new RecordingOrigin();
  const logger = new MemoryLogger();
  const handler = createHandler({
    config: parseConfig(source({ ...BASE_SETTINGS, ...settings })),
    secrets: parseSecrets(source(BASE_SECRETS)),
    store,
    origin,
    logger,
    clock,
    cache: new MemoryStateCache(clock),
  });
  return { handler, origin, logger, clock };
}

async function createCodes(handler: Handler, body: Record<string, unknown>): Promise<{ codes: { code: string; link: string }[] }> {
  const response = await handler(
    new Request(`${SITE}/__wr/api/vip`, { method: 'POST', body: JSON.stringify(body), headers: { authorization: `Bearer ${API_TOKEN}` } }),
    CLIENT,
  );
  expect(response.status).toBe(200);
  return (await response.json()) as { codes: { code: string; link: string }[] };
}

describe('VIP codes', () => {
  it('are random, readable, and stored only as hashes', async () => {
    const codes = new Set(Array.from({ length: 200 }, createVipCode));
    expect(codes.size).toBe(200);
    for (const code of codes) expect(code).toMatch(/^[A-HJKMNP-Z2-9]{16}$/);
    const [first] = codes;
    expect(normalizeVipCode(`${first!.slice(0, 4).toLowerCase()}-${first!.slice(4)}`)).toBe(first);
    expect(normalizeVipCode('short')).toBeUndefined();
    expect(await hashVipCode('ABCDEFGHJKMNPQRS')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a link admits the visitor at once and lands on the same address without the code', async () => {
    const { handler, origin } = build(new MemoryQueueStore());
    // Someone already waits: a VIP does not.
    await handler(new Request(`${SITE}/`), CLIENT);
    const { codes } = await createCodes(handler, { count: 2, uses: 1 });
    expect(codes).toHaveLength(2);
    const { code, link } = codes[0]!;
    expect(link).toBe(`${SITE}/?wr_vip=${code}`);
    const used = await handler(new Request(`${SITE}/sale?item=7&wr_vip=${code}`), CLIENT);
    expect(used.status).toBe(303);
    expect(used.headers.get('location')).toBe('/sale?item=7');
    const cookie = cookieFrom(used)!;
    expect(payloadOf(cookie)).toMatchObject({ k: 'a' });
    const inside = await handler(new Request(`${SITE}/sale?item=7`, { headers: { cookie: `waiting_room=${cookie}` } }), CLIENT);
    expect(inside.headers.get('x-origin')).toBe('yes');
    expect(origin.requests.every((r) => !r.url.includes('wr_vip'))).toBe(true);
    // Used up: the second visitor with the same link queues like anyone else.
    const again = await handler(new Request(`${SITE}/sale?wr_vip=${code}`), CLIENT);
    expect(again.status).toBe(200);
    expect(again.headers.get('x-origin')).toBeNull();
  });

  it('expire when they say so, and a made-up code does nothing', async () => {
    const { handler, logger, clock } = build(new MemoryQueueStore());
    const { codes } = await createCodes(handler, { uses: 5, expires_in_seconds: 600 });
    clock.advance(600_000);
    expect((await handler(new Request(`${SITE}/?wr_vip=${codes[0]!.code}`), CLIENT)).status).toBe(200);
    expect(logger.last?.reason).toBe('vip_expired');
    expect((await handler(new Request(`${SITE}/?wr_vip=${createVipCode()}`), CLIENT)).status).toBe(200);
    expect(logger.last?.reason).toBe('vip_unknown');
    expect((await handler(new Request(`${SITE}/?wr_vip=<script>`), CLIENT)).status).toBe(200);
    expect(logger.last?.reason).toBe('vip_malformed');
  });

  it.each<[Record<string, unknown>, RegExp]>([
    [{ count: 0 }, /count/],
    [{ count: 101 }, /count/],
    [{ uses: 0 }, /uses/],
    [{ uses: 1.5 }, /uses/],
    [{ expires_in_seconds: 5 }, /expires_in_seconds/],
    [{ code: 'MINE' }, /unknown field/],
  ])('refuses %j', (input, reason) => {
    const parsed = parseVipRequest(input);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toMatch(reason);
  });
});

describe('VIP codes on the real store', () => {
  let redis: RedisServer;
  let bridge: UpstashBridge;
  beforeAll(async () => {
    redis = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: redis.url, token: 'vip-test-token' });
  });
  afterAll(async () => {
    await bridge?.close();
    await redis?.stop();
  });

  it('a code with 5 uses admits exactly 5 of 100 visitors who use it at once', async () => {
    const store = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: 'vip-test-token', retries: 0 })) });
    // Not a test of timeouts: 100 store calls at once on a busy machine must not meet the 1-s default.
    const { handler } = build(store, new ManualClock(), { store_timeout_ms: '15000' });
    const { codes } = await createCodes(handler, { uses: 5 });
    const responses = await Promise.all(
      Array.from({ length: 100 }, () => handler(new Request(`${SITE}/drop?wr_vip=${codes[0]!.code}`), CLIENT)),
    );
    const admitted = responses.filter((r) => r.status === 303);
    expect(admitted).toHaveLength(5);
    expect(responses.filter((r) => r.status === 200)).toHaveLength(95);
    expect(admitted.every((r) => payloadOf(cookieFrom(r)!)['k'] === 'a')).toBe(true);
  });

  it('the most codes one may ask for are made in one store call (and the audit entry in another), each admitting its visitor', async () => {
    // One call per code would pass Fastly's 32 backend requests per request well before 100.
    expect(MAX_VIP_CODES).toBeLessThanOrEqual(VIP_MAX_BATCH);
    const upstash = new Redis(createUpstashClientOptions({ url: bridge.url, token: 'vip-test-token', retries: 0 }));
    const store = new FaultyStore(new UpstashQueueStore({ redis: upstash }));
    const { handler } = build(store);
    const before = (await upstash.keys('*:vip:*')).length;
    const { codes } = await createCodes(handler, { count: MAX_VIP_CODES, uses: 1 });
    // The codes in one call; then who made how many, in the audit trail (never the codes).
    expect(store.calls).toBe(2);
    expect(codes).toHaveLength(MAX_VIP_CODES);
    expect(new Set(codes.map((c) => c.code)).size).toBe(MAX_VIP_CODES);
    expect((await upstash.keys('*:vip:*')).length - before).toBe(MAX_VIP_CODES);
    for (const { code } of [codes[0]!, codes[49]!, codes[99]!]) {
      expect((await handler(new Request(`${SITE}/drop?wr_vip=${code}`), CLIENT)).status).toBe(303);
      expect((await handler(new Request(`${SITE}/drop?wr_vip=${code}`), CLIENT)).status).toBe(200);
    }
  });

  it('a batch the store does not confirm shows no code and says none was made', async () => {
    const store = new FaultyStore(new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: 'vip-test-token', retries: 0 })) }));
    store.mode = 'error';
    const { handler } = build(store);
    const response = await handler(
      new Request(`${SITE}/__wr/api/vip`, { method: 'POST', body: JSON.stringify({ count: 40 }), headers: { authorization: `Bearer ${API_TOKEN}` } }),
      CLIENT,
    );
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: string; codes: unknown[] };
    expect(body.error).toMatch(/did not confirm the codes .*no code was made/);
    expect(body.codes).toEqual([]);
    expect(store.calls).toBe(1);
  });
});
