/**
 * Ticket blocks (`ticket_blocks`, issue 34) end to end, on both hosts, with the billed commands read
 * from the test's own redis-server (INFO commandstats, as Upstash bills):
 * - the Node host on a manual clock (time moves only when the test says, so block sizes and
 *   expiry are exact): N arrivals cost 3 commands a join and far fewer joins than arrivals; every
 *   visitor holds a distinct number, later arrivals higher ones; an expired block's rest is reported
 *   as holes, and admitting exactly as many as the real visitors below the top calls the top one;
 * - the wasm with sandboxes reused (one worker: one instance serves every request in turn), on
 *   real time: the same promises, the savings shown when the instance serves arrivals fast enough
 *   for a block to fill within its quarter of a second;
 * - the wasm with a fresh sandbox per request: every join takes one number (the allocator has seen
 *   one arrival), which is exactly today's cost;
 * - `off`: every arrival is a join, as before.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { forgetTicketBlocks } from '../src/core/edge-blocks';
import type { RequestLog } from '../src/core/ports';
import { DEFAULT_BLOCK_SETTINGS } from '../src/core/ticket-blocks';
import { commandCalls } from './support/command-stats';
import { findComputeHost } from './support/compute-host';
import { API_TOKEN, cookieFrom, ManualClock, payloadOf } from './support/fixtures';
import { startNodeStack, startWasmStack, type Stack } from './support/stack';

const host = findComputeHost();
const B = 20;
/** Admission only by the admit API; the POP's cache on (handed numbers are answered from it). */
const SETTINGS = { ticket_blocks: String(B), admit_per_period: '0', state_cache_seconds: '5' };

interface Arrival {
  readonly ticket: number;
  readonly cookie: string;
}

/** A new visitor (no cookie): its number, from the waiting cookie the room set. */
async function arrive(stack: Stack): Promise<Arrival> {
  const response = await fetch(`${stack.url}/products`, { headers: { accept: 'text/html' } });
  expect(response.status).toBe(200);
  await response.arrayBuffer();
  const cookie = cookieFrom(response);
  expect(cookie, 'a waiting cookie').toBeDefined();
  const claims = payloadOf(cookie!);
  expect(claims['k']).toBe('w');
  return { ticket: claims['t'] as number, cookie: cookie! };
}

async function billed(stack: Stack): Promise<number> {
  return commandCalls(await stack.direct.info('commandstats'));
}

async function admit(stack: Stack, count: number): Promise<void> {
  const response = await fetch(`${stack.url}/__wr/api/admit?count=${count}`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } });
  expect(response.status).toBe(200);
  await response.arrayBuffer();
}

/** The visitor's next request: `a` when it was let in (an access token set), else `w`. */
async function comeBack(stack: Stack, visitor: Arrival): Promise<'a' | 'w'> {
  const response = await fetch(`${stack.url}/products`, { headers: { accept: 'text/html', cookie: `waiting_room=${visitor.cookie}` } });
  await response.arrayBuffer();
  const cookie = cookieFrom(response);
  return cookie !== undefined && payloadOf(cookie)['k'] === 'a' ? 'a' : 'w';
}

/** The log lines of new tickets (a waiting page for a visitor without a cookie), in order. */
function ticketLines(stack: Stack): RequestLog[] {
  return stack.logs().filter((l) => l.path === '/products' && l.ticket !== undefined && l.decision === 'waiting');
}

/** Every number distinct, and each later arrival's higher: the instance hands them out in arrival order. */
function expectRising(arrivals: readonly Arrival[]): void {
  for (let i = 1; i < arrivals.length; i++) expect(arrivals[i]!.ticket, `arrival ${i}`).toBeGreaterThan(arrivals[i - 1]!.ticket);
}

describe('ticket blocks on the Node host (a manual clock)', () => {
  const clock = new ManualClock();
  let stack: Stack;
  beforeAll(async () => {
    forgetTicketBlocks();
    stack = await startNodeStack(SETTINGS, undefined, { clock });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    forgetTicketBlocks();
  });

  const N = 400;
  const arrivals: Arrival[] = [];

  it(`${N} arrivals through one instance: a join every block, 3 billed commands each, numbers distinct and rising`, async () => {
    // The first arrival loads the scripts and finds no line (a plain join); it is not measured.
    arrivals.push(await arrive(stack));
    stack.clearLogs();
    const before = await billed(stack);
    for (let i = 0; i < N; i++) arrivals.push(await arrive(stack));
    const cost = (await billed(stack)) - before;
    expectRising(arrivals);
    const lines = ticketLines(stack);
    expect(lines).toHaveLength(N);
    const handed = lines.filter((l) => l.block === 'handed').length;
    const joins = N - handed;
    // The clock stands still, so the allocator sees every arrival at once: the rate only grows and
    // blocks reach B after 4 × B arrivals (a quarter of a second's worth at 1,000 a ms).
    expect(joins).toBeLessThan(N / 4);
    expect(cost).toBe(3 * joins);
    // Numbers handed out without a store call went to arrivals whose request made none: no other command.
    expect(lines.filter((l) => l.block === 'handed').every((l) => l.store_ms === undefined)).toBe(true);
    // The instance's own counts, on the metrics endpoint.
    const metrics = await (await fetch(`${stack.url}/__wr/api/metrics`, { headers: { authorization: `Bearer ${API_TOKEN}` } })).text();
    expect(metrics).toContain(`wr_block_tickets_handed_total{queue="default"} ${handed}`);
    expect(metrics).toContain('wr_block_holes_reported_total{queue="default"} 0');
    console.log(`Node host, ticket_blocks=${B}: ${N} arrivals, ${joins} joins, ${cost} billed commands (${(cost / N).toFixed(3)} an arrival; 3 × N / B = ${(3 * N) / B})`);
  });

  it(`at full size, ${N} more arrivals cost 3 × N / B billed commands (one join more for the block under way)`, async () => {
    stack.clearLogs();
    const before = await billed(stack);
    for (let i = 0; i < N; i++) arrivals.push(await arrive(stack));
    const cost = (await billed(stack)) - before;
    expectRising(arrivals);
    const joins = ticketLines(stack).filter((l) => l.block !== 'handed');
    // Each join took a whole block, its first number its joiner's.
    for (const line of joins) expect(line.block).toBe(`took ${line.ticket}-${line.ticket! + B - 1}`);
    expect(joins.length).toBeGreaterThanOrEqual(N / B);
    expect(joins.length).toBeLessThanOrEqual(N / B + 1);
    expect(cost).toBe(3 * joins.length);
    console.log(`Node host, ticket_blocks=${B}, blocks at full size: ${N} arrivals, ${joins.length} joins, ${cost} billed commands (3 × N / B = ${(3 * N) / B})`);
  });

  it("an expired block's rest is reported as holes: admissions go to real visitors, in number order", async () => {
    const top = arrivals.at(-1)!.ticket;
    stack.clearLogs();
    // Past the block's age: the next arrival finds its rest expired and its join reports them.
    clock.advance(DEFAULT_BLOCK_SETTINGS.maxAgeMs);
    const late = await arrive(stack);
    const line = ticketLines(stack).at(-1)!;
    expect(line.block).toMatch(/reported \d+ holes/);
    const holes = Number(/reported (\d+) holes/.exec(line.block!)![1]);
    expect(holes).toBeGreaterThan(0);
    // The block's rest, just above the last number handed out, and the late join's number above them.
    expect(late.ticket).toBe(top + holes + 1);
    arrivals.push(late);
    // Everyone but the latest: the latest still waits, at the front, behind nobody real.
    await admit(stack, arrivals.length - 1);
    clock.advance(6_000);
    expect(await comeBack(stack, arrivals.at(-2)!)).toBe('a');
    expect(await comeBack(stack, late)).toBe('w');
    // One more admission: the latest is called, the holes took none.
    await admit(stack, 1);
    clock.advance(6_000);
    expect(await comeBack(stack, late)).toBe('a');
  });
});

describe('ticket blocks on the Node host, arrivals at once (they wait for the block join under way)', () => {
  let stack: Stack;
  beforeAll(async () => {
    forgetTicketBlocks();
    stack = await startNodeStack(SETTINGS, undefined, { clock: new ManualClock() });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    forgetTicketBlocks();
  });

  it('every visitor of 5 waves of 60 concurrent arrivals holds a distinct number; arrivals that find no block wait for the join under way', async () => {
    const tickets = [(await arrive(stack)).ticket];
    stack.clearLogs();
    const before = await billed(stack);
    const perWave: number[] = [];
    for (let wave = 0; wave < 5; wave++) {
      const joinsBefore = ticketLines(stack).filter((l) => l.block !== 'handed').length;
      const arrivals = await Promise.all(Array.from({ length: 60 }, () => arrive(stack)));
      tickets.push(...arrivals.map((a) => a.ticket));
      perWave.push(ticketLines(stack).filter((l) => l.block !== 'handed').length - joinsBefore);
    }
    const cost = (await billed(stack)) - before;
    expect(new Set(tickets).size).toBe(tickets.length);
    const lines = ticketLines(stack);
    expect(lines).toHaveLength(300);
    const joins = lines.filter((l) => l.block !== 'handed');
    // Every arrival's store command was a join of 3 (a handed number, even one that waited, made none).
    expect(cost).toBe(3 * joins.length);
    // Without waiting, each wave's arrivals found no block at once and joined side by side: 57
    // joins for 300 (measured before arrivals waited). Waiting, a join serves as many as its block holds.
    expect(joins.length).toBeLessThan(40);
    // The clock stands still: no block expires, so no join reports holes, and the numbers handed
    // out are all the numbers taken but the unused rest of the last blocks.
    expect(joins.every((l) => !/holes/.test(l.block ?? ''))).toBe(true);
    const taken = joins.map((l) => /took (\d+)-(\d+)/.exec(l.block ?? '')).reduce((n, m) => n + (m === null ? 1 : Number(m[2]) - Number(m[1]) + 1), 0);
    expect(taken - 300).toBeLessThan(2 * B);
    console.log(`Node host, ticket_blocks=${B}, 5 waves of 60 at once: ${joins.length} joins for 300 arrivals (by wave: ${perWave.join(', ')}), ${cost} billed commands, ${taken} numbers taken`);
  });
});

describe('ticket blocks off on the Node host: nothing changes', () => {
  let stack: Stack;
  beforeAll(async () => {
    forgetTicketBlocks();
    stack = await startNodeStack({ ...SETTINGS, ticket_blocks: 'off' }, undefined, { clock: new ManualClock() });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
  });

  it('every arrival is a join of one number, 3 billed commands, contiguous numbers', async () => {
    const arrivals = [await arrive(stack)];
    stack.clearLogs();
    const before = await billed(stack);
    for (let i = 0; i < 60; i++) arrivals.push(await arrive(stack));
    expect((await billed(stack)) - before).toBe(3 * 60);
    expect(arrivals.map((a) => a.ticket)).toEqual(Array.from({ length: 61 }, (_, i) => i + 1));
    expect(ticketLines(stack).some((l) => l.block !== undefined)).toBe(false);
  });
});

/** The log lines once there are `count` new-ticket lines (the host prints them as it serves). */
async function linesOnce(stack: Stack, count: number): Promise<RequestLog[]> {
  await expect.poll(() => ticketLines(stack).length, { timeout: 30_000 }).toBeGreaterThanOrEqual(count);
  return ticketLines(stack);
}

describe.skipIf(!host.found)('ticket blocks on the wasm, sandboxes reused (one instance serves every request)', () => {
  let stack: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    stack = await startWasmStack({ viceroyPath: host.path, settings: { ...SETTINGS, state_cache_seconds: '2' }, sandboxReuse: true, workers: 1 });
  }, 180_000);
  afterAll(async () => {
    await stack?.close();
  });

  const arrivals: Arrival[] = [];

  it('arrivals through one instance: fewer joins than arrivals, 3 billed commands a join, numbers distinct and rising', async () => {
    arrivals.push(await arrive(stack));
    await linesOnce(stack, 1);
    stack.clearLogs();
    const N = 200;
    const before = await billed(stack);
    const started = Date.now();
    for (let i = 0; i < N; i++) arrivals.push(await arrive(stack));
    const elapsedMs = Date.now() - started;
    const cost = (await billed(stack)) - before;
    expectRising(arrivals);
    const lines = await linesOnce(stack, N);
    const handed = lines.filter((l) => l.block === 'handed').length;
    const joins = N - handed;
    // A cached state that expired is loaded by a poll (2 or 3 commands), at most once per cache
    // lifetime; the minute's first join writes its history point (one command more).
    const polls = lines.filter((l) => l.cache === 'miss').length;
    expect(cost).toBeGreaterThanOrEqual(3 * joins);
    expect(cost).toBeLessThanOrEqual(3 * joins + 3 * polls + 2);
    // A block is sized to fill in a quarter of a second at the recent rate: at more than 16
    // arrivals a second (this instance's own pace) it holds 4 numbers or more.
    const perSecond = (N * 1000) / elapsedMs;
    if (perSecond * (DEFAULT_BLOCK_SETTINGS.fillTargetMs / 1000) >= 4) expect(joins).toBeLessThan(N / 2);
    console.log(`wasm, reused sandbox, ticket_blocks=${B}: ${N} arrivals at ${perSecond.toFixed(0)}/s, ${joins} joins, ${polls} polls, ${cost} billed commands (${(cost / N).toFixed(3)} an arrival)`);
  });

  it("an expired block's rest is reported as holes and takes no admission", async () => {
    // One arrival more, its line once the host printed it (lines come as the instance serves).
    const next = async (): Promise<{ visitor: Arrival; line: RequestLog }> => {
      const count = ticketLines(stack).length;
      const visitor = await arrive(stack);
      arrivals.push(visitor);
      return { visitor, line: (await linesOnce(stack, count + 1)).at(-1)! };
    };
    // Arrivals until the instance holds numbers it has not handed out (the last block not used up).
    const lines = await linesOnce(stack, 1);
    let end = Math.max(0, ...lines.map((l) => Number(/took \d+-(\d+)/.exec(l.block ?? '')?.[1] ?? 0)));
    const deadline = Date.now() + 30_000;
    while (end <= arrivals.at(-1)!.ticket) {
      expect(Date.now(), 'a block taken and not used up').toBeLessThan(deadline);
      const { line } = await next();
      end = Math.max(end, Number(/took \d+-(\d+)/.exec(line.block ?? '')?.[1] ?? 0));
    }
    // Slow arrivals until the block has aged out: the first arrival after it reports its rest as holes.
    let late: Arrival | undefined;
    let holes = 0;
    let top = 0;
    const until = Date.now() + 30_000;
    while (late === undefined) {
      expect(Date.now(), 'holes reported').toBeLessThan(until);
      await new Promise((r) => setTimeout(r, DEFAULT_BLOCK_SETTINGS.maxAgeMs / 5));
      top = arrivals.at(-1)!.ticket;
      const { visitor, line } = await next();
      const reported = /reported (\d+) holes/.exec(line.block ?? '');
      if (reported !== null) {
        late = visitor;
        holes = Number(reported[1]);
      }
    }
    expect(holes).toBeGreaterThan(0);
    expectRising(arrivals);
    expect(late.ticket).toBe(top + holes + 1);
    // Admitting exactly the real visitors but the latest leaves the latest waiting; one more calls it.
    await admit(stack, arrivals.length - 1);
    await expect.poll(() => comeBack(stack, arrivals.at(-2)!), { timeout: 15_000 }).toBe('a');
    expect(await comeBack(stack, late)).toBe('w');
    await admit(stack, 1);
    await expect.poll(() => comeBack(stack, late!), { timeout: 15_000 }).toBe('a');
  });
});

describe.skipIf(!host.found)('ticket blocks on the wasm, a fresh sandbox per request: blocks cannot help, and nothing breaks', () => {
  let stack: Stack;
  beforeAll(async () => {
    if (!host.found) return;
    stack = await startWasmStack({ viceroyPath: host.path, settings: SETTINGS, sandboxReuse: false });
  }, 180_000);
  afterAll(async () => {
    await stack?.close();
  });
  afterEach(() => stack?.clearLogs());

  it('every join takes one number: contiguous numbers, 3 billed commands an arrival, nothing handed out', async () => {
    const arrivals = [await arrive(stack)];
    await linesOnce(stack, 1);
    stack.clearLogs();
    const N = 30;
    const before = await billed(stack);
    for (let i = 0; i < N; i++) arrivals.push(await arrive(stack));
    const lines = await linesOnce(stack, N);
    const cost = (await billed(stack)) - before;
    expect(arrivals.map((a) => a.ticket)).toEqual(Array.from({ length: N + 1 }, (_, i) => i + 1));
    expect(lines.some((l) => l.block !== undefined)).toBe(false);
    const polls = lines.filter((l) => l.cache === 'miss').length;
    expect(cost).toBeGreaterThanOrEqual(3 * N);
    expect(cost).toBeLessThanOrEqual(3 * N + 3 * polls + 2);
  });
});
