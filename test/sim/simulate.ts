/**
 * `npm run simulate`: a flash sale against the REAL store code on a REAL Redis, to show that with
 * the per-POP cache of the queue state the store's load follows arrivals, admissions and the number
 * of POPs, not the number of people waiting; and what the same crowd costs without the cache.
 *
 * Everything runs on 127.0.0.1, started and stopped here:
 *   - redis-server (test harness, its own free port)                    child process
 *   - the Upstash REST bridge over it (src/node/upstash-bridge.ts)      worker thread
 *   - UpstashQueueStore through the real `@upstash/redis` client        this process
 *   - POPS simulated POPs, each its own `createHandler(...)` and its own MemoryStateCache, all
 *     sharing the one store and one virtual clock (as test/state-cache.test.ts builds them)
 *   - visitors: a burst, then a steady trickle, each polling every `refresh_seconds` (20 s) with
 *     jitter at one POP until a poll finds it admitted
 *
 * Time is virtual: the clock moves in TICK_MS steps, every request of a tick happens at the same
 * virtual instant (requests of a tick run concurrently and are all awaited before the clock moves),
 * and the real time a store call takes counts as no virtual time at all.
 *
 * Store round trips are counted independently, three ways, and compared second by second:
 *   - a counting wrapper around the QueueStore the handlers use (calls by method);
 *   - HTTP requests the Upstash client sends to the bridge (a wrapper around the global `fetch`,
 *     which `@upstash/redis` calls once per request attempt, retries included);
 *   - EVALSHA/EVAL calls that Redis itself executed (INFO commandstats deltas).
 * Beside them, what Upstash bills: every command Redis ran, the script call itself plus each
 * `redis.call` inside it (the sum of `calls` and `rejected_calls` over every `cmdstat_*` line of INFO
 * commandstats), less the simulation's own commands: INFO, CLIENT, SCRIPT and FLUSHALL by name (the
 * store never sends them), and the few data commands it sends itself (HGET for the snapshots, HINCRBY
 * for a modelled burst), counted as it sends them and subtracted.
 *
 * The billed cost of one store call of each kind is measured alone on the same Redis (INFO deltas
 * around single calls), and used for what cannot be run: the cache-off polls of the large sizes,
 * and the section "beyond one database".
 *
 * Real versus modelled depends on the size; the printed report says which, size by size.
 *
 * `npm run simulate` runs every size (about 3 minutes on 2 cores); `npm run simulate -- --quick`
 * the smallest and the largest (about a minute and a half); `-- --sizes=1000,100000` (or
 * WR_SIM_SIZES=1000,100000) the sizes given. Every run ends with the surge check and the plan
 * "beyond one database", from its largest size.
 */
import { table } from '../support/markdown-table';
import os from 'node:os';
import { isMainThread, workerData } from 'node:worker_threads';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import { parseConfig, parseSecrets, type Config, type Secrets } from '../../src/core/config';
import { createHandler, type Handler } from '../../src/core/handler';
import type { AdmissionPolicy, AdmitResult, AuditAppended, AuditMerge, ClaimResult, ClientInfo, Clock, DrawResult, HistoryPoint, JoinResult, Logger, Origin, QueueState, QueueStats, QueueStore, RequestLog, ResetResult, RuntimeControl, JoinOptions, VipCode, VipUse } from '../../src/core/ports';
import { admissionPolicy } from '../../src/core/handler';
import { seededRandom } from '../support/seeded-random';
import { signToken } from '../../src/core/tokens';
import { MemoryStateCache } from '../../src/platform/memory-cache';
import { buildQueueKeys, DEFAULT_KEY_PREFIX } from '../../src/store/scripts';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { API_TOKEN, BASE_SECRETS, cookieFrom, ManualClock, payloadOf, source } from '../support/fixtures';
import { startRedisServer, type RedisServer } from '../support/redis-server';
import { bridgeWorker, checkSnapshots, Direct, pickPop, popShares, runLimited, startBridgeWorker, sum, messageOf, type BridgeWorker, type BridgeWorkerInput } from './sim-support';
import { mainSurge } from './surge';
import { mainAdaptive } from './adaptive';
import { mainAdaptiveLive } from './adaptive-live';

// ---------------------------------------------------------------------------------------------
// Parameters (every loop below is bounded by these)

/** "At least this many waiting" sizes (a full run: about 3 minutes on 2 cores). */
const ALL_SIZES: readonly number[] = [1_000, 10_000, 100_000, 1_000_000];
/** `--quick`: the smallest size (all real) and the largest (modelled burst): about a minute and a half. */
const QUICK_SIZES: readonly number[] = [1_000, 1_000_000];
/** The sizes of this run: ALL_SIZES, QUICK_SIZES (`--quick`) or `--sizes=1000,100000` (or WR_SIM_SIZES); set in main. */
let SIZES: readonly number[] = ALL_SIZES;
/** Simulated POPs, each with its own cache and handler. */
const POPS = 40;
/** Queues (the store keys a POP caches): this simulation runs one. */
const QUEUES = 1;
/** Zipf exponent of the POPs' shares of the visitors (0 would be uniform). */
const POP_SKEW = 0.5;
/** Virtual time step. */
const TICK_MS = 100;
const TICKS_PER_S = 1000 / TICK_MS;
/** Simulated seconds before the measured window: the burst arrives at their start, over BURST_S. */
const PRE_S = 22;
/**
 * Length of the burst. Its visitors first poll refresh_seconds ± jitter after arriving, so with
 * PRE_S = BURST_S + JITTER_S the polls have fully ramped up when the window opens.
 */
const BURST_S = 20;
/** The measured window, in simulated seconds. */
const WINDOW_S = 60;
/** Poll interval jitter: each poll comes refresh_seconds ± this after the previous one. */
const JITTER_S = 2;
/** New arrivals per simulated second, from the start of the burst to the end of the window. */
const TRICKLE_PER_S = 30;
/** The burst is the size plus this margin, so the number waiting never drops below the size. */
const BURST_MARGIN = 400;
/** Automatic admission (a setting: runs inside the poll/join scripts, so it costs no command). */
const AUTO_ADMIT_PER_PERIOD = 100;
const AUTO_ADMIT_PERIOD_S = 10;
/** The origin's admit API (`POST /__wr/api/admit`, one store command each): this many, this often. */
const ORIGIN_ADMIT_COUNT = 200;
const ORIGIN_ADMIT_EVERY_S = 10;
const ORIGIN_ADMIT_OFFSET_S = 5;
/** Up to this size the burst is real joins through the handlers; above, one HINCRBY of the tail. */
const REAL_JOINS_UP_TO = 10_000;
/** Up to this size every poll goes through a full handler; above, see HANDLER_POLLS_PER_POP_TICK. */
const FULL_HANDLER_UP_TO = 10_000;
/**
 * Above FULL_HANDLER_UP_TO, in each tick each POP sends its first this-many polls through its full
 * handler (cookie verification, cache, settle, new cookie, holding page, log line) and the rest
 * straight to the same POP's cache (same key, same lifetime). As the handler polls come first and
 * the whole tick is one virtual instant, the rest can only hit; each is checked, and any that
 * reached the store would be counted (and reported) like any other store call.
 */
const HANDLER_POLLS_PER_POP_TICK = 1;
/** Without the cache, sizes up to this are measured for real over the whole window. */
const NO_CACHE_MEASURED_UP_TO = 10_000;
/** Without the cache, this size is also measured for real over the first SPOT_WINDOW_S seconds. */
const NO_CACHE_SPOT_SIZE = 100_000;
const SPOT_WINDOW_S = 2;
/** At most this many requests in flight per POP. */
const POP_CONCURRENCY = 8;
/** Upstash pay-as-you-go. */
const USD_PER_100K_COMMANDS = 0.2;
const COMMANDS_PER_S_CAP = 10_000;
/** The Fastly starter kit makes two store calls per poll (the issue's numbers). */
const STARTER_KIT_CALLS_PER_POLL = 2;
/**
 * The starter kit's billed commands, from issue 13's measurement of it on the same bridge: a poll
 * 2-5 (its low end here, so the kit's column is a lower bound), a queued join 3, an admit 1.
 */
const STARTER_KIT_BILLED = { poll: 2, join: 3, admit: 1 } as const;
/** Each kind of store call is measured alone this many times (median used). */
const UNIT_SAMPLES = 10;
/**
 * The surge check: a queue of this many (modelled, as above FULL_HANDLER_UP_TO) with its polls and
 * admissions, plus real joins through the handlers at the rate computed to reach the cap, over
 * SURGE_WINDOW_S measured seconds.
 */
const SURGE_QUEUE = 10_000;
const SURGE_WINDOW_S = 3;
/** Beyond one database: the arrival rates to plan for, the database counts and block sizes shown. */
const PLAN_ARRIVALS_PER_S: readonly number[] = [5_000, 10_000, 30_000, 100_000];
const PLAN_DATABASES: readonly number[] = [1, 2, 4, 8];
const PLAN_BLOCKS: readonly number[] = [1, 10, 100, 1_000];
/** The whole run is abandoned (and everything stopped) past this. */
const WATCHDOG_MS = 420_000;
const SEED = 20_261_127;
/** Block length of the over-time table. */
const SERIES_BLOCK_S = 10;
/** Handler polls timed at the end, to say what a full handler poll costs. */
const CALIBRATION_POLLS = 2_000;
const SALE_OPENS_MS = Date.UTC(2026, 10, 27, 12, 0, 0);
const SHOP_URL = 'https://shop.example/products/limited-drop';
const BRIDGE_TOKEN = 'simulation-bridge-token-0123456789';

// ---------------------------------------------------------------------------------------------
// Small helpers

function log(line: string): void {
  process.stderr.write(`simulate: ${line}\n`);
}




function fmtInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function fmtRate(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  if (n >= 1000) return fmtInt(n);
  if (n >= 100) return n.toFixed(0);
  return n.toFixed(1);
}

function usdPerHour(commandsPerS: number): number {
  return ((commandsPerS * 3600) / 100_000) * USD_PER_100K_COMMANDS;
}

function fmtUsd(n: number): string {
  return n >= 100 ? `$${fmtInt(n)}` : `$${n.toFixed(2)}`;
}

function capText(peakPerS: number): string {
  return peakPerS <= COMMANDS_PER_S_CAP ? 'yes' : `NO (${(peakPerS / COMMANDS_PER_S_CAP).toFixed(1)}x)`;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length === 0 ? NaN : sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

// ---------------------------------------------------------------------------------------------
// Counting in Redis: script calls (round trips) and billed commands

// ---------------------------------------------------------------------------------------------
// Counting: the store wrapper and the fetch wrapper

/** `admit`: explicit admits, and the calls this simulation never makes (touch, leave, control, reset, VIP); `peek`: reads. */
type Method = 'join' | 'poll' | 'claim' | 'admit' | 'peek';
const METHODS: readonly Method[] = ['join', 'poll', 'claim', 'admit', 'peek'];

/** Counts every store call by method and by virtual second, then passes it to the real store. */
class CountingStore implements QueueStore {
  /** Calls per method, per second slot (slot = second + PRE_S). */
  readonly perSecond: Record<Method, number[]>;
  constructor(
    private readonly inner: QueueStore,
    private readonly clock: Clock,
    private readonly slots: number,
  ) {
    this.perSecond = { join: [], poll: [], claim: [], admit: [], peek: [] };
    for (const m of METHODS) this.perSecond[m] = new Array<number>(slots).fill(0);
  }
  #count(method: Method): void {
    const slot = Math.floor((this.clock.now() - SALE_OPENS_MS) / 1000) + PRE_S;
    if (slot < 0 || slot >= this.slots) throw new Error(`store call outside the simulated time (slot ${slot})`);
    this.perSecond[method][slot]! += 1;
  }
  join(queue: string, nowMs: number, policy: AdmissionPolicy, options?: JoinOptions): Promise<JoinResult> {
    this.#count('join');
    return this.inner.join(queue, nowMs, policy, options);
  }
  poll(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    this.#count('poll');
    return this.inner.poll(queue, nowMs, policy);
  }
  admit(queue: string, count: number, nowMs: number, policy: AdmissionPolicy, idempotencyKey?: string): Promise<AdmitResult> {
    this.#count('admit');
    return this.inner.admit(queue, count, nowMs, policy, idempotencyKey);
  }
  peek(queue: string): Promise<Pick<QueueState, 'tail' | 'cursor'>> {
    this.#count('peek');
    return this.inner.peek(queue);
  }
  /** A called visitor claims its admission (rate mode too: its call is then not handed on). */
  claim(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<ClaimResult> {
    this.#count('claim');
    return this.inner.claim(queue, ticket, nowMs, policy, waitedMs, generation);
  }
  // Rate mode (this simulation) makes none of these calls; they are counted all the same.
  touch(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, untilMs: number, generation?: number): Promise<boolean> {
    this.#count('admit');
    return this.inner.touch(queue, ticket, nowMs, policy, untilMs, generation);
  }
  leave(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, graceMs: number, generation?: number): Promise<boolean> {
    this.#count('admit');
    return this.inner.leave(queue, ticket, nowMs, policy, graceMs, generation);
  }
  control(queue: string, change: RuntimeControl, nowMs: number, policy: AdmissionPolicy): Promise<QueueState> {
    this.#count('admit');
    return this.inner.control(queue, change, nowMs, policy);
  }
  stats(queue: string, nowMs: number, policy: AdmissionPolicy): Promise<QueueStats> {
    this.#count('peek');
    return this.inner.stats(queue, nowMs, policy);
  }
  draw(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<DrawResult> {
    this.#count('poll');
    return this.inner.draw(queue, ticket, nowMs, policy, waitedMs, generation);
  }
  history(queue: string, nowMs: number): Promise<readonly HistoryPoint[]> {
    this.#count('peek');
    return this.inner.history(queue, nowMs);
  }
  reset(queue: string, nowMs: number, policy: AdmissionPolicy, expectedEpoch?: number): Promise<ResetResult> {
    this.#count('admit');
    return this.inner.reset(queue, nowMs, policy, expectedEpoch);
  }
  createVips(queue: string, codeHashes: readonly string[], code: VipCode, nowMs: number): Promise<boolean[]> {
    this.#count('admit');
    return this.inner.createVips(queue, codeHashes, code, nowMs);
  }
  useVip(queue: string, codeHash: string, nowMs: number): Promise<VipUse> {
    this.#count('admit');
    return this.inner.useVip(queue, codeHash, nowMs);
  }
  appendAudit(queue: string, entry: string, nowMs: number, merge?: AuditMerge): Promise<AuditAppended> {
    this.#count('admit');
    return this.inner.appendAudit(queue, entry, nowMs, merge);
  }
  readAudit(queue: string, limit: number, nowMs: number): Promise<readonly string[]> {
    this.#count('peek');
    return this.inner.readAudit(queue, limit, nowMs);
  }
}

/** Requests that reached the bridge through the global fetch (the Upstash client's transport). */
const fetchCounter = { bridgeOrigin: '', requests: 0 };
const originalFetch = globalThis.fetch;

function installFetchCounter(bridgeUrl: string): void {
  fetchCounter.bridgeOrigin = new URL(bridgeUrl).origin;
  globalThis.fetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith(fetchCounter.bridgeOrigin)) fetchCounter.requests++;
    return originalFetch(input, init);
  };
}

// ---------------------------------------------------------------------------------------------
// Simulated POPs

class PopLog implements Logger {
  hits = 0;
  misses = 0;
  readonly decisions = new Map<string, number>();
  log(record: RequestLog): void {
    if (record.cache === 'hit') this.hits++;
    else if (record.cache === 'miss') this.misses++;
    this.decisions.set(record.decision, (this.decisions.get(record.decision) ?? 0) + 1);
  }
}

/** The shop behind the waiting room: answers from memory. */
const ORIGIN: Origin = {
  forward: async () => new Response('<h1>the shop</h1>', { status: 200, headers: { 'content-type': 'text/html' } }),
};

interface Pop {
  readonly name: string;
  readonly handler: Handler;
  readonly cache: MemoryStateCache;
  readonly log: PopLog;
  readonly client: ClientInfo;
}

// ---------------------------------------------------------------------------------------------
// One scenario: one size, with or without the cache

interface Scenario {
  readonly size: number;
  readonly cacheOn: boolean;
  readonly windowS: number;
  /** The burst as real joins through the handlers (else one HINCRBY of the tail). */
  readonly realJoins: boolean;
  /** Every poll through a full handler (else HANDLER_POLLS_PER_POP_TICK per POP per tick). */
  readonly fullHandler: boolean;
  /** Real joins through the handlers, this many per second on top of the trickle, during the measured window only. */
  readonly surgePerS?: number;
}

interface SecondStats {
  polls: number;
  waiting: number;
  join: number;
  poll: number;
  claim: number;
  admit: number;
  peek: number;
  wrapper: number;
  fetch: number;
  redis: number;
  /** Billed commands (INFO commandstats, all commands, less the simulation's own). */
  billed: number;
}

interface RunResult {
  readonly scenario: Scenario;
  /** One entry per second of the measured window. */
  readonly seconds: SecondStats[];
  /** The pre-window (burst) totals. */
  readonly burst: { joins: number; wrapper: number; fetch: number; redis: number; billed: number; peakBilledPerS: number; modelledJoins: number };
  handlerPolls: number;
  directPolls: number;
  directMisses: number;
  handlerHits: number;
  handlerMisses: number;
  cacheLoads: number;
  mintedCookies: number;
  admittedVisitors: number;
  readonly decisions: Map<string, number>;
  wallMs: number;
}

interface Shared {
  readonly store: QueueStore;
  readonly direct: Direct;
  readonly secrets: Readonly<Secrets>;
  readonly baseSettings: Record<string, string>;
  readonly deadline: number;
}

const NOT_ARRIVED = 0;
const WAITING = 1;
const ADMITTED = 2;

async function runScenario(sc: Scenario, shared: Shared): Promise<RunResult> {
  const started = Date.now();
  const { direct, secrets } = shared;
  if (!sc.cacheOn && !sc.fullHandler) throw new Error('without the cache every poll must go through a handler');
  await direct.flushall();

  const startTick = -PRE_S * TICKS_PER_S;
  const endTick = sc.windowS * TICKS_PER_S;
  const totalTicks = endTick - startTick;
  const slots = PRE_S + sc.windowS;
  const clock = new ManualClock(SALE_OPENS_MS + startTick * TICK_MS);
  const settings = { ...shared.baseSettings, ...(sc.cacheOn ? {} : { state_cache_seconds: '0' }) };
  const config: Readonly<Config> = parseConfig(source(settings));
  const store = new CountingStore(shared.store, clock, slots);
  const auto: AdmissionPolicy = admissionPolicy(config);
  const cacheKey = `queue-state:${config.queueName}`;
  const keys = buildQueueKeys(DEFAULT_KEY_PREFIX, config.queueName);

  const pops: Pop[] = Array.from({ length: POPS }, (_, k) => {
    const cache = new MemoryStateCache(clock);
    const popLog = new PopLog();
    const handler = createHandler({ config, secrets, store, origin: ORIGIN, logger: popLog, clock, cache });
    return { name: `POP${String(k + 1).padStart(2, '0')}`, handler, cache, log: popLog, client: { address: `203.0.113.${k + 1}`, pop: `POP${k + 1}` } };
  });

  // Visitors: the burst first (indices 0..burst-1), then the trickle.
  const random = seededRandom(SEED);
  const shares = popShares(POPS, POP_SKEW);
  const burstSize = sc.size + BURST_MARGIN;
  const trickleSize = TRICKLE_PER_S * (PRE_S + sc.windowS);
  const surgeSize = Math.round((sc.surgePerS ?? 0) * sc.windowS);
  const capacity = burstSize + trickleSize + surgeSize;
  const ticket = new Float64Array(capacity);
  const arrivalTick = new Int32Array(capacity);
  const popOf = new Uint8Array(capacity);
  const state = new Uint8Array(capacity);
  const nextInBucket = new Int32Array(capacity).fill(-1);
  const bucketHead = new Int32Array(totalTicks).fill(-1);
  const cookies = new Map<number, string>();

  const schedule = (v: number, tick: number): void => {
    if (tick >= endTick) return;
    const b = tick - startTick;
    nextInBucket[v] = bucketHead[b]!;
    bucketHead[b] = v;
  };
  const nextPollTick = (tick: number): number =>
    tick + config.refreshSeconds * TICKS_PER_S + Math.floor((random() * 2 - 1) * JITTER_S * TICKS_PER_S + 0.5);

  for (let v = 0; v < burstSize; v++) {
    arrivalTick[v] = startTick + Math.floor((v * BURST_S * TICKS_PER_S) / burstSize);
    popOf[v] = pickPop(shares, random());
  }
  for (let j = 0; j < trickleSize; j++) {
    const v = burstSize + j;
    arrivalTick[v] = startTick + Math.floor((j * TICKS_PER_S) / TRICKLE_PER_S);
    popOf[v] = pickPop(shares, random());
  }
  for (let j = 0; j < surgeSize; j++) {
    const v = burstSize + trickleSize + j;
    arrivalTick[v] = Math.floor((j * TICKS_PER_S) / sc.surgePerS!);
    popOf[v] = pickPop(shares, random());
  }
  let modelledJoins = 0;
  if (!sc.realJoins) {
    // MODELLED burst: the tickets 1..burstSize are taken at once (one HINCRBY of ctl's tail, not a store call);
    // each visitor "arrives" at its arrival tick already holding its ticket.
    await direct.hincrby(keys.ctl, 'tail', burstSize);
    modelledJoins = burstSize;
    for (let v = 0; v < burstSize; v++) {
      ticket[v] = v + 1;
      state[v] = WAITING;
      schedule(v, nextPollTick(arrivalTick[v]!));
    }
  } else {
    for (let v = 0; v < burstSize; v++) schedule(v, arrivalTick[v]!);
  }
  for (let v = burstSize; v < capacity; v++) schedule(v, arrivalTick[v]!);

  const result: RunResult = {
    scenario: sc,
    seconds: [],
    burst: { joins: 0, wrapper: 0, fetch: 0, redis: 0, billed: 0, peakBilledPerS: 0, modelledJoins },
    handlerPolls: 0,
    directPolls: 0,
    directMisses: 0,
    handlerHits: 0,
    handlerMisses: 0,
    cacheLoads: 0,
    mintedCookies: 0,
    admittedVisitors: 0,
    decisions: new Map(),
    wallMs: 0,
  };
  const pollsPerSlot = new Array<number>(slots).fill(0);
  const cookieName = config.cookieName;

  const request = (token: string | undefined): Request =>
    new Request(SHOP_URL, { headers: token === undefined ? {} : { cookie: `${cookieName}=${token}`, accept: 'text/html' } });

  /** Reads the visitor's new cookie: admitted (access token) or still waiting. */
  const settle = (v: number, res: Response, tick: number): void => {
    const token = cookieFrom(res, cookieName);
    const claims = token === undefined ? undefined : payloadOf(token);
    if (claims?.['k'] === 'a') {
      state[v] = ADMITTED;
      result.admittedVisitors++;
      cookies.delete(v);
      return;
    }
    if (token !== undefined) {
      cookies.set(v, token);
      if (typeof claims?.['t'] === 'number') ticket[v] = claims['t'];
    }
    state[v] = WAITING;
    schedule(v, nextPollTick(tick));
  };

  const join = async (v: number, pop: Pop, tick: number): Promise<void> => {
    const res = await pop.handler(request(undefined), pop.client);
    if (cookieFrom(res, cookieName) === undefined) throw new Error(`a join got no cookie (status ${res.status})`);
    settle(v, res, tick);
  };

  const handlerPoll = async (v: number, pop: Pop, tick: number): Promise<void> => {
    let token = cookies.get(v);
    if (token === undefined) {
      // MODELLED visitor: its waiting cookie, signed by the real signing code with the POPs' key.
      const iat = Math.floor((SALE_OPENS_MS + arrivalTick[v]! * TICK_MS) / 1000);
      token = await signToken(secrets.keyRing, { q: config.queueName, k: 'w', t: ticket[v]!, iat, exp: iat + config.queueTimeoutSeconds });
      result.mintedCookies++;
    }
    result.handlerPolls++;
    const res = await pop.handler(request(token), pop.client);
    settle(v, res, tick);
  };

  const directPoll = async (v: number, pop: Pop, tick: number, nowMs: number): Promise<void> => {
    const { value, hit } = await pop.cache.getOrLoad(cacheKey, config.stateCacheSeconds, () => store.poll(config.queueName, nowMs, auto));
    if (!hit) result.directMisses++;
    if (ticket[v]! <= value.cursor) {
      // Called: like every called visitor it claims its admission (one store call), so this poll
      // goes through the full handler (a cache hit, then the claim). Unclaimed calls would lapse
      // and be handed on by the store, letting in more than the rate.
      await handlerPoll(v, pop, tick);
      return;
    }
    result.directPolls++;
    schedule(v, nextPollTick(tick));
  };

  const originAdmit = async (): Promise<void> => {
    const pop = pops[0]!;
    const res = await pop.handler(
      new Request(`https://shop.example${config.pathPrefix}api/admit?count=${ORIGIN_ADMIT_COUNT}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_TOKEN}` },
      }),
      pop.client,
    );
    if (res.status !== 200) throw new Error(`origin admit answered ${res.status}: ${await res.text()}`);
  };

  interface Snapshot {
    wrapper: Record<Method, number>;
    fetch: number;
    redis: number;
    billed: number;
    waiting: number;
  }
  const snapshot = async (): Promise<Snapshot> => {
    // The HGETs are awaited before the INFO, so that `counts` measures them out exactly.
    const tail = Number((await direct.hget(keys.ctl, 'tail')) ?? 0);
    const cursor = Number((await direct.hget(keys.ctl, 'cursor')) ?? 0);
    const counts = await direct.counts();
    const wrapper = { join: 0, poll: 0, claim: 0, admit: 0, peek: 0 };
    for (const m of METHODS) wrapper[m] = sum(store.perSecond[m]);
    return { wrapper, fetch: fetchCounter.requests, redis: counts.scripts, billed: counts.billed, waiting: Math.max(0, tail - cursor) };
  };

  const snapshots: Snapshot[] = [];
  const arrivalsByPop: number[][] = pops.map(() => []);
  const pollsByPop: number[][] = pops.map(() => []);

  for (let tick = startTick; tick < endTick; tick++) {
    if (Date.now() > shared.deadline) throw new Error(`watchdog: the run passed ${WATCHDOG_MS / 1000} s`);
    clock.ms = SALE_OPENS_MS + tick * TICK_MS;
    if (tick % TICKS_PER_S === 0) snapshots.push(await snapshot());
    const slot = Math.floor(tick / TICKS_PER_S) + PRE_S;

    // This tick's visitors, by POP.
    for (const list of arrivalsByPop) list.length = 0;
    for (const list of pollsByPop) list.length = 0;
    const b = tick - startTick;
    let v = bucketHead[b]!;
    bucketHead[b] = -1;
    while (v >= 0) {
      const after = nextInBucket[v]!;
      nextInBucket[v] = -1;
      (state[v] === NOT_ARRIVED ? arrivalsByPop : pollsByPop)[popOf[v]!]!.push(v);
      v = after;
    }

    const nowMs = clock.now();
    await Promise.all(
      pops.map(async (pop, p) => {
        const arrivals = arrivalsByPop[p]!;
        const polls = pollsByPop[p]!;
        pollsPerSlot[slot]! += polls.length;
        const tasks: (() => Promise<void>)[] = arrivals.map((visitor) => () => join(visitor, pop, tick));
        const viaHandler = sc.fullHandler ? polls.length : Math.min(polls.length, HANDLER_POLLS_PER_POP_TICK);
        for (let i = 0; i < viaHandler; i++) {
          const visitor = polls[i]!;
          tasks.push(() => handlerPoll(visitor, pop, tick));
        }
        await runLimited(tasks, POP_CONCURRENCY);
        for (let i = viaHandler; i < polls.length; i++) await directPoll(polls[i]!, pop, tick, nowMs);
      }),
    );

    const second = Math.floor(tick / TICKS_PER_S);
    if (tick % TICKS_PER_S === 0 && (second - ORIGIN_ADMIT_OFFSET_S) % ORIGIN_ADMIT_EVERY_S === 0) await originAdmit();
  }
  clock.ms = SALE_OPENS_MS + endTick * TICK_MS;
  snapshots.push(await snapshot());

  // Per-second deltas over the measured window; the pre-window (burst) as one total.
  const windowStart = snapshots[PRE_S]!;
  const first = snapshots[0]!;
  const total = (s: Snapshot): number => sum(METHODS.map((m) => s.wrapper[m]));
  result.burst.joins = windowStart.wrapper.join - first.wrapper.join;
  result.burst.wrapper = total(windowStart) - total(first);
  result.burst.fetch = windowStart.fetch - first.fetch;
  result.burst.redis = windowStart.redis - first.redis;
  result.burst.billed = windowStart.billed - first.billed;
  for (let s = 0; s < PRE_S; s++) result.burst.peakBilledPerS = Math.max(result.burst.peakBilledPerS, snapshots[s + 1]!.billed - snapshots[s]!.billed);
  for (let s = 0; s < sc.windowS; s++) {
    const a = snapshots[PRE_S + s]!;
    const z = snapshots[PRE_S + s + 1]!;
    const slot = PRE_S + s;
    result.seconds.push({
      polls: pollsPerSlot[slot]!,
      waiting: a.waiting,
      join: store.perSecond.join[slot]!,
      poll: store.perSecond.poll[slot]!,
      claim: store.perSecond.claim[slot]!,
      admit: store.perSecond.admit[slot]!,
      peek: store.perSecond.peek[slot]!,
      wrapper: total(z) - total(a),
      fetch: z.fetch - a.fetch,
      redis: z.redis - a.redis,
      billed: z.billed - a.billed,
    });
  }
  for (const pop of pops) {
    result.handlerHits += pop.log.hits;
    result.handlerMisses += pop.log.misses;
    result.cacheLoads += pop.cache.loads;
    for (const [decision, n] of pop.log.decisions) result.decisions.set(decision, (result.decisions.get(decision) ?? 0) + n);
  }
  result.wallMs = Date.now() - started;
  return result;
}

// ---------------------------------------------------------------------------------------------
// Billed commands per store call, measured alone

type UnitKey = 'joinWalkIn' | 'joinQueued' | 'poll' | 'pollStep' | 'pollMinute' | 'claim' | 'admit' | 'admitNoKey';

interface UnitRow {
  readonly key: UnitKey;
  readonly label: string;
  readonly billed: number[];
  readonly scripts: number[];
}

interface UnitCosts {
  readonly rows: readonly UnitRow[];
  /** The median billed commands of one call of this kind (NaN when none was measured). */
  cost(key: UnitKey): number;
}

const UNIT_LABELS: Record<UnitKey, string> = {
  joinWalkIn: 'join, walks in (nobody waiting, within the period\'s calls)',
  joinQueued: 'join, queued (people waiting)',
  poll: 'poll (a POP\'s cache miss), no period step',
  pollStep: 'poll, first of a period: the step calls the period\'s tickets',
  pollMinute: 'poll, first of a minute and of a period (step + history point)',
  claim: 'claim of a called ticket',
  admit: `admit ${ORIGIN_ADMIT_COUNT} with an idempotency key (the origin admit: the handler always sends one)`,
  admitNoKey: `admit ${ORIGIN_ADMIT_COUNT} without an idempotency key (a direct store call; not made here)`,
};

/**
 * Each kind of store call the simulation makes, run alone on the same Redis through the same client
 * and bridge, with the simulation's settings (rate mode, FIFO, automatic admission
 * AUTO_ADMIT_PER_PERIOD per AUTO_ADMIT_PERIOD_S s): INFO commandstats before and after each call.
 * The scripts are warm (main loads them first), so no NOSCRIPT miss is counted.
 */
async function measureUnitCosts(shared: Shared): Promise<UnitCosts> {
  const { store, direct } = shared;
  await direct.flushall();
  const policy = admissionPolicy(parseConfig(source(shared.baseSettings)));
  const rows = new Map<UnitKey, UnitRow>();
  const record = (key: UnitKey, billed: number, scripts: number): void => {
    let row = rows.get(key);
    if (row === undefined) rows.set(key, (row = { key, label: UNIT_LABELS[key], billed: [], scripts: [] }));
    row.billed.push(billed);
    row.scripts.push(scripts);
  };
  /** Runs one call alone; `classify` says, from its answer, which kind it turned out to be (undefined: not recorded). */
  const measure = async <T>(run: () => Promise<T>, classify: (answer: T) => UnitKey | undefined): Promise<T> => {
    const before = await direct.counts();
    const answer = await run();
    const after = await direct.counts();
    const key = classify(answer);
    if (key !== undefined) record(key, after.billed - before.billed, after.scripts - before.scripts);
    return answer;
  };
  const T = SALE_OPENS_MS;
  const P = AUTO_ADMIT_PERIOD_S * 1000;
  const joined = (r: JoinResult): UnitKey => (r.ticket <= r.cursor ? 'joinWalkIn' : 'joinQueued');

  const q = 'unit-costs';
  await store.poll(q, T, policy); // the state exists (its generation is written once) and the period's step ran
  for (let i = 0; i < UNIT_SAMPLES; i++) await measure(() => store.join(q, T + 1 + i, policy), joined);
  // Past the period's calls: from here on people wait.
  for (let i = 0; i < 2 * AUTO_ADMIT_PER_PERIOD; i++) await store.join(q, T + 100, policy);
  for (let i = 0; i < UNIT_SAMPLES; i++) await measure(() => store.join(q, T + 200 + i, policy), joined);
  // Enough waiting for every step and admit below to call its full count, as in the simulation.
  for (let i = 0; i < 3 * AUTO_ADMIT_PER_PERIOD + 6 * ORIGIN_ADMIT_COUNT; i++) await store.join(q, T + 250, policy);
  for (let i = 0; i < UNIT_SAMPLES; i++) await measure(() => store.poll(q, T + 300 + i, policy), () => 'poll');
  // Three period steps (10, 20, 30 s: before any of their calls could lapse); after each, claims.
  let claims = 0;
  for (let period = 1; period <= 3; period++) {
    const before = await store.peek(q);
    const stepped = await measure(() => store.poll(q, T + period * P + 1, policy), (r) => (r.cursor - before.cursor === AUTO_ADMIT_PER_PERIOD ? 'pollStep' : undefined));
    for (let i = 0; i < Math.ceil(UNIT_SAMPLES / 3) && claims < UNIT_SAMPLES; i++, claims++) {
      await measure(() => store.claim(q, stepped.cursor - i, T + period * P + 2 + i, policy, 0, stepped.generation), (r) => (r.claimed ? 'claim' : undefined));
    }
  }
  for (let i = 0; i < 3; i++) {
    await measure(() => store.admit(q, ORIGIN_ADMIT_COUNT, T + 3 * P + 100 + i, policy, `unit-${i}`), (r) => (r.admitted === ORIGIN_ADMIT_COUNT ? 'admit' : undefined));
    await measure(() => store.admit(q, ORIGIN_ADMIT_COUNT, T + 3 * P + 200 + i, policy), (r) => (r.admitted === ORIGIN_ADMIT_COUNT ? 'admitNoKey' : undefined));
  }
  // The first poll of a minute (its period's too), on queues of their own so that no call made above lapses first.
  for (let i = 0; i < 3; i++) {
    const m = `unit-minute-${i}`;
    await store.poll(m, T + 50_000, policy);
    for (let j = 0; j < 2 * AUTO_ADMIT_PER_PERIOD + 50; j++) await store.join(m, T + 50_001, policy);
    const before = await store.peek(m);
    await measure(() => store.poll(m, T + 60_001, policy), (r) => (r.cursor - before.cursor === AUTO_ADMIT_PER_PERIOD ? 'pollMinute' : undefined));
  }
  await direct.flushall();
  const ordered = (Object.keys(UNIT_LABELS) as UnitKey[]).flatMap((k) => rows.get(k) ?? []);
  return { rows: ordered, cost: (key) => median(rows.get(key)?.billed ?? []) };
}

// ---------------------------------------------------------------------------------------------
// Reporting

interface Summary {
  readonly waitingMin: number;
  readonly waitingMax: number;
  readonly pollsPerS: number;
  readonly joinsPerS: number;
  /** Admissions: claims plus explicit admit calls (the round-trip formula's term). */
  readonly admitsPerS: number;
  readonly claimsPerS: number;
  readonly admitCallsPerS: number;
  readonly commandsPerS: number;
  readonly peakCommandsPerS: number;
  readonly billedPerS: number;
  readonly peakBilledPerS: number;
  readonly storePollsPerS: number;
  /** The no-cache design's round trips per second from this run's polls (1 per poll + joins + claims + admits). */
  readonly computedNoCache: { avg: number; peak: number };
  readonly computedKit: { avg: number; peak: number };
  /** The same, billed: this run's billed commands with every poll a store poll at its measured cost. */
  readonly computedNoCacheBilled: { avg: number; peak: number };
  /** The starter kit, billed (STARTER_KIT_BILLED: a lower bound). */
  readonly computedKitBilled: { avg: number; peak: number };
  /** Billed commands less the arrivals' share (joins x a queued join's measured cost): the state-load and admission terms. */
  readonly nonArrivalBilled: { avg: number; peak: number };
  readonly agreeSeconds: number;
}

function avgPeak(values: readonly number[]): { avg: number; peak: number } {
  return { avg: sum(values) / values.length, peak: Math.max(...values) };
}

function summarize(r: RunResult, units: UnitCosts): Summary {
  const s = r.seconds;
  const w = s.length;
  const cPoll = units.cost('poll');
  const cJoin = units.cost('joinQueued');
  return {
    waitingMin: Math.min(...s.map((x) => x.waiting)),
    waitingMax: Math.max(...s.map((x) => x.waiting)),
    pollsPerS: sum(s.map((x) => x.polls)) / w,
    joinsPerS: sum(s.map((x) => x.join)) / w,
    admitsPerS: sum(s.map((x) => x.admit + x.claim)) / w,
    claimsPerS: sum(s.map((x) => x.claim)) / w,
    admitCallsPerS: sum(s.map((x) => x.admit)) / w,
    commandsPerS: sum(s.map((x) => x.redis)) / w,
    peakCommandsPerS: Math.max(...s.map((x) => x.redis)),
    billedPerS: sum(s.map((x) => x.billed)) / w,
    peakBilledPerS: Math.max(...s.map((x) => x.billed)),
    storePollsPerS: sum(s.map((x) => x.poll)) / w,
    computedNoCache: avgPeak(s.map((x) => x.polls + x.join + x.claim + x.admit + x.peek)),
    computedKit: avgPeak(s.map((x) => STARTER_KIT_CALLS_PER_POLL * x.polls + x.join + x.claim + x.admit + x.peek)),
    computedNoCacheBilled: avgPeak(s.map((x) => x.billed + (x.polls - x.poll) * cPoll)),
    computedKitBilled: avgPeak(s.map((x) => STARTER_KIT_BILLED.poll * x.polls + STARTER_KIT_BILLED.join * x.join + STARTER_KIT_BILLED.admit * (x.claim + x.admit))),
    nonArrivalBilled: avgPeak(s.map((x) => x.billed - x.join * cJoin)),
    agreeSeconds: s.filter((x) => x.wrapper === x.fetch && x.fetch === x.redis).length,
  };
}

/**
 * Billed commands per second from the measured unit costs: arrivals x a queued join, claims x a
 * claim, admit calls x an admit, POPs x queues / lifetime x a poll, plus the period step's and the
 * minute's extra once per period and per minute.
 */
function billedFormula(c: Summary, units: UnitCosts, ttl: number): number {
  const step = units.cost('pollStep') - units.cost('poll');
  const minute = units.cost('pollMinute') - units.cost('pollStep');
  return (
    c.joinsPerS * units.cost('joinQueued') +
    c.claimsPerS * units.cost('claim') +
    c.admitCallsPerS * units.cost('admit') +
    ((POPS * QUEUES) / ttl) * units.cost('poll') +
    step / AUTO_ADMIT_PERIOD_S +
    minute / 60
  );
}

interface Calibration {
  readonly polls: number;
  readonly cpuUs: number;
  readonly wallUs: number;
}

/**
 * What one full handler poll costs when the cache hits: one POP, a cache lifetime longer than the
 * measurement, one waiting cookie, CALIBRATION_POLLS polls in a row after a first one that fills the cache.
 */
async function calibrate(shared: Shared): Promise<Calibration> {
  await shared.direct.flushall();
  const clock = new ManualClock(SALE_OPENS_MS);
  const config = parseConfig(source({ ...shared.baseSettings, state_cache_seconds: '60', admit_per_period: '0' }));
  const handler = createHandler({ config, secrets: shared.secrets, store: shared.store, origin: ORIGIN, logger: new PopLog(), clock, cache: new MemoryStateCache(clock) });
  await shared.direct.hincrby(buildQueueKeys(DEFAULT_KEY_PREFIX, config.queueName).ctl, 'tail', 10);
  const iat = Math.floor(SALE_OPENS_MS / 1000);
  const token = await signToken(shared.secrets.keyRing, { q: config.queueName, k: 'w', t: 5, iat, exp: iat + config.queueTimeoutSeconds });
  const client: ClientInfo = { address: '203.0.113.250', pop: 'CAL' };
  const poll = () => handler(new Request(SHOP_URL, { headers: { cookie: `${config.cookieName}=${token}`, accept: 'text/html' } }), client);
  await poll();
  const cpu = process.cpuUsage();
  const wall = performance.now();
  for (let i = 0; i < CALIBRATION_POLLS; i++) await poll();
  const wallUs = ((performance.now() - wall) * 1000) / CALIBRATION_POLLS;
  const used = process.cpuUsage(cpu);
  return { polls: CALIBRATION_POLLS, cpuUs: (used.user + used.system) / CALIBRATION_POLLS, wallUs };
}

/** The arrivals one database takes under the cap, from a run's measured non-arrival terms and a join's measured cost. */
interface OneDatabase {
  /** The run the state-load and admission terms come from. */
  readonly from: RunResult;
  readonly joinCost: number;
  readonly nonArrival: { avg: number; peak: number };
  /** (cap - the non-arrival terms' peak second) / a join's cost: arrivals per second that keep every second under the cap. */
  readonly arrivalsPerS: number;
  /** The same with the terms' average. */
  readonly arrivalsPerSAtAverage: number;
}

function oneDatabase(run: RunResult, units: UnitCosts): OneDatabase {
  const c = summarize(run, units);
  const joinCost = units.cost('joinQueued');
  return {
    from: run,
    joinCost,
    nonArrival: c.nonArrivalBilled,
    arrivalsPerS: Math.floor((COMMANDS_PER_S_CAP - c.nonArrivalBilled.peak) / joinCost),
    arrivalsPerSAtAverage: Math.floor((COMMANDS_PER_S_CAP - c.nonArrivalBilled.avg) / joinCost),
  };
}

interface ReportInput {
  readonly cacheRuns: readonly RunResult[];
  readonly noCacheRuns: readonly RunResult[];
  readonly surge: RunResult | undefined;
  readonly units: UnitCosts;
  readonly ttl: number;
  readonly totalMs: number;
  readonly calibration: Calibration | undefined;
}

function report(input: ReportInput): boolean {
  const { cacheRuns, noCacheRuns, surge, units, ttl, totalMs, calibration } = input;
  const out: string[] = [];
  const say = (line = ''): void => {
    out.push(line);
  };
  let ok = true;
  const summary = (r: RunResult): Summary => summarize(r, units);
  const cJoin = units.cost('joinQueued');
  const cPoll = units.cost('poll');
  const fmtCost = (n: number): string => (Number.isInteger(n) ? String(n) : n.toFixed(1));

  const noCacheBySize = new Map(noCacheRuns.filter((r) => r.scenario.windowS === WINDOW_S).map((r) => [r.scenario.size, r]));
  const spot = noCacheRuns.find((r) => r.scenario.windowS !== WINDOW_S);

  say('# Flash-sale simulation: store round trips and billed commands per second against the number waiting');
  say();
  say(`${POPS} POPs (Zipf-like shares, s=${POP_SKEW}), ${QUEUES} queue, state_cache_seconds=${ttl} (the setting's value), refresh_seconds=20 ± ${JITTER_S} s jitter,`);
  say(`burst of (size + ${BURST_MARGIN}) visitors over ${BURST_S} s, from ${PRE_S} s before the window, then ${TRICKLE_PER_S} new arrivals/s throughout;`);
  say(`rate mode, FIFO: automatic admission ${AUTO_ADMIT_PER_PERIOD} per ${AUTO_ADMIT_PERIOD_S} s (inside the poll/join scripts: no extra round trip), an origin admit of`);
  say(`${ORIGIN_ADMIT_COUNT} every ${ORIGIN_ADMIT_EVERY_S} s through POST /__wr/api/admit (one round trip each), and one claim per called visitor. Measured window:`);
  say(`${WINDOW_S} simulated s, in ${TICK_MS} ms ticks. Sizes run: ${SIZES.map(fmtInt).join(', ')}${SIZES.length < ALL_SIZES.length ? ` (of ${ALL_SIZES.map(fmtInt).join(', ')})` : ''}.`);
  say('Round trips/s = arrivals/s + admissions/s + POPs x queues / cache lifetime (+ active sessions / refresh interval: not yet a term, 0 here).');
  say('Billed commands/s = the same terms, each times what one such call is billed (the script plus every command inside it; measured below).');
  say();

  // Unit costs.
  say('## Billed commands per store call, measured alone (INFO commandstats delta around one call, same Redis, client and bridge)');
  say();
  say(
    table(
      ['store call (rate mode, FIFO)', 'calls measured', 'billed: median (min-max)', 'round trips each'],
      ['l', 'r', 'r', 'r'],
      units.rows.map((row) => [
        row.label,
        String(row.billed.length),
        `${fmtCost(median(row.billed))} (${Math.min(...row.billed)}-${Math.max(...row.billed)})`,
        row.scripts.every((n) => n === 1) ? '1' : `${Math.min(...row.scripts)}-${Math.max(...row.scripts)}`,
      ]),
    ),
  );
  say('The medians are used where a figure is computed: the WITHOUT-cache and formula columns, and "beyond one database".');
  say();

  // Round trips.
  const mainRows: string[][] = [];
  const billedRows: string[][] = [];
  const costRows: string[][] = [];
  for (const r of cacheRuns) {
    const size = r.scenario.size;
    const c = summary(r);
    const predicted = c.joinsPerS + c.admitsPerS + (POPS * QUEUES) / ttl;
    const measuredRun = noCacheBySize.get(size);
    const measured = measuredRun === undefined ? undefined : summary(measuredRun);
    if (c.commandsPerS > predicted + 1e-9) ok = false;
    if (c.waitingMin < size) ok = false;
    mainRows.push([
      `>= ${fmtInt(size)}`,
      `${fmtInt(c.waitingMin)}-${fmtInt(c.waitingMax)}`,
      fmtRate(c.pollsPerS),
      `${fmtRate(c.commandsPerS)} (${fmtInt(c.peakCommandsPerS)})`,
      fmtRate(predicted),
      measured ? `${fmtRate(measured.commandsPerS)} (${fmtInt(measured.peakCommandsPerS)})` : 'not run',
      `${fmtRate(c.computedNoCache.avg)} (${fmtInt(c.computedNoCache.peak)})`,
      `${fmtRate(c.computedKit.avg)} (${fmtInt(c.computedKit.peak)})`,
    ]);
    billedRows.push([
      `>= ${fmtInt(size)}`,
      fmtRate(c.pollsPerS),
      `${fmtRate(c.billedPerS)} (${fmtInt(c.peakBilledPerS)})`,
      (c.billedPerS / c.commandsPerS).toFixed(2),
      fmtRate(billedFormula(c, units, ttl)),
      measured ? `${fmtRate(measured.billedPerS)} (${fmtInt(measured.peakBilledPerS)})` : 'not run',
      `${fmtRate(c.computedNoCacheBilled.avg)} (${fmtInt(c.computedNoCacheBilled.peak)})`,
      `${fmtRate(c.computedKitBilled.avg)} (${fmtInt(c.computedKitBilled.peak)})`,
    ]);
    // The cost and cap columns use the measurement where there is one, else the computation.
    const nc = measured ? { avg: measured.billedPerS, peak: measured.peakBilledPerS } : c.computedNoCacheBilled;
    costRows.push([
      `>= ${fmtInt(size)}`,
      fmtUsd(usdPerHour(c.billedPerS)),
      capText(c.peakBilledPerS),
      `${fmtUsd(usdPerHour(nc.avg))}${measured ? '' : ' (computed)'}`,
      capText(nc.peak),
      fmtUsd(usdPerHour(c.computedKitBilled.avg)),
      capText(c.computedKitBilled.peak),
    ]);
  }
  say('## Store round trips per second (script calls), side by side (window average, peak second in brackets)');
  say();
  say(
    table(
      ['waiting', 'waiting (min-max)', 'polls/s', 'WITH cache: measured', 'formula', 'WITHOUT cache: measured', 'WITHOUT: computed', 'starter kit: modelled'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      mainRows,
    ),
  );
  say('waiting = tail - cursor in Redis, sampled every second. polls/s is a little above waiting / 20: a visitor let in keeps polling until its');
  say('next poll tells it so. WITHOUT computed = 1 round trip per poll + joins + claims + admits, second by second, from the WITH-cache run\'s own');
  say('polls (the same seeded visitors); starter kit = 2 per poll + the same. Where WITHOUT is also measured, the two can be compared.');
  say();
  say('## Billed commands per second (what Upstash bills: every command Redis ran, those inside scripts included; window average, peak second in brackets)');
  say();
  say(
    table(
      ['waiting', 'polls/s', 'WITH cache: measured', 'billed per round trip', 'formula (unit costs)', 'WITHOUT cache: measured', 'WITHOUT: computed', 'starter kit: modelled (at least)'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      billedRows,
    ),
  );
  say(`formula = joins x ${fmtCost(cJoin)} + claims x ${fmtCost(units.cost('claim'))} + admit calls x ${fmtCost(units.cost('admit'))} + POPs x queues / lifetime x ${fmtCost(cPoll)}`);
  say(`  + the period step's extra (${fmtCost(units.cost('pollStep') - cPoll)}) once per ${AUTO_ADMIT_PERIOD_S} s + the minute's extra (${fmtCost(units.cost('pollMinute') - units.cost('pollStep'))}) once per 60 s, with this run's joins, claims and admit calls.`);
  say(`WITHOUT computed = the WITH-cache run's billed commands, second by second, with every poll a store poll at ${fmtCost(cPoll)} (the measured median).`);
  say(`Starter kit = ${STARTER_KIT_BILLED.poll} per poll (the low end of issue 13's 2-5), ${STARTER_KIT_BILLED.join} per join, ${STARTER_KIT_BILLED.admit} per admission: a lower bound.`);
  say();
  say(`## Upstash cost in billed commands ($${USD_PER_100K_COMMANDS.toFixed(2)} per 100k) per hour at the window's average, and the ${fmtInt(COMMANDS_PER_S_CAP)} commands/s cap (peak second)`);
  say();
  say(table(['waiting', 'WITH cache $/h', 'under cap', 'WITHOUT cache $/h', 'under cap', 'starter kit $/h (at least)', 'under cap'], ['l', 'r', 'l', 'r', 'l', 'r', 'l'], costRows));
  say();

  say(`## Over time: billed commands/s in each ${SERIES_BLOCK_S} s block of the window (measured; round trips/s in brackets)`);
  say();
  const blocks = Math.ceil(WINDOW_S / SERIES_BLOCK_S);
  say(
    table(
      ['run', ...Array.from({ length: blocks }, (_, b) => `${b * SERIES_BLOCK_S}-${Math.min(WINDOW_S, (b + 1) * SERIES_BLOCK_S)} s`)],
      ['l', ...Array.from({ length: blocks }, (): 'r' => 'r')],
      [...cacheRuns, ...noCacheRuns.filter((r) => r.scenario.windowS === WINDOW_S)].map((r) => [
        `${r.scenario.cacheOn ? 'with' : 'without'} cache, >= ${fmtInt(r.scenario.size)}`,
        ...Array.from({ length: blocks }, (_, b) => {
          const part = r.seconds.slice(b * SERIES_BLOCK_S, (b + 1) * SERIES_BLOCK_S);
          return `${fmtRate(sum(part.map((x) => x.billed)) / part.length)} (${fmtRate(sum(part.map((x) => x.redis)) / part.length)})`;
        }),
      ]),
    ),
  );
  say();

  // The formula's terms.
  say('## The formula, term by term (with the cache; measured round trips per second, and what they are billed at the unit costs)');
  say();
  say(
    table(
      ['waiting', 'arrivals (joins)', 'claims', 'admit calls', 'cache misses (polls)', 'POPs x queues / lifetime', 'round trips', 'formula', 'billed', 'billed formula'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      cacheRuns.map((r) => {
        const c = summary(r);
        return [
          `>= ${fmtInt(r.scenario.size)}`,
          `${c.joinsPerS.toFixed(1)} (${fmtRate(c.joinsPerS * cJoin)})`,
          `${c.claimsPerS.toFixed(1)} (${fmtRate(c.claimsPerS * units.cost('claim'))})`,
          `${c.admitCallsPerS.toFixed(2)} (${fmtRate(c.admitCallsPerS * units.cost('admit'))})`,
          `${c.storePollsPerS.toFixed(1)} (${fmtRate(c.storePollsPerS * cPoll)})`,
          `<= ${((POPS * QUEUES) / ttl).toFixed(1)}`,
          c.commandsPerS.toFixed(1),
          (c.joinsPerS + c.admitsPerS + (POPS * QUEUES) / ttl).toFixed(1),
          c.billedPerS.toFixed(1),
          billedFormula(c, units, ttl).toFixed(1),
        ];
      }),
    ),
  );
  say('Each term: round trips per second (billed at the unit costs in brackets). A POP makes at most one store call per cache lifetime, and');
  say('fewer when it gets fewer polls than that (small crowds, small POPs).');
  say();

  // Counting agreement.
  say('## Counting: store wrapper vs HTTP requests to the bridge vs Redis script calls (EVALSHA+EVAL), and billed commands, measured window');
  say();
  const countRows: string[][] = [];
  for (const r of [...cacheRuns, ...noCacheRuns, ...(surge ? [surge] : [])]) {
    const s = r.seconds;
    const wrapper = sum(s.map((x) => x.wrapper));
    const fetches = sum(s.map((x) => x.fetch));
    const redis = sum(s.map((x) => x.redis));
    const billed = sum(s.map((x) => x.billed));
    const agree = s.filter((x) => x.wrapper === x.fetch && x.fetch === x.redis).length;
    if (wrapper !== redis || fetches !== redis || agree !== s.length) ok = false;
    const name =
      r === surge
        ? `surge check: >= ${fmtInt(r.scenario.size)}, +${fmtInt(r.scenario.surgePerS ?? 0)} joins/s (${r.scenario.windowS} s)`
        : `${r.scenario.cacheOn ? 'with' : 'without'} cache, >= ${fmtInt(r.scenario.size)}${r.scenario.windowS === WINDOW_S ? '' : ` (first ${r.scenario.windowS} s)`}`;
    countRows.push([
      name,
      `${fmtInt(wrapper)} (j ${fmtInt(sum(s.map((x) => x.join)))} / p ${fmtInt(sum(s.map((x) => x.poll)))} / c ${fmtInt(sum(s.map((x) => x.claim)))} / a ${fmtInt(sum(s.map((x) => x.admit)))})`,
      fmtInt(fetches),
      fmtInt(redis),
      `${agree}/${s.length}`,
      fmtInt(billed),
      (billed / redis).toFixed(2),
      `${fmtInt(r.burst.wrapper)} / ${fmtInt(r.burst.fetch)} / ${fmtInt(r.burst.redis)} / ${fmtInt(r.burst.billed)}`,
      `${(r.wallMs / 1000).toFixed(1)} s`,
    ]);
  }
  say(
    table(
      ['run', 'store wrapper (join/poll/claim/admit)', 'bridge HTTP', 'Redis EVALSHA+EVAL', 'seconds agreeing', 'Redis billed', 'billed per round trip', 'pre-window: wrapper/HTTP/Redis/billed', 'wall time'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      countRows,
    ),
  );
  say('Billed: calls + rejected_calls summed over every cmdstat_* line, less INFO, CLIENT, SCRIPT, FLUSHALL and the HGETs/HINCRBY the simulation');
  say('sends itself (counted as sent; two snapshots in a row, and two around one such HGET, were checked to count nothing).');
  say();

  // Cache behaviour.
  say('## What the polls went through (with the cache)');
  say();
  say(
    table(
      ['waiting', 'polls', 'via full handler', 'hits / misses (handler log)', 'straight to the POP cache', 'of which missed', 'cookies minted', 'admitted', 'unavailable'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      cacheRuns.map((r) => {
        if (r.directMisses !== 0 || (r.decisions.get('unavailable') ?? 0) !== 0) ok = false;
        return [
          `>= ${fmtInt(r.scenario.size)}`,
          fmtInt(r.handlerPolls + r.directPolls),
          fmtInt(r.handlerPolls),
          `${fmtInt(r.handlerHits)} / ${fmtInt(r.handlerMisses)}`,
          fmtInt(r.directPolls),
          fmtInt(r.directMisses),
          fmtInt(r.mintedCookies),
          fmtInt(r.admittedVisitors),
          fmtInt(r.decisions.get('unavailable') ?? 0),
        ];
      }),
    ),
  );
  say('(polls and admissions over the whole simulated time, burst included; "unavailable" = store call failed or timed out; a called visitor\'s');
  say('poll always goes through the full handler, which claims its admission)');
  say();

  // The burst.
  say('## Arrivals before the window: the burst (plus the trickle), the one term no cache can absorb');
  say();
  say(
    table(
      ['waiting', 'joins before the window', 'how', 'joins/s during the burst', 'billed/s during the burst', 'under cap', 'their cost'],
      ['l', 'r', 'l', 'r', 'r', 'l', 'r'],
      cacheRuns.map((r) => {
        const joins = r.burst.modelledJoins + r.burst.joins;
        const rate = (r.scenario.size + BURST_MARGIN) / BURST_S + TRICKLE_PER_S;
        const modelled = r.burst.modelledJoins > 0;
        const billedRate = modelled ? rate * cJoin : r.burst.peakBilledPerS;
        const billed = modelled ? joins * cJoin : r.burst.billed;
        return [
          `>= ${fmtInt(r.scenario.size)}`,
          fmtInt(joins),
          modelled
            ? `burst MODELLED: 1 HINCRBY of ${fmtInt(r.burst.modelledJoins)}; ${fmtInt(r.burst.joins)} real trickle joins`
            : `all ${fmtInt(r.burst.joins)} REAL joins, counted 3 ways`,
          fmtRate(rate),
          modelled ? `${fmtInt(billedRate)} (computed: x ${fmtCost(cJoin)})` : `${fmtInt(billedRate)} (measured, peak second)`,
          capText(billedRate),
          `$${((billed / 100_000) * USD_PER_100K_COMMANDS).toFixed(3)}${modelled ? ' (computed)' : ''}`,
        ];
      }),
    ),
  );
  const largest = SIZES[SIZES.length - 1]!;
  say(`Every arrival is one join (${fmtCost(cJoin)} billed commands), cache or not: ${fmtInt(largest)} arrivals within ${BURST_S} s need ${fmtInt((largest * cJoin) / BURST_S)} billed/s;`);
  say(`under the cap they must be spread over at least ${fmtInt((largest * cJoin) / COMMANDS_PER_S_CAP)} s, or the sale needs more than one database (below).`);
  say();

  if (spot !== undefined) {
    const s = summary(spot);
    const c = cacheRuns.find((r) => r.scenario.size === spot.scenario.size);
    say(`## Spot check of the computed WITHOUT-cache columns: >= ${fmtInt(spot.scenario.size)} waiting, cache off, first ${spot.scenario.windowS} s of the window measured for real`);
    say();
    say(`measured: ${fmtRate(s.commandsPerS)} round trips/s (peak second ${fmtInt(s.peakCommandsPerS)}) and ${fmtRate(s.billedPerS)} billed/s (peak ${fmtInt(s.peakBilledPerS)}) for ${fmtRate(s.pollsPerS)} polls/s over seconds 0-${spot.scenario.windowS};`);
    if (c !== undefined) {
      const same = c.seconds.slice(0, spot.scenario.windowS);
      const computed = sum(same.map((x) => x.polls + x.join + x.claim + x.admit + x.peek)) / same.length;
      const computedBilled = sum(same.map((x) => x.billed + (x.polls - x.poll) * cPoll)) / same.length;
      const pollsPerS = sum(same.map((x) => x.polls)) / same.length;
      say(`computed as in the WITHOUT columns, from the WITH-cache run's polls in the same seconds: ${fmtRate(computed)} round trips/s and ${fmtRate(computedBilled)} billed/s for`);
      say(`${fmtRate(pollsPerS)} polls/s (${((100 * (s.commandsPerS - computed)) / computed).toFixed(1)}% and ${((100 * (s.billedPerS - computedBilled)) / computedBilled).toFixed(1)}% apart).`);
    }
    say();
  }

  // Beyond one database.
  const biggest = cacheRuns[cacheRuns.length - 1];
  if (biggest !== undefined) {
    const one = oneDatabase(biggest, units);
    const shares = popShares(POPS, POP_SKEW);
    const share = (k: number): number => shares[k]! - (k === 0 ? 0 : shares[k - 1]!);
    const busiest = share(0);
    const quietest = share(POPS - 1);
    const room = COMMANDS_PER_S_CAP - one.nonArrival.peak;
    say('## Beyond one database');
    say();
    say('MEASURED: a queued join is billed ' + `${fmtCost(one.joinCost)} commands (above); the state-load and admission terms, i.e. everything but the arrivals (a run's`);
    say(`billed commands less its joins x ${fmtCost(one.joinCost)}), come to ${fmtRate(one.nonArrival.avg)}/s on average and ${fmtRate(one.nonArrival.peak)} in the peak second in the >= ${fmtInt(biggest.scenario.size)}`);
    say(`run (${POPS} POPs, ${QUEUES} queue, ${ttl} s cache, ${fmtRate(summary(biggest).claimsPerS)} claims/s and ${fmtRate(summary(biggest).admitCallsPerS)} admit calls/s).`);
    say(`COMPUTED from those: one database takes (${fmtInt(COMMANDS_PER_S_CAP)} - ${fmtRate(one.nonArrival.peak)}) / ${fmtCost(one.joinCost)} = ${fmtInt(one.arrivalsPerS)} arrivals/s with every second under the cap`);
    say(`(${fmtInt(one.arrivalsPerSAtAverage)} at the terms' average). The terms grow with POPs x queues / lifetime x ${fmtCost(cPoll)} and admissions/s x ${fmtCost(units.cost('claim'))}: with 100 POPs and`);
    say(`200 admissions/s they would be about ${fmtInt((100 / ttl) * cPoll + 200 * units.cost('claim'))}/s, leaving room for ${fmtInt((COMMANDS_PER_S_CAP - (100 / ttl) * cPoll - 200 * units.cost('claim')) / one.joinCost)} arrivals/s.`);
    if (surge !== undefined) {
      const s = surge.seconds;
      const joins = avgPeak(s.map((x) => x.join));
      const billed = avgPeak(s.map((x) => x.billed));
      const redis = avgPeak(s.map((x) => x.redis));
      say(`MEASURED check: a queue of >= ${fmtInt(surge.scenario.size)} with its polls, claims and admits, plus ${fmtInt(surge.scenario.surgePerS ?? 0)} extra real joins/s through the handlers for`);
      say(`${surge.scenario.windowS} s: ${fmtRate(joins.avg)} joins/s, ${fmtRate(redis.avg)} round trips/s, billed ${fmtInt(billed.avg)}/s on average and ${fmtInt(billed.peak)} in the peak second`);
      say(`(${capText(billed.peak) === 'yes' ? 'under' : 'OVER'} the cap; per second: ${s.map((x) => fmtInt(x.billed)).join(', ')}).`);
    }
    say();
    say('Two ways past it. Both COMPUTED from the measured costs above: neither is built (the store has one queue per database and');
    say('takes tickets one at a time), and blocks would need store and edge changes.');
    say();
    say(`- **Several databases** (N queues, one per database; each arrival goes to one, e.g. by a hash of its address): each database has`);
    say(`  its own cap and its own terms, so the figure is N x ${fmtInt(one.arrivalsPerS)} (each POP caches N states: N x ${POPS} / ${ttl} s loads, spread over the N`);
    say('  databases). Billed per arrival is unchanged. What it breaks: FIFO holds within each database only; the admission rate is split');
    say('  N ways, so two visitors arriving together may wait differently, by however much the N lines differ; the operator admits, pauses');
    say('  and reads figures per database (N admit calls).');
    say(`- **Ticket blocks** (a POP takes B numbers with one run of the join script, HINCRBY of B instead of 1, and hands them out itself):`);
    say(`  billed per arrival ${fmtCost(one.joinCost)} / B, so the figure is B x ${fmtInt(one.arrivalsPerS)}. What it breaks: order between POPs within a block's fill time`);
    say(`  (B / the POP's arrivals/s): a later visitor at a busy POP can get a lower number than an earlier one at a quiet POP. Here the busiest`);
    say(`  POP has ${(100 * busiest).toFixed(1)}% of arrivals and the quietest ${(100 * quietest).toFixed(1)}%. A block that never fills must expire, leaving numbers nobody holds (the cursor`);
    say('  passes them and admits nobody, unless the store learns to skip them), and a POP needs one counter shared by its instances: Fastly');
    say('  Compute has no atomic per-POP counter (its cache collapses loads, it does not increment), so in practice a block is per instance,');
    say('  which means more blocks, slower fill and more holes. Not measured.');
    say();
    const planRows = PLAN_ARRIVALS_PER_S.map((a) => {
      const n = Math.ceil(a / one.arrivalsPerS);
      const b = Math.max(1, Math.ceil((a * one.joinCost) / room));
      const fill = (part: number): string => {
        const ms = (1000 * b) / (a * part);
        return b === 1 ? '0 (no block)' : ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(0)} ms`;
      };
      return [fmtInt(a), fmtInt(a * one.joinCost), String(n), String(b), fill(busiest), fill(quietest), fmtUsd(usdPerHour(a * one.joinCost)), fmtUsd(usdPerHour((a * one.joinCost) / b))];
    });
    say(
      table(
        ['arrivals/s', 'billed/s for the joins (1 database)', 'databases needed', 'or: block size needed', 'block fill time, busiest POP', 'quietest POP', '$/h of the joins', 'with those blocks'],
        ['r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
        planRows,
      ),
    );
    say(`Needed = the smallest N, or B, with arrivals x ${fmtCost(one.joinCost)} / B + ${fmtRate(one.nonArrival.peak)} <= ${fmtInt(COMMANDS_PER_S_CAP)} (one database each). Fill time = B / (arrivals/s x the POP's share): the`);
    say('window within which cross-POP order is not kept. Several databases cost the same per arrival; blocks cost 1/B.');
    say();
    say(
      table(
        ['option', ...PLAN_DATABASES.map((n) => `N=${n}`), ...PLAN_BLOCKS.filter((b) => b > 1).map((b) => `B=${fmtInt(b)}`)],
        ['l', ...PLAN_DATABASES.map((): 'r' => 'r'), ...PLAN_BLOCKS.filter((b) => b > 1).map((): 'r' => 'r')],
        [
          [
            'arrivals/s where it stops',
            ...PLAN_DATABASES.map((n) => fmtInt(n * one.arrivalsPerS)),
            ...PLAN_BLOCKS.filter((b) => b > 1).map((b) => fmtInt(Math.floor((room * b) / one.joinCost))),
          ],
          [
            'billed per arrival',
            ...PLAN_DATABASES.map(() => fmtCost(one.joinCost)),
            ...PLAN_BLOCKS.filter((b) => b > 1).map((b) => (one.joinCost / b).toFixed(b >= 100 ? 3 : 2)),
          ],
        ],
      ),
    );
    say(`At a block option's own limit every POP's block fills in 1 / (${fmtInt(one.arrivalsPerS)} x its share): ${((1000 / (one.arrivalsPerS * busiest))).toFixed(0)} ms at the busiest POP, ${((1000 / (one.arrivalsPerS * quietest))).toFixed(0)} ms at the`);
    say('quietest, whatever B; below the limit, longer in proportion. The two combine (N databases of blocks: N x B x the figure).');
    say();
  }

  // Real vs modelled.
  say('## What is real and what is modelled');
  say();
  say('REAL at every size: redis-server (own port, 127.0.0.1) and its Lua execution; the Upstash REST bridge (src/node/upstash-bridge.ts);');
  say('  the `@upstash/redis` client with createUpstashClientOptions over HTTP; UpstashQueueStore and its scripts (join, poll with automatic');
  say(`  admission, claim, admit); ${POPS} createHandler(...) instances, each with its own MemoryStateCache; cookie signing and verification (jose);`);
  say(`  the ${TRICKLE_PER_S}/s arrivals as joins through the handlers; every called visitor's claim through its POP's handler; the origin admits`);
  say('  through POST /__wr/api/admit; the round-trip counts (3 ways) and the billed commands (INFO commandstats).');
  say('MODELLED at every size: the visitors (arrival times, POP choice, poll jitter: seeded), sockets (no HTTP between a visitor and its POP:');
  say('  a Request object is handed to the POP\'s handler), timing (a virtual clock in ticks; a store call takes no virtual time however long');
  say('  it really takes; the requests of one tick are concurrent). Active sessions after admission are not simulated (they cost no store call).');
  say('COMPUTED (from measured per-call costs): the WITHOUT-cache columns above 10,000 waiting, the starter kit, the billed cost of a modelled');
  say('  burst, and the options beyond one database.');
  say();
  say(
    table(
      ['waiting', 'burst joins', 'polls WITH the cache', 'WITHOUT the cache', 'starter kit'],
      ['l', 'l', 'l', 'l', 'l'],
      SIZES.map((size) => [
        `>= ${fmtInt(size)}`,
        size <= REAL_JOINS_UP_TO ? 'REAL: joins via handler + store' : 'MODELLED: 1 HINCRBY of the tail',
        size <= FULL_HANDLER_UP_TO
          ? 'REAL: every poll via full handler + POP cache'
          : `REAL: ${HANDLER_POLLS_PER_POP_TICK}/POP/tick and every called visitor via full handler, rest via the POP cache only`,
        size <= NO_CACHE_MEASURED_UP_TO
          ? 'MEASURED: every poll via handler + store'
          : spot !== undefined && spot.scenario.size === size
            ? `COMPUTED (1 store poll per poll); MEASURED for ${spot.scenario.windowS} s`
            : 'COMPUTED: 1 store poll per poll',
        'MODELLED: per-class counts of issue 13',
      ]),
    ),
  );
  say();
  say(`"via the POP cache only": above ${fmtInt(FULL_HANDLER_UP_TO)} waiting, ${HANDLER_POLLS_PER_POP_TICK === 1 ? 'the first poll' : `the first ${HANDLER_POLLS_PER_POP_TICK} polls`} of each POP in each ${TICK_MS} ms tick goes through the full`);
  say('handler and the rest call that POP\'s MemoryStateCache directly, with the handler\'s key and lifetime and store.poll as the load');
  say('(the handler\'s own load also races the call against store_timeout_ms); a visitor found called goes on through the full handler.');
  say('They can only hit (a handler poll came first at the same virtual instant); each one is checked, and a miss would reach the');
  say('store and be counted like any other call ("of which missed" above).');
  if (calibration !== undefined) {
    say(
      `Why: a full handler poll on a cache hit took ${calibration.cpuUs.toFixed(0)} us of CPU (${calibration.wallUs.toFixed(0)} us wall) here, measured at the end of this run over ` +
        `${fmtInt(calibration.polls)} polls;`,
    );
    const last = cacheRuns[cacheRuns.length - 1];
    if (last !== undefined) {
      const polls = last.handlerPolls + last.directPolls;
      say(`  all ${fmtInt(polls)} polls of the largest run through full handlers would have taken about ${fmtInt((polls * calibration.cpuUs) / 1e6)} s of CPU on their own.`);
    }
  }
  say(`Wall time of the whole run: ${(totalMs / 1000).toFixed(1)} s (${process.version}, ${os.cpus().length} CPUs, ${new Date().toISOString().slice(0, 10)}).`);
  say();
  say(ok ? 'RESULT: ok (round trips agree 3 ways in every second; with the cache, at or under the formula at every size; never fewer waiting than the size)' : 'RESULT: FAILED (see the tables)');
  process.stdout.write(`${out.join('\n')}\n`);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Main

/** The sizes asked for: `--quick`, `--sizes=1000,100000` or WR_SIM_SIZES; else all. */
function chosenSizes(argv: readonly string[], env: string | undefined): readonly number[] {
  if (argv.includes('--quick')) return QUICK_SIZES;
  const given = argv.find((a) => a.startsWith('--sizes='))?.slice('--sizes='.length) ?? env;
  if (given === undefined || given.trim() === '') return ALL_SIZES;
  const sizes = given.split(',').map((t) => Number(t.trim().replace(/_/g, '')));
  if (sizes.some((n) => !Number.isSafeInteger(n) || n < 1 || n > 1_000_000)) throw new Error(`--sizes: whole numbers from 1 to 1,000,000, comma-separated (got "${given}")`);
  return [...new Set(sizes)].sort((a, b) => a - b);
}

async function main(): Promise<number> {
  // Adaptive admission's simulation (issue 17) is a model of its own: test/sim/adaptive.ts.
  if (process.argv.includes('--adaptive')) return mainAdaptive(process.argv.slice(2));
  // The same controller against live origins over HTTP (issue 30): test/sim/adaptive-live.ts.
  if (process.argv.includes('--adaptive-live')) return mainAdaptiveLive(process.argv.slice(2));
  // 100,000 arrivals a second past one database's ceiling (issue 34): test/sim/surge.ts.
  if (process.argv.includes('--surge') || process.argv.includes('--surge-quick')) return mainSurge(process.argv.slice(2));
  const runStarted = Date.now();
  const deadline = runStarted + WATCHDOG_MS;
  let redisServer: RedisServer | undefined;
  let bridge: BridgeWorker | undefined;
  let direct: IORedis | undefined;
  const stopAll = async (): Promise<void> => {
    globalThis.fetch = originalFetch;
    direct?.disconnect();
    direct = undefined;
    await bridge?.stop().catch(() => {});
    bridge = undefined;
    await redisServer?.stop().catch(() => {});
    redisServer = undefined;
  };
  const onSignal = (): void => {
    void stopAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    SIZES = chosenSizes(process.argv.slice(2), process.env['WR_SIM_SIZES']);
    redisServer = await startRedisServer();
    bridge = await startBridgeWorker(redisServer.url, BRIDGE_TOKEN, log);
    direct = new IORedis(redisServer.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await direct.connect();
    installFetchCounter(bridge.url);
    log(`redis-server on ${redisServer.url}, bridge on ${bridge.url}`);

    const store = new UpstashQueueStore({ redis: new Redis(createUpstashClientOptions({ url: bridge.url, token: BRIDGE_TOKEN })) });
    // Warm the scripts (EVALSHA's NOSCRIPT fallback loads them) on another queue, so every measured
    // store call is exactly one command; FLUSHALL before each run leaves the script cache alone.
    const warmAuto: AdmissionPolicy = { auto: { count: 1, periodMs: 1000 }, thresholds: { maxActive: 0, maxNewPerMinute: 0 }, sessionMs: 300_000, reservationMs: 30_000 };
    await store.join('warmup', SALE_OPENS_MS, warmAuto);
    await store.poll('warmup', SALE_OPENS_MS, warmAuto);
    await store.admit('warmup', 1, SALE_OPENS_MS, warmAuto);
    await store.claim('warmup', 1, SALE_OPENS_MS, warmAuto, 0);
    await store.peek('warmup');
    const own = new Direct(direct);
    await checkSnapshots(own);

    const baseSettings: Record<string, string> = {
      queue_name: 'default',
      refresh_seconds: '20',
      queue_timeout_seconds: '600',
      admit_per_period: String(AUTO_ADMIT_PER_PERIOD),
      admit_period_seconds: String(AUTO_ADMIT_PERIOD_S),
      store_timeout_ms: '5000',
      ...(process.env['WR_STATE_CACHE_SECONDS'] !== undefined && { state_cache_seconds: process.env['WR_STATE_CACHE_SECONDS'] }),
    };
    const ttl = parseConfig(source(baseSettings)).stateCacheSeconds;
    if (ttl === 0) throw new Error('state_cache_seconds is 0: nothing to compare');
    const secrets = parseSecrets(source(BASE_SECRETS));
    const shared: Shared = { store, direct: own, secrets, baseSettings, deadline };
    const units = await measureUnitCosts(shared);
    log(`unit costs: ${units.rows.map((r) => `${r.key} ${median(r.billed)}`).join(', ')}`);

    const cacheRuns: RunResult[] = [];
    const noCacheRuns: RunResult[] = [];
    for (const size of SIZES) {
      const r = await runScenario({ size, cacheOn: true, windowS: WINDOW_S, realJoins: size <= REAL_JOINS_UP_TO, fullHandler: size <= FULL_HANDLER_UP_TO }, shared);
      cacheRuns.push(r);
      log(`with cache, >= ${fmtInt(size)} waiting: ${(r.wallMs / 1000).toFixed(1)} s`);
      if (size <= NO_CACHE_MEASURED_UP_TO) {
        const n = await runScenario({ size, cacheOn: false, windowS: WINDOW_S, realJoins: size <= REAL_JOINS_UP_TO, fullHandler: true }, shared);
        noCacheRuns.push(n);
        log(`without cache, >= ${fmtInt(size)} waiting: ${(n.wallMs / 1000).toFixed(1)} s`);
      }
      if (size === NO_CACHE_SPOT_SIZE) {
        const n = await runScenario({ size, cacheOn: false, windowS: SPOT_WINDOW_S, realJoins: size <= REAL_JOINS_UP_TO, fullHandler: true }, shared);
        noCacheRuns.push(n);
        log(`without cache, >= ${fmtInt(size)} waiting, first ${SPOT_WINDOW_S} s: ${(n.wallMs / 1000).toFixed(1)} s`);
      }
    }
    // The surge check: joins at the rate computed to reach the cap with the largest run's other terms.
    let surge: RunResult | undefined;
    const largestRun = cacheRuns[cacheRuns.length - 1];
    if (largestRun !== undefined) {
      const surgePerS = Math.max(0, oneDatabase(largestRun, units).arrivalsPerS - TRICKLE_PER_S);
      surge = await runScenario({ size: SURGE_QUEUE, cacheOn: true, windowS: SURGE_WINDOW_S, realJoins: false, fullHandler: false, surgePerS }, shared);
      log(`surge check, +${fmtInt(surgePerS)} joins/s for ${SURGE_WINDOW_S} s: ${(surge.wallMs / 1000).toFixed(1)} s`);
    }
    const calibration = await calibrate(shared);
    await stopAll();
    return report({ cacheRuns, noCacheRuns, surge, units, ttl, totalMs: Date.now() - runStarted, calibration }) ? 0 : 1;
  } catch (error) {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : messageOf(error)}`);
    return 1;
  } finally {
    await stopAll();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

if (isMainThread) {
  process.exitCode = await main();
} else {
  await bridgeWorker(workerData as BridgeWorkerInput);
}
