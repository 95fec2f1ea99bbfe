/**
 * Hostile traffic against one queue over two databases with ticket blocks on (`store_shards = 2`,
 * `ticket_blocks = 50`, `ticket_block_ms = 300`, `ticket_limit = 3`), on both hosts: the Node host as
 * a self-hoster runs it (bin/node-host.mjs, its own process, over two redis-servers) and the wasm on
 * the Compute host stand-in with sandboxes reused (one worker: one instance serves every request in
 * turn), over two Upstash bridges. With blocks on, an instance sends all its new visitors to one
 * database of its own; a second Node host process with blocks off over the same two databases (the
 * "populator", a database at random per join) puts visitors in both, as a deployment's other
 * instances do. Each visitor is a loopback address of its own. What is checked, directly in both
 * databases (ioredis: tails, cursors, the holes the instance reported):
 * - a flood from one address over the ticket limit while another address joins: the flooder gets
 *   its three tickets and no more, the other visitor a ticket, no 5xx, and the numbers the
 *   databases gave out are exactly the tickets held plus the holes reported (refused requests take
 *   no number and do not swell a block);
 * - forged and malformed tokens aimed at the database claim (`sh`): each is a new visitor in the
 *   instance's own database (no 5xx, never the origin), no cursor moves, and a database given no
 *   new ticket keeps its tail;
 * - the second database flushed (FLUSHALL): a ticket another instance gives out there afterwards
 *   keeps its place at the host under test while the host's cached state is still of the lost
 *   generation (it was sent to the back before visit.ts asked the store about a ticket of another
 *   era than its cache), the lost generation's tickets rejoin there, and the first is left alone;
 * - raw hostile bytes (Node host): never a 5xx, the host keeps serving, no cursor moves;
 * - the instance's own database frozen (SIGSTOP) during a burst of joins: no 5xx, the other
 *   database's called visitors get in, and after SIGCONT the frozen one's called visitors get in,
 *   the burst's pending joins get their tickets in their own database, every ticket is unique across
 *   both databases, no reported hole is held, and on the Node host every number is held or
 *   reported. (On the wasm a call that timed out ends the reused sandbox, seen on the stand-in: the
 *   next instance may pick the other database, and the blocks of the one that ended lapse unreported.)
 */
import fc from 'fast-check';
import { Redis as IORedis } from 'ioredis';
import jws from 'jws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLog } from '../src/core/ports';
import { startDemoOrigin } from '../src/node/demo-origin';
import type { RunningServer } from '../src/node/host';
import { startUpstashBridge, type UpstashBridge } from '../src/node/upstash-bridge';
import { findComputeHost } from './support/compute-host';
import { reachedOrigin } from './support/e2e-scenarios';
import { API_TOKEN, base64url, cookieFrom, KEY_1, KEY_2, payloadOf, purposeKey } from './support/fixtures';
import { fetchFrom } from './support/from-address';
import { buildNodeBundles, deploymentEnv, startNodeHostProcess, type NodeHostProcess } from './support/node-host-process';
import { rawRequest, sendRaw } from './support/raw-http';
import { startRedisServer, type RedisServer } from './support/redis-server';
import { startWasmStack, UPSTASH_TOKEN, type Stack } from './support/stack';

const computeHost = findComputeHost();
const CTL = 'wr:{default}:ctl';
const LIMIT = 3;
const BLOCK_MS = 300;

/** The host under test's settings (Config Store keys; the Node host takes each as WR_<KEY>). */
const SETTINGS: Record<string, string> = {
  store_shards: '2',
  ticket_blocks: '50',
  ticket_block_ms: String(BLOCK_MS),
  // Blocks answer handed numbers from the POP's cached state.
  state_cache_seconds: '1',
  // Nobody is let in but by the operator's admit.
  admit_per_period: '0',
  ticket_limit: String(LIMIT),
  ticket_window_seconds: '10',
  ticket_penalty_minutes: '1',
  store_timeout_ms: '1000',
  queue_timeout_seconds: '60',
  session_seconds: '600',
  refresh_seconds: '5',
};

/** The populator: blocks off (a database at random per join), no ticket limit, no cache. */
const { ticket_blocks: _blocks, ticket_block_ms: _age, ...UNBLOCKED } = SETTINGS;
const POPULATOR: Record<string, string> = { ...UNBLOCKED, ticket_limit: '0', state_cache_seconds: '0' };

function envOf(settings: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(settings).map(([key, value]) => [`WR_${key.toUpperCase()}`, value]));
}

interface Target {
  readonly kind: 'node' | 'wasm';
  /** The host under test. */
  readonly url: string;
  readonly servers: readonly RedisServer[];
  readonly direct: readonly IORedis[];
  readonly populator: NodeHostProcess;
  logs(): RequestLog[];
}

let clients = 0;

/** A loopback address no visitor of this file used before. */
function nextAddress(): string {
  const i = clients++;
  return `127.0.${60 + Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** A visitor: its own address and a one-cookie jar. */
class Visitor {
  cookie: string | undefined;
  constructor(
    public base: string,
    readonly address = nextAddress(),
  ) {}

  async get(path = '/products', headers: Record<string, string> = {}): Promise<Response> {
    const response = await fetchFrom(this.address, `${this.base}${path}`, {
      headers: { accept: 'text/html', ...headers, ...(this.cookie !== undefined && { cookie: `waiting_room=${this.cookie}` }) },
    });
    const set = cookieFrom(response);
    if (set !== undefined) this.cookie = set === '' ? undefined : set;
    return response;
  }

  get claims(): Record<string, unknown> {
    return this.cookie === undefined ? {} : payloadOf(this.cookie);
  }

  /** The database its token names (0: the first, which tokens leave unnamed). */
  get db(): number {
    return Number(this.claims['sh'] ?? 0);
  }

  get generation(): number {
    return Number(this.claims['gen'] ?? 0);
  }

  /** Its ticket (waiting or let in); 0 without one (no cookie, or a join still pending). */
  get ticket(): number {
    return Number(this.claims['t'] ?? 0);
  }

  /** Its place across both databases: database, generation, ticket. */
  get place(): string {
    return `${this.db}:${this.generation}:${this.ticket}`;
  }
}

interface DbState {
  readonly tail: number;
  readonly cursor: number;
  readonly generation: number;
  /** Reported holes above the cursor (ctl `bh`, of the current epoch and generation). */
  readonly holes: number;
}

async function readDb(direct: IORedis): Promise<DbState> {
  const [tail, cursor, gen, epoch, bh] = await direct.hmget(CTL, 'tail', 'cursor', 'gen', 'epoch', 'bh');
  const c = Number(cursor ?? 0);
  let holes = 0;
  const stored = /^(\d+):(\d+):(.*)$/.exec(bh ?? '');
  if (stored !== null && Number(stored[1]) === Number(epoch ?? 0) && Number(stored[2]) === Number(gen ?? 0)) {
    for (const [, a, b] of stored[3]!.matchAll(/(\d+)-(\d+)/g)) {
      const from = Math.max(Number(a), c + 1);
      if (Number(b) >= from) holes += Number(b) - from + 1;
    }
  }
  return { tail: Number(tail ?? 0), cursor: c, generation: Number(gen ?? 0), holes };
}

/**
 * Per database: the numbers above its cursor that no visitor of `holders` holds and no reported
 * hole covers. 0 everywhere: the databases gave out exactly the tickets held and the holes reported.
 */
async function unheld(t: Target, holders: readonly Visitor[]): Promise<number[]> {
  const states = await Promise.all(t.direct.map(readDb));
  return states.map((s, db) => s.tail - s.cursor - s.holes - holders.filter((v) => v.db === db && v.generation === s.generation && v.ticket > s.cursor).length);
}

/**
 * Waits until every number is held or reported: new visitors one after another, each once a block
 * has aged out (slow arrivals take one number each, and their joins report the holes of blocks
 * that aged out). The arrivals join `holders`.
 */
async function expectAccounted(t: Target, holders: Visitor[]): Promise<void> {
  await expect
    .poll(
      async () => {
        const v = new Visitor(t.url);
        expect((await v.get()).status).toBe(200);
        expect(v.ticket).toBeGreaterThan(0);
        holders.push(v);
        return unheld(t, holders);
      },
      { interval: 2 * BLOCK_MS, timeout: 20_000 },
    )
    .toEqual([0, 0]);
}

/** New visitors through the populator until each database has at least `each`; they then visit the host under test. */
async function populate(t: Target, each: number): Promise<Visitor[][]> {
  const byDb: Visitor[][] = [[], []];
  const deadline = Date.now() + 15_000;
  while (byDb.some((group) => group.length < each)) {
    if (Date.now() > deadline) throw new Error(`the populator placed ${byDb.map((g) => g.length).join(' and ')} visitors in the two databases`);
    const v = new Visitor(t.populator.url);
    expect((await v.get()).status).toBe(200);
    expect(v.ticket).toBeGreaterThan(0);
    byDb[v.db]!.push(v);
  }
  for (const v of byDb.flat()) v.base = t.url;
  return byDb;
}

/** The operator lets everyone waiting in (an admit stops at each database's tail). */
async function admitAll(t: Target): Promise<void> {
  const response = await fetch(`${t.url}/__wr/api/admit?count=1000`, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}` } });
  expect(response.status).toBe(200);
  await response.arrayBuffer();
}

/** A token signed as the room signs (HS256, kid k1) with the ring secret `secret`. */
function signed(claims: Record<string, unknown>, purpose: 'waiting' | 'access' = 'waiting', secret = KEY_1): string {
  return jws.sign({ header: { alg: 'HS256', kid: 'k1', typ: 'JWT' }, payload: claims, secret: purposeKey(secret, purpose) });
}

function expectNo5xx(responses: readonly Response[]): void {
  expect(responses.map((r) => r.status).filter((s) => s >= 500)).toEqual([]);
}

function defineHostileShards(target: () => Target): void {
  it('a flood from one address over ticket_limit: three tickets and no more for it, a ticket for another address, no 5xx, and no number given out beyond the tickets held and the holes reported', async () => {
    const t = target();
    expect((await Promise.all(t.direct.map(readDb))).map((s) => s.tail)).toEqual([0, 0]);
    // A line to join (blocks are taken only while somebody waits).
    const early = [new Visitor(t.url), new Visitor(t.url)];
    for (const v of early) expect((await v.get()).status).toBe(200);
    const bot = nextAddress();
    const flood = Array.from({ length: 60 }, () => new Visitor(t.url, bot));
    const person = new Visitor(t.url);
    const answers = await Promise.all([...flood.map((v) => v.get()), person.get()]);
    expectNo5xx(answers);
    const floodAnswers = answers.slice(0, flood.length);
    expect(floodAnswers.filter((r) => r.status === 200)).toHaveLength(LIMIT);
    expect(floodAnswers.filter((r) => r.status === 429)).toHaveLength(flood.length - LIMIT);
    const botHolders = flood.filter((v) => v.cookie !== undefined);
    expect(botHolders).toHaveLength(LIMIT);
    expect(answers.at(-1)!.status).toBe(200);
    expect(reachedOrigin(answers.at(-1)!)).toBe(false);
    expect(person.ticket).toBeGreaterThan(0);
    const holders = [...early, ...botHolders, person];
    expect(holders.every((v) => v.ticket > 0 && v.claims['k'] === 'w')).toBe(true);
    expect(new Set(holders.map((v) => v.place)).size).toBe(holders.length);
    // All from this instance's own database.
    expect(new Set(holders.map((v) => v.db)).size).toBe(1);
    // The refused requests took no number and did not swell a block: the numbers out there now are
    // the six held plus what the allowed arrivals' own rate asked for (6 or 7 measured on the Node
    // host); the 57 refused ones counted as arrivals would size one join's block at 30 or more.
    const states = await Promise.all(t.direct.map(readDb));
    const given = states.reduce((n, s) => n + s.tail, 0);
    expect(given).toBeGreaterThanOrEqual(holders.length);
    expect(given).toBeLessThanOrEqual(2 * holders.length);
    await expectAccounted(t, holders);
    await expect.poll(() => t.logs().filter((l) => l.client === bot && l.status === 429).length).toBe(flood.length - LIMIT);
  });

  it('forged and malformed tokens aimed at the database claim: a new ticket in the instance\'s own database each, never a 5xx or the origin, no cursor moved, a database given no ticket unchanged', async () => {
    const t = target();
    const [, second] = await populate(t, 1);
    const real = second![0]!;
    const before = await Promise.all(t.direct.map(readDb));
    const iat = Math.floor(Date.now() / 1000);
    const waiting = (extra: Record<string, unknown>) => ({ q: 'default', k: 'w', t: 1, iat, exp: iat + 300, j: iat, ...extra });
    const access = (extra: Record<string, unknown>) => ({ q: 'default', k: 'a', t: 1, iat, exp: iat + 300, j: iat, s: iat, ...extra });
    const realClaims = payloadOf(real.cookie!);
    const [realHeader, , realSignature] = real.cookie!.split('.');
    const cases: Record<string, string> = {
      'sh of a database the queue lacks (2)': signed(waiting({ sh: 2 })),
      'sh of the last database a token may name (7)': signed(waiting({ sh: 7 })),
      'sh out of range (9)': signed(waiting({ sh: 9 })),
      'sh negative': signed(waiting({ sh: -1 })),
      'sh not an integer': signed(waiting({ sh: 1.5 })),
      'sh a string': signed(waiting({ sh: '1' })),
      'sh null': signed(waiting({ sh: null })),
      'sh 0 named': signed(waiting({ sh: 0 })),
      'sh past 2^53': signed(waiting({ sh: 2 ** 53 })),
      'sh an array': signed(waiting({ sh: [1] })),
      'access token, sh of a database the queue lacks': signed(access({ sh: 2 })),
      'access token, sh a string': signed(access({ sh: '1' })),
      'access token, sh negative': signed(access({ sh: -1 })),
      'signed with another secret, sh 1': signed(waiting({ sh: 1 }), 'waiting', KEY_2),
      'access token signed with another secret, sh 1': signed(access({ sh: 1 }), 'access', KEY_2),
      'expired, sh 1': signed(waiting({ sh: 1, iat: iat - 600, exp: iat - 1 })),
      'alg none, sh 1': `${base64url({ alg: 'none', kid: 'k1', typ: 'JWT' })}.${base64url(access({ sh: 1 }))}.`,
      'a real database-2 ticket moved to database 1 (sh removed, signature kept)': `${realHeader}.${base64url({ ...realClaims, sh: undefined })}.${realSignature}`,
      'a real database-2 ticket renamed to database 3': `${realHeader}.${base64url({ ...realClaims, sh: 2 })}.${realSignature}`,
      'a pending join of a database the queue lacks': signed({ q: 'default', k: 'w', t: 0, iat, exp: iat + 60, p: '0123456789abcdef', sh: 5 }),
    };
    const visitors: Visitor[] = [];
    for (const [name, token] of Object.entries(cases)) {
      const v = new Visitor(t.url);
      v.cookie = token;
      const response = await v.get();
      expect(response.status, name).toBe(200);
      expect(reachedOrigin(response), name).toBe(false);
      expect(v.cookie, name).not.toBe(token);
      expect(v.claims['k'], name).toBe('w');
      expect(v.ticket, name).toBeGreaterThan(0);
      expect([0, 1], name).toContain(v.db);
      visitors.push(v);
    }
    // Each a new ticket, all in this instance's own database, none of them a place taken before.
    expect(new Set(visitors.map((v) => v.place)).size).toBe(visitors.length);
    expect(new Set(visitors.map((v) => v.db)).size).toBe(1);
    const home = visitors[0]!.db;
    expect(visitors.map((v) => v.place)).not.toContain(real.place);
    const after = await Promise.all(t.direct.map(readDb));
    expect(after.map((s) => s.cursor)).toEqual(before.map((s) => s.cursor));
    expect(after.map((s) => s.generation)).toEqual(before.map((s) => s.generation));
    expect(after[1 - home]!.tail).toBe(before[1 - home]!.tail);
    // The real token still is what it was: a place in database 2.
    const still = await real.get();
    expect(still.status).toBe(200);
    expect(real.db).toBe(1);
    expect(real.ticket).toBe(realClaims['t']);
  });

  it('database 2 flushed (FLUSHALL): a ticket it gives out afterwards keeps its place at a host whose cache is older, its old tickets rejoin in its new generation, no 5xx, database 1 untouched', async () => {
    const t = target();
    const [, second] = await populate(t, 2);
    const [a, b] = second!;
    const old = a!.generation;
    expect(old).toBeGreaterThan(0);
    // The host keeps database 2's state in its cache (state_cache_seconds).
    expect((await a!.get()).status).toBe(200);
    await t.direct[1]!.flushall();
    // Another instance gives out database 2's first tickets of the new generation, and one of their
    // holders comes to the host at once: its place is the store's, not a lost one.
    const [, renewed] = await populate(t, 1);
    const newcomer = renewed![0]!;
    expect(newcomer.generation).not.toBe(old);
    const placed = newcomer.place;
    const first = await readDb(t.direct[0]!);
    const answers = [await newcomer.get()];
    expect(answers[0]!.status).toBe(200);
    expect(reachedOrigin(answers[0]!)).toBe(false);
    expect(newcomer.place).toBe(placed);
    for (const v of [a!, b!]) {
      // A ticket of the lost generation: a new one in database 2 (the POP may answer from its cached
      // state for up to state_cache_seconds first).
      await expect
        .poll(
          async () => {
            const response = await v.get();
            answers.push(response);
            expect(response.status).toBe(200);
            expect(reachedOrigin(response)).toBe(false);
            return v.generation;
          },
          { interval: 200, timeout: 10_000 },
        )
        .toBe(newcomer.generation);
      expect(v.db).toBe(1);
      expect(v.claims['k']).toBe('w');
      expect(v.ticket).toBeGreaterThan(0);
    }
    expectNo5xx(answers);
    expect(new Set([newcomer, a!, b!].map((v) => v.place)).size).toBe(3);
    const flushed = await readDb(t.direct[1]!);
    expect(flushed.generation).toBe(newcomer.generation);
    expect(flushed.tail).toBeGreaterThanOrEqual(Math.max(newcomer.ticket, a!.ticket, b!.ticket));
    expect(flushed.cursor).toBe(0);
    expect(await readDb(t.direct[0]!)).toEqual(first);
  });

  it('the instance\'s own database frozen (SIGSTOP) during a burst of joins: no 5xx, the other database\'s called visitors get in; after SIGCONT every ticket is unique across both databases and accounted for', async () => {
    const t = target();
    const populated = await populate(t, 3);
    await admitAll(t);
    // The database this instance sends its new visitors to.
    const scout = new Visitor(t.url);
    expect((await scout.get()).status).toBe(200);
    const home = scout.db;
    const other = 1 - home;
    const calledHere = populated[home]!;
    const calledThere = populated[other]!;
    // One called visitor of the other database gets in once the POP's cached state shows the admit.
    const probe = calledThere[0]!;
    await expect.poll(async () => reachedOrigin(await probe.get()), { interval: 200, timeout: 10_000 }).toBe(true);

    const burst = Array.from({ length: 8 }, () => new Visitor(t.url));
    t.servers[home]!.pause();
    let during: Response[];
    try {
      during = await Promise.all([...burst.map((v) => v.get()), ...calledThere.slice(1).map((v) => v.get()), ...calledHere.map((v) => v.get())]);
    } finally {
      t.servers[home]!.resume();
    }
    expectNo5xx(during);
    expect(during.map((r) => r.status).every((s) => s === 200)).toBe(true);
    const burstAnswers = during.slice(0, burst.length);
    const thereAnswers = during.slice(burst.length, burst.length + calledThere.length - 1);
    const hereAnswers = during.slice(burst.length + calledThere.length - 1);
    // The burst joined the frozen database: those whose join got no answer hold a pending join of
    // that database (on the wasm, the instance ends after a call that timed out, and the next one
    // may send its newcomers to the other database). Nobody is let in beyond a call: a number handed
    // from a block taken before the operator's admit may be one the admit called (docs/architecture.md,
    // "Past one database").
    const pending = burst.filter((v) => v.ticket === 0);
    expect(pending.length).toBeGreaterThan(0);
    for (const v of pending) expect(v.claims).toMatchObject({ k: 'w', t: 0, p: expect.any(String), ...(home === 1 && { sh: 1 }) });
    const calledBefore = await Promise.all(t.direct.map(readDb));
    burst.forEach((v, i) => {
      if (reachedOrigin(burstAnswers[i]!)) expect(v.ticket).toBeLessThanOrEqual(calledBefore[v.db]!.cursor);
    });
    // The other database answered: its called visitors got in.
    expect(thereAnswers.map(reachedOrigin)).toEqual(calledThere.slice(1).map(() => true));
    // The frozen one's called visitors: let in on the POP's cached state (a rate-mode admission
    // needs nothing from the store afterwards), or held with their places kept.
    calledHere.forEach((v, i) => {
      expect(v.db).toBe(home);
      expect(v.claims['k']).toBe(reachedOrigin(hereAnswers[i]!) ? 'a' : 'w');
    });

    // Answering again: its called visitors get in, the burst gets its tickets.
    for (const v of calledHere) await expect.poll(async () => reachedOrigin(await v.get()), { interval: 200, timeout: 10_000 }).toBe(true);
    for (const v of burst) {
      await expect
        .poll(
          async () => {
            const response = await v.get();
            expect(response.status).toBe(200);
            return v.ticket;
          },
          { interval: 200, timeout: 10_000 },
        )
        .toBeGreaterThan(0);
    }
    // A pending join is asked again in its own database (its key gives the ticket the join took there).
    for (const v of pending) expect(v.db).toBe(home);
    const everyone = [...populated.flat(), scout, ...burst];
    expect(everyone.every((v) => v.ticket > 0)).toBe(true);
    expect(new Set(everyone.map((v) => v.place)).size).toBe(everyone.length);
    const states = await Promise.all(t.direct.map(readDb));
    for (const v of everyone) expect(v.ticket).toBeLessThanOrEqual(states[v.db]!.tail);
    // No reported hole is a number somebody holds. On the Node host (one process, which never ends)
    // every number the databases gave out meanwhile is held or was reported as a hole; on the wasm an
    // ended instance's blocks are never reported (they lapse as abandoned tickets do).
    for (const n of await unheld(t, [scout, ...burst])) expect(n).toBeGreaterThanOrEqual(0);
    if (t.kind === 'node') await expectAccounted(t, [scout, ...burst]);
  });
}

let nodeBuilt = false;
function buildOnce(): void {
  if (nodeBuilt) return;
  buildNodeBundles();
  nodeBuilt = true;
}

async function stopProcess(p: NodeHostProcess | undefined): Promise<void> {
  if (p === undefined || p.child.exitCode !== null) return;
  const exited = new Promise((done) => p.child.once('exit', done));
  p.child.kill('SIGTERM');
  await exited;
}

describe('the Node host over two databases with ticket blocks, under hostile traffic', () => {
  let servers: RedisServer[] = [];
  let direct: IORedis[] = [];
  let origin: RunningServer;
  let main: NodeHostProcess;
  let populator: NodeHostProcess;
  let t: Target;

  beforeAll(async () => {
    buildOnce();
    servers = [await startRedisServer(), await startRedisServer()];
    direct = servers.map((s) => new IORedis(s.url));
    origin = await startDemoOrigin();
    const both = { ...deploymentEnv(servers[0]!.url, origin.url), REDIS_SHARD_URLS: servers[1]!.url };
    [main, populator] = await Promise.all([startNodeHostProcess({ ...both, ...envOf(SETTINGS) }), startNodeHostProcess({ ...both, ...envOf(POPULATOR) })]);
    t = { kind: 'node', url: main.url, servers, direct, populator, logs: () => main.logs() };
  }, 120_000);

  afterAll(async () => {
    await Promise.allSettled([stopProcess(main), stopProcess(populator)]);
    for (const d of direct) d.disconnect();
    await origin?.close();
    for (const s of servers) await s.stop();
  });

  defineHostileShards(() => t);

  it('raw hostile bytes aimed at the token and its database: never a 5xx, the host keeps serving, no cursor moves', async () => {
    const [first, second] = await populate(t, 1);
    const real = second![0]!.cookie!;
    const before = await Promise.all(direct.map(readDb));
    const h = `127.0.0.1:${main.port}`;
    const iat = Math.floor(Date.now() / 1000);
    const forged = (sh: unknown) => signed({ q: 'default', k: 'a', t: 1, iat, exp: iat + 300, j: iat, s: iat, sh }, 'access');
    const cases: [string, string | Buffer][] = [
      ['an access token of a database the queue lacks', rawRequest('GET', '/products', [['Host', h], ['Cookie', `waiting_room=${forged(3)}`]])],
      ['sixty cookies of our name, each naming another database', rawRequest('GET', '/products', [['Host', h], ['Cookie', Array.from({ length: 60 }, (_, i) => `waiting_room=${forged(i % 10)}`).join('; ')]])],
      ['a real database-2 token followed by bytes that are not UTF-8', Buffer.concat([Buffer.from(`GET /products HTTP/1.1\r\nHost: ${h}\r\nCookie: waiting_room=${real}`), Buffer.from([0xff, 0xfe, 0x80, 0xc0]), Buffer.from('\r\nConnection: close\r\n\r\n')])],
      ['a real database-2 token cut by a NUL', rawRequest('GET', '/products', [['Host', h], ['Cookie', `waiting_room=${real.slice(0, 30)}\u0000${real.slice(30)}`]])],
      ['a folded Cookie header carrying a second token', `GET /products HTTP/1.1\r\nHost: ${h}\r\nCookie: waiting_room=${real}\r\n ; waiting_room=${forged(2)}\r\nConnection: close\r\n\r\n`],
      ['a 64 KB cookie', rawRequest('GET', '/products', [['Host', h], ['Cookie', `waiting_room=${'A'.repeat(65_536)}`]])],
      ['a token of 8,000 dots', rawRequest('GET', '/products', [['Host', h], ['Cookie', `waiting_room=${'.'.repeat(8_000)}`]])],
      ['Content-Length and Transfer-Encoding together, an admit hidden in the body', `POST /products HTTP/1.1\r\nHost: ${h}\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\nCookie: waiting_room=${real}\r\n\r\n0\r\n\r\nPOST /__wr/api/admit?count=1000 HTTP/1.1\r\nHost: ${h}\r\nCookie: waiting_room=${forged(1)}\r\n\r\n`],
      ['the admit API with a bearer of bytes that are not UTF-8 and a forged cookie', Buffer.concat([Buffer.from(`POST /__wr/api/admit?count=1000 HTTP/1.1\r\nHost: ${h}\r\nAuthorization: Bearer `), Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(`\r\nCookie: waiting_room=${forged(1)}\r\nConnection: close\r\n\r\n`)])],
      ['an absolute-form target of another host, with a database-2 token', rawRequest('GET', 'http://evil.example/products', [['Host', h], ['Cookie', `waiting_room=${real}`]])],
      ['HTTP/1.0 with no Host, with a database-2 token', `GET /products HTTP/1.0\r\nCookie: waiting_room=${real}\r\n\r\n`],
      ['a status request naming a queue and a database of its own', rawRequest('GET', '/__wr/status?queue=default&sh=5', [['Host', h], ['Accept', 'application/json'], ['Cookie', `waiting_room=${forged(5)}`]])],
      ['a TLS ClientHello', Buffer.from('16030100a5010000a10303000102030405060708090a0b0c0d0e0f', 'hex')],
      ['binary noise', Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 37 + 11) % 256))],
    ];
    for (const [name, bytes] of cases) {
      const answer = await sendRaw(main.port, bytes, 3000, nextAddress());
      expect(answer.status === undefined || answer.status < 500, `${name}: ${String(answer.status)}`).toBe(true);
    }
    // Random bytes as the cookie's value, the request always ended.
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 300 }), async (noise) => {
        const bytes = Buffer.concat([Buffer.from(`GET /products HTTP/1.1\r\nHost: ${h}\r\nCookie: waiting_room=`), Buffer.from(noise), Buffer.from('\r\nConnection: close\r\n\r\n')]);
        const answer = await sendRaw(main.port, bytes, 3000, nextAddress());
        return answer.status === undefined || answer.status < 500;
      }),
      { numRuns: 30, seed: 2026 },
    );
    expect(main.child.exitCode).toBeNull();
    expect((await Promise.all(direct.map(readDb))).map((s) => s.cursor)).toEqual(before.map((s) => s.cursor));
    // Still serving: a new visitor gets a ticket, and the real visitors of both databases keep their places.
    const fresh = new Visitor(t.url);
    expect((await fresh.get()).status).toBe(200);
    expect(fresh.ticket).toBeGreaterThan(0);
    for (const v of [first![0]!, second![0]!]) {
      const place = v.place;
      expect((await v.get()).status).toBe(200);
      expect(v.place).toBe(place);
    }
    expect(main.logs().filter((l) => l.status >= 500)).toEqual([]);
  });
});

describe.skipIf(!computeHost.found)('the wasm (sandboxes reused) over two databases with ticket blocks, under hostile traffic', () => {
  let stack: Stack;
  let second: RedisServer;
  let bridge: UpstashBridge;
  let secondDirect: IORedis;
  let populator: NodeHostProcess;
  let t: Target;

  beforeAll(async () => {
    if (!computeHost.found) return;
    buildOnce();
    second = await startRedisServer();
    bridge = await startUpstashBridge({ redisUrl: second.url, token: UPSTASH_TOKEN });
    secondDirect = new IORedis(second.url);
    stack = await startWasmStack({
      viceroyPath: computeHost.path,
      settings: { ...SETTINGS, upstash_shard_urls: bridge.url },
      secrets: { upstash_shard_tokens: UPSTASH_TOKEN },
      backends: { upstash_2: bridge.url },
      sandboxReuse: true,
      workers: 1,
    });
    // The populator speaks Redis to the servers behind the bridges; it signs with the same key.
    populator = await startNodeHostProcess({ ...deploymentEnv(stack.redis.url, stack.origin.url), REDIS_SHARD_URLS: second.url, ...envOf(POPULATOR) });
    t = { kind: 'wasm', url: stack.url, servers: [stack.redis, second], direct: [stack.direct, secondDirect], populator, logs: () => stack.logs() };
  }, 180_000);

  afterAll(async () => {
    await stopProcess(populator);
    await stack?.close();
    secondDirect?.disconnect();
    await bridge?.close();
    await second?.stop();
  });

  defineHostileShards(() => t);

  it('logged no 5xx', () => {
    expect(stack.logs().filter((l) => l.status >= 500)).toEqual([]);
  });
});
