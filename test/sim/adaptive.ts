/**
 * `npm run simulate -- --adaptive`: adaptive admission (issue 17) on the REAL store code, against a
 * modelled origin whose capacity the waiting room does not know and which halves mid-sale, then
 * recovers. The same seeded crowd meets fixed counts set too low, right and too high, and the
 * controller; the report says what each run cost the origin and what the visitors got.
 *
 * The store: MemoryQueueStore (the contract suite binds it to the Redis scripts), or with `--redis`
 * the UpstashQueueStore through the Upstash REST bridge (src/node/upstash-bridge.ts) on a
 * redis-server started here. Joins, polls and claims are real store calls (and a stats call each
 * second reads the learned value); the visitors, the POPs' counting and the origin are modelled.
 * With `--redis` the joins and claims of one tick go out together, so which visitor of a second
 * takes which ticket may differ from the memory run (the totals come out close, not equal).
 *
 * Time is virtual, in 1-s ticks (TICK_S). In each tick, in this order:
 *   1. arrivals join, one `store.join` each, at their POP, carrying that POP's report;
 *   2. each POP polls the store once (its state cache, state_cache_seconds = 1), carrying its report
 *      (what it counted of the origin over the 10 s before this tick);
 *   3. tickets the POP's state shows called are noticed by their visitor at its next poll, which
 *      claims the call (`store.claim`, as the edge does): a waiting visitor polls every
 *      refresh_seconds (20 s) +- 2 s (uniform, each poll), counted from its arrival;
 *   4. admitted visitors browse: a first request when they notice the call, then one every 2.5-7.5 s
 *      (uniform, mean 5 s) until their session ends (exponential, mean 2 minutes, drawn per visitor
 *      and the same in every run), all through their own POP;
 *   5. the origin answers this second's requests, and each POP counts its own visitors' outcomes.
 *
 * The origin (modelled): true capacity C requests per second (100; 50 from minute 10 to minute 20).
 * In a second with n requests, when n > C, n - C of them, drawn at random, fail (503); the others
 * take base 100 ms times a jitter (log-normal, sigma 0.3) times a factor of the utilisation
 * rho = n / C: 1 up to rho = 0.85, then 1 + 9 x^2 with x = (rho - 0.85) / 0.15, so 10x base at
 * rho = 1 and above. Slow = time to first byte over 500 ms. Requests are counted in the second they
 * are sent (a second or less off). No queueing carries load from one second to the next, so a
 * Poisson-like burst in one second can fail requests although the mean is under C: that is what
 * makes the error rate of a threshold "right" on average non-zero.
 *
 * A visitor whose request fails gives up. Served = sessions that ended, before the sale ended,
 * without an error. Waiting visitors never give up (no abandonment is modelled). Mean wait = from
 * the join to noticing the call, over the visitors who got in during the sale.
 *
 * The runs (same crowd, same seeds): rate mode, admit_per_period every 10 s. "Right" is what full
 * capacity sustains: C x period / (requests per session), a session's mean requests being
 * 1 + 120 s / 5 s = 25, so 100 x 10 / 25 = 40; "too low" is half of it, "too high" twice it. The
 * controller, twice, configured as an operator would (adaptive_admission = on, adaptive_min = 5,
 * adaptive_max = 4 x right = 160, adaptive_slow_ms = 500, read by parseConfig and turned into the
 * policy by admissionPolicy, the POP's report added as the edge adds its meter's counts), starting
 * from the operator's guess of the "too low" count: with cautious targets (adaptive_error_percent =
 * 1, adaptive_slow_percent = 10: the origin kept well inside its limit) and with throughput-first
 * ones (5 and 50: errors up to what the "too high" count costs, the origin run near its limit). The
 * issue's bar compares a controller with the fixed count that serves most; here that is the count
 * set too high, whose origin fails 5-6 % of requests, so the bar is for the controller that an
 * operator who accepts such errors would configure. Served grows with the count past the origin's
 * limit in this model (waiting visitors never give up, so a visitor who fails is replaced at once).
 *
 * Adaptation: after the halving, the end of the first 10 s (all after it) whose origin error rate is
 * back at or below the controller's error target: the controller has cut enough to stop the
 * overload. (The learned value reaching what the halved capacity sustains with every session served,
 * right / 2, is reported too; a controller holding the origin at its limit need not go that low,
 * since its visitors who fail leave early and make room.) After the recovery, the first second the
 * learned value (store.stats, every tick of a controller run) is at or above 90 % of what full
 * capacity sustains (0.9 x right): the count it needs to use the capacity regained; the load
 * follows as sessions turn over.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from '@upstash/redis';
import { parseConfig } from '../../src/core/config';
import { admissionPolicy } from '../../src/core/handler';
import type { AdmissionPolicy, OriginReport, QueueStore } from '../../src/core/ports';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { reportSlot } from '../../src/store/adaptive';
import { MemoryQueueStore } from '../../src/store/memory-store';
import { createUpstashClientOptions, UpstashQueueStore } from '../../src/store/upstash-store';
import { source } from '../support/fixtures';
import { table } from '../support/markdown-table';
import { startRedisServer } from '../support/redis-server';
import { seededRandom } from '../support/seeded-random';

// ---------------------------------------------------------------------------------------------
// The model's parameters

export interface AdaptiveScenario {
  /** Length of the sale, simulated seconds. */
  readonly saleS: number;
  /** Visitors arriving over the first `crowdS` seconds (Poisson, even rate), then `tricklePerS`. */
  readonly crowd: number;
  readonly crowdS: number;
  readonly tricklePerS: number;
  /** The origin's true capacity, requests per second, and when it halves and recovers (s into the sale). */
  readonly capacity: number;
  readonly halvesAtS: number;
  readonly recoversAtS: number;
  readonly seed: number;
  /** The edge's slow threshold (time to first byte), ms. */
  readonly slowMs: number;
  /**
   * How the origin takes load (see the header): 'second', each second alone, the excess over C of
   * that second failing; 'window', as the live origins of test/support/adaptive-live.ts, the load
   * counted over the last ORIGIN_WINDOW_S seconds (a queue absorbs shorter bursts), the requests
   * over C times that window refused and the others slowed by that load. Default 'second'.
   */
  readonly origin?: 'second' | 'window';
  /**
   * An admitted visitor's visit: an exponential session of mean `meanS`, requests `gapMinS` to
   * `gapMaxS` apart (uniform; at least a tick). Default the flash sale's: 2 minutes, 2.5-7.5 s.
   * The live runs' visits are a few seconds long (LIVE_VISIT).
   */
  readonly visit?: Visit;
}

export interface Visit {
  readonly meanS: number;
  readonly gapMinS: number;
  readonly gapMaxS: number;
}


export const TICK_S = 1;
/** Rate mode's period (admit_period_seconds). */
export const PERIOD_S = 10;
/** A waiting visitor's poll interval (refresh_seconds), give or take POLL_JITTER_S. */
export const REFRESH_S = 20;
export const POLL_JITTER_S = 2;
/** POPs and their shares of the visitors. */
export const POPS: readonly { readonly name: string; readonly share: number }[] = [
  { name: 'fra', share: 0.4 },
  { name: 'lhr', share: 0.3 },
  { name: 'iad', share: 0.2 },
  { name: 'nrt', share: 0.1 },
];
/** The 'window' origin's load gauge: requests over this many seconds (the live origins' LOAD_S). */
export const ORIGIN_WINDOW_S = 10;
/** A POP's report covers this many seconds before the tick. */
export const REPORT_WINDOW_S = 10;
export const SESSION_MEAN_S = 120;
/** Gaps between an admitted visitor's requests: uniform in [GAP_MIN_S, GAP_MAX_S]. */
export const GAP_MIN_S = 2.5;
export const GAP_MAX_S = 7.5;
/** Mean requests of a session: the first page, then one per mean gap. */
export const REQUESTS_PER_SESSION = 1 + SESSION_MEAN_S / ((GAP_MIN_S + GAP_MAX_S) / 2);
export const BASE_LATENCY_MS = 100;
export const LATENCY_SIGMA = 0.3;
export const KNEE = 0.85;
export const PEAK_FACTOR = 10;
export const SLOW_MS = 500;
/** The controllers' targets (adaptive_error_percent, adaptive_slow_percent) and floor. */
export const CAUTIOUS = { errorPercent: 1, slowPercent: 10 } as const;
export const THROUGHPUT_FIRST = { errorPercent: 5, slowPercent: 50 } as const;
export const ADAPTIVE_MIN = 5;
/** The full run (`npm run simulate -- --adaptive`). */
export const FULL_SCENARIO: AdaptiveScenario = { saleS: 1_800, crowd: 40_000, crowdS: 600, tricklePerS: 3, capacity: 100, halvesAtS: 600, recoversAtS: 1_200, seed: 20_261_126, slowMs: SLOW_MS };
/** The window over which the origin's error rate counts as back within target after the halving, s. */
export const SETTLE_WINDOW_S = 10;
/** Learned-value samples in the report, every this many seconds. */
export const SERIES_EVERY_S = 30;
const T0 = Date.UTC(2026, 10, 26, 18, 0, 0);

/** The count per period that `capacity` requests per second sustain with every session served. */
export function sustainedCount(capacity: number, s?: AdaptiveScenario): number {
  return Math.round((capacity * PERIOD_S) / requestsPerSession(s));
}

/** Mean requests of a session in scenario `s` (REQUESTS_PER_SESSION for the flash sale's visits). */
export function requestsPerSession(s?: AdaptiveScenario): number {
  const v = visitOf(s);
  return 1 + v.meanS / ((v.gapMinS + v.gapMaxS) / 2);
}

export function visitOf(s?: AdaptiveScenario): Visit {
  return s?.visit ?? { meanS: SESSION_MEAN_S, gapMinS: GAP_MIN_S, gapMaxS: GAP_MAX_S };
}

export function capacityAt(s: AdaptiveScenario, t: number): number {
  return t >= s.halvesAtS && t < s.recoversAtS ? s.capacity / 2 : s.capacity;
}

/** Latency multiplier at utilisation rho (offered load / capacity). */
export function latencyFactor(rho: number): number {
  if (rho <= KNEE) return 1;
  if (rho >= 1) return PEAK_FACTOR;
  const x = (rho - KNEE) / (1 - KNEE);
  return 1 + (PEAK_FACTOR - 1) * x * x;
}

// ---------------------------------------------------------------------------------------------
// The crowd: drawn once from the seed, the same for every run

interface Visitor {
  readonly arrivalS: number;
  readonly pop: number;
  readonly sessionS: number;
  /** Seeds this visitor's gaps between requests, so it browses alike in every run. */
  readonly seed: number;
}

function poisson(next: () => number, mean: number): number {
  // Knuth's method; the means here are below 100, well within a double's range of e^-mean.
  const limit = Math.exp(-mean);
  let k = 0;
  let p = next();
  while (p > limit) {
    k += 1;
    p *= next();
  }
  return k;
}

export function drawCrowd(s: AdaptiveScenario): Visitor[] {
  const next = seededRandom(s.seed);
  const out: Visitor[] = [];
  for (let t = 0; t < s.saleS; t += TICK_S) {
    const n = poisson(next, t < s.crowdS ? (s.crowd / s.crowdS) * TICK_S : s.tricklePerS * TICK_S);
    for (let i = 0; i < n; i++) {
      const u = next();
      let pop = 0;
      for (let acc = POPS[0]!.share; u > acc && pop < POPS.length - 1; acc += POPS[++pop]!.share);
      out.push({ arrivalS: t, pop, sessionS: -visitOf(s).meanS * Math.log(1 - next()), seed: Math.floor(next() * 2 ** 32) });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// One run

export interface RunSpec {
  readonly name: string;
  /** admit_per_period configured (the controller's starting value when it is on). */
  readonly count: number;
  /** The controller's bounds and targets, or none: the count is fixed (adaptive_admission = off). */
  readonly adaptive?: { readonly min: number; readonly max: number; readonly errorPercent: number; readonly slowPercent: number };
}

export interface RunResult {
  readonly spec: RunSpec;
  readonly arrivals: number;
  /** Visitors who noticed their call during the sale, and their mean wait, s. */
  readonly admitted: number;
  readonly meanWaitS: number;
  readonly served: number;
  /** Sessions ended by an error (the visitor gave up). */
  readonly failed: number;
  /** Requests the origin got, and of them failed and slow. */
  readonly requests: number;
  readonly errors: number;
  readonly slow: number;
  /** Mean over the sale's seconds of min(load, C) / C. */
  readonly utilisation: number;
  /** Per second: requests sent, capacity, errors, slow. */
  readonly perSecond: { readonly requests: number; readonly capacity: number; readonly errors: number; readonly slow: number }[];
  /** Controller runs: the value in effect at the end of each second (from store.stats). */
  readonly learned: number[];
  /** Per period: how many tickets the period step called (cursor moved). */
  readonly calledPerPeriod: number[];
  /** Controller runs: seconds from the halving (recovery) to the value within reach; undefined = never. */
  readonly halvingReachS?: number | undefined;
  readonly recoveryReachS?: number | undefined;
  /**
   * Controller runs: seconds from the halving to the end of the first 10 s, all after it, whose
   * origin error rate is at or below the controller's target (the overload stopped); undefined = never.
   */
  readonly halvingSettledS?: number | undefined;
  readonly wallMs: number;
}

/**
 * When a waiting visitor first polls at or after `fromS`: its polls come every refresh_seconds
 * plus or minus POLL_JITTER_S (uniform), from its arrival, drawn from its own seed (a separate
 * stream from its browsing), so its phase drifts as in the browser and is the same in every run.
 */
function firstPollFrom(v: Visitor, fromS: number): number {
  const next = seededRandom(v.seed ^ 0x9e3779b9);
  let at = v.arrivalS;
  do at += REFRESH_S + POLL_JITTER_S * (2 * next() - 1);
  while (at < fromS);
  return at;
}

/**
 * The policy the edge builds from its configuration (src/core/context.ts admissionPolicy): the
 * controller's settings come from the same keys an operator sets; the report is added per POP as
 * the edge adds its meter's counts.
 */
export function runPolicy(s: AdaptiveScenario, spec: RunSpec): AdmissionPolicy {
  const settings: Record<string, string> = {
    queue_name: 'adaptive-sim',
    admit_per_period: String(spec.count),
    admit_period_seconds: String(PERIOD_S),
    refresh_seconds: String(REFRESH_S),
    state_cache_seconds: '1',
  };
  if (spec.adaptive !== undefined) {
    Object.assign(settings, {
      adaptive_admission: 'on',
      adaptive_min: String(spec.adaptive.min),
      adaptive_max: String(spec.adaptive.max),
      adaptive_error_percent: String(spec.adaptive.errorPercent),
      adaptive_slow_ms: String(s.slowMs),
      adaptive_slow_percent: String(spec.adaptive.slowPercent),
    });
  }
  const config = parseConfig(source(settings));
  return admissionPolicy(config);
}

/** One run of the sale; `concurrentCalls`: a tick's joins (and its claims) go out together, as they would from many visitors. */
export async function runScenario(store: QueueStore, s: AdaptiveScenario, crowd: readonly Visitor[], spec: RunSpec, options: { concurrentCalls?: boolean } = {}): Promise<RunResult> {
  const started = Date.now();
  const queue = `ac-sim-${randomUUID().slice(0, 8)}`;
  const base = runPolicy(s, spec);
  const visit = visitOf(s);
  // Each POP's outcome counts per second over the report window: a ring indexed by t % window.
  const counts = POPS.map(() => Array.from({ length: REPORT_WINDOW_S }, () => ({ requests: 0, errors: 0, slow: 0 })));
  const policyOf = (pop: number): AdmissionPolicy => {
    if (base.adaptive === undefined) return base;
    const r: { -readonly [K in keyof OriginReport]: OriginReport[K] } = { pop: POPS[pop]!.name, requests: 0, errors: 0, slow: 0 };
    for (const c of counts[pop]!) {
      r.requests += c.requests;
      r.errors += c.errors;
      r.slow += c.slow;
    }
    return { ...base, adaptive: { ...base.adaptive, report: r } };
  };
  const ticketOwner = new Map<number, number>();
  const ticketOf = new Map<number, number>();
  let generation = 0;
  /** Visitors whose join found their ticket called (they go straight in). */
  const walkedIn = new Set<number>();
  const arrivalsAt = new Map<number, number[]>();
  crowd.forEach((v, i) => {
    const list = arrivalsAt.get(v.arrivalS) ?? [];
    list.push(i);
    arrivalsAt.set(v.arrivalS, list);
  });
  /** Second → visitors who notice their call then (a session starts). */
  const starts = new Map<number, number[]>();
  /** Second → requests sent then: [visitor, its session's end, its gap generator]. */
  const sends = new Map<number, { v: number; end: number; next: () => number }[]>();
  const origin = seededRandom(s.seed ^ 0x5eed);
  const normal = (): number => Math.sqrt(-2 * Math.log(1 - origin())) * Math.cos(2 * Math.PI * origin());
  const push = <T>(m: Map<number, T[]>, k: number, item: T): void => {
    const list = m.get(k);
    if (list === undefined) m.set(k, [item]);
    else list.push(item);
  };
  let calledUpTo = 0;
  let admitted = 0;
  let waitSum = 0;
  let served = 0;
  let failed = 0;
  let requests = 0;
  let errors = 0;
  let slow = 0;
  let utilSum = 0;
  const perSecond: RunResult['perSecond'][number][] = [];
  const learned: number[] = [];
  const calledPerPeriod: number[] = [];
  let periodStartCursor = 0;
  /** 'window' origin: requests taken (not refused) in each of the last ORIGIN_WINDOW_S seconds, by t % ORIGIN_WINDOW_S. */
  const taken = Array.from({ length: ORIGIN_WINDOW_S }, () => 0);

  for (let t = 0; t < s.saleS; t += TICK_S) {
    const nowMs = T0 + t * 1000;
    // 1. Arrivals join at their POP.
    const arriving = arrivalsAt.get(t) ?? [];
    const joinOne = async (i: number): Promise<void> => {
      const r = await store.join(queue, nowMs, policyOf(crowd[i]!.pop));
      ticketOwner.set(r.ticket, i);
      ticketOf.set(i, r.ticket);
      if (r.claimed) walkedIn.add(i);
    };
    if (options.concurrentCalls === true) await Promise.all(arriving.map(joinOne));
    else for (const i of arriving) await joinOne(i);
    // 2. Each POP polls once, as its state cache expires.
    let cursor = Number.POSITIVE_INFINITY;
    for (let p = 0; p < POPS.length; p++) {
      const state = await store.poll(queue, nowMs, policyOf(p));
      cursor = Math.min(cursor, state.cursor);
      generation = state.generation;
    }
    if (t % PERIOD_S === PERIOD_S - 1) {
      calledPerPeriod.push(cursor - periodStartCursor);
      periodStartCursor = cursor;
    }
    // 3. Called tickets are noticed at their holder's next poll.
    for (; calledUpTo < cursor; calledUpTo++) {
      const i = ticketOwner.get(calledUpTo + 1);
      if (i === undefined) continue;
      const v = crowd[i]!;
      push(starts, walkedIn.has(i) ? t : Math.floor(firstPollFrom(v, t)), i);
    }
    if (spec.adaptive !== undefined) learned.push((await store.stats(queue, nowMs, base)).adaptive?.value ?? 0);
    // 4. A visitor who notices its call claims it (the edge's one store call for it: in rate mode it
    // records the arrival; a call nobody claims within the reservation is handed on), then its
    // session starts with a first request.
    const starting = starts.get(t) ?? [];
    const claimOne = async (i: number): Promise<void> => {
      if (walkedIn.has(i)) return;
      await store.claim(queue, ticketOf.get(i)!, nowMs, base, (t - crowd[i]!.arrivalS) * 1000, generation);
    };
    if (options.concurrentCalls === true) await Promise.all(starting.map(claimOne));
    else for (const i of starting) await claimOne(i);
    for (const i of starting) {
      const v = crowd[i]!;
      admitted += 1;
      waitSum += t - v.arrivalS;
      const gaps = seededRandom(v.seed);
      push(sends, t, { v: i, end: t + v.sessionS, next: () => visit.gapMinS + (visit.gapMaxS - visit.gapMinS) * gaps() });
    }
    starts.delete(t);
    // 5. The origin answers this second's requests.
    const batch = sends.get(t) ?? [];
    sends.delete(t);
    const capacity = capacityAt(s, t);
    const n = batch.length;
    // The excess over capacity fails: a partial Fisher-Yates moves the failing ones to the front.
    // 'second': the excess of this second alone; 'window': what the last ORIGIN_WINDOW_S seconds
    // (this one included) took beyond capacity times that span, and the load is theirs.
    const windowed = s.origin === 'window';
    const tookBefore = windowed ? taken.reduce((a, x) => a + x, 0) - taken[t % ORIGIN_WINDOW_S]! : 0;
    const failing = windowed ? Math.max(0, n - Math.max(0, capacity * ORIGIN_WINDOW_S - tookBefore)) : Math.max(0, n - capacity);
    if (windowed) taken[t % ORIGIN_WINDOW_S] = n - failing;
    for (let k = 0; k < failing; k++) {
      const j = k + Math.floor(origin() * (n - k));
      [batch[k], batch[j]] = [batch[j]!, batch[k]!];
    }
    const factor = latencyFactor(windowed ? (tookBefore + n - failing) / (capacity * ORIGIN_WINDOW_S) : n / capacity);
    const slot = t % REPORT_WINDOW_S;
    for (const c of counts) c[slot] = { requests: 0, errors: 0, slow: 0 };
    let secondSlow = 0;
    batch.forEach((req, k) => {
      const c = counts[crowd[req.v]!.pop]![slot]!;
      c.requests += 1;
      if (k < failing) {
        c.errors += 1;
        failed += 1;
        return;
      }
      if (BASE_LATENCY_MS * factor * Math.exp(LATENCY_SIGMA * normal()) > s.slowMs) {
        c.slow += 1;
        secondSlow += 1;
      }
      const at = t + req.next();
      if (at < req.end) push(sends, Math.floor(at), req);
      else if (req.end < s.saleS) served += 1;
    });
    requests += n;
    errors += failing;
    slow += secondSlow;
    utilSum += Math.min(n, capacity) / capacity;
    perSecond.push({ requests: n, capacity, errors: failing, slow: secondSlow });
  }
  const reach = (from: number, ok: (value: number) => boolean): number | undefined => {
    if (spec.adaptive === undefined) return undefined;
    for (let t = from; t < learned.length; t++) if (ok(learned[t]!)) return t - from;
    return undefined;
  };
  const right = sustainedCount(s.capacity, s);
  return {
    spec,
    arrivals: crowd.length,
    admitted,
    meanWaitS: admitted === 0 ? 0 : waitSum / admitted,
    served,
    failed,
    requests,
    errors,
    slow,
    utilisation: utilSum / (s.saleS / TICK_S),
    perSecond,
    learned,
    calledPerPeriod,
    halvingReachS: reach(s.halvesAtS, (v) => v <= sustainedCount(s.capacity / 2, s)),
    halvingSettledS: settled(s, spec, perSecond),
    recoveryReachS: reach(s.recoversAtS, (v) => v >= 0.9 * right),
    wallMs: Date.now() - started,
  };
}

export const CAUTIOUS_RUN = 'controller, cautious';
export const THROUGHPUT_RUN = 'controller, throughput-first';

/** See RunResult.halvingSettledS. */
function settled(s: AdaptiveScenario, spec: RunSpec, perSecond: RunResult['perSecond']): number | undefined {
  if (spec.adaptive === undefined) return undefined;
  let requests = 0;
  let errors = 0;
  for (let t = s.halvesAtS; t < s.recoversAtS; t++) {
    requests += perSecond[t]!.requests;
    errors += perSecond[t]!.errors;
    if (t >= s.halvesAtS + SETTLE_WINDOW_S) {
      requests -= perSecond[t - SETTLE_WINDOW_S]!.requests;
      errors -= perSecond[t - SETTLE_WINDOW_S]!.errors;
    }
    if (t + 1 >= s.halvesAtS + SETTLE_WINDOW_S && errors * 100 <= spec.adaptive.errorPercent * requests) return t + 1 - s.halvesAtS;
  }
  return undefined;
}

/** The five runs: fixed too low, right, too high, and the controller twice (each starting at the low guess). */
export function runSpecs(s: AdaptiveScenario): RunSpec[] {
  const right = sustainedCount(s.capacity, s);
  const bounds = { min: ADAPTIVE_MIN, max: right * 4 };
  return [
    { name: 'fixed, too low', count: Math.round(right / 2) },
    { name: 'fixed, right', count: right },
    { name: 'fixed, too high', count: right * 2 },
    { name: CAUTIOUS_RUN, count: Math.round(right / 2), adaptive: { ...bounds, ...CAUTIOUS } },
    { name: THROUGHPUT_RUN, count: Math.round(right / 2), adaptive: { ...bounds, ...THROUGHPUT_FIRST } },
  ];
}

export const errorRate = (r: RunResult): number => (r.requests === 0 ? 0 : r.errors / r.requests);

export interface Verdict {
  readonly best: RunResult;
  readonly controller: RunResult;
  /** controller served / best fixed served. */
  readonly servedRatio: number;
  readonly throughputOk: boolean;
  readonly errorsOk: boolean;
  readonly adaptationOk: boolean;
}

/** The issue's bar for one controller run: within 10 % of the best fixed's served, error rate no higher, adapted within 60 s. */
export function judge(results: readonly RunResult[], name: string): Verdict {
  const fixed = results.filter((r) => r.spec.adaptive === undefined);
  const best = fixed.reduce((a, b) => (b.served > a.served ? b : a));
  const controller = results.find((r) => r.spec.name === name)!;
  const servedRatio = controller.served / best.served;
  return {
    best,
    controller,
    servedRatio,
    throughputOk: servedRatio >= 0.9,
    errorsOk: errorRate(controller) <= errorRate(best),
    adaptationOk: controller.halvingSettledS !== undefined && controller.halvingSettledS <= 60 && controller.recoveryReachS !== undefined && controller.recoveryReachS <= 60,
  };
}

/** After a change of capacity, the learned value counts as converged from this many seconds on. */
export const CONVERGED_AFTER_S = 180;

/**
 * A controller run's swing after convergence: the least and most learned value over each span of
 * constant capacity from CONVERGED_AFTER_S after its start (the halving, the recovery) to its end,
 * the span whose most / least is larger. Undefined for a fixed run.
 */
export function swingOf(s: AdaptiveScenario, r: RunResult): { least: number; most: number } | undefined {
  if (r.spec.adaptive === undefined) return undefined;
  let worst: { least: number; most: number } | undefined;
  for (const [from, to] of [[s.halvesAtS, s.recoversAtS], [s.recoversAtS, s.saleS]] as const) {
    const span = r.learned.slice(from + CONVERGED_AFTER_S, to);
    if (span.length === 0) continue;
    const here = { least: Math.min(...span), most: Math.max(...span) };
    if (worst === undefined || here.most / here.least > worst.most / worst.least) worst = here;
  }
  return worst;
}

// ---------------------------------------------------------------------------------------------
// The report

const pct = (x: number, digits = 1): string => `${(100 * x).toFixed(digits)} %`;
const int = (n: number): string => Math.round(n).toLocaleString('en-US');
const clock = (t: number): string => `${Math.floor(t / 60)}:${String(Math.floor(t % 60)).padStart(2, '0')}`;

export function reportMarkdown(s: AdaptiveScenario, results: readonly RunResult[], storeName: string): string {
  const right = sustainedCount(s.capacity, s);
  const out: string[] = [];
  out.push(`### Adaptive admission: ${storeName}, ${int(results[0]?.arrivals ?? 0)} visitors over ${s.saleS / 60} simulated minutes`);
  out.push('');
  out.push(`Origin capacity ${s.capacity} requests/s, ${s.capacity / 2} from ${clock(s.halvesAtS)} to ${clock(s.recoversAtS)}; "right" = ${right} per ${PERIOD_S} s period (what full capacity sustains), halved capacity sustains ${sustainedCount(s.capacity / 2, s)}.`);
  out.push('');
  out.push(
    table(
      ['run', 'admit per period', 'origin error rate', 'slow', 'origin utilisation', 'admitted', 'served', 'gave up on an error', 'mean wait'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      results.map((r) => [
        r.spec.name,
        r.spec.adaptive === undefined ? String(r.spec.count) : `learned, ${r.spec.adaptive.min}-${r.spec.adaptive.max} from ${r.spec.count}`,
        pct(errorRate(r), 2),
        pct(r.requests === 0 ? 0 : r.slow / r.requests),
        pct(r.utilisation),
        int(r.admitted),
        int(r.served),
        int(r.failed),
        `${clock(r.meanWaitS)}`,
      ]),
    ),
  );
  const reach = (x: number | undefined): string => (x === undefined ? 'never' : `${x} s`);
  const controllers = results.filter((r) => r.spec.adaptive !== undefined);
  for (const c of controllers) {
    const v = judge(results, c.spec.name);
    const a = c.spec.adaptive!;
    out.push('');
    out.push(`**${c.spec.name}** (targets ${a.errorPercent} % errors, ${a.slowPercent} % slow): ${pct(v.servedRatio)} of the best fixed count's served ("${v.best.spec.name}", ${int(v.best.served)}; bar: at least 90 %: ${v.throughputOk ? 'met' : 'NOT met'}), error rate ${pct(errorRate(c), 2)} against its ${pct(errorRate(v.best), 2)} (bar: no higher: ${v.errorsOk ? 'met' : 'NOT met'}); after the halving at ${clock(s.halvesAtS)} the origin's errors over ${SETTLE_WINDOW_S} s back within the target ${reach(c.halvingSettledS)} after it (the learned value at or below ${sustainedCount(s.capacity / 2, s)}, what the halved origin sustains with every session served, ${reach(c.halvingReachS)} after it), after the recovery the learned value at or above ${Math.ceil(0.9 * right)} (90 % of ${right}) ${reach(c.recoveryReachS)} after the recovery at ${clock(s.recoversAtS)} (bar: the errors and the value within 60 s: ${v.adaptationOk ? 'met' : 'NOT met'}). Against each fixed count: ${results.filter((r) => r.spec.adaptive === undefined).map((r) => `"${r.spec.name}" ${pct(c.served / r.served)}`).join(', ')}.`);
  }
  out.push('');
  out.push(`The controllers over time (learned value at the time; the origin's load and its errors and slow answers over the ${SERIES_EVERY_S} s before it):`);
  out.push('');
  const rows: string[][] = [];
  for (let t = SERIES_EVERY_S; t <= s.saleS; t += SERIES_EVERY_S) {
    const row = [clock(t), String(controllers[0]?.perSecond[t - 1]?.capacity ?? '')];
    for (const c of controllers) {
      const span = c.perSecond.slice(t - SERIES_EVERY_S, t);
      const sent = span.reduce((a, x) => a + x.requests, 0);
      const errs = span.reduce((a, x) => a + x.errors, 0);
      const slows = span.reduce((a, x) => a + x.slow, 0);
      row.push(String(c.learned[t - 1] ?? ''), (sent / SERIES_EVERY_S).toFixed(1), `${pct(sent === 0 ? 0 : errs / sent)} / ${pct(sent === 0 ? 0 : slows / sent, 0)}`);
    }
    rows.push(row);
  }
  const heads = controllers.flatMap((c) => {
    const short = c.spec.name.replace('controller, ', '');
    return [`${short}: learned`, 'load rps', 'errors / slow'];
  });
  out.push(table(['time', 'capacity rps', ...heads], ['r', 'r', ...heads.map(() => 'r' as const)], rows));
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------
// `npm run simulate -- --adaptive [--redis]`

export async function runAll(s: AdaptiveScenario, makeStore: () => QueueStore, options: { concurrentCalls?: boolean; log?: (line: string) => void } = {}): Promise<RunResult[]> {
  const crowd = drawCrowd(s);
  const out: RunResult[] = [];
  for (const spec of runSpecs(s)) {
    const r = await runScenario(makeStore(), s, crowd, spec, options);
    options.log?.(`${spec.name}: ${(r.wallMs / 1000).toFixed(1)} s`);
    out.push(r);
  }
  return out;
}

/**
 * The live runs' visits (test/support/adaptive-live.ts: a few requests a second apart), in the
 * simulation's terms: 6 s on average, a request every 1-2 s, 5 requests a visit; with them the load
 * follows the count within a period, as it does against the live origins.
 */
export const LIVE_VISIT: Visit = { meanS: 6, gapMinS: 1, gapMaxS: 2 };

/** The sale half as long: 15 minutes, half the crowd, the capacity halved from minute 5 to minute 10. */
export const SHORT_SCENARIO: AdaptiveScenario = { ...FULL_SCENARIO, saleS: 900, crowd: 20_000, crowdS: 300, halvesAtS: 300, recoversAtS: 600 };

/**
 * `--seeds 1,2,3`: the bar for each controller over other crowds (each seed, the full sale and the
 * one half as long), one row per run: how robust the single report above is.
 */
export async function seedsMarkdown(seeds: readonly number[], makeStore: () => QueueStore, log?: (line: string) => void, model: Pick<AdaptiveScenario, 'origin' | 'visit'> = {}): Promise<string> {
  const rows: string[][] = [];
  for (const seed of seeds) {
    for (const [length, base] of [['30 min', FULL_SCENARIO], ['15 min', SHORT_SCENARIO]] as const) {
      const s: AdaptiveScenario = { ...base, seed, ...(model.origin !== undefined && { origin: model.origin }), ...(model.visit !== undefined && { visit: model.visit }) };
      const results = await runAll(s, makeStore);
      log?.(`seed ${seed}, ${length}: done`);
      for (const c of results.filter((r) => r.spec.adaptive !== undefined)) {
        const v = judge(results, c.spec.name);
        const reach = (x: number | undefined): string => (x === undefined ? 'never' : `${x} s`);
        const w = swingOf(s, c)!;
        rows.push([String(seed), length, c.spec.name.replace('controller, ', ''), pct(v.servedRatio), pct(errorRate(c), 2), pct(errorRate(v.best), 2), reach(c.halvingSettledS), reach(c.recoveryReachS), `${w.least}-${w.most} (${(w.most / w.least).toFixed(2)}x)`, v.throughputOk && v.errorsOk && v.adaptationOk ? 'met' : 'not met']);
      }
    }
  }
  return table(['seed', 'sale', 'controller', 'served / best fixed', 'errors', 'best fixed errors', 'halving: errors in target', 'recovery: value back', 'learned after convergence', 'bar'], ['r', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'], rows);
}

export async function mainAdaptive(argv: readonly string[]): Promise<number> {
  const log = (line: string): void => void process.stderr.write(`simulate --adaptive: ${line}\n`);
  for (const [a, b] of POPS.flatMap((x, i) => POPS.slice(i + 1).map((y) => [x.name, y.name] as const))) {
    if (reportSlot(a) === reportSlot(b)) throw new Error(`POPs ${a} and ${b} share a report slot`);
  }
  const started = Date.now();
  const originArg = argv.find((a) => a.startsWith('--origin='))?.slice('--origin='.length);
  if (originArg !== undefined && originArg !== 'second' && originArg !== 'window') throw new Error(`--origin: second or window (got "${originArg}")`);
  const visitArg = argv.find((a) => a.startsWith('--visit='))?.slice('--visit='.length);
  if (visitArg !== undefined && visitArg !== 'sale' && visitArg !== 'live') throw new Error(`--visit: sale or live (got "${visitArg}")`);
  const FULL: AdaptiveScenario = { ...FULL_SCENARIO, origin: originArg ?? 'second', ...(visitArg === 'live' && { visit: LIVE_VISIT }) };
  const seedsAt = argv.indexOf('--seeds');
  if (seedsAt >= 0) {
    const seeds = (argv[seedsAt + 1] ?? '').split(',').map(Number);
    if (seeds.length === 0 || seeds.some((x) => !Number.isSafeInteger(x) || x < 0)) throw new Error('--seeds takes whole numbers separated by commas, e.g. --seeds 1,2,3');
    process.stdout.write(`${await seedsMarkdown(seeds, () => new MemoryQueueStore(), log, FULL)}\n\nMeasured in ${((Date.now() - started) / 1000).toFixed(0)} s.\n`);
    return 0;
  }
  if (!argv.includes('--redis')) {
    const results = await runAll(FULL, () => new MemoryQueueStore(), { log });
    process.stdout.write(`${reportMarkdown(FULL, results, 'MemoryQueueStore')}\n\nMeasured in ${((Date.now() - started) / 1000).toFixed(0)} s.\n`);
    return 0;
  }
  const server = await startRedisServer();
  const token = `adaptive-sim-${randomUUID()}`;
  const bridge = await startUpstashBridge({ redisUrl: server.url, token });
  try {
    log(`redis-server on ${server.url}, bridge on ${bridge.url}`);
    const redis = new Redis({ ...createUpstashClientOptions({ url: bridge.url, token }), retry: false });
    const results = await runAll(FULL, () => new UpstashQueueStore({ redis, keyPrefix: `wr-ac-${randomUUID().slice(0, 8)}` }), { log, concurrentCalls: true });
    process.stdout.write(`${reportMarkdown(FULL, results, 'UpstashQueueStore on redis-server')}\n\nMeasured in ${((Date.now() - started) / 1000).toFixed(0)} s.\n`);
    return 0;
  } finally {
    await bridge.close();
    await server.stop();
  }
}
