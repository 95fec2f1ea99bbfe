/**
 * Adaptive admission against live origins over HTTP (issue 30, item 2): the waiting room on the Node
 * host (its HTTP server, the Upstash store through the bridge on a real redis-server), an origin
 * that degrades above a capacity C in one of several ways, and visitors who queue, get in and browse,
 * all over real sockets. Used by test/adaptive-settle.test.ts (time compressed) and by
 * `npm run simulate -- --adaptive-live` (real time, longer).
 *
 * Time: the room runs on a clock `timeFactor` times faster than the wall's, and so do the origin's
 * load gauge and latencies and the visitors' pauses, so the world stays self-consistent: one
 * scenario second is 1 / timeFactor of a real one. At timeFactor 1 it is plain real time. Requests,
 * sockets, the store and its scripts are the real ones either way; only the waits are shorter.
 *
 * The origins (C in requests per scenario second, load = requests over the last LOAD_S seconds / LOAD_S):
 *   errors  — answers at once up to C; the requests over C it refuses with a 503 (an origin that
 *             sheds the excess load: at 1.25 C a fifth of the requests fail);
 *   latency — time to first byte 1.2 s (± 20 %) up to 0.9 C, then growing by 40 s per unit of
 *             load over 0.9 C (5.2 s at C, 9.2 s at 1.1 C): slow answers, never errors, until 2 C;
 *   C may halve at `halvesAtS`.
 * Visitors: `visitors` loops, each a visitor after another: join, poll the holding page every
 * POLL_S, and once let in make `requestsPerVisit` requests a VISIT_GAP_S apart, the last one to a
 * page whose answer ends the session (capacity mode frees the seat at once). A visit is served when
 * none of its requests failed.
 */
import http from 'node:http';
import { Redis } from '@upstash/redis';
import { serve, startHost, type RunningServer } from '../../src/node/host';
import { startUpstashBridge } from '../../src/node/upstash-bridge';
import { buildWaitingRoom } from '../../src/node/waiting-room';
import { createNodeUpstashOptions } from '../../src/platform/node';
import { UpstashQueueStore } from '../../src/store/upstash-store';
import { API_TOKEN, BASE_SECRETS, BASE_SETTINGS, MemoryLogger, source } from './fixtures';
import { startRedisServer } from './redis-server';
import { seededRandom } from './seeded-random';

export const POLL_S = 4;
export const VISIT_GAP_S = 1;
/** The origin's load gauge: requests over this many seconds (its queue absorbs shorter bursts). */
export const LOAD_S = 10;

export interface LiveScenario {
  readonly name: string;
  readonly mode: 'rate' | 'capacity';
  readonly degrade: 'errors' | 'latency';
  /** The origin's capacity, requests per scenario second. */
  readonly capacity: number;
  /** When it halves (scenario seconds from the start), if it does. */
  readonly halvesAtS?: number;
  /** The knob's configured value (admit_per_period, or max_active). */
  readonly start: number;
  /** Rate mode's admit_period_seconds. */
  readonly periodS?: number;
  /** The controller's settings; none: the knob is fixed at `start` (adaptive_admission off). */
  readonly adaptive?: { readonly min: number; readonly max: number; readonly errorPercent: number; readonly slowPercent: number };
  readonly slowMs: number;
  readonly requestsPerVisit: number;
  readonly visitors: number;
  readonly seed: number;
}

export interface LiveRequest {
  /** Scenario second it was sent. */
  readonly s: number;
  readonly error: boolean;
  /** Scenario ms to the answer's head. */
  readonly ms: number;
}

export interface LiveResult {
  readonly scenario: LiveScenario;
  /** The learned value over time (scenario seconds), from the stats API. */
  readonly values: readonly { readonly s: number; readonly value: number }[];
  readonly requests: readonly LiveRequest[];
  /** Visits ended, and of those served (no request failed), by the scenario second they ended. */
  readonly visits: readonly { readonly s: number; readonly served: boolean }[];
  readonly moves: readonly { readonly from: number; readonly to: number; readonly reason: string }[];
}

/** The origin's capacity at scenario second `s`. */
export function capacityAt(sc: LiveScenario, s: number): number {
  return sc.halvesAtS !== undefined && s >= sc.halvesAtS ? sc.capacity / 2 : sc.capacity;
}

/**
 * The knob's value at which the origin's load is C at scenario second `s`: in capacity mode a visitor
 * in makes one request a second, so max_active = C; in rate mode each visitor let in makes
 * `requestsPerVisit` requests, so admit_per_period = C x period / requestsPerVisit.
 */
export function boundaryAt(sc: LiveScenario, s: number): number {
  const c = capacityAt(sc, s);
  return sc.mode === 'capacity' ? c : (c * (sc.periodS ?? 1)) / sc.requestsPerVisit;
}

function startOrigin(sc: LiveScenario, clockS: () => number, factor: number): Promise<RunningServer> {
  const arrivals: number[] = [];
  const random = seededRandom(sc.seed);
  const server = http.createServer((req, res) => {
    req.resume();
    const now = clockS();
    while (arrivals.length > 0 && arrivals[0]! <= now - LOAD_S) arrivals.shift();
    const c = capacityAt(sc, now);
    // errors: what the origin took over the last LOAD_S seconds, the request refused when that is its
    // capacity already (it sheds the excess); latency: every request, taken (it slows everyone down).
    if (sc.degrade === 'latency' || arrivals.length < c * LOAD_S) arrivals.push(now);
    const load = arrivals.length / LOAD_S;
    const headers: Record<string, string> = { 'content-type': 'text/plain', 'x-origin': 'live' };
    if ((req.url ?? '').startsWith('/done')) headers['x-waiting-room-end-session'] = '1';
    let delayMs = 0;
    if (sc.degrade === 'errors' ? arrivals.at(-1) !== now : load > 2 * c) {
      res.writeHead(503, headers).end('overloaded');
      return;
    }
    if (sc.degrade === 'latency') delayMs = (1200 + 40_000 * Math.max(0, load / c - 0.9)) * (0.8 + 0.4 * random());
    setTimeout(() => res.writeHead(200, headers).end('ok'), delayMs / factor);
  });
  return serve(server, 0, '127.0.0.1');
}

/** Runs one scenario for `runS` scenario seconds at `timeFactor` (scenario seconds per real second). */
export async function runLive(sc: LiveScenario, runS: number, timeFactor: number): Promise<LiveResult> {
  const realStart = Date.now();
  const nowMs = (): number => realStart + (Date.now() - realStart) * timeFactor;
  const clockS = (): number => (nowMs() - realStart) / 1000;
  const sleep = (scenarioMs: number): Promise<void> => new Promise((r) => setTimeout(r, scenarioMs / timeFactor));
  const redis = await startRedisServer();
  const bridge = await startUpstashBridge({ redisUrl: redis.url, token: BASE_SECRETS['upstash_token']! });
  const origin = await startOrigin(sc, clockS, timeFactor);
  const knob: Record<string, string> = sc.mode === 'rate' ? { admit_per_period: String(sc.start), admit_period_seconds: String(sc.periodS ?? 1) } : { max_active: String(sc.start) };
  const adaptive: Record<string, string> = sc.adaptive === undefined
    ? {}
    : {
        adaptive_admission: 'on',
        adaptive_min: String(sc.adaptive.min),
        adaptive_max: String(sc.adaptive.max),
        adaptive_error_percent: String(sc.adaptive.errorPercent),
        adaptive_slow_percent: String(sc.adaptive.slowPercent),
        adaptive_slow_ms: String(sc.slowMs),
      };
  const built = buildWaitingRoom({
    settings: source({
      ...BASE_SETTINGS,
      upstash_url: bridge.url,
      store_timeout_ms: '3000',
      ticket_limit: '0',
      state_cache_seconds: '1',
      refresh_seconds: String(POLL_S),
      queue_timeout_seconds: '30',
      session_seconds: '30',
      activity_refresh_seconds: '5',
      ...knob,
      ...adaptive,
    }),
    // No admission keys: the origin here checks no signed admission, and an ES256 signature per
    // request would cost the shared machine more than everything else a request does.
    secrets: source(Object.fromEntries(Object.entries(BASE_SECRETS).filter(([k]) => k !== 'admission_keys'))),
    originUrl: origin.url,
    logger: new MemoryLogger(),
    clock: { now: nowMs },
    store: (config, secrets) =>
      new UpstashQueueStore({
        redis: new Redis(createNodeUpstashOptions({ url: config.upstashUrl!, token: secrets.upstashToken!, retries: config.storeRetries, timeoutMs: config.storeTimeoutMs })),
      }),
  });
  const room = await startHost(built.handler);
  const requests: LiveRequest[] = [];
  const visits: { s: number; served: boolean }[] = [];
  const values: { s: number; value: number }[] = [];
  let moves: LiveResult['moves'] = [];
  let stop = false;
  // A visitor's cookies by name (the room may set its access cookie and the carried admission at once).
  const get = async (path: string, jar: Map<string, string>): Promise<{ origin: boolean; error: boolean; ms: number } | undefined> => {
    const sent = nowMs();
    try {
      const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const response = await fetch(`${room.url}${path}`, { headers: { cookie } });
      const ms = nowMs() - sent;
      for (const line of response.headers.getSetCookie()) {
        const [pair = ''] = line.split(';');
        const eq = pair.indexOf('=');
        if (eq > 0) jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
      }
      await response.arrayBuffer();
      const fromOrigin = response.headers.get('x-origin') === 'live';
      return { origin: fromOrigin || response.status >= 500, error: response.status >= 500, ms };
    } catch {
      return undefined;
    }
  };
  const visitor = async (n: number): Promise<void> => {
    // Spread the first arrivals over the first poll interval.
    await sleep(((n * 997) % 1000) * POLL_S);
    while (!stop) {
      const jar = new Map<string, string>();
      let served = true;
      let made = 0;
      while (!stop && made === 0) {
        const path = sc.requestsPerVisit === 1 ? '/done' : '/shop/0';
        const s = clockS();
        const r = await get(path, jar);
        if (r?.origin === true) {
          requests.push({ s, error: r.error, ms: r.ms });
          served &&= !r.error;
          made = 1;
        } else await sleep(POLL_S * 1000);
      }
      while (!stop && made < sc.requestsPerVisit) {
        await sleep(VISIT_GAP_S * 1000);
        const s = clockS();
        const r = await get(made === sc.requestsPerVisit - 1 ? '/done' : `/shop/${made}`, jar);
        made += 1;
        if (r?.origin === true) {
          requests.push({ s, error: r.error, ms: r.ms });
          served &&= !r.error;
        }
      }
      if (made === sc.requestsPerVisit) visits.push({ s: clockS(), served });
    }
  };
  const sample = async (): Promise<void> => {
    try {
      const stats = (await (await fetch(`${room.url}/__wr/api/stats`, { headers: { authorization: `Bearer ${API_TOKEN}` } })).json()) as { adaptive?: { value: number; moves: { from: number; to: number; reason: string }[] } };
      values.push({ s: clockS(), value: stats.adaptive?.value ?? sc.start });
      if (stats.adaptive !== undefined) moves = stats.adaptive.moves;
    } catch {
      // A missed sample: the next one comes a second later.
    }
  };
  const loops = Array.from({ length: sc.visitors }, (_, n) => visitor(n));
  const sampler = (async () => {
    while (!stop) {
      await sample();
      await sleep(1000);
    }
  })();
  await sleep(runS * 1000);
  stop = true;
  await Promise.allSettled([...loops, sampler]);
  await room.close();
  await Promise.allSettled([origin.close(), bridge.close()]);
  await redis.stop();
  return { scenario: sc, values, requests, visits, moves };
}

export interface LiveSummary {
  /** Mean, least and most learned value from `fromS` on. */
  readonly mean: number;
  readonly least: number;
  readonly most: number;
  /** Origin error and slow shares of the requests sent from `fromS` on. */
  readonly errorShare: number;
  readonly slowShare: number;
  /** Visits served over the whole run. */
  readonly served: number;
}

export function summarize(r: LiveResult, fromS: number): LiveSummary {
  const late = r.values.filter((v) => v.s >= fromS).map((v) => v.value);
  const sent = r.requests.filter((q) => q.s >= fromS);
  const errors = sent.filter((q) => q.error).length;
  const slow = sent.filter((q) => !q.error && q.ms > r.scenario.slowMs).length;
  return {
    mean: late.reduce((a, b) => a + b, 0) / Math.max(1, late.length),
    least: Math.min(...late),
    most: Math.max(...late),
    errorShare: errors / Math.max(1, sent.length),
    slowShare: slow / Math.max(1, sent.length),
    served: r.visits.filter((v) => v.served).length,
  };
}

/**
 * Rate mode against the origin that sheds load over C (5 requests a second): admit_per_period every
 * 4 s, configured at 12 (more than twice the boundary of 5: see boundaryAt), the controller's
 * targets and bounds those of the capacity scenarios. Each visitor let in makes 4 requests a second
 * apart, so a count reaches the origin within a visit's 3 s, and the load follows the knob within a
 * period or two, as max_active does in capacity mode.
 */
export const RATE_SCENARIO: LiveScenario = {
  name: 'rate mode, errors above C',
  mode: 'rate',
  degrade: 'errors',
  capacity: 5,
  start: 12,
  periodS: 4,
  adaptive: { min: 2, max: 40, errorPercent: 5, slowPercent: 10 },
  slowMs: 60_000,
  requestsPerVisit: 4,
  visitors: 24,
  seed: 4,
};
