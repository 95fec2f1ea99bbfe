/**
 * What the hot store calls are billed (Upstash bills every command a script runs), measured with
 * INFO commandstats on a real redis-server through the real client and the bridge. The generation
 * must ride on reads the scripts already make: one command per generation, none per call.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import IORedis from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AdmissionPolicy } from '../src/core/ports';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { STORE_SCRIPTS } from '../src/store/scripts';
import { createUpstashClientOptions, UpstashQueueStore } from '../src/store/upstash-store';
import { billedCommands, measureHotCalls } from './support/command-cost';
import { table } from './support/markdown-table';
import { startRedisServer, type RedisServer } from './support/redis-server';

const TOKEN = 'cost-test-token';
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
let server: RedisServer;
let bridge: UpstashBridge;
let direct: IORedis;
let store: UpstashQueueStore;

beforeAll(async () => {
  server = await startRedisServer();
  bridge = await startUpstashBridge({ redisUrl: server.url, token: TOKEN });
  direct = new IORedis(server.url);
  store = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: TOKEN, retries: 0 })) });
  // Cached scripts (through the bridge, which strips the shebang flag Redis 7 refuses): a NOSCRIPT
  // miss would add an EVAL to the first call of each.
  const loader = new Redis({ url: bridge.url, token: TOKEN, enableTelemetry: false, retry: false });
  for (const script of STORE_SCRIPTS) await loader.scriptLoad(script.text);
});

afterAll(async () => {
  direct?.disconnect();
  await bridge?.close();
  await server?.stop();
});

const queue = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;
const RATE: AdmissionPolicy = { auto: { count: 0, periodMs: 1_000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 600_000, reservationMs: 30_000 };

it('costs one command per generation and none per call; an idempotency key costs none', async () => {
  const q = queue('gen');
  await store.join(q, T0, RATE);
  // The minute's first poll writes its history point; the next writes nothing.
  await store.poll(q, T0 + 1, RATE);
  const steady = await billedCommands(direct, () => store.poll(q, T0 + 2, RATE));
  // The state loses its generation alone: the next run writes a new one, one HSET more.
  await direct.hdel(`wr:{${q}}:ctl`, 'gen');
  const regenerating = await billedCommands(direct, () => store.poll(q, T0 + 3, RATE));
  expect(regenerating - steady).toBe(1);
  expect(await billedCommands(direct, () => store.poll(q, T0 + 4, RATE))).toBe(steady);
  // A join writes ctl anyway (its tail): a new generation rides on that HSET.
  const joining = await billedCommands(direct, () => store.join(q, T0 + 5, RATE));
  await direct.hdel(`wr:{${q}}:ctl`, 'gen');
  expect(await billedCommands(direct, () => store.join(q, T0 + 6, RATE))).toBe(joining);

  // The minute's first writing call but a join writes its history point: not measured here.
  await store.poll(q, T0 + 3, RATE);
  const keyless = await billedCommands(direct, () => store.admit(q, 1, T0 + 4, RATE));
  const keyed = await billedCommands(direct, () => store.admit(q, 1, T0 + 5, RATE, 'cost-1'));
  const replay = await billedCommands(direct, () => store.admit(q, 1, T0 + 6, RATE, 'cost-1'));
  // The key rides on ctl: read with the controls, written with the cursor, no command of its own.
  expect(keyed - keyless).toBe(0);
  expect(replay).toBeLessThan(keyless);

  const rows = await measureHotCalls(direct, store, queue, T0);
  rows.push({ call: 'admit 1 with an idempotency key, rate mode', commands: keyed }, { call: 'admit replayed (same key)', commands: replay });
  console.info(`\n${table(['call', 'billed commands'], ['l', 'r'], rows.map((r) => [r.call, String(r.commands)]))}`);
});
