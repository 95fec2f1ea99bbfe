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
 * Store commands are counted independently, three ways, and compared second by second:
 *   - a counting wrapper around the QueueStore the handlers use (calls by method);
 *   - HTTP requests the Upstash client sends to the bridge (a wrapper around the global `fetch`,
 *     which `@upstash/redis` calls once per request attempt, retries included);
 *   - EVALSHA/EVAL calls that Redis itself executed (INFO commandstats deltas).
 * Upstash bills per command, and each store call is one EVALSHA, so those are the billed commands.
 *
 * Real versus modelled depends on the size; the printed report says which, size by size.
 */
import { table } from '../support/markdown-table';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Redis } from '@upstash/redis';
import { Redis as IORedis } from 'ioredis';
import { parseConfig, parseSecrets, type Config, type Secrets } from '../../src/core/config';
import { createHandler, type Handler } from '../../src/core/handler';
import type { AdmissionPolicy, AdmitResult, ClaimResult, ClientInfo, Clock, DrawResult, HistoryPoint, JoinResult, Logger, Origin, QueueState, QueueStats, QueueStore, RequestLog, ResetResult, RuntimeControl, VipCode, VipUse } from '../../src/core/ports';
import { admissionPolicy } from '../../src/core/handler';
import { seededRandom } from '../support/seeded-random';
import { nextWorkerMessage } from '../support/worker-message';
import { signToken } from '../../src/core/tokens';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { MemoryStateCache } from '../../src/platform/memory-cache';
import { buildQueueKeys, DEFAULT_KEY_PREFIX } from '../../src/store/scripts';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { API_TOKEN, BASE_SECRETS, cookieFrom, ManualClock, payloadOf, source } from '../support/fixtures';
import { startRedisServer, type RedisServer } from '../support/redis-server';

// ---------------------------------------------------------------------------------------------
// Parameters (every loop below is bounded by these)

/** "At least this many waiting" sizes. */
const SIZES = [1_000, 10_000, 100_000, 1_000_000] as const;
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
/** Up to this size the burst is real joins through the handlers; above, one INCRBY of the tail. */
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
/** The whole run is abandoned (and everything stopped) past this. */
const WATCHDOG_MS = 240_000;
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

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}


function sum(values: readonly number[]): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
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

/** Runs the tasks with at most `limit` in flight; the first failure is thrown after all settle. */
async function runLimited(tasks: readonly (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < tasks.length) {
      const task = tasks[next++]!;
      try {
        await task();
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, lane));
  if (failure !== undefined) throw failure;
}

/** Sum of EVALSHA/EVAL (and their _RO forms) calls in an INFO commandstats reply. */
function scriptCalls(commandstats: string): number {
  let total = 0;
  for (const match of commandstats.matchAll(/cmdstat_(?:evalsha|eval|evalsha_ro|eval_ro):calls=(\d+)/g)) total += Number(match[1]);
  return total;
}

// ---------------------------------------------------------------------------------------------
// Counting: the store wrapper and the fetch wrapper

type Method = 'join' | 'poll' | 'admit' | 'peek';
const METHODS: readonly Method[] = ['join', 'poll', 'admit', 'peek'];

/** Counts every store call by method and by virtual second, then passes it to the real store. */
class CountingStore implements QueueStore {
  /** Calls per method, per second slot (slot = second + PRE_S). */
  readonly perSecond: Record<Method, number[]>;
  constructor(
    private readonly inner: QueueStore,
    private readonly clock: Clock,
    private readonly slots: number,
  ) {
    this.perSecond = { join: new Array<number>(slots).fill(0), poll: new Array<number>(slots).fill(0), admit: new Array<number>(slots).fill(0), peek: new Array<number>(slots).fill(0) };
  }
  #count(method: Method): void {
    const slot = Math.floor((this.clock.now() - SALE_OPENS_MS) / 1000) + PRE_S;
    if (slot < 0 || slot >= this.slots) throw new Error(`store call outside the simulated time (slot ${slot})`);
    this.perSecond[method][slot]! += 1;
  }
  join(queue: string, nowMs: number, policy: AdmissionPolicy, recoverMs?: number): Promise<JoinResult> {
    this.#count('join');
    return this.inner.join(queue, nowMs, policy, recoverMs);
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
  // Rate mode (this simulation) makes none of these calls; they are counted all the same.
  claim(queue: string, ticket: number, nowMs: number, policy: AdmissionPolicy, waitedMs: number, generation?: number): Promise<ClaimResult> {
    this.#count('admit');
    return this.inner.claim(queue, ticket, nowMs, policy, waitedMs, generation);
  }
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
  createVip(queue: string, codeHash: string, code: VipCode, nowMs: number): Promise<boolean> {
    this.#count('admit');
    return this.inner.createVip(queue, codeHash, code, nowMs);
  }
  useVip(queue: string, codeHash: string, nowMs: number): Promise<VipUse> {
    this.#count('admit');
    return this.inner.useVip(queue, codeHash, nowMs);
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

/** Cumulative shares of the POPs (Zipf-like), for picking a visitor's POP. */
function popShares(): Float64Array {
  const weights = Array.from({ length: POPS }, (_, k) => 1 / Math.pow(k + 1, POP_SKEW));
  const total = sum(weights);
  const cumulative = new Float64Array(POPS);
  let running = 0;
  weights.forEach((w, k) => {
    running += w / total;
    cumulative[k] = running;
  });
  cumulative[POPS - 1] = 1;
  return cumulative;
}

function pickPop(cumulative: Float64Array, u: number): number {
  let lo = 0;
  let hi = POPS - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (u < cumulative[mid]!) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------
// One scenario: one size, with or without the cache

interface Scenario {
  readonly size: number;
  readonly cacheOn: boolean;
  readonly windowS: number;
  /** The burst as real joins through the handlers (else one INCRBY of the tail). */
  readonly realJoins: boolean;
  /** Every poll through a full handler (else HANDLER_POLLS_PER_POP_TICK per POP per tick). */
  readonly fullHandler: boolean;
}

interface SecondStats {
  polls: number;
  waiting: number;
  join: number;
  poll: number;
  admit: number;
  peek: number;
  wrapper: number;
  fetch: number;
  redis: number;
}

interface RunResult {
  readonly scenario: Scenario;
  /** One entry per second of the measured window. */
  readonly seconds: SecondStats[];
  /** The pre-window (burst) totals. */
  readonly burst: { joins: number; wrapper: number; fetch: number; redis: number; modelledJoins: number };
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
  readonly direct: IORedis;
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
  const shares = popShares();
  const burstSize = sc.size + BURST_MARGIN;
  const trickleSize = TRICKLE_PER_S * (PRE_S + sc.windowS);
  const capacity = burstSize + trickleSize;
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
    burst: { joins: 0, wrapper: 0, fetch: 0, redis: 0, modelledJoins },
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
    result.directPolls++;
    const { value, hit } = await pop.cache.getOrLoad(cacheKey, config.stateCacheSeconds, () => store.poll(config.queueName, nowMs, auto));
    if (!hit) result.directMisses++;
    if (ticket[v]! <= value.cursor) {
      state[v] = ADMITTED;
      result.admittedVisitors++;
      cookies.delete(v);
    } else {
      schedule(v, nextPollTick(tick));
    }
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
    waiting: number;
  }
  const snapshot = async (): Promise<Snapshot> => {
    const [info, tailValue, cursorValue] = await Promise.all([direct.info('commandstats'), direct.hget(keys.ctl, 'tail'), direct.hget(keys.ctl, 'cursor')]);
    const tail = Number(tailValue ?? 0);
    const cursor = Number(cursorValue ?? 0);
    const wrapper = { join: sum(store.perSecond.join), poll: sum(store.perSecond.poll), admit: sum(store.perSecond.admit), peek: sum(store.perSecond.peek) };
    return { wrapper, fetch: fetchCounter.requests, redis: scriptCalls(info), waiting: Math.max(0, tail - cursor) };
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
  for (let s = 0; s < sc.windowS; s++) {
    const a = snapshots[PRE_S + s]!;
    const z = snapshots[PRE_S + s + 1]!;
    const slot = PRE_S + s;
    result.seconds.push({
      polls: pollsPerSlot[slot]!,
      waiting: a.waiting,
      join: store.perSecond.join[slot]!,
      poll: store.perSecond.poll[slot]!,
      admit: store.perSecond.admit[slot]!,
      peek: store.perSecond.peek[slot]!,
      wrapper: total(z) - total(a),
      fetch: z.fetch - a.fetch,
      redis: z.redis - a.redis,
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
// Reporting

interface Summary {
  readonly waitingMin: number;
  readonly waitingMax: number;
  readonly pollsPerS: number;
  readonly joinsPerS: number;
  readonly admitsPerS: number;
  readonly commandsPerS: number;
  readonly peakCommandsPerS: number;
  readonly storePollsPerS: number;
  /** The no-cache design's commands per second from this run's polls (1 per poll + joins + admits). */
  readonly computedNoCache: { avg: number; peak: number };
  readonly computedKit: { avg: number; peak: number };
  readonly agreeSeconds: number;
}

function summarize(r: RunResult): Summary {
  const s = r.seconds;
  const w = s.length;
  const perSecondNoCache = s.map((x) => x.polls + x.join + x.admit + x.peek);
  const perSecondKit = s.map((x) => STARTER_KIT_CALLS_PER_POLL * x.polls + x.join + x.admit + x.peek);
  return {
    waitingMin: Math.min(...s.map((x) => x.waiting)),
    waitingMax: Math.max(...s.map((x) => x.waiting)),
    pollsPerS: sum(s.map((x) => x.polls)) / w,
    joinsPerS: sum(s.map((x) => x.join)) / w,
    admitsPerS: sum(s.map((x) => x.admit)) / w,
    commandsPerS: sum(s.map((x) => x.redis)) / w,
    peakCommandsPerS: Math.max(...s.map((x) => x.redis)),
    storePollsPerS: sum(s.map((x) => x.poll)) / w,
    computedNoCache: { avg: sum(perSecondNoCache) / w, peak: Math.max(...perSecondNoCache) },
    computedKit: { avg: sum(perSecondKit) / w, peak: Math.max(...perSecondKit) },
    agreeSeconds: s.filter((x) => x.wrapper === x.fetch && x.fetch === x.redis).length,
  };
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

function report(cacheRuns: readonly RunResult[], noCacheRuns: readonly RunResult[], ttl: number, totalMs: number, calibration: Calibration | undefined): boolean {
  const out: string[] = [];
  const say = (line = ''): void => {
    out.push(line);
  };
  let ok = true;

  const noCacheBySize = new Map(noCacheRuns.filter((r) => r.scenario.windowS === WINDOW_S).map((r) => [r.scenario.size, r]));
  const spot = noCacheRuns.find((r) => r.scenario.windowS !== WINDOW_S);

  say('# Flash-sale simulation: store commands per second against the number waiting');
  say();
  say(`${POPS} POPs (Zipf-like shares, s=${POP_SKEW}), ${QUEUES} queue, state_cache_seconds=${ttl} (the setting's value), refresh_seconds=20 ± ${JITTER_S} s jitter,`);
  say(`burst of (size + ${BURST_MARGIN}) visitors over ${BURST_S} s, from ${PRE_S} s before the window, then ${TRICKLE_PER_S} new arrivals/s throughout;`);
  say(`automatic admission ${AUTO_ADMIT_PER_PERIOD} per ${AUTO_ADMIT_PERIOD_S} s (inside the poll/join scripts: no extra command) and an origin admit of`);
  say(`${ORIGIN_ADMIT_COUNT} every ${ORIGIN_ADMIT_EVERY_S} s through POST /__wr/api/admit (one command each). Measured window: ${WINDOW_S} simulated s, in ${TICK_MS} ms ticks.`);
  say(`Formula: store commands/s = arrivals/s + admissions/s + POPs x queues / cache lifetime (+ active sessions / refresh interval: not yet a term, 0 here).`);
  say();

  // Main table.
  const mainRows: string[][] = [];
  const costRows: string[][] = [];
  for (const r of cacheRuns) {
    const size = r.scenario.size;
    const c = summarize(r);
    const predicted = c.joinsPerS + c.admitsPerS + (POPS * QUEUES) / ttl;
    const measuredRun = noCacheBySize.get(size);
    const measured = measuredRun === undefined ? undefined : summarize(measuredRun);
    // The cost and cap columns use the measurement where there is one, else the computation.
    const nc = measured ? { avg: measured.commandsPerS, peak: measured.peakCommandsPerS } : c.computedNoCache;
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
    costRows.push([
      `>= ${fmtInt(size)}`,
      fmtUsd(usdPerHour(c.commandsPerS)),
      capText(c.peakCommandsPerS),
      `${fmtUsd(usdPerHour(nc.avg))}${measured ? '' : ' (computed)'}`,
      capText(nc.peak),
      fmtUsd(usdPerHour(c.computedKit.avg)),
      capText(c.computedKit.peak),
    ]);
  }
  say('## Store commands per second, side by side (window average, peak second in brackets)');
  say();
  say(
    table(
      ['waiting', 'waiting (min-max)', 'polls/s', 'WITH cache: measured', 'formula', 'WITHOUT cache: measured', 'WITHOUT: computed', 'starter kit: modelled'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      mainRows,
    ),
  );
  say('waiting = tail - cursor in Redis, sampled every second. polls/s is a little above waiting / 20: a visitor let in keeps polling until its');
  say('next poll tells it so. WITHOUT computed = 1 command per poll + joins + admits, second by second, from the WITH-cache run\'s own polls');
  say('(the same seeded visitors); starter kit = 2 per poll + joins + admits. Where WITHOUT is also measured, the two can be compared.');
  say();
  say(`## Upstash cost ($${USD_PER_100K_COMMANDS.toFixed(2)} per 100k commands) per hour at the window's average, and the ${fmtInt(COMMANDS_PER_S_CAP)} commands/s cap (peak second)`);
  say();
  say(table(['waiting', 'WITH cache $/h', 'under cap', 'WITHOUT cache $/h', 'under cap', 'starter kit $/h', 'under cap'], ['l', 'r', 'l', 'r', 'l', 'r', 'l'], costRows));
  say();

  say(`## Over time: store commands/s in each ${SERIES_BLOCK_S} s block of the window (measured)`);
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
          return fmtRate(sum(part.map((x) => x.redis)) / part.length);
        }),
      ]),
    ),
  );
  say();

  // The formula's terms.
  say('## The formula, term by term (with the cache; measured, per second)');
  say();
  say(
    table(
      ['waiting', 'arrivals (joins)', 'admissions (admit calls)', 'cache misses (polls)', 'POPs x queues / lifetime', 'total', 'formula'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
      cacheRuns.map((r) => {
        const c = summarize(r);
        return [
          `>= ${fmtInt(r.scenario.size)}`,
          c.joinsPerS.toFixed(1),
          c.admitsPerS.toFixed(2),
          c.storePollsPerS.toFixed(1),
          `<= ${((POPS * QUEUES) / ttl).toFixed(1)}`,
          c.commandsPerS.toFixed(1),
          (c.joinsPerS + c.admitsPerS + (POPS * QUEUES) / ttl).toFixed(1),
        ];
      }),
    ),
  );
  say('A POP makes at most one store call per cache lifetime, and fewer when it gets fewer polls than that (small crowds, small POPs).');
  say();

  // Counting agreement.
  say('## Counting: store wrapper vs HTTP requests to the bridge vs Redis INFO commandstats (EVALSHA+EVAL), measured window');
  say();
  const countRows: string[][] = [];
  for (const r of [...cacheRuns, ...noCacheRuns]) {
    const s = r.seconds;
    const wrapper = sum(s.map((x) => x.wrapper));
    const fetches = sum(s.map((x) => x.fetch));
    const redis = sum(s.map((x) => x.redis));
    const agree = s.filter((x) => x.wrapper === x.fetch && x.fetch === x.redis).length;
    if (wrapper !== redis || fetches !== redis || agree !== s.length) ok = false;
    countRows.push([
      `${r.scenario.cacheOn ? 'with' : 'without'} cache, >= ${fmtInt(r.scenario.size)}${r.scenario.windowS === WINDOW_S ? '' : ` (first ${r.scenario.windowS} s)`}`,
      `${fmtInt(wrapper)} (j ${fmtInt(sum(s.map((x) => x.join)))} / p ${fmtInt(sum(s.map((x) => x.poll)))} / a ${fmtInt(sum(s.map((x) => x.admit)))})`,
      fmtInt(fetches),
      fmtInt(redis),
      `${agree}/${s.length}`,
      `${fmtInt(r.burst.wrapper)} / ${fmtInt(r.burst.fetch)} / ${fmtInt(r.burst.redis)}`,
      `${(r.wallMs / 1000).toFixed(1)} s`,
    ]);
  }
  say(
    table(
      ['run', 'store wrapper (join/poll/admit)', 'bridge HTTP', 'Redis EVALSHA+EVAL', 'seconds agreeing', 'pre-window: wrapper/HTTP/Redis', 'wall time'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
      countRows,
    ),
  );
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
  say('(polls and admissions over the whole simulated time, burst included; "unavailable" = store call failed or timed out)');
  say();

  // The burst.
  say('## Arrivals before the window: the burst (plus the trickle), the one term no cache can absorb');
  say();
  say(
    table(
      ['waiting', 'joins before the window', 'how', 'joins/s during the burst', 'under cap', 'their cost'],
      ['l', 'r', 'l', 'r', 'l', 'r'],
      cacheRuns.map((r) => {
        const joins = r.burst.modelledJoins + r.burst.joins;
        const rate = (r.scenario.size + BURST_MARGIN) / BURST_S + TRICKLE_PER_S;
        return [
          `>= ${fmtInt(r.scenario.size)}`,
          fmtInt(joins),
          r.burst.modelledJoins > 0
            ? `burst MODELLED: 1 INCRBY of ${fmtInt(r.burst.modelledJoins)}; ${fmtInt(r.burst.joins)} real trickle joins`
            : `all ${fmtInt(r.burst.joins)} REAL joins, counted 3 ways`,
          fmtRate(rate),
          capText(rate),
          `$${((joins / 100_000) * USD_PER_100K_COMMANDS).toFixed(3)}`,
        ];
      }),
    ),
  );
  const largest = SIZES[SIZES.length - 1]!;
  say(`Every arrival is one join command, cache or not: ${fmtInt(largest)} arrivals within ${BURST_S} s exceed the cap on arrivals alone;`);
  say(`they fit under it only when spread over at least ${fmtInt(largest / COMMANDS_PER_S_CAP)} s (or admitted through a pre-queue that is not modelled here).`);
  say();

  if (spot !== undefined) {
    const s = summarize(spot);
    const c = cacheRuns.find((r) => r.scenario.size === spot.scenario.size);
    say(`## Spot check of the computed WITHOUT-cache column: >= ${fmtInt(spot.scenario.size)} waiting, cache off, first ${spot.scenario.windowS} s of the window measured for real`);
    say();
    say(`measured: ${fmtRate(s.commandsPerS)} commands/s (peak second ${fmtInt(s.peakCommandsPerS)}) for ${fmtRate(s.pollsPerS)} polls/s over seconds 0-${spot.scenario.windowS};`);
    if (c !== undefined) {
      const same = c.seconds.slice(0, spot.scenario.windowS);
      const computed = sum(same.map((x) => x.polls + x.join + x.admit + x.peek)) / same.length;
      const pollsPerS = sum(same.map((x) => x.polls)) / same.length;
      say(`computed as in the WITHOUT column, from the WITH-cache run's polls in the same seconds: ${fmtRate(computed)} commands/s for ${fmtRate(pollsPerS)} polls/s`);
      say(`(${((100 * (s.commandsPerS - computed)) / computed).toFixed(1)}% apart; over its whole window that run computes ${fmtRate(summarize(c).computedNoCache.avg)}).`);
    }
    say();
  }

  // Real vs modelled.
  say('## What is real and what is modelled');
  say();
  say('REAL at every size: redis-server (own port, 127.0.0.1) and its Lua execution; the Upstash REST bridge (src/node/upstash-bridge.ts);');
  say('  the `@upstash/redis` client with createUpstashClientOptions over HTTP; UpstashQueueStore and its scripts (join, poll with automatic');
  say(`  admission, admit); ${POPS} createHandler(...) instances, each with its own MemoryStateCache; cookie signing and verification (jose);`);
  say(`  the ${TRICKLE_PER_S}/s arrivals as joins through the handlers; the origin admits through POST /__wr/api/admit; the command counts (3 ways).`);
  say('MODELLED at every size: the visitors (arrival times, POP choice, poll jitter: seeded), sockets (no HTTP between a visitor and its POP:');
  say('  a Request object is handed to the POP\'s handler), timing (a virtual clock in ticks; a store call takes no virtual time however long');
  say('  it really takes; the requests of one tick are concurrent). Active sessions after admission are not simulated (they cost no store call).');
  say();
  say(
    table(
      ['waiting', 'burst joins', 'polls WITH the cache', 'WITHOUT the cache', 'starter kit'],
      ['l', 'l', 'l', 'l', 'l'],
      SIZES.map((size) => [
        `>= ${fmtInt(size)}`,
        size <= REAL_JOINS_UP_TO ? 'REAL: joins via handler + store' : 'MODELLED: 1 INCRBY of the tail',
        size <= FULL_HANDLER_UP_TO
          ? 'REAL: every poll via full handler + POP cache'
          : `REAL: ${HANDLER_POLLS_PER_POP_TICK}/POP/tick via full handler, rest via the POP cache only`,
        size <= NO_CACHE_MEASURED_UP_TO
          ? 'MEASURED: every poll via handler + store'
          : spot !== undefined && spot.scenario.size === size
            ? `COMPUTED (1/poll); MEASURED for ${spot.scenario.windowS} s`
            : 'COMPUTED: 1 command per poll',
        'MODELLED: 2 per poll',
      ]),
    ),
  );
  say();
  say(`"via the POP cache only": above ${fmtInt(FULL_HANDLER_UP_TO)} waiting, ${HANDLER_POLLS_PER_POP_TICK === 1 ? 'the first poll' : `the first ${HANDLER_POLLS_PER_POP_TICK} polls`} of each POP in each ${TICK_MS} ms tick goes through the full`);
  say('handler and the rest call that POP\'s MemoryStateCache directly, with the handler\'s key and lifetime and store.poll as the load');
  say('(the handler\'s own load also races the call against store_timeout_ms).');
  say('They can only hit (a handler poll came first at the same virtual instant); each one is checked, and a miss would reach the');
  say('store and be counted like any other call ("of which missed" above).');
  if (calibration !== undefined) {
    say(
      `Why: a full handler poll on a cache hit took ${calibration.cpuUs.toFixed(0)} us of CPU (${calibration.wallUs.toFixed(0)} us wall) here, measured at the end of this run over ` +
        `${fmtInt(calibration.polls)} polls;`,
    );
    const biggest = cacheRuns[cacheRuns.length - 1];
    if (biggest !== undefined) {
      const polls = biggest.handlerPolls + biggest.directPolls;
      say(`  all ${fmtInt(polls)} polls of the largest run through full handlers would have taken about ${fmtInt((polls * calibration.cpuUs) / 1e6)} s of CPU on their own.`);
    }
  }
  say(`Wall time of the whole run: ${(totalMs / 1000).toFixed(1)} s.`);
  say();
  say(ok ? 'RESULT: ok (counts agree in every second; with the cache, at or under the formula at every size; never fewer waiting than the size)' : 'RESULT: FAILED (see the tables)');
  process.stdout.write(`${out.join('\n')}\n`);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// The bridge, in a worker thread (this same bundle, workerData.role = 'bridge'), so that its HTTP
// server and its Redis connection do not share an event loop with the POPs and the Upstash client.

interface BridgeWorkerInput {
  readonly role: 'bridge';
  readonly redisUrl: string;
  readonly token: string;
}
type BridgeReply = { type: 'ready'; url: string } | { type: 'stopped' } | { type: 'error'; message: string };

async function bridgeWorker(input: BridgeWorkerInput): Promise<void> {
  const port = parentPort;
  if (port === null || input?.role !== 'bridge') throw new Error('simulate: unknown worker role');
  try {
    const bridge = await startUpstashBridge({ redisUrl: input.redisUrl, token: input.token });
    port.on('message', (message: unknown) => {
      if (message !== 'stop') return;
      void bridge.close().finally(() => {
        port.postMessage({ type: 'stopped' } satisfies BridgeReply);
        port.close();
      });
    });
    port.postMessage({ type: 'ready', url: bridge.url } satisfies BridgeReply);
  } catch (error) {
    port.postMessage({ type: 'error', message: messageOf(error) } satisfies BridgeReply);
  }
}

interface BridgeWorker {
  readonly url: string;
  stop(): Promise<void>;
}


async function startBridgeWorker(redisUrl: string): Promise<BridgeWorker> {
  const worker = new Worker(fileURLToPath(import.meta.url), { workerData: { role: 'bridge', redisUrl, token: BRIDGE_TOKEN } satisfies BridgeWorkerInput });
  let reply: BridgeReply;
  try {
    reply = await nextWorkerMessage<BridgeReply>(worker, 10_000, 'starting the bridge');
  } catch (error) {
    await worker.terminate();
    throw error;
  }
  if (reply.type !== 'ready') {
    await worker.terminate();
    throw new Error(`starting the bridge: ${reply.type === 'error' ? reply.message : reply.type}`);
  }
  let stopped = false;
  return {
    url: reply.url,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        const done = nextWorkerMessage<BridgeReply>(worker, 5_000, 'stopping the bridge');
        worker.postMessage('stop');
        await done;
      } catch (error) {
        log(`the bridge did not stop cleanly (${messageOf(error)}); terminating it`);
      }
      await worker.terminate();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
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
    redisServer = await startRedisServer();
    bridge = await startBridgeWorker(redisServer.url);
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
    await store.peek('warmup');

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
    const shared: Shared = { store, direct, secrets, baseSettings, deadline };

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
    const calibration = await calibrate(shared);
    await stopAll();
    return report(cacheRuns, noCacheRuns, ttl, Date.now() - runStarted, calibration) ? 0 : 1;
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
