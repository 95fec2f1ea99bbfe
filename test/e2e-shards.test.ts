/**
 * One queue over two databases on the Node host as a self-hoster runs it (bin/node-host.mjs, its own
 * process): WR_STORE=redis, REDIS_URL the first database and REDIS_SHARD_URLS the second,
 * WR_STORE_SHARDS=2. Visitors' tickets land in both, each token naming its own; the origin's `admit
 * N` lets exactly N in across both; a pause reaches both; one database down turns nobody away with a
 * 5xx; and a count that disagrees with the URLs given refuses to start, saying why.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { Redis as IORedis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoOrigin } from '../src/node/demo-origin';
import type { RunningServer } from '../src/node/host';
import { PROJECT_ROOT } from './support/compute-host';
import { reachedOrigin } from './support/e2e-scenarios';
import { API_TOKEN } from './support/fixtures';
import { buildNodeBundles, deploymentEnv, hostBaseEnv, startNodeHostProcess, type NodeHostProcess } from './support/node-host-process';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { HttpVisitor } from './support/stack';

let servers: RedisServer[] = [];
let direct: IORedis[] = [];
let origin: RunningServer;
let host: NodeHostProcess;

const CTL = 'wr:{default}:ctl';

async function stopHost(h: NodeHostProcess | undefined): Promise<void> {
  if (h === undefined || h.child.exitCode !== null) return;
  const exited = new Promise((done) => h.child.once('exit', done));
  h.child.kill('SIGTERM');
  await exited;
}

beforeAll(async () => {
  buildNodeBundles();
  servers = [await startRedisServer(), await startRedisServer()];
  direct = servers.map((s) => new IORedis(s.url));
  origin = await startDemoOrigin();
  host = await startNodeHostProcess({
    ...deploymentEnv(servers[0]!.url, origin.url),
    REDIS_SHARD_URLS: servers[1]!.url,
    WR_STORE_SHARDS: '2',
    WR_STATE_CACHE_SECONDS: '0',
    WR_ADMIT_PER_PERIOD: '0',
    WR_TICKET_LIMIT: '0',
    WR_STORE_TIMEOUT_MS: '500',
  });
}, 120_000);

afterAll(async () => {
  await stopHost(host);
  for (const d of direct) d.disconnect();
  await origin?.close();
  for (const s of servers) await s.stop();
});

const tailOf = async (d: IORedis): Promise<number> => Number((await d.hget(CTL, 'tail')) ?? 0);
const cursorOf = async (d: IORedis): Promise<number> => Number((await d.hget(CTL, 'cursor')) ?? 0);

describe('a Node host over two Redis databases (store_shards = 2)', () => {
  it('spreads tickets over both, lets in exactly N across them, and pauses both', async () => {
    const visitors = Array.from({ length: 24 }, () => new HttpVisitor(host.url));
    for (const v of visitors) {
      const response = await v.get('/');
      expect(response.status).toBe(200);
      expect(reachedOrigin(response)).toBe(false);
    }
    const inFirst = visitors.filter((v) => v.claims['sh'] === undefined);
    const inSecond = visitors.filter((v) => v.claims['sh'] === 1);
    expect(inFirst.length + inSecond.length).toBe(24);
    expect(inFirst.length).toBeGreaterThan(0);
    expect(inSecond.length).toBeGreaterThan(0);
    expect([await tailOf(direct[0]!), await tailOf(direct[1]!)]).toEqual([inFirst.length, inSecond.length]);
    for (const group of [inFirst, inSecond]) expect(group.map((v) => v.claims['t']).sort((a, b) => Number(a) - Number(b))).toEqual(group.map((_, i) => i + 1));

    const admit = await fetch(`${host.url}/__wr/api/admit?count=10`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'idempotency-key': 'e2e-shards-1' } });
    expect(admit.status).toBe(200);
    expect(await admit.json()).toMatchObject({ admitted: 10, tail: 24, cursor: 10 });
    expect((await cursorOf(direct[0]!)) + (await cursorOf(direct[1]!))).toBe(10);
    // Exactly the called ones of each database get through.
    let through = 0;
    for (const v of visitors) if (reachedOrigin(await v.get('/products'))) through += 1;
    expect(through).toBe(10);

    const pause = await fetch(`${host.url}/__wr/api/control`, { method: 'POST', body: JSON.stringify({ paused: true }), headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' } });
    expect(pause.status).toBe(200);
    expect(await pause.json()).toMatchObject({ paused: true });
    for (const d of direct) expect(await d.hget(CTL, 'paused')).toBe('1');
    const resume = await fetch(`${host.url}/__wr/api/control`, { method: 'POST', body: JSON.stringify({ paused: false }), headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' } });
    expect(resume.status).toBe(200);
    for (const d of direct) expect(await d.hget(CTL, 'paused')).not.toBe('1');
  });

  it('turns nobody away with a 5xx while the second database is down; the first one\'s visitors are served', async () => {
    const visitors = Array.from({ length: 12 }, () => new HttpVisitor(host.url));
    for (const v of visitors) expect((await v.get('/')).status).toBe(200);
    const second = visitors.find((v) => v.claims['sh'] === 1)!;
    const first = visitors.find((v) => v.claims['sh'] === undefined)!;
    servers[1]!.pause();
    try {
      const held = await second.get('/');
      expect(held.status).toBe(200);
      expect(reachedOrigin(held)).toBe(false);
      expect(second.claims['sh']).toBe(1);
      const served = await first.get('/');
      expect(served.status).toBe(200);
      expect(first.claims['sh']).toBeUndefined();
    } finally {
      servers[1]!.resume();
    }
  });

  it('refuses to start when store_shards and REDIS_SHARD_URLS disagree, saying so', () => {
    const run = spawnSync(process.execPath, [resolve(PROJECT_ROOT, 'bin/node-host.mjs')], {
      cwd: PROJECT_ROOT,
      env: { ...hostBaseEnv(), ...deploymentEnv(servers[0]!.url, origin.url), PORT: '0', REDIS_SHARD_URLS: servers[1]!.url, WR_STORE_SHARDS: '3' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/store_shards.*is 3, but the environment variable REDIS_SHARD_URLS names 1 database besides the first/);
  });
});
