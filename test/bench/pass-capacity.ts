/**
 * The capacity pass: capacity-mode admission on one more host of each kind (CAPACITY_ROOM, a queue
 * of its own, the state cache off): `max_active` set, `activity_refresh_seconds` at its minimum,
 * and every request class of a slot's life counted the same two ways: a walk-in (the join claims
 * the slot), a new visitor when full (a ticket), an admitted visitor between refreshes (no store
 * call) and after the refresh interval (one touch for a burst of requests), the heartbeat (before and after it is due), the
 * leave, the origin's end-of-session header, a called visitor claiming the freed slot, and the
 * runtime control and stats APIs. Fewer visitors per class on the wasm.
 */
import type http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Config } from '../../src/core/config';
import { table } from '../support/markdown-table';
import {
  ARM_CONCURRENCY,
  counted,
  loadStoreScripts,
  wasmOutcome,
  type Arm,
  type ArmName,
  type BilledRow,
  type Counts,
  type Outcome,
  type Pass,
  type RoomSpec,
  type Snapshot,
} from './harness';
import { printTrouble } from './trouble';
import { cookieFrom, describeSettings, log, messageOf, PATH, runConcurrent, send, sleep, tokenClaims, tokenKind, type Reply } from './util';

/**
 * Capacity mode (`max_active`), the refresh interval at its minimum (5 s, so the run waits for it
 * once per host), the state cache off (a called visitor's poll then costs its 1 store call every
 * time, deterministically), a queue of its own. No automatic admission in rate terms (capacity mode
 * requires admit_per_period=0). A longer store timeout: on a loaded machine the stand-in's store
 * requests sometimes took over the default 1 s, which turns a class's answer into a store failure
 * (an error here, not a count).
 */
const CAPACITY_ROOM: RoomSpec = {
  variant: 'capacity',
  overrides: {
    admit_per_period: '0',
    store_failure: 'hold',
    state_cache_seconds: '0',
    queue_name: 'bench-capacity',
    max_active: '50',
    activity_refresh_seconds: '5',
    store_timeout_ms: '5000',
  },
  nodeLogName: 'node capacity waiting room',
  sockets: ARM_CONCURRENCY,
};
/** Visitors per class (at most max_active: each class uses distinct visitors). */
const CAPACITY_PER_CLASS: Readonly<Record<ArmName, number>> = { node: 50, wasm: 20 };
/** Requests per admitted visitor after the refresh interval (the 1st touches). */
const CAPACITY_BURST = 5;
/** How far past the refresh interval's end the burst starts. */
const CAPACITY_MARGIN_MS = 150;

/** The capacity pass's rows, in the order of the table (node and wasm alike). */
const CAP = {
  walkIn: 0,
  full: 1,
  called: 2,
  between: 3,
  burst: 4,
  first: 5,
  rest: 6,
  heartbeat: 7,
  leave: 8,
  endSession: 9,
  control: 10,
  stats: 11,
  heartbeatEarly: 12,
} as const;

/**
 * `budget`: round trips per request; `billedBudget`: billed commands per request, on average over the
 * class (what Upstash bills: the script and every command it runs). Issue 13's ceilings where it sets
 * one (a capacity walk-in ≤ 4; a cache-miss state load ≤ 4 and a claim ≤ 4; the admin page's stats
 * ≤ 4; a queued join 3, as in rate mode); the others at what the store measured when they were set,
 * with one command to spare where a run may also do the book's occasional work (an expiry come due,
 * a window read again), so that a regression fails the run.
 */
const CAPACITY_CLASSES: readonly { readonly label: string; readonly budget: string; readonly billedBudget: number }[] = [
  { label: 'new visitor while there is room: walks in (the join claims the slot)', budget: '≤ 1', billedBudget: 4 },
  { label: 'new visitor when full: gets a ticket (join)', budget: '≤ 1', billedBudget: 3 },
  { label: 'called visitor claims a slot: poll + claim (state cache off)', budget: '≤ 2 = claim 1 + poll 1 (0 on a cache hit)', billedBudget: 8 },
  { label: 'admitted visitor between refreshes (token only)', budget: '≤ 0', billedBudget: 0 },
  { label: `admitted visitor after the refresh interval: burst of ${CAPACITY_BURST} each`, budget: `≤ 1 per visitor = ≤ ${(1 / CAPACITY_BURST).toFixed(2)}`, billedBudget: 4 / CAPACITY_BURST },
  { label: '  └ its 1st request after the interval (touch, renewed cookie)', budget: '≤ 1', billedBudget: 4 },
  { label: `  └ its requests 2–${CAPACITY_BURST} (the renewed cookie)`, budget: '≤ 0', billedBudget: 0 },
  { label: 'heartbeat (POST __wr/heartbeat: touch)', budget: '≤ 1', billedBudget: 4 },
  { label: 'leave (POST __wr/leave)', budget: '≤ 1', billedBudget: 6 },
  { label: 'end of session by the origin (GET /checkout/done, end-session header)', budget: '≤ 1', billedBudget: 7 },
  // The change, then its audit entry (who changed what: 4 billed, 5 once the trail is at its cap).
  { label: 'runtime control (POST __wr/api/control {"paused":false}, audited)', budget: '≤ 2 = the change 1 + its audit entry 1', billedBudget: 7 },
  { label: 'stats (GET __wr/api/stats)', budget: '≤ 1', billedBudget: 4 },
  { label: 'heartbeat before the refresh interval is over (answered from the cookie)', budget: '≤ 0', billedBudget: 0 },
];

interface CapacityRow extends Counts {
  readonly requests: number;
  /** The most store calls the budget allows for these requests. */
  readonly allowed: number;
}

/** A capacity-mode visitor's moves against one host, each checking that the answer is what it expects. */
function capacityClient(host: string, base: string, agent: http.Agent, config: Config, apiToken: string) {
  const page = `${base}${PATH}`;
  const own = (rest: string): string => `${base}${config.pathPrefix}${rest}`;
  const bearer = { authorization: `Bearer ${apiToken}` };
  const isHolding = (r: Reply): boolean => r.status === config.holdStatus && r.headers['refresh'] !== undefined && r.headers['x-origin'] === undefined;
  const isOrigin = (r: Reply): boolean => r.status === 200 && r.headers['x-origin'] === 'demo';
  const fail = (what: string, r: Reply): never => {
    throw new Error(`${host} (capacity), ${what}: unexpected answer ${r.status} ${JSON.stringify(r.headers)} ${JSON.stringify(r.body.slice(0, 200))}`);
  };
  /** An access token that holds a slot: `k: a` with a session start and a refresh time. */
  const slotToken = (cookie: string | undefined): cookie is string => {
    const claims = cookie === undefined ? undefined : tokenClaims(cookie);
    return claims?.['k'] === 'a' && typeof claims['s'] === 'number' && typeof claims['r'] === 'number';
  };
  const json = (r: Reply): Record<string, unknown> => {
    try {
      const body: unknown = JSON.parse(r.body);
      if (typeof body === 'object' && body !== null) return body as Record<string, unknown>;
    } catch {
      // not JSON: fall through
    }
    return {};
  };
  return {
    /** No cookie, room free: the origin's page and an access token with a slot. */
    async walkIn(): Promise<string> {
      const r = await send(agent, 'GET', page);
      const cookie = cookieFrom(r, config.cookieName);
      if (!isOrigin(r) || !slotToken(cookie)) fail('walk-in: origin page with a slot token', r);
      return cookie!;
    },
    /** No cookie, full: the holding page and a waiting ticket. */
    async ticket(): Promise<string> {
      const r = await send(agent, 'GET', page);
      const cookie = cookieFrom(r, config.cookieName);
      if (!isHolding(r) || cookie === undefined || tokenKind(cookie) !== 'w') fail('new visitor when full: holding page with a ticket', r);
      return cookie!;
    },
    /** Slot token within its refresh interval: the origin's page, cookie untouched. */
    async admitted(cookie: string): Promise<void> {
      const r = await send(agent, 'GET', page, { cookie });
      if (!isOrigin(r) || cookieFrom(r, config.cookieName) !== undefined) fail('admitted visitor: origin page, cookie untouched', r);
    },
    /** Slot token past its refresh interval: the origin's page and a renewed token (a later `r`). */
    async touched(cookie: string): Promise<string> {
      const r = await send(agent, 'GET', page, { cookie });
      const renewed = cookieFrom(r, config.cookieName);
      const before = Number(tokenClaims(cookie)?.['r']);
      if (!isOrigin(r) || !slotToken(renewed) || !(Number(tokenClaims(renewed)?.['r']) > before)) {
        fail('admitted visitor after the interval: origin page with a renewed slot token', r);
      }
      return renewed!;
    },
    /** A heartbeat that is not due yet: the slot was refreshed within activity_refresh_seconds. */
    async heartbeatEarly(cookie: string): Promise<void> {
      const r = await send(agent, 'POST', own('heartbeat'), { cookie });
      const body = json(r);
      if (r.status !== 200 || body['state'] !== 'active' || body['refreshed'] !== false) fail('early heartbeat: active, not refreshed', r);
    },
    async heartbeat(cookie: string): Promise<string> {
      const r = await send(agent, 'POST', own('heartbeat'), { cookie });
      const renewed = cookieFrom(r, config.cookieName);
      const body = json(r);
      if (r.status !== 200 || body['state'] !== 'active' || body['refreshed'] !== true || !slotToken(renewed)) fail('heartbeat: active, refreshed', r);
      return renewed!;
    },
    async leave(cookie: string): Promise<void> {
      const r = await send(agent, 'POST', own('leave'), { cookie });
      if (r.status !== 204) fail('leave: 204', r);
    },
    /** The origin's end-of-session header: its page, the header removed, the cookie cleared. */
    async endSession(cookie: string): Promise<void> {
      const r = await send(agent, 'GET', `${base}/checkout/done`, { cookie });
      const cleared = cookieFrom(r, config.cookieName);
      if (!isOrigin(r) || r.headers[config.endSessionHeader] !== undefined || cleared !== `${config.cookieName}=`) {
        fail('end of session: origin page, header removed, cookie cleared', r);
      }
    },
    /** A called ticket's poll: the origin's page and a slot token (its reservation claimed). */
    async claim(cookie: string): Promise<string> {
      const r = await send(agent, 'GET', page, { cookie });
      const access = cookieFrom(r, config.cookieName);
      if (!isOrigin(r) || !slotToken(access)) fail('called visitor: origin page with a slot token', r);
      return access!;
    },
    async control(): Promise<void> {
      const r = await send(agent, 'POST', own('api/control'), bearer, JSON.stringify({ paused: false }));
      const body = json(r);
      if (r.status !== 200 || body['mode'] !== 'capacity' || body['paused'] !== false) fail('control: 200, capacity mode, not paused', r);
    },
    async stats(): Promise<Record<string, unknown>> {
      const r = await send(agent, 'GET', own('api/stats'), bearer);
      const body = json(r);
      if (r.status !== 200 || body['mode'] !== 'capacity' || body['max_sessions'] !== config.maxActive) fail('stats: 200, capacity mode', r);
      return body;
    },
  };
}

/** When a slot token's refresh interval ends (ms since the epoch): its last refresh `r` plus the interval. */
function refreshDueMs(cookie: string, config: Config): number {
  const claims = tokenClaims(cookie);
  const last = Number(claims?.['r'] ?? claims?.['s']);
  if (!Number.isFinite(last)) throw new Error('capacity pass: an access token without a refresh time');
  return (last + config.activityRefreshSeconds) * 1000;
}

interface CapacityInput {
  readonly host: string;
  readonly base: string;
  readonly agent: http.Agent;
  /** The capacity host's parsed settings (the wasm gets the same). */
  readonly config: Config;
  readonly apiToken: string;
  readonly perClass: number;
  readonly concurrency: number;
  readonly snapshot: Snapshot;
  /** This arm's Upstash bridge, to load the store's scripts first (a warm script cache). */
  readonly bridge: { readonly url: string; readonly token: string };
}

interface CapacityResult {
  readonly host: string;
  readonly perClass: number;
  readonly concurrency: number;
  /** Indexed by CAP. */
  readonly rows: readonly CapacityRow[];
  /** How long the pass slept for the refresh interval to pass. */
  readonly waitedMs: number;
  readonly wallMs: number;
  /** What the stats API said at the checkpoints (not counted in any class). */
  readonly checkpoints: string;
}

type CapacityOutcome = Outcome<CapacityResult>;

/**
 * One capacity queue through its life, every class counted on its own (the counts are deltas
 * around each class only; the checkpoints between them are not counted):
 *   walk-ins fill max_active (the first `perClass` counted) → admitted visitors between refreshes →
 *   new visitors when full (tickets) → control, stats → sleep until the walk-ins' refresh interval
 *   is over → a burst per visitor (1st request touches, the rest ride the renewed cookie) →
 *   heartbeats → the origin ends those sessions (each frees a slot and calls the next ticket) →
 *   the called tickets poll and claim → they leave.
 */
async function runCapacityPass(input: CapacityInput): Promise<CapacityResult> {
  const { config, perClass: n, concurrency, snapshot } = input;
  const started = performance.now();
  if (config.maxActive < n) throw new Error(`capacity pass: ${n} visitors per class, but max_active is ${config.maxActive}`);
  // A warm script cache, as the other passes have by now (their cold cost is reported by the
  // round-trip pass), outside any class's counts.
  await loadStoreScripts(input.bridge, 'capacity pass');
  const c = capacityClient(input.host, input.base, input.agent, config, input.apiToken);
  // The queue's first writing run starts its generation and an empty book (scripts.ts, Book): one
  // command more, once per life of the queue's state, not per walk-in. Made here, outside the
  // classes, as the script cache is warmed (test/billed-commands.test.ts measures it).
  await c.control();
  const rows: CapacityRow[] = new Array<CapacityRow>(CAPACITY_CLASSES.length);
  const measure = async (index: number, requests: number, allowed: number, run: () => Promise<void>): Promise<void> => {
    rows[index] = { requests, allowed, ...(await counted(snapshot, run)) };
  };
  const each = (count: number, task: (i: number) => Promise<void>) => () => runConcurrent(count, concurrency, task);
  /** Throws when a class that must not refresh ran into its tokens' refresh time (it would not measure what it says). */
  const stillWithin = (cookies: readonly string[], what: string): void => {
    const due = Math.min(...cookies.map((cookie) => refreshDueMs(cookie, config)));
    if (Date.now() >= due) throw new Error(`capacity pass: ${what} ran past activity_refresh_seconds (${config.activityRefreshSeconds} s); host too slow`);
  };
  const checkpoints: string[] = [];
  const checkpoint = async (when: string, expect: Record<string, number>): Promise<void> => {
    const body = await c.stats();
    const seen = Object.keys(expect).map((key) => `${key} ${String(body[key])}`);
    checkpoints.push(`${when}: ${seen.join(', ')}`);
    for (const [key, value] of Object.entries(expect)) {
      if (body[key] !== value) throw new Error(`capacity pass, ${when}: ${key} is ${String(body[key])}, expected ${value}`);
    }
  };
  log(`${input.host}: capacity pass, max_active ${config.maxActive}, ${n} visitors per class, concurrency ${concurrency}`);

  // Walk-ins: the first n counted, then the room filled up (not counted).
  const access = new Array<string>(config.maxActive).fill('');
  await measure(CAP.walkIn, n, n, each(n, async (i) => void (access[i] = await c.walkIn())));
  await runConcurrent(config.maxActive - n, concurrency, async (i) => void (access[n + i] = await c.walkIn()));
  // Admitted visitors within their refresh interval: the token alone decides. The n freshest
  // tokens, so a slow host has the most time before their interval ends (checked after).
  const fresh = [...access].sort((a, b) => refreshDueMs(b, config) - refreshDueMs(a, config)).slice(0, n);
  await measure(CAP.between, n, 0, each(n, (i) => c.admitted(fresh[i]!)));
  stillWithin(fresh, 'the admitted visitors between refreshes');
  await checkpoint('full', { active_sessions: config.maxActive, cursor: config.maxActive, tail: config.maxActive });
  // New visitors when full: a ticket each.
  const tickets = new Array<string>(n).fill('');
  await measure(CAP.full, n, n, each(n, async (i) => void (tickets[i] = await c.ticket())));
  await measure(CAP.control, n, 2 * n, each(n, () => c.control()));
  await measure(CAP.stats, n, n, each(n, async () => void (await c.stats())));
  await checkpoint('tickets taken', { active_sessions: config.maxActive, cursor: config.maxActive, waiting: n });

  // After the refresh interval: the first request of each visitor touches, the rest do not.
  const burst = access.slice(0, n);
  const dueMs = Math.max(...burst.map((cookie) => refreshDueMs(cookie, config))) + CAPACITY_MARGIN_MS;
  const waitedMs = Math.max(0, dueMs - Date.now());
  log(`${input.host}: capacity pass, ${(waitedMs / 1000).toFixed(1)} s until the walk-ins' refresh interval is over`);
  await sleep(waitedMs);
  const renewed = new Array<string>(n).fill('');
  await measure(CAP.first, n, n, each(n, async (i) => void (renewed[i] = await c.touched(burst[i]!))));
  await measure(CAP.rest, n * (CAPACITY_BURST - 1), 0, each(n, async (i) => {
    for (let k = 1; k < CAPACITY_BURST; k++) await c.admitted(renewed[i]!);
  }));
  stillWithin(renewed, 'the rest of the burst');
  const first = rows[CAP.first]!;
  const rest = rows[CAP.rest]!;
  rows[CAP.burst] = {
    requests: first.requests + rest.requests,
    allowed: n,
    http: first.http + rest.http,
    redis: first.redis + rest.redis,
    billed: first.billed + rest.billed,
  };

  // Heartbeats: one before the refresh is due (no store call), then one after it (a touch); then the
  // origin ends those sessions (each frees a slot and calls the next ticket).
  await measure(CAP.heartbeatEarly, n, 0, each(n, (i) => c.heartbeatEarly(renewed[i]!)));
  const dueAgainMs = Math.max(...renewed.map((cookie) => refreshDueMs(cookie, config))) + CAPACITY_MARGIN_MS;
  log(`${input.host}: capacity pass, ${(Math.max(0, dueAgainMs - Date.now()) / 1000).toFixed(1)} s until the heartbeats are due`);
  await sleep(Math.max(0, dueAgainMs - Date.now()));
  const beaten = new Array<string>(n).fill('');
  await measure(CAP.heartbeat, n, n, each(n, async (i) => void (beaten[i] = await c.heartbeat(renewed[i]!))));
  await measure(CAP.endSession, n, n, each(n, (i) => c.endSession(beaten[i]!)));
  stillWithin(beaten, 'the end of session');
  await checkpoint('sessions ended', { active_sessions: config.maxActive, cursor: config.maxActive + n, reserved: n, waiting: 0 });

  // The called tickets poll: the poll (state cache off: 1) sees the call, the claim takes the reserved slot (1).
  const claimed = new Array<string>(n).fill('');
  await measure(CAP.called, n, 2 * n, each(n, async (i) => void (claimed[i] = await c.claim(tickets[i]!))));
  await checkpoint('slots claimed', { active_sessions: config.maxActive, reserved: 0 });
  await measure(CAP.leave, n, n, each(n, (i) => c.leave(claimed[i]!)));

  return {
    host: input.host,
    perClass: n,
    concurrency,
    rows,
    waitedMs,
    wallMs: performance.now() - started,
    checkpoints: checkpoints.join('; '),
  };
}

function capacityReport(node: CapacityOutcome, wasm: CapacityOutcome): { text: string; failed: boolean } {
  const within = (row: CapacityRow | undefined): boolean => row !== undefined && row.http <= row.allowed && row.redis <= row.allowed;
  const cell = (row: CapacityRow | undefined): string =>
    row === undefined ? 'error' : `${(row.http / row.requests).toFixed(2)} · ${(row.redis / row.requests).toFixed(2)} (${row.requests})`;
  const nodeRows = node.kind === 'ran' ? node.result.rows : undefined;
  const wasmRows = wasm.kind === 'ran' ? wasm.result.rows : undefined;
  let failed = node.kind !== 'ran' || wasm.kind === 'error';
  const rows = CAPACITY_CLASSES.map((cls, i) => {
    const nodeRow = nodeRows?.[i];
    const wasmRow = wasmRows?.[i];
    const nodeOk = within(nodeRow);
    const wasmOk = wasm.kind === 'skipped' || within(wasmRow);
    failed ||= !nodeOk || !wasmOk;
    return [
      cls.label,
      cls.budget,
      cell(nodeRow),
      wasm.kind === 'skipped' ? 'skipped' : cell(wasmRow),
      nodeOk && wasmOk ? (wasm.kind === 'skipped' ? 'PASS (node only)' : 'PASS') : 'FAIL',
    ];
  });
  const agreement = (outcome: CapacityOutcome, label: string): string => {
    if (outcome.kind === 'skipped') return `${label}: skipped (${outcome.reason}).`;
    if (outcome.kind === 'error') return `${label}: FAILED: ${outcome.message}`;
    const r = outcome.result;
    const disagree = CAPACITY_CLASSES.filter((_, i) => r.rows[i]!.http !== r.rows[i]!.redis).map((cls) => cls.label.trim());
    return (
      `${label}: ${r.perClass} visitors per class, concurrency ${r.concurrency}; slept ${(r.waitedMs / 1000).toFixed(1)} s for the refresh ` +
      `interval; the pass took ${(r.wallMs / 1000).toFixed(1)} s. ${disagree.length === 0 ? 'The two counts agree on every row.' : `The counts DISAGREE on: ${disagree.join('; ')}.`} ` +
      `Stats API at the checkpoints (not counted): ${r.checkpoints}.`
    );
  };
  const text = [
    `### Capacity mode: store round trips per request (${describeSettings(CAPACITY_ROOM.overrides)}; warm script cache)`,
    '',
    table(
      ['request class', 'budget', 'node round trips / request (HTTP · Redis) (requests)', 'wasm round trips / request (HTTP · Redis) (requests)', 'result'],
      ['l', 'l', 'r', 'r', 'l'],
      rows,
    ),
    '',
    'A separate host of each kind (the wasm: the same bin/main.wasm with these settings) over the same harness as above, its own queue. ' +
      'Counted as above: HTTP requests that reached the bridge · script commands Redis executed, each class on its own. One queue\'s life: ' +
      `walk-ins fill max_active (the first ones counted; each gets the origin's page and an access token carrying its slot); admitted ` +
      `visitors within activity_refresh_seconds (the origin's page, the cookie untouched, checked to end before the tokens' refresh time); ` +
      `new visitors when full (the holding page and a ticket); control and stats; then, after the walk-ins' refresh interval, a burst ` +
      `of ${CAPACITY_BURST} requests per visitor, one after another (the 1st touches the slot and renews the cookie, the others carry the ` +
      'renewed cookie, as a browser does); a heartbeat each before its refresh is due (answered from the cookie) and one after (a touch); the origin ends those sessions (its header removed, the cookie cleared; the ' +
      'freed slot calls the next ticket); the called tickets poll and claim their reserved slots; they leave. With the state cache ' +
      'off a called visitor\'s poll costs its 1 store call every time: poll 1 + claim 1 = 2; with the cache on (the default) the poll is ' +
      'answered from the POP\'s cache (see the cached pass: 0 on a hit) and the claim is the 1 call. The burst row is per request: 1 touch ' +
      `per visitor per refresh interval over ${CAPACITY_BURST} requests.`,
    `- ${agreement(node, 'node')}`,
    `- ${agreement(wasm, 'wasm')}`,
    '',
  ].join('\n');
  return { text, failed };
}


export function capacityPass(): Pass {
  const outcomes: Partial<Record<ArmName, CapacityOutcome>> = {};
  return {
    name: 'capacity',
    async run(arm: Arm) {
      try {
        const host = await arm.host(CAPACITY_ROOM);
        const result = await runCapacityPass({
          host: arm.name,
          base: host.url,
          agent: host.agent,
          config: host.config,
          apiToken: arm.apiToken,
          perClass: CAPACITY_PER_CLASS[arm.name],
          concurrency: ARM_CONCURRENCY[arm.name],
          snapshot: arm.snapshot,
          bridge: arm.bridge,
        });
        outcomes[arm.name] = { kind: 'ran', result };
      } catch (error) {
        log(`${arm.name} capacity pass FAILED: ${messageOf(error)}`);
        const lines = await printTrouble(`${arm.name} capacity pass`, arm.troubleSources(CAPACITY_ROOM));
        outcomes[arm.name] = { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
      }
    },
    report(wasm) {
      const report = capacityReport(outcomes.node ?? { kind: 'error', message: 'it did not run' }, wasmOutcome(outcomes.wasm, wasm));
      const billed = (['node', 'wasm'] as const).flatMap((arm): BilledRow[] => {
        const outcome = outcomes[arm];
        if (outcome?.kind !== 'ran') return [];
        return CAPACITY_CLASSES.flatMap((cls, i) => {
          const row = outcome.result.rows[i];
          return row === undefined ? [] : [{ pass: 'capacity' as const, arm, label: cls.label, requests: row.requests, counts: row, billedBudget: cls.billedBudget }];
        });
      });
      return { text: report.text, failures: report.failed ? ['the capacity pass failed, or a capacity-mode store round-trip budget is exceeded'] : [], billed };
    },
  };
}
