/**
 * Ticket blocks on several Node hosts behind a load balancer (issue 34): three hosts (the real
 * bundle, bin/node-host.mjs, each its own process) with `ticket_blocks = auto` and
 * `ticket_block_ms = 300`, WR_STORE=redis on one redis-server the test starts, behind Debian's
 * HAProxy (round robin; skipped, saying so, where HAProxy is missing). Waves of new visitors at
 * once, each from its own loopback address, one wave sent when the last was answered:
 * - every ticket is unique across the hosts, and each host hands its numbers in arrival order (a
 *   visitor it answered before another was sent holds the lower number);
 * - an operator's `admit N` lets exactly N real visitors in: the holes of expired blocks take none;
 * - among the visitors let in and those not, no one was let in ahead of a visitor who arrived more
 *   than ticket_block_ms plus that visitor's own round trip earlier;
 * - the arrivals cost under 3 billed commands each (INFO commandstats of the test's redis-server);
 * - a FLUSHALL mid-run: no 5xx, and new tickets come in a new generation, unique.
 * Which host answered is HAProxy's `x-served-by`; the hosts' log lines carry the ticket and how it
 * was handed (`block`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import IORedis from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoOrigin } from '../src/node/demo-origin';
import type { RunningServer } from '../src/node/host';
import { commandCalls } from './support/command-stats';
import { reachedOrigin } from './support/e2e-scenarios';
import { API_TOKEN } from './support/fixtures';
import { fetchFrom } from './support/from-address';
import { haproxyMissing, startHaproxy, stopProcess, type RunningHaproxy } from './support/haproxy';
import { buildNodeBundles, deploymentEnv, startNodeHostProcess, type NodeHostProcess } from './support/node-host-process';
import { startRedisServer, type RedisServer } from './support/redis-server';

const MISSING = haproxyMissing();
const BLOCK_MS = 300;
const HOSTS = ['a', 'b', 'c'] as const;
type HostName = (typeof HOSTS)[number];
/** Waves of new visitors at once; the next is sent when every one of the last was answered. */
const WAVES = 8;
const WAVE = 30;

interface Arrival {
  readonly address: string;
  readonly wave: number;
  /** When the test sent the request and when the answer was back, ms (this machine's clock, the hosts' too). */
  readonly sentMs: number;
  readonly doneMs: number;
  readonly status: number;
  readonly host: HostName;
  readonly ticket: number;
  readonly generation: number;
  readonly cookie: string | undefined;
}

let dir: string;
let redis: RedisServer;
let direct: IORedis;
let origin: RunningServer;
let hosts: Record<HostName, NodeHostProcess>;
let haproxy: RunningHaproxy | undefined;
let clients = 0;

/** A loopback address no visitor used before: each visitor is its own client to the hosts. */
function nextAddress(): string {
  const i = clients++;
  return `127.0.${20 + Math.floor(i / 250)}.${(i % 250) + 1}`;
}

function claimsOf(cookie: string | undefined): Record<string, unknown> {
  const part = (cookie ?? '').split('.')[1] ?? '';
  return part === '' ? {} : (JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>);
}

/** A request through HAProxy from `address` (with `cookie`, if any); the waiting-room cookie it set, if any. */
async function visit(address: string, cookie?: string): Promise<{ status: number; host: HostName; cookie: string | undefined; response: Response }> {
  const response = await fetchFrom(address, `${haproxy!.url}/products`, { headers: { accept: 'text/html', ...(cookie !== undefined && { cookie: `waiting_room=${cookie}` }) } });
  let set: string | undefined;
  for (const header of response.headers.getSetCookie()) {
    const [pair] = header.split(';');
    if (pair?.startsWith('waiting_room=')) set = pair.slice('waiting_room='.length);
  }
  return { status: response.status, host: response.headers.get('x-served-by') as HostName, cookie: set ?? cookie, response };
}

/** A new visitor (no cookie), from an address of its own. */
async function arrive(wave: number): Promise<Arrival> {
  const address = nextAddress();
  const sentMs = Date.now();
  const answer = await visit(address);
  const claims = claimsOf(answer.cookie);
  return { address, wave, sentMs, doneMs: Date.now(), status: answer.status, host: answer.host, ticket: Number(claims['t'] ?? 0), generation: Number(claims['gen'] ?? 0), cookie: answer.cookie };
}

async function wave(index: number, size: number): Promise<Arrival[]> {
  return Promise.all(Array.from({ length: size }, () => arrive(index)));
}

async function billed(): Promise<number> {
  return commandCalls(await direct.info('commandstats'));
}

/** The hosts' log lines of new tickets (a waiting page for a visitor without a cookie), by host, once there are `count` in all. */
async function ticketLines(count: number): Promise<Record<HostName, { ticket: number; block: string | undefined }[]>> {
  const read = () =>
    Object.fromEntries(HOSTS.map((h) => [h, hosts[h].logs().filter((l) => l.path === '/products' && l.decision === 'waiting' && l.ticket !== undefined && l.ticket > 0).map((l) => ({ ticket: l.ticket!, block: l.block }))])) as Record<HostName, { ticket: number; block: string | undefined }[]>;
  await expect.poll(() => HOSTS.reduce((n, h) => n + read()[h].length, 0), { timeout: 10_000 }).toBeGreaterThanOrEqual(count);
  return read();
}

describe.skipIf(MISSING !== undefined)(`ticket blocks on three Node hosts behind HAProxy${MISSING === undefined ? '' : ` (skipped: ${MISSING})`}`, () => {
  beforeAll(async () => {
    buildNodeBundles();
    dir = mkdtempSync(join(tmpdir(), 'wr-blocks-hosts-'));
    redis = await startRedisServer();
    direct = new IORedis(redis.url);
    origin = await startDemoOrigin();
    const env = {
      ...deploymentEnv(redis.url, origin.url),
      // HAProxy connects from 127.0.0.1; the visitors come from other loopback addresses.
      TRUSTED_PROXIES: '127.0.0.1',
      WR_TICKET_BLOCKS: 'auto',
      WR_TICKET_BLOCK_MS: String(BLOCK_MS),
      WR_STATE_CACHE_SECONDS: '1',
      // Nobody is let in but by the operator's admit.
      WR_ADMIT_PER_PERIOD: '0',
    };
    const started = await Promise.all(HOSTS.map(() => startNodeHostProcess(env)));
    hosts = Object.fromEntries(HOSTS.map((h, i) => [h, started[i]!])) as Record<HostName, NodeHostProcess>;
    haproxy = await startHaproxy(dir, HOSTS.map((name) => ({ name, port: hosts[name].port })), 500, 2);
  }, 120_000);

  afterAll(async () => {
    await haproxy?.stop();
    await Promise.allSettled(HOSTS.map((h) => stopProcess(hosts?.[h]?.child)));
    direct?.disconnect();
    await origin?.close();
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('hand unique tickets in arrival order at each host, let in exactly what admit says past the holes, keep the order bound, under 3 billed commands an arrival; survive a FLUSHALL', async () => {
    // Warm-up: one visitor at each host (round robin), so each has loaded the scripts and seen the line.
    const arrivals: Arrival[] = [];
    for (let i = 0; i < HOSTS.length; i++) arrivals.push(await arrive(0));
    expect(new Set(arrivals.map((a) => a.host))).toEqual(new Set(HOSTS));

    const before = await billed();
    for (let w = 1; w <= WAVES; w++) arrivals.push(...(await wave(w, WAVE)));
    const waveCommands = (await billed()) - before;
    const waveArrivals = WAVES * WAVE;

    // No 5xx, every visitor holds a number, unique across the hosts, all of one generation.
    expect(arrivals.map((a) => a.status).filter((s) => s !== 200)).toEqual([]);
    expect(arrivals.every((a) => a.ticket > 0)).toBe(true);
    expect(new Set(arrivals.map((a) => a.ticket)).size).toBe(arrivals.length);
    const generation = arrivals[0]!.generation;
    expect(new Set(arrivals.map((a) => a.generation))).toEqual(new Set([generation]));
    // Each host hands its numbers in arrival order: whoever it answered before another was sent holds the lower number.
    for (const host of HOSTS) {
      const at = arrivals.filter((a) => a.host === host);
      for (let w = 1; w <= WAVES; w++) {
        const earlier = at.filter((a) => a.wave < w).map((a) => a.ticket);
        const later = at.filter((a) => a.wave === w).map((a) => a.ticket);
        if (earlier.length > 0 && later.length > 0) expect(Math.min(...later), `host ${host}, wave ${w}`).toBeGreaterThan(Math.max(...earlier));
      }
    }
    // The hosts' own log lines: the same numbers by host, most handed out of blocks.
    const lines = await ticketLines(arrivals.length);
    for (const host of HOSTS) expect(lines[host].map((l) => l.ticket).sort((x, y) => x - y), `host ${host}`).toEqual(arrivals.filter((a) => a.host === host).map((a) => a.ticket).sort((x, y) => x - y));
    const handed = HOSTS.reduce((n, h) => n + lines[h].filter((l) => l.block === 'handed').length, 0);
    expect(handed).toBeGreaterThan(0);
    // Billed as Upstash counts: well under a join's 3 an arrival.
    expect(waveCommands / waveArrivals).toBeLessThan(3);

    // Every block has aged out: the next arrival at each host joins and reports its expired rest as holes.
    const lastDone = Math.max(...arrivals.map((a) => a.doneMs));
    while (Date.now() <= lastDone + BLOCK_MS) await sleep(BLOCK_MS / 10);
    const reporting: Arrival[] = [];
    for (let i = 0; i < 4 * HOSTS.length && new Set(reporting.map((a) => a.host)).size < HOSTS.length; i++) {
      const next = await arrive(WAVES + 1);
      if (!reporting.some((a) => a.host === next.host)) reporting.push(next);
      else arrivals.push(next);
    }
    expect(new Set(reporting.map((a) => a.host))).toEqual(new Set(HOSTS));
    const reportLines = await ticketLines(arrivals.length + reporting.length);
    const reported = HOSTS.flatMap((h) => reportLines[h].filter((l) => reporting.some((r) => r.ticket === l.ticket)).map((l) => l.block ?? ''));
    // Below the first of these joins every number is held by a visitor or a reported hole.
    const boundary = Math.min(...reporting.map((a) => a.ticket));
    const held = new Set(arrivals.map((a) => a.ticket));
    const holes = Array.from({ length: boundary - 1 }, (_, i) => i + 1).filter((n) => !held.has(n));
    expect(holes.length, `holes below ${boundary}; the reporting joins said ${JSON.stringify(reported)}`).toBeGreaterThan(0);
    // Admit as many as are before the first hole and half of those after it: the admit must pass holes.
    const real = arrivals.filter((a) => a.ticket < boundary).map((a) => a.ticket).sort((x, y) => x - y);
    const beforeHole = real.filter((t) => t < holes[0]!).length;
    const count = beforeHole + Math.max(1, Math.floor((real.length - beforeHole) / 2));
    const admitted = await fetch(`${haproxy!.url}/__wr/api/admit?count=${count}`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } });
    expect(admitted.status).toBe(200);
    const admit = (await admitted.json()) as { admitted: number; cursor: number };
    expect(admit.admitted).toBe(count);
    // Exactly `count` real visitors are at or below the cursor: the holes it passed took none.
    const letIn = arrivals.filter((a) => a.ticket <= admit.cursor);
    expect(letIn.length).toBe(count);
    expect(admit.cursor - count, 'holes passed over').toBe(holes.filter((n) => n <= admit.cursor).length);
    expect(admit.cursor - count).toBeGreaterThan(0);
    // And they get in, through any host; the next ones do not.
    const waiting = arrivals.filter((a) => a.ticket > admit.cursor).sort((x, y) => x.ticket - y.ticket);
    for (const visitor of letIn) {
      await expect
        .poll(
          async () => {
            const answer = await visit(visitor.address, visitor.cookie);
            expect(answer.status).toBeLessThan(500);
            return reachedOrigin(answer.response);
          },
          { timeout: 15_000, interval: 100 },
        )
        .toBe(true);
    }
    for (const visitor of waiting.slice(0, 20)) {
      const answer = await visit(visitor.address, visitor.cookie);
      expect(answer.status).toBe(200);
      expect(reachedOrigin(answer.response), `ticket ${visitor.ticket}`).toBe(false);
    }

    // The order bound: nobody let in ahead of a visitor who arrived more than ticket_block_ms plus
    // that visitor's own round trip earlier (its number is fixed by the time its answer is back).
    let worst = 0;
    for (const b of waiting) {
      for (const a of letIn) {
        const gap = a.sentMs - b.sentMs;
        if (gap <= 0) continue;
        worst = Math.max(worst, gap);
        expect(gap, `ticket ${a.ticket} let in, sent ${gap} ms after ticket ${b.ticket} (round trip ${b.doneMs - b.sentMs} ms)`).toBeLessThan(BLOCK_MS + (b.doneMs - b.sentMs));
      }
    }

    // The store forgets everything: no visitor sees a 5xx, and new tickets come in a new generation.
    await direct.flushall();
    const flushedAt = Date.now();
    const after: Arrival[] = [];
    let fresh: Arrival[] = [];
    for (let w = 0; w < 40; w++) {
      const next = await wave(100 + w, 10);
      after.push(...next);
      expect(next.map((a) => a.status).filter((s) => s >= 500)).toEqual([]);
      // Once every block of the old life has aged out, a whole wave holds the new life's numbers.
      if (next[0]!.sentMs > flushedAt + BLOCK_MS && next.every((a) => a.generation !== generation && a.ticket > 0)) {
        fresh = next;
        break;
      }
    }
    expect(fresh.length, 'a wave all in the new generation').toBeGreaterThan(0);
    const renewed = after.filter((a) => a.generation !== generation && a.ticket > 0);
    expect(new Set(renewed.map((a) => a.generation)).size).toBe(1);
    expect(new Set(renewed.map((a) => a.ticket)).size).toBe(renewed.length);
    // A visitor who waited in the old life comes back: held, no 5xx, given a number of the new life.
    const old = waiting[waiting.length - 1]!;
    const back = await visit(old.address, old.cookie);
    expect(back.status).toBeLessThan(500);
    expect(Number(claimsOf(back.cookie)['gen'] ?? 0)).not.toBe(generation);

    const joined = HOSTS.reduce((n, h) => n + lines[h].filter((l) => l.block !== 'handed').length, 0);
    console.log(
      `blocks on 3 hosts: ${waveArrivals} arrivals in ${WAVES} waves of ${WAVE}, ${waveCommands} billed commands (${(waveCommands / waveArrivals).toFixed(2)} an arrival); ` +
        `${handed} numbers handed out of blocks, ${joined} joins (warm-up included); ${holes.length} holes below ${boundary}; admit ${count}: cursor ${admit.cursor}; ` +
        `largest inversion among those let in ${worst} ms (bound ${BLOCK_MS} ms + a round trip); after FLUSHALL ${after.length} arrivals, ${renewed.length} in the new generation`,
    );
  }, 120_000);
});
