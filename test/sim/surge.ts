/**
 * `npm run simulate -- --surge` (issue 34): a sale of 100,000 arrivals a second for 60 s, in virtual
 * time, on the real store code (the product's ShardedStore over an UpstashQueueStore and its scripts
 * per database, one real redis-server each: `store_shards` as the product runs it), with the rest of
 * such a sale's traffic on top:
 *   - POPS POPs, each loading the queue's state once per cache lifetime from every database (the
 *     waiting crowd's polls are cache hits: they cost the store nothing, but they keep sandboxes busy);
 *   - automatic admission's period steps (inside those loads and the joins);
 *   - a claim by every called visitor, some time within a poll interval after its call;
 *   - an operator's `admit N` over all databases every few seconds (split by the product's ShardedStore).
 * The arrivals go to instances, the reused sandboxes of their POP. A POP keeps as many as Little's
 * law says its requests (arrivals and the crowd's polls) keep busy, at SERVICE_MS each and a
 * utilisation of UTILISATION; an instance ends after a random lifetime, taking its unreported holes
 * with it. Each instance runs the real allocator (src/core/ticket-blocks.ts) and joins the store with
 * its joinOptions(), so the joins, blocks and holes are the ones the edge would make.
 *
 * Virtual time moves in TICK_MS steps; a store call takes no virtual time however long it really
 * takes. Within a tick each instance serves its arrivals one at a time (a sandbox runs one request at
 * a time), awaiting its join when it needs one; the instances run concurrently.
 *
 * Counted per database: billed commands in every virtual second (INFO commandstats snapshots at each
 * second's boundary, less the simulation's own commands: test/sim/sim-support.ts's Direct). Known
 * for every ticket number of every database: the visitor who holds it and when they arrived, or that
 * it is a hole, reported or not. From that, at the end: the largest inversion (a visitor who arrived
 * before another but is called after them; the largest such arrival-time gap), and for every admit
 * what it let in.
 *
 * The alternatives (one database with today's joins, N databases spread by a hash, blocks on one, on
 * N) run the same sale. Those that make a store call per arrival run at a tenth of the rate (at full
 * rate a virtual second would take minutes here) and their full-rate figures are computed from a
 * join's measured cost; the block runs other than the chosen design run 10 virtual seconds.
 *
 * The store reaches Redis over ioredis by default (`--surge-transport=direct`: the Node host's
 * store, the same class and scripts, so the same billed commands, without the HTTP that made the
 * bridge about five times slower on the 2-core machine), and the chosen design then runs one more
 * virtual second through the Upstash client and the REST bridge (a worker thread per database) to
 * show the counts agree; `--surge-transport=rest` runs everything through the bridge, and
 * test/surge.test.ts does. `--surge-quick` runs 20,000 a second; `--surge-only=KEY` one alternative
 * (b1, hash, chosen, blocks, blocks-long, blocks-n, rest-check); `--surge-rate=` and
 * `--surge-seconds=` change the rate and the chosen design's length.
 */
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import { parseConfig } from '../../src/core/config';
import { admissionPolicy } from '../../src/core/context';
import type { AdmissionPolicy, BlockHoles, JoinOptions, JoinResult, QueueState, QueueStore } from '../../src/core/ports';
import { blockSettings, DEFAULT_BLOCK_SETTINGS, TicketBlocks, type BlockSettings } from '../../src/core/ticket-blocks';
import { createRedisQueueStore } from '../../src/store/redis-store';
import { DEFAULT_KEY_PREFIX, buildQueueKeys } from '../../src/store/scripts';
import { ShardedStore } from '../../src/store/sharded-store';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { source } from '../support/fixtures';
import { table } from '../support/markdown-table';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import { seededRandom } from '../support/seeded-random';
import { checkSnapshots, Direct, messageOf, pickPop, popShares, runLimited, startBridgeWorker, sum } from './sim-support';

// ---------------------------------------------------------------------------------------------
// Parameters

/** Upstash pay-as-you-go: the cap per database and the price. */
export const COMMANDS_PER_S_CAP = 10_000;
const USD_PER_100K_COMMANDS = 0.2;
/** The order bound issue 34 states: a visitor who arrived more than this before another is never called after them. */
export const ORDER_BOUND_MS = 1_000;
const SALE_OPENS_MS = Date.UTC(2026, 10, 29, 12, 0, 0);
const QUEUE = 'sale';
const BRIDGE_TOKEN = 'surge-bridge-token-0123456789abcdef';

/** How one alternative runs. */
export interface SurgeOptions {
  readonly label: string;
  readonly arrivalsPerS: number;
  /** Virtual seconds of arrivals. */
  readonly seconds: number;
  readonly databases: number;
  /** The allocator's settings; maxSize 1 is today's join (one per arrival). */
  readonly blocks: BlockSettings;
  /**
   * How arrivals are spread over the databases: `visitor`, by a hash of the visitor (each instance
   * keeps an allocator per database); `instance`, by a hash of the instance (all its arrivals go to
   * one database, so its allocator sees its whole rate).
   */
  readonly spread: 'visitor' | 'instance';
  readonly pops: number;
  /** Zipf exponent of the POPs' shares. @default 0.5 */
  readonly popSkew?: number;
  /** Automatic admission over all databases, per second (each database: its share). */
  readonly admitPerS: number;
  /** The operator's `admit N` with N = count x databases (the product's ShardedStore splits it by their waiting), every `everyS` virtual seconds (0: none), `atS` into each such stretch (@default everyS - 0.5). */
  readonly operatorAdmit: { readonly count: number; readonly everyS: number; readonly atS?: number };
  /** A request's time in a sandbox, ms (Little's law: busy sandboxes = requests/s x this). @default 2 */
  readonly serviceMs?: number;
  /** How busy a POP keeps its sandboxes (it keeps busy / this). @default 0.5 */
  readonly utilisation?: number;
  /** A sandbox's mean lifetime (exponential), s. @default 20 */
  readonly instanceLifeS?: number;
  /** @default 10 */
  readonly tickMs?: number;
  /** The POPs' state cache lifetime, s. @default 1 */
  readonly stateCacheSeconds?: number;
  readonly seed?: number;
  /** Store calls in flight at once. @default 64 */
  readonly concurrency?: number;
  /**
   * How the store reaches each redis-server: `rest`, the Upstash client through the REST bridge
   * (`startBridge` starts one: a worker thread from the bundle, in-process in a test); `direct`, the
   * same store class and scripts over ioredis (src/store/redis-store.ts, the Node host's store),
   * the same billed commands without the HTTP, for runs too long for the bridge on this machine.
   */
  readonly transport: 'rest' | 'direct';
  readonly startBridge?: (redisUrl: string, token: string) => Promise<{ readonly url: string; stop(): Promise<void> }>;
  /** The run is abandoned past this (Date.now()). */
  readonly deadline?: number;
  readonly progress?: (line: string) => void;
}

const REFRESH_SECONDS = 20;
/** A called visitor told to wait claims again at its next polls, up to this many claims in all. */
const CLAIM_ATTEMPTS = 3;

// ---------------------------------------------------------------------------------------------
// Ticket numbers of one database

const UNTAKEN = 0;
const VISITOR = 1;
const REPORTED_HOLE = 2;
/** Taken in a block and not (yet) handed out: at the end, a hole nobody reported. */
const UNREPORTED_HOLE = 3;
/** Left in a live instance's blocks when the run ended: its next join would report them. */
const HOLE_AT_END = 4;
/** Reported only after the cursor had called it: it was called as an unreported hole is. */
const REPORTED_LATE = 5;

/** What every ticket number of one database became, grown as the tail grows. */
class Numbers {
  mark = new Uint8Array(1 << 16);
  /** Arrival, ms since the sale opened (visitors only). */
  arrival = new Float32Array(1 << 16);
  /** When it was called, ms since the sale opened (NaN: not called). */
  called = new Float32Array(1 << 16).fill(NaN);
  tail = 0;
  ensure(n: number): void {
    if (n < this.mark.length) return;
    let size = this.mark.length;
    while (size <= n) size *= 2;
    const mark = new Uint8Array(size);
    mark.set(this.mark);
    const arrival = new Float32Array(size);
    arrival.set(this.arrival);
    const called = new Float32Array(size).fill(NaN);
    called.set(this.called);
    this.mark = mark;
    this.arrival = arrival;
    this.called = called;
  }
}

interface Database {
  readonly index: number;
  readonly server: RedisServer;
  readonly bridge: { readonly url: string; stop(): Promise<void> };
  readonly ioredis: IORedis;
  readonly direct: Direct;
  readonly store: QueueStore;
  readonly numbers: Numbers;
  /** The highest cursor any answer showed, and when (ms since the sale opened). */
  cursor: number;
  /** Billed commands per virtual second. */
  readonly billed: number[];
  readonly joinsPerS: number[];
  lastBilled: number;
  joins: number;
  /** Numbers taken by block joins, handed locally, reported as holes. */
  blockNumbers: number;
}

interface Instance {
  readonly pop: number;
  /** Index of its database when spread by instance. */
  readonly db: number;
  /** One allocator per database (spread by visitor), or one. */
  readonly blocks: TicketBlocks[];
  readonly endsAtMs: number;
  /** Arrivals of the current tick (ms since the sale opened; and their database). */
  readonly pending: number[];
  readonly pendingDb: number[];
}

export interface AdmitCheck {
  readonly db: number;
  readonly atS: number;
  /** This database's part of the product's `admit N` over all of them: what it let in (see runSurge's figures). */
  asked: number;
  admitted: number;
  readonly from: number;
  readonly to: number;
  /** Over from..to, at the end of the run. */
  visitors: number;
  reportedHoles: number;
  unreportedHoles: number;
}

export interface DatabaseFigures {
  readonly index: number;
  readonly billed: readonly number[];
  readonly peakBilled: number;
  readonly peakSecond: number;
  readonly averageBilled: number;
  readonly joins: number;
  readonly tail: number;
  readonly cursor: number;
  readonly visitors: number;
  readonly reportedHoles: number;
  readonly unreportedHoles: number;
  /** Reported holes the cursor passed, and unreported ones it called. */
  readonly reportedHolesPassed: number;
  readonly unreportedHolesCalled: number;
  /** Left in live instances' blocks at the end (their next join would report them). */
  readonly holesAtEnd: number;
  readonly visitorsCalled: number;
}

export interface SurgeResult {
  readonly options: SurgeOptions;
  readonly databases: readonly DatabaseFigures[];
  readonly arrivals: number;
  readonly joins: number;
  readonly handedLocally: number;
  /** The largest arrival-time gap of a pair called out of order: among those called in the run (uncalled count as called after all). */
  readonly inversionCalledMs: number;
  /** The same in ticket order within each database, over every visitor (the order they will be called in). */
  readonly inversionTicketMs: number;
  /** Within one instance: a later arrival given a lower number (must be 0). */
  readonly instanceOrderBreaks: number;
  readonly admits: readonly AdmitCheck[];
  readonly claims: { readonly sent: number; readonly claimed: number };
  readonly instances: { readonly peak: number; readonly average: number; readonly ended: number; readonly perPopPeak: number };
  /** Faults found: a reported hole that a visitor holds, a number handed twice, an admit that let in other than it said. */
  readonly faults: readonly string[];
  readonly wallMs: number;
}

// ---------------------------------------------------------------------------------------------
// One run

async function startDatabase(index: number, options: SurgeOptions): Promise<Database> {
  const server = await startRedisServer();
  try {
    const ioredis = new IORedis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await ioredis.connect();
    let bridge: Database['bridge'];
    let store: QueueStore;
    if (options.transport === 'rest') {
      if (options.startBridge === undefined) throw new Error('the rest transport needs startBridge');
      bridge = await options.startBridge(server.url, BRIDGE_TOKEN);
      store = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: BRIDGE_TOKEN })) });
    } else {
      const connection = new IORedis(server.url, { maxRetriesPerRequest: 1 });
      bridge = { url: server.url, stop: async () => connection.disconnect() };
      store = createRedisQueueStore({ redis: connection });
    }
    return { index, server, bridge, ioredis, direct: new Direct(ioredis), store, numbers: new Numbers(), cursor: 0, billed: [], joinsPerS: [], lastBilled: 0, joins: 0, blockNumbers: 0 };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

async function stopDatabase(db: Database): Promise<void> {
  db.ioredis.disconnect();
  await db.bridge.stop().catch(() => {});
  await db.server.stop().catch(() => {});
}

export async function runSurge(options: SurgeOptions): Promise<SurgeResult> {
  const started = Date.now();
  const tickMs = options.tickMs ?? 10;
  const serviceMs = options.serviceMs ?? 2;
  const utilisation = options.utilisation ?? 0.5;
  const lifeMs = (options.instanceLifeS ?? 20) * 1000;
  const concurrency = options.concurrency ?? 64;
  const n = options.databases;
  const random = seededRandom(options.seed ?? 20_261_129);
  const shares = popShares(options.pops, options.popSkew ?? 0.5);
  const faults: string[] = [];
  const fault = (line: string): void => {
    if (faults.length < 20) faults.push(line);
  };

  // The product's settings: admit_per_period over all databases, which ShardedStore splits exactly.
  const config = parseConfig(
    source({
      queue_name: QUEUE,
      store_shards: String(n),
      refresh_seconds: String(REFRESH_SECONDS),
      queue_timeout_seconds: '600',
      admit_per_period: String(options.admitPerS),
      admit_period_seconds: '1',
      store_timeout_ms: '5000',
      state_cache_seconds: String(options.stateCacheSeconds ?? 1),
    }),
  );
  const policy: AdmissionPolicy = admissionPolicy(config);
  /** A visitor's call in database `d`: the product's policy naming it (AdmissionPolicy.shard). */
  const on = (d: number): AdmissionPolicy => ({ ...policy, shard: d });
  const ctlKey = buildQueueKeys(DEFAULT_KEY_PREFIX, QUEUE).ctl;
  const ttlMs = config.stateCacheSeconds * 1000;

  const databases: Database[] = [];
  try {
    for (let d = 0; d < n; d++) databases.push(await startDatabase(d, options));
    // The product's store over the databases (src/store/sharded-store.ts): every call below goes through it.
    const product = new ShardedStore(databases.map((db) => db.store));
    // Scripts loaded once (EVALSHA's NOSCRIPT fallback) on another queue, so every measured call is one command.
    for (const db of databases) {
      await product.join('warmup', SALE_OPENS_MS, on(db.index), { block: { size: 2 } });
      await product.poll('warmup', SALE_OPENS_MS, on(db.index));
      await product.admit('warmup', 1, SALE_OPENS_MS, on(db.index), 'warm');
      await product.claim('warmup', 1, SALE_OPENS_MS, on(db.index), 0);
      await checkSnapshots(db.direct);
      db.lastBilled = (await db.direct.counts()).billed;
    }

    // -- Instances
    const popInstances: Instance[][] = Array.from({ length: options.pops }, () => []);
    let instanceSeq = 0;
    let ended = 0;
    const instanceTotals: number[] = [];
    let perPopPeak = 0;
    const newInstance = (pop: number, nowMs: number): Instance => {
      const id = instanceSeq++;
      const blocks = Array.from({ length: options.spread === 'visitor' ? n : 1 }, () => new TicketBlocks(options.blocks));
      return { pop, db: id % n, blocks, endsAtMs: nowMs - lifeMs * Math.log(1 - random()), pending: [], pendingDb: [] };
    };
    const arrivedAt = new Float64Array(options.pops);
    const shareOf = (p: number): number => shares[p]! - (p === 0 ? 0 : shares[p - 1]!);
    /** Instances each POP needs: Little's law over its arrivals and its crowd's polls. */
    const resize = (nowMs: number): void => {
      let total = 0;
      for (let p = 0; p < options.pops; p++) {
        const list = popInstances[p]!;
        // Ended sandboxes go, with their live blocks and unreported holes (they stay unreported).
        for (let i = list.length - 1; i >= 0; i--) {
          if (list[i]!.endsAtMs <= nowMs) {
            list.splice(i, 1);
            ended++;
          }
        }
        // This second's arrivals (the POP's share of the rate) and the polls of everyone waiting there.
        const requestsPerS = shareOf(p) * options.arrivalsPerS + arrivedAt[p]! / REFRESH_SECONDS;
        const needed = Math.max(1, Math.ceil((requestsPerS * serviceMs) / 1000 / utilisation));
        while (list.length < needed) list.push(newInstance(p, nowMs));
        while (list.length > needed) {
          list.splice(Math.floor(random() * list.length), 1);
          ended++;
        }
        total += list.length;
        perPopPeak = Math.max(perPopPeak, list.length);
      }
      instanceTotals.push(total);
    };

    // -- What answers tell: the cursor, and who it called
    const claimsAt = new Map<number, { db: number; ticket: number; attempt: number }[]>();
    const queueClaim = (db: Database, ticket: number, atMs: number, attempt: number): void => {
      const at = Math.floor(atMs / tickMs) + 1;
      let list = claimsAt.get(at);
      if (list === undefined) claimsAt.set(at, (list = []));
      list.push({ db: db.index, ticket, attempt });
    };
    /** The visitor finds itself called at its next poll, some time within a poll interval, and claims. */
    const scheduleClaim = (db: Database, ticket: number, callMs: number): void => {
      db.numbers.called[ticket] = callMs;
      queueClaim(db, ticket, callMs + random() * REFRESH_SECONDS * 1000, 1);
    };
    const sawState = (db: Database, state: QueueState, nowMs: number): void => {
      if (state.cursor <= db.cursor) return;
      const nums = db.numbers;
      nums.ensure(state.cursor);
      for (let k = db.cursor + 1; k <= state.cursor; k++) {
        if (nums.mark[k] === VISITOR) scheduleClaim(db, k, nowMs);
        else if (nums.mark[k] !== UNTAKEN) nums.called[k] = nowMs;
      }
      db.cursor = state.cursor;
    };
    /** A visitor holds `ticket` from `arrivalMs` on. */
    const hand = (db: Database, ticket: number, arrivalMs: number, nowMs: number, walkedIn = false): void => {
      const nums = db.numbers;
      nums.ensure(ticket);
      if (nums.mark[ticket] === VISITOR) fault(`database ${db.index}: ticket ${ticket} handed twice`);
      else if (nums.mark[ticket] === REPORTED_HOLE) fault(`database ${db.index}: ticket ${ticket} handed after it was reported a hole`);
      nums.mark[ticket] = VISITOR;
      nums.arrival[ticket] = arrivalMs;
      // Already called (the cursor passed it while it sat in a block): the visitor claims at its
      // first poll. One whose own join walked it in has claimed already.
      if (walkedIn) nums.called[ticket] = nowMs;
      else if (ticket <= db.cursor) scheduleClaim(db, ticket, nowMs);
    };
    const reported = (db: Database, holes: BlockHoles | undefined): void => {
      if (holes === undefined) return;
      const nums = db.numbers;
      for (const r of holes.ranges) {
        nums.ensure(r.to);
        for (let k = r.from; k <= r.to; k++) {
          if (nums.mark[k] === VISITOR) fault(`database ${db.index}: ticket ${k} reported a hole but handed out`);
          nums.mark[k] = k <= db.cursor ? REPORTED_LATE : REPORTED_HOLE;
        }
      }
    };

    let joins = 0;
    let handedLocally = 0;
    let instanceOrderBreaks = 0;
    let claimsSent = 0;
    let claimed = 0;
    const admits: AdmitCheck[] = [];
    const productAdmits: { atS: number; asked: number; admitted: number }[] = [];

    /** One instance serves its tick's arrivals in arrival order, joining when its allocator has nothing. */
    const serve = async (inst: Instance, nowMs: number): Promise<void> => {
      const lastHanded = new Map<number, number>();
      for (let i = 0; i < inst.pending.length; i++) {
        const arrivalMs = inst.pending[i]!;
        const d = options.spread === 'visitor' ? inst.pendingDb[i]! : inst.db;
        const db = databases[d]!;
        const blocks = inst.blocks[options.spread === 'visitor' ? d : 0]!;
        let ticket: number;
        let walkedIn = false;
        const handed = blocks.next(arrivalMs);
        if (handed !== undefined) {
          ticket = handed.ticket;
          handedLocally++;
        } else {
          const ask = blocks.joinOptions(arrivalMs);
          const joinOptions: JoinOptions = ask.size > 1 || ask.holes !== undefined ? { block: { size: ask.size, holes: ask.holes } } : {};
          let result: JoinResult;
          try {
            result = await product.join(QUEUE, Math.floor(SALE_OPENS_MS + arrivalMs), on(d), joinOptions);
          } catch (error) {
            blocks.failed(ask.holes);
            throw error;
          }
          joins++;
          db.joins++;
          reported(db, ask.holes);
          blocks.accept(result, arrivalMs);
          const nums = db.numbers;
          if (result.block !== undefined) {
            nums.ensure(result.block.to);
            db.blockNumbers += result.block.to - result.block.from + 1;
            for (let k = result.block.from; k <= result.block.to; k++) if (nums.mark[k] === UNTAKEN) nums.mark[k] = UNREPORTED_HOLE;
          }
          ticket = result.ticket;
          walkedIn = result.claimed;
          nums.tail = Math.max(nums.tail, result.tail);
          sawState(db, result, nowMs);
        }
        const before = lastHanded.get(d);
        if (before !== undefined && ticket < before) instanceOrderBreaks++;
        lastHanded.set(d, ticket);
        hand(db, ticket, arrivalMs, nowMs, walkedIn);
      }
      inst.pending.length = 0;
      inst.pendingDb.length = 0;
    };

    // -- The clock
    const ticksPerS = 1000 / tickMs;
    const endTick = options.seconds * ticksPerS;
    // The calls after the last arrivals: long enough for the last claims.
    const tailTicks = 0;
    let carry = 0;
    const admitEvery = options.operatorAdmit.everyS * ticksPerS;
    const admitAt = Math.round((options.operatorAdmit.atS ?? options.operatorAdmit.everyS - 0.5) * ticksPerS) % Math.max(1, admitEvery);
    for (let tick = 0; tick < endTick + tailTicks; tick++) {
      if (options.deadline !== undefined && Date.now() > options.deadline) throw new Error(`${options.label}: the run passed its wall-time limit at virtual ${(tick * tickMs) / 1000} s`);
      const nowMs = tick * tickMs;
      const now = SALE_OPENS_MS + nowMs;
      if (tick % ticksPerS === 0) {
        if (tick > 0) {
          for (const db of databases) {
            const { billed } = await db.direct.counts();
            db.billed.push(billed - db.lastBilled);
            db.lastBilled = billed;
            db.joinsPerS.push(db.joins - sum(db.joinsPerS));
          }
          options.progress?.(`${options.label}: virtual ${tick / ticksPerS} s, peak so far ${Math.max(...databases.map((db) => Math.max(...db.billed)))} billed/s, ${joins} joins, ${((Date.now() - started) / 1000).toFixed(0)} s wall`);
        }
        resize(nowMs);
      }
      // This tick's arrivals, spread evenly over it, each to its POP and one of the POP's instances.
      const tasks: (() => Promise<void>)[] = [];
      if (tick < endTick) {
        carry += (options.arrivalsPerS * tickMs) / 1000;
        const count = Math.floor(carry);
        carry -= count;
        const busy = new Set<Instance>();
        for (let i = 0; i < count; i++) {
          const arrivalMs = nowMs + ((i + 0.5) * tickMs) / count;
          const p = pickPop(shares, random());
          arrivedAt[p]! += 1;
          const list = popInstances[p]!;
          const inst = list[Math.floor(random() * list.length)]!;
          inst.pending.push(arrivalMs);
          inst.pendingDb.push(Math.floor(random() * n));
          busy.add(inst);
        }
        for (const inst of busy) tasks.push(() => serve(inst, nowMs));
      }
      // Each POP loads each database's state once per cache lifetime, POPs staggered over it.
      for (let p = 0; p < options.pops; p++) {
        const offset = Math.floor((p * ttlMs) / options.pops / tickMs) * tickMs;
        if ((nowMs - offset) % ttlMs !== 0) continue;
        for (const db of databases) {
          tasks.push(async () => {
            sawState(db, await product.poll(QUEUE, now, on(db.index)), nowMs);
          });
        }
      }
      // Called visitors claim.
      for (const c of claimsAt.get(tick) ?? []) {
        const db = databases[c.db]!;
        tasks.push(async () => {
          claimsSent++;
          const waited = Math.max(0, Math.floor(nowMs - db.numbers.arrival[c.ticket]!));
          const r = await product.claim(QUEUE, c.ticket, now, on(c.db), waited);
          if (r.claimed) claimed++;
          // Told to wait (the rate window is full): the visitor claims again at its next poll.
          else if (c.attempt < CLAIM_ATTEMPTS) queueClaim(db, c.ticket, nowMs + REFRESH_SECONDS * 1000, c.attempt + 1);
          sawState(db, r, nowMs);
        });
      }
      claimsAt.delete(tick);
      await runLimited(tasks, concurrency);
      // The operator's admit, half a second before each `everyS` boundary (its period's step has run by then), alone.
      // The product's `admit N` over all databases (N = count x databases), split by their waiting;
      // each database's cursor read around it (the simulation's own commands, not billed).
      if (admitEvery > 0 && tick % admitEvery === admitAt && tick < endTick) {
        const cursorOf = async (db: Database): Promise<number> => Number((await db.direct.hget(ctlKey, 'cursor')) ?? 0);
        const before = await Promise.all(databases.map(cursorOf));
        const asked = options.operatorAdmit.count * n;
        const r = await product.admit(QUEUE, asked, now, policy, `surge-${tick}`);
        const after = await Promise.all(databases.map(cursorOf));
        productAdmits.push({ atS: nowMs / 1000, asked, admitted: r.admitted });
        for (const db of databases) {
          sawState(db, { ...r, cursor: after[db.index]! }, nowMs);
          admits.push({ db: db.index, atS: nowMs / 1000, asked: NaN, admitted: NaN, from: before[db.index]! + 1, to: after[db.index]!, visitors: 0, reportedHoles: 0, unreportedHoles: 0 });
        }
      }
    }
    // The run ends: what live instances still hold in blocks (and the holes they have not reported
    // yet) would go to their next join as holes; taken out here so as not to count them unreported.
    const endMs = endTick * tickMs + options.blocks.maxAgeMs;
    for (const list of popInstances) {
      for (const inst of list) {
        inst.blocks.forEach((blocks, i) => {
          const holes = blocks.joinOptions(endMs).holes;
          if (holes === undefined) return;
          const db = databases[options.spread === 'visitor' ? i : inst.db]!;
          for (const r of holes.ranges) for (let k = r.from; k <= r.to; k++) if (db.numbers.mark[k] === UNREPORTED_HOLE && k > db.cursor) db.numbers.mark[k] = HOLE_AT_END;
        });
      }
    }
    // The last second's snapshot.
    for (const db of databases) {
      const { billed } = await db.direct.counts();
      db.billed.push(billed - db.lastBilled);
      db.joinsPerS.push(db.joins - sum(db.joinsPerS));
    }

    // -- Figures
    for (const a of admits) {
      const nums = databases[a.db]!.numbers;
      for (let k = a.from; k <= a.to; k++) {
        if (nums.mark[k] === VISITOR) a.visitors++;
        else if (nums.mark[k] === REPORTED_HOLE) a.reportedHoles++;
        else if (nums.mark[k] === UNREPORTED_HOLE || nums.mark[k] === REPORTED_LATE) a.unreportedHoles++;
      }
      // This database's part: the visitors and unreported holes its cursor moved over.
      a.asked = a.admitted = a.visitors + a.unreportedHoles;
      if (a.admitted !== a.asked) fault(`database ${a.db}: admit ${a.asked} at ${a.atS} s admitted ${a.admitted}`);
      if (a.visitors + a.unreportedHoles !== a.admitted) fault(`database ${a.db}: admit ${a.asked} at ${a.atS} s called ${a.visitors} visitors and ${a.unreportedHoles} unreported holes (${a.reportedHoles} reported passed over)`);
    }
    for (const p of productAdmits) {
      const parts = sum(admits.filter((a) => a.atS === p.atS).map((a) => a.admitted));
      if (p.admitted !== p.asked) fault(`admit ${p.asked} at ${p.atS} s over ${n} databases admitted ${p.admitted}`);
      if (parts !== p.admitted) fault(`admit ${p.asked} at ${p.atS} s: the databases called ${parts} visitors and unreported holes, it said ${p.admitted}`);
    }
    const figures = databases.map((db): DatabaseFigures => {
      const nums = db.numbers;
      let visitors = 0;
      let reportedHoles = 0;
      let unreportedHoles = 0;
      let reportedHolesPassed = 0;
      let unreportedHolesCalled = 0;
      let holesAtEnd = 0;
      let visitorsCalled = 0;
      for (let k = 1; k <= nums.tail; k++) {
        const m = nums.mark[k];
        const called = k <= db.cursor;
        if (m === VISITOR) {
          visitors++;
          if (called) visitorsCalled++;
        } else if (m === REPORTED_HOLE) {
          reportedHoles++;
          if (called) reportedHolesPassed++;
        } else if (m === UNREPORTED_HOLE || m === REPORTED_LATE) {
          unreportedHoles++;
          if (called) unreportedHolesCalled++;
        } else if (m === HOLE_AT_END) holesAtEnd++;
        else fault(`database ${db.index}: ticket ${k} below the tail was never taken`);
      }
      const peakBilled = Math.max(...db.billed);
      return {
        index: db.index,
        billed: db.billed,
        peakBilled,
        peakSecond: db.billed.indexOf(peakBilled) + 1,
        averageBilled: sum(db.billed) / db.billed.length,
        joins: db.joins,
        tail: nums.tail,
        cursor: db.cursor,
        visitors,
        reportedHoles,
        unreportedHoles,
        reportedHolesPassed,
        unreportedHolesCalled,
        holesAtEnd,
        visitorsCalled,
      };
    });
    const arrivals = sum(figures.map((f) => f.visitors));
    const instances = { peak: Math.max(...instanceTotals), average: sum(instanceTotals) / instanceTotals.length, ended, perPopPeak };
    return {
      options,
      databases: figures,
      arrivals,
      joins,
      handedLocally,
      inversionCalledMs: inversionInCalls(databases),
      inversionTicketMs: Math.max(...databases.map((db) => inversionInTickets(db.numbers))),
      instanceOrderBreaks,
      admits,
      claims: { sent: claimsSent, claimed },
      instances,
      faults,
      wallMs: Date.now() - started,
    };
  } finally {
    for (const db of databases) await stopDatabase(db);
  }
}

/**
 * The largest a.Y - a.X over visitors X, Y of one database with a.X < a.Y and X's ticket above Y's:
 * Y is called before X however the cursor moves. Tickets from the top down, keeping the earliest
 * arrival seen above.
 */
function inversionInTickets(nums: Numbers): number {
  let earliestAbove = Infinity;
  let largest = 0;
  for (let k = nums.tail; k >= 1; k--) {
    if (nums.mark[k] !== VISITOR) continue;
    const a = nums.arrival[k]!;
    if (a - earliestAbove > largest) largest = a - earliestAbove;
    if (a < earliestAbove) earliestAbove = a;
  }
  return largest;
}

/**
 * The largest a.Y - a.X over visitors X, Y (any databases) with a.X < a.Y and X called after Y in
 * time; a visitor not called in the run counts as called after everyone who was. Called visitors by
 * call time from the latest down, keeping the earliest arrival among those called strictly later.
 */
function inversionInCalls(databases: readonly Database[]): number {
  let earliestUncalled = Infinity;
  const calledArrival: number[] = [];
  const calledAt: number[] = [];
  for (const db of databases) {
    const nums = db.numbers;
    for (let k = 1; k <= nums.tail; k++) {
      if (nums.mark[k] !== VISITOR) continue;
      const c = nums.called[k]!;
      if (Number.isNaN(c)) earliestUncalled = Math.min(earliestUncalled, nums.arrival[k]!);
      else {
        calledArrival.push(nums.arrival[k]!);
        calledAt.push(c);
      }
    }
  }
  const order = calledAt.map((_, i) => i).sort((i, j) => calledAt[j]! - calledAt[i]!);
  let earliestLater = earliestUncalled;
  let largest = 0;
  for (let g = 0; g < order.length; ) {
    // A group called at the same instant: none of them is called after another.
    let h = g;
    while (h < order.length && calledAt[order[h]!] === calledAt[order[g]!]) h++;
    let groupEarliest = Infinity;
    for (let i = g; i < h; i++) {
      const a = calledArrival[order[i]!]!;
      if (a - earliestLater > largest) largest = a - earliestLater;
      groupEarliest = Math.min(groupEarliest, a);
    }
    earliestLater = Math.min(earliestLater, groupEarliest);
    g = h;
  }
  return largest;
}

// ---------------------------------------------------------------------------------------------
// `npm run simulate -- --surge`

/** The billed commands of one ordinary join (people waiting), alone on a fresh database: the median of 10. */
async function measureJoinCost(transport: SurgeOptions['transport'], startBridge: SurgeOptions['startBridge']): Promise<number> {
  const db = await startDatabase(0, { transport, ...(startBridge !== undefined && { startBridge }) } as SurgeOptions);
  try {
    const policy = admissionPolicy(parseConfig(source({ queue_name: QUEUE, admit_per_period: '0' })));
    await db.store.join(QUEUE, SALE_OPENS_MS, policy);
    const costs: number[] = [];
    for (let i = 0; i < 10; i++) {
      const before = (await db.direct.counts()).billed;
      await db.store.join(QUEUE, SALE_OPENS_MS + i, policy);
      costs.push((await db.direct.counts()).billed - before);
    }
    costs.sort((a, b) => a - b);
    return costs[5]!;
  } finally {
    await stopDatabase(db);
  }
}

function fmtInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function usdPerHour(commandsPerS: number): number {
  return ((commandsPerS * 3600) / 100_000) * USD_PER_100K_COMMANDS;
}

function log(line: string): void {
  process.stderr.write(`simulate --surge: ${line}\n`);
}

interface Plan {
  readonly arrivalsPerS: number;
  /** The chosen design's run, virtual seconds. */
  readonly seconds: number;
  /** The other block alternatives run this long. */
  readonly altSeconds: number;
  /** The B=1 alternatives make a store call per arrival: they run at this rate for this long, and the full rate is computed. */
  readonly perArrivalRate: number;
  readonly perArrivalSeconds: number;
  readonly hashDatabases: number;
  /** Blocks with the allocator's default settings spread over this many databases, and the chosen design over `chosenDatabases`. */
  readonly blockDatabases: number;
  readonly chosenDatabases: number;
  readonly admitPerS: number;
  readonly operatorAdmit: { readonly count: number; readonly everyS: number };
  readonly pops: number;
}

const FULL: Plan = { arrivalsPerS: 100_000, seconds: 60, altSeconds: 10, perArrivalRate: 10_000, perArrivalSeconds: 1, hashDatabases: 4, blockDatabases: 4, chosenDatabases: 2, admitPerS: 1_000, operatorAdmit: { count: 1_000, everyS: 10 }, pops: 40 };
const QUICK: Plan = { arrivalsPerS: 20_000, seconds: 10, altSeconds: 5, perArrivalRate: 2_000, perArrivalSeconds: 1, hashDatabases: 4, blockDatabases: 4, chosenDatabases: 2, admitPerS: 200, operatorAdmit: { count: 200, everyS: 5 }, pops: 40 };

/**
 * Longer blocks: `ticket_blocks = 1000`, `ticket_block_ms = 900`, read by the settings' parser and
 * turned into the allocator's settings as an instance does (blockSettings: sized to fill in half the
 * age). Not the full second: a joiner holds its number only once the join's answer is back, so the
 * bound is maxAgeMs plus a join's round trip (here up to a tick; measured 1,005 ms with 1,000 ms
 * blocks), and 900 is the setting's ceiling.
 */
export const LONG_BLOCKS: BlockSettings = settingsOf({ ticket_blocks: '1000', ticket_block_ms: '900' });

/** The allocator settings an instance builds from these ticket-block settings (see edge-blocks.ts's blocksOf). */
function settingsOf(settings: Record<string, string>): BlockSettings {
  const config = parseConfig(source({ queue_name: QUEUE, ...settings }));
  return blockSettings(config.ticketBlocks, config.ticketBlockMs);
}

/** `--surge-rate=`, `--surge-seconds=`: another rate or length for the chosen design's run. */
function chosenPlan(argv: readonly string[]): Plan {
  const plan = argv.includes('--surge-quick') ? QUICK : FULL;
  const given = (name: string): number | undefined => {
    const text = argv.find((a) => a.startsWith(`--surge-${name}=`))?.slice(`--surge-${name}=`.length);
    if (text === undefined) return undefined;
    const value = Number(text.replace(/_/g, ''));
    if (!Number.isSafeInteger(value) || value < 1 || value > 1_000_000) throw new Error(`--surge-${name}: a whole number from 1 to 1,000,000 (got "${text}")`);
    return value;
  };
  const arrivalsPerS = given('rate') ?? plan.arrivalsPerS;
  const seconds = given('seconds') ?? plan.seconds;
  return { ...plan, arrivalsPerS, seconds, altSeconds: Math.min(plan.altSeconds, seconds), perArrivalSeconds: Math.min(plan.perArrivalSeconds, seconds) };
}

interface Run {
  readonly key: string;
  readonly result: SurgeResult;
  /** B=1 runs: billed commands of the joins per arrival, and the rest per second, to compute the full rate from. */
  readonly perArrival?: { readonly joinCost: number; readonly otherPerS: number };
}

/** One run's own section: printed as soon as it ends, so a long run shows its results as it goes. */
function runSection(r: SurgeResult): string {
  const out: string[] = [];
  const say = (line = ''): void => {
    out.push(line);
  };
  say(`## ${r.options.label} (${fmtInt(r.options.arrivalsPerS)} arrivals/s, ${r.options.databases} database${r.options.databases === 1 ? '' : 's'})`);
  say();
  say(`${fmtInt(r.arrivals)} arrivals in ${r.options.seconds} virtual s; ${fmtInt(r.joins)} joins, ${fmtInt(r.handedLocally)} numbers handed out by instances; instances: ${fmtInt(r.instances.average)} on average, ${fmtInt(r.instances.peak)} at the peak (${r.instances.perPopPeak} at the busiest POP), ${fmtInt(r.instances.ended)} ended.`);
  say(`Billed commands per virtual second: ${r.databases.map((d) => `database ${d.index + 1}: ${d.billed.map(fmtInt).join(' ')}`).join('; ')}.`);
  say(`Claims: ${fmtInt(r.claims.sent)} sent, ${fmtInt(r.claims.claimed)} claimed (a claim told to wait is sent again at the visitor's next poll, up to ${CLAIM_ATTEMPTS} in all). Within one instance, numbers out of arrival order: ${r.instanceOrderBreaks}.`);
  say(
    table(
      ['database', 'peak billed/s (second)', 'average billed/s', 'joins', 'tail', 'cursor', 'visitors called', 'reported holes (passed over)', 'unreported holes (called)', 'in live blocks at the end'],
      ['r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      r.databases.map((d) => [String(d.index + 1), `${fmtInt(d.peakBilled)} (${d.peakSecond})`, fmtInt(d.averageBilled), fmtInt(d.joins), fmtInt(d.tail), fmtInt(d.cursor), fmtInt(d.visitorsCalled), `${fmtInt(d.reportedHoles)} (${fmtInt(d.reportedHolesPassed)})`, `${fmtInt(d.unreportedHoles)} (${fmtInt(d.unreportedHolesCalled)})`, fmtInt(d.holesAtEnd)]),
    ),
  );
  const admitted = r.admits.filter((a) => a.admitted === a.asked && a.visitors + a.unreportedHoles === a.admitted).length;
  say(`Admits: ${admitted} of ${r.admits.length} let in exactly what they said (visitors + unreported holes = admitted; reported holes passed over: ${fmtInt(sum(r.admits.map((a) => a.reportedHoles)))}); unreported holes among them: ${fmtInt(sum(r.admits.map((a) => a.unreportedHoles)))}.`);
  if (r.faults.length > 0) say(`FAULTS: ${r.faults.join('; ')}`);
  say();
  return out.join('\n');
}

export async function mainSurge(argv: readonly string[]): Promise<number> {
  const plan = chosenPlan(argv);
  const only = argv.find((a) => a.startsWith('--surge-only='))?.slice('--surge-only='.length);
  const started = Date.now();
  const deadline = started + 40 * 60_000;
  const startBridge = (url: string, token: string) => startBridgeWorker(url, token, log);
  const scale = plan.arrivalsPerS / FULL.arrivalsPerS;
  const transportArg = argv.find((a) => a.startsWith('--surge-transport='))?.slice('--surge-transport='.length) ?? 'direct';
  if (transportArg !== 'rest' && transportArg !== 'direct') throw new Error(`--surge-transport: rest or direct (got "${transportArg}")`);
  const transport: SurgeOptions['transport'] = transportArg;
  const base = { pops: plan.pops, admitPerS: plan.admitPerS, operatorAdmit: plan.operatorAdmit, startBridge, deadline, progress: log } as const;
  const runs: Run[] = [];
  /** `--surge-only=KEY` runs one alternative: b1, hash, blocks, blocks-long, blocks-n, chosen, rest-check. */
  const one = async (key: string, options: Omit<SurgeOptions, keyof typeof base>): Promise<SurgeResult | undefined> => {
    if (only !== undefined && only !== key) return undefined;
    log(`${options.label}: starting`);
    const result = await runSurge({ ...base, ...options });
    log(`${options.label}: ${(result.wallMs / 1000).toFixed(0)} s wall`);
    let perArrival: Run['perArrival'];
    if (options.blocks.maxSize === 1) {
      // Every arrival one join: what the joins cost is the measured per-join figure; the rest (state loads, claims, admits) is per second.
      const billed = sum(result.databases.map((d) => sum(d.billed)));
      const joinCost = await measureJoinCost(options.transport, startBridge);
      perArrival = { joinCost, otherPerS: (billed - joinCost * result.joins) / options.seconds };
    }
    runs.push({ key, result, ...(perArrival !== undefined && { perArrival }) });
    process.stdout.write(`${runSection(result)}\n`);
    return result;
  };
  try {
    const off: BlockSettings = { ...DEFAULT_BLOCK_SETTINGS, maxSize: 1 };
    const b1 = { arrivalsPerS: plan.perArrivalRate, seconds: plan.perArrivalSeconds, blocks: off, spread: 'visitor', transport } as const;
    const full = { arrivalsPerS: plan.arrivalsPerS, transport } as const;
    await one('b1', { ...b1, label: "1 database, today's joins (B=1)", databases: 1 });
    await one('hash', { ...b1, label: `${plan.hashDatabases} databases by a hash of the visitor, B=1`, databases: plan.hashDatabases });
    await one('chosen', { ...full, label: `${plan.chosenDatabases} databases by instance, blocks (900 ms blocks)`, seconds: plan.seconds, databases: plan.chosenDatabases, blocks: LONG_BLOCKS, spread: 'instance' });
    await one('blocks', { ...full, label: '1 database, blocks (default settings)', seconds: plan.altSeconds, databases: 1, blocks: DEFAULT_BLOCK_SETTINGS, spread: 'instance' });
    await one('blocks-long', { ...full, label: '1 database, blocks (900 ms blocks)', seconds: plan.altSeconds, databases: 1, blocks: LONG_BLOCKS, spread: 'instance' });
    await one('blocks-n', { ...full, label: `${plan.blockDatabases} databases by instance, blocks (default settings)`, seconds: plan.altSeconds, databases: plan.blockDatabases, blocks: DEFAULT_BLOCK_SETTINGS, spread: 'instance' });
    // The same design for one virtual second through the REST bridge: the billed counts do not depend on the transport.
    if (transport === 'direct') await one('rest-check', { ...full, transport: 'rest', label: `the same through the REST bridge (1 s)`, seconds: 1, databases: plan.chosenDatabases, blocks: LONG_BLOCKS, spread: 'instance' });
  } catch (error) {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : messageOf(error)}`);
    return 1;
  }
  const cap = COMMANDS_PER_S_CAP * scale;
  const out: string[] = [];
  const say = (line = ''): void => {
    out.push(line);
  };
  say(`# A surge of ${fmtInt(plan.arrivalsPerS)} arrivals a second`);
  say();
  say(`${plan.pops} POPs, automatic admission ${fmtInt(plan.admitPerS)} a second over all databases, an operator's admit of ${fmtInt(plan.operatorAdmit.count)} x the databases every ${plan.operatorAdmit.everyS} s (the product's store: split by their waiting),`);
  say(`every called visitor claims within ${REFRESH_SECONDS} s; each POP loads each database's state once a second. The cap${scale === 1 ? '' : ' (scaled to this rate)'}: ${fmtInt(cap)} billed commands per database per second.`);
  say(`Instances: a POP keeps (its arrivals/s + its waiting crowd / ${REFRESH_SECONDS} s) x 2 ms / 0.5 sandboxes, each living 20 s on average (exponential). Store: ${transport === 'direct' ? 'UpstashQueueStore over ioredis (the Node host\'s store: the same scripts and billed commands, no HTTP), and the chosen design for 1 s through the REST bridge' : 'UpstashQueueStore through the Upstash client and the REST bridge'}.`);
  say();
  say(
    table(
      ['alternative', 'arrivals/s run', 'virtual s', 'databases', 'peak billed/s, worst database', 'average billed/s a database', `under the cap`, 'billed per arrival', `at ${fmtInt(plan.arrivalsPerS)}/s: peak billed/s a database`, 'databases it needs', 'largest inversion: called / ticket order', 'holes reported / unreported', `$/hour at ${fmtInt(plan.arrivalsPerS)}/s`],
      ['l', 'r', 'r', 'r', 'r', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'l'],
      runs.map(({ result: r, perArrival }) => {
        const n = r.options.databases;
        const worst = Math.max(...r.databases.map((d) => d.peakBilled));
        const avg = sum(r.databases.map((d) => d.averageBilled));
        const billed = sum(r.databases.map((d) => sum(d.billed)));
        const runCap = (COMMANDS_PER_S_CAP * r.options.arrivalsPerS) / FULL.arrivalsPerS;
        let atFull: string;
        let needed: string;
        let usd: string;
        if (perArrival !== undefined) {
          // Computed: every arrival a join at its measured cost, the rest as measured per database.
          const otherPerDb = perArrival.otherPerS / n;
          atFull = `${fmtInt((plan.arrivalsPerS * perArrival.joinCost) / n + otherPerDb)} (computed)`;
          needed = `${fmtInt(Math.ceil((plan.arrivalsPerS * perArrival.joinCost) / (COMMANDS_PER_S_CAP - otherPerDb)))} (computed)`;
          usd = `$${usdPerHour(plan.arrivalsPerS * perArrival.joinCost + perArrival.otherPerS).toFixed(0)} (computed)`;
        } else {
          atFull = r.options.arrivalsPerS === plan.arrivalsPerS ? fmtInt(worst) : 'not run';
          needed = worst <= runCap ? String(n) : `more than ${n}`;
          usd = `$${usdPerHour(avg).toFixed(2)}`;
        }
        return [
          r.options.label,
          fmtInt(r.options.arrivalsPerS),
          String(r.options.seconds),
          String(n),
          fmtInt(worst),
          fmtInt(avg / n),
          worst <= runCap ? 'yes' : `NO (${(worst / runCap).toFixed(1)}x)`,
          (billed / r.arrivals).toFixed(3),
          atFull,
          needed,
          `${fmtInt(r.inversionCalledMs)} ms / ${fmtInt(r.inversionTicketMs)} ms`,
          `${fmtInt(sum(r.databases.map((d) => d.reportedHoles)))} / ${fmtInt(sum(r.databases.map((d) => d.unreportedHoles)))}`,
          usd,
        ];
      }),
    ),
  );
  say();
  say('"under the cap": every virtual second of every database, against the cap scaled to the rate the row ran at. Inversion: the largest arrival-time gap of two');
  say('visitors called in the wrong order; "called" over those the run called (anyone not called counts as after them), "ticket order" over every');
  say('visitor of a database in the order its numbers will be called. B=1 rows run at a tenth of the rate (a store call per arrival is too slow to');
  say('run at full rate here); their full-rate columns are computed from the measured cost of a join and the rest of their measured load.');
  say();
  say(`Wall time: ${((Date.now() - started) / 1000).toFixed(0)} s (${process.version}).`);
  process.stdout.write(`${out.join('\n')}\n`);
  return runs.some((r) => r.result.faults.length > 0) ? 1 : 0;
}
