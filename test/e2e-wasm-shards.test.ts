/**
 * One queue over two Upstash databases on the wasm (the Compute host with sandboxes reused, one
 * instance serving every request): `store_shards = 2`, `upstash_shard_urls` the second database's
 * REST bridge, reached through the backend `upstash_2` with the secret `upstash_shard_tokens`.
 * Visitors' tickets land in both, each token naming its own; the origin's `admit N` lets exactly N
 * in across both; the second database's bridge down gives its visitors the holding page (no 5xx)
 * while the first one's are served.
 */
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { findComputeHost } from './support/compute-host';
import { reachedOrigin } from './support/e2e-scenarios';
import { API_TOKEN } from './support/fixtures';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { HttpVisitor, startWasmStack, UPSTASH_TOKEN, type Stack } from './support/stack';

const host = findComputeHost();
const CTL = 'wr:{default}:ctl';

describe.skipIf(!host.found)('the wasm over two Upstash databases (store_shards = 2)', () => {
  let stack: Stack;
  let second: RedisServer;
  let bridge: UpstashBridge;
  let direct: IORedis;
  beforeAll(async () => {
    if (!host.found) return;
    second = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: second.url, token: UPSTASH_TOKEN });
    direct = new IORedis(second.url);
    stack = await startWasmStack({
      viceroyPath: host.path,
      settings: { store_shards: '2', upstash_shard_urls: bridge.url, admit_per_period: '0', state_cache_seconds: '0' },
      secrets: { upstash_shard_tokens: UPSTASH_TOKEN },
      backends: { upstash_2: bridge.url },
      sandboxReuse: true,
      workers: 1,
    });
  }, 180_000);
  afterAll(async () => {
    await stack?.close();
    direct?.disconnect();
    await bridge?.close();
    await second?.stop();
  });

  const tailOf = async (d: IORedis): Promise<number> => Number((await d.hget(CTL, 'tail')) ?? 0);

  it('spreads tickets over both databases and lets in exactly N across them', async () => {
    const visitors = Array.from({ length: 20 }, () => new HttpVisitor(stack.url));
    for (const v of visitors) expect((await v.get('/')).status).toBe(200);
    const inFirst = visitors.filter((v) => v.claims['sh'] === undefined);
    const inSecond = visitors.filter((v) => v.claims['sh'] === 1);
    expect(inFirst.length + inSecond.length).toBe(20);
    expect(inSecond.length).toBeGreaterThan(0);
    expect(inFirst.length).toBeGreaterThan(0);
    expect([await tailOf(stack.direct), await tailOf(direct)]).toEqual([inFirst.length, inSecond.length]);

    const admit = await fetch(`${stack.url}/__wr/api/admit?count=8`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'idempotency-key': 'wasm-shards-1' } });
    expect(admit.status).toBe(200);
    expect(await admit.json()).toMatchObject({ admitted: 8, tail: 20, cursor: 8 });
    let through = 0;
    for (const v of visitors) if (reachedOrigin(await v.get('/products'))) through += 1;
    expect(through).toBe(8);
  });

  it('with the second database unreachable, its visitors are held (no 5xx) and the first one\'s are served', async () => {
    const visitors = Array.from({ length: 12 }, () => new HttpVisitor(stack.url));
    for (const v of visitors) expect((await v.get('/')).status).toBe(200);
    const inSecond = visitors.find((v) => v.claims['sh'] === 1)!;
    const inFirst = visitors.find((v) => v.claims['sh'] === undefined)!;
    await bridge.close();
    try {
      const held = await inSecond.get('/');
      expect(held.status).toBe(200);
      expect(reachedOrigin(held)).toBe(false);
      expect(inSecond.claims['sh']).toBe(1);
      expect((await inFirst.get('/')).status).toBe(200);
      expect(inFirst.claims['sh']).toBeUndefined();
    } finally {
      bridge = await startUpstashBridge({ redisUrl: second.url, token: UPSTASH_TOKEN, port: bridge.port });
    }
  });
});
