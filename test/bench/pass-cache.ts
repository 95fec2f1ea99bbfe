/**
 * The cache pass: the per-POP state cache at its default lifetime, on one more host of each kind
 * (CACHED_ROOM: the same settings as the round-trip pass but `state_cache_seconds` left at its
 * default, and a queue of its own). A few thousand real waiting visitors (fewer on the wasm), each
 * holding the cookie of its own real join, poll every `refresh_seconds` for a fixed wall-clock
 * window, spread evenly, bounded in flight, nobody admitted. Both counts over the window give store
 * commands per poll, against window ÷ lifetime (one load per expiry in one POP), and the bridge
 * requests' timestamps give the loads per expiry: the stand-in's SimpleCache does not collapse
 * concurrent misses (Fastly's does), so the wasm's extra loads at an expiry are reported.
 *
 * The poll window (pollPass) is also the methods pass's measure.
 */
import { performance } from 'node:perf_hooks';
import { table } from '../support/markdown-table';
import {
  counted,
  countsBetween,
  visitorClasses,
  wasmOutcome,
  type Arm,
  type ArmName,
  type BilledRow,
  type Counts,
  type Outcome,
  type Pass,
  type PassName,
  type RoomSpec,
  type VisitorClasses,
} from './harness';
import { printTrouble } from './trouble';
import { describeSettings, log, messageOf, ms, REQUEST_TIMEOUT_MS, runConcurrent, sleep } from './util';
import { runPollPlan, type PollPlan, type PollResult } from './workers';

/**
 * Joins' concurrency and polls in flight at most. On the wasm, at most as many polls in flight as
 * the stand-in has workers (4 by default), so none waits in its queue: a host that falls behind has
 * every worker missing at once at each expiry, which the stand-in does not collapse.
 */
export const POLL_JOIN_CONCURRENCY: Readonly<Record<ArmName, number>> = { node: 16, wasm: 4 };
const POLL_CONCURRENCY: Readonly<Record<ArmName, number>> = { node: 32, wasm: 4 };

/**
 * The same settings as the round-trip pass's room but `state_cache_seconds` left at its default
 * (the per-POP cache on), and a queue of its own so that nothing of the other passes (their
 * admitted visitors, their cursor) touches it. Nobody is admitted: no automatic admission, no
 * admin admit.
 */
export const CACHED_ROOM: RoomSpec = {
  variant: 'cached',
  overrides: { admit_per_period: '0', store_failure: 'hold', queue_name: 'bench-cached' },
  nodeLogName: 'node cached waiting room (cached pass, methods pass fifo)',
  sockets: POLL_JOIN_CONCURRENCY,
};
/** The wall-clock window every host's visitors poll for. */
const CACHED_WINDOW_MS = 12_000;
/**
 * Waiting visitors (real joins). Fewer on the wasm: the stand-in instantiates the wasm for every
 * request; at 400 polling every 5 s, 80 polls/s, it fell behind the schedule on a 2-CPU machine.
 */
const CACHED_VISITORS: Readonly<Record<ArmName, number>> = { node: 3_000, wasm: 250 };
/** Verdict: store commands per poll must stay below this (≪ 1). */
const CACHED_MAX_COMMANDS_PER_POLL = 0.05;

/** One poll window on one arm's room. */
interface PollWindowInput {
  /** The pass's name in the progress lines and failures ("cached pass", "methods pass, fifo", …). */
  readonly pass: string;
  /** Names the host in error messages ("cached", "fifo", …). */
  readonly label: string;
  readonly room: RoomSpec;
  /** The wall-clock window the visitors poll for. */
  readonly windowMs: number;
  readonly visitors: number;
}

export interface CachedPassResult {
  readonly host: string;
  readonly visitors: number;
  /** The joins that made the visitors (before the window, not in its counts). */
  readonly joins: Counts;
  readonly poll: PollResult;
  /** Store requests from the window's start to its last answer. */
  readonly http: number;
  readonly redis: number;
  readonly billed: number;
  readonly windowMs: number;
  readonly intervalMs: number;
  readonly ttlSeconds: number;
  /** Loads (bridge requests) per cache expiry: requests less than a quarter lifetime apart are one expiry. */
  readonly loadsPerExpiry: number[];
  /** Requests in the window that met a store failure (the host's log). */
  readonly storeFailures: number;
}

/**
 * `visitors` fresh visitors join the room (not counted in the window), then poll it for the window
 * through the load thread. The host's request log is watched: with store_failure=hold a poll that
 * met a store failure still gets a holding page and a renewed waiting cookie ("checking your
 * place"), which the poll check cannot tell from a good answer: the log can, and such a window's
 * counts are not the cost of a poll.
 */
async function runPollWindow(arm: Arm, input: PollWindowInput): Promise<CachedPassResult> {
  const { windowMs, visitors } = input;
  const host = await arm.host(input.room);
  const { config } = host;
  const classes: VisitorClasses = visitorClasses(`${arm.name} (${input.label})`, host, arm.apiToken);
  const joinConcurrency = POLL_JOIN_CONCURRENCY[arm.name];
  const pollConcurrency = POLL_CONCURRENCY[arm.name];
  log(`${arm.name}: ${input.pass}, ${visitors} visitors join (concurrency ${joinConcurrency})`);
  const cookies = new Array<string>(visitors).fill('');
  // One visitor joins first, outside the counts (and never polls): the queue's first writing run
  // starts its generation (random: and an empty book, one command more; scripts.ts, Book), once per
  // life of the queue's state, not per join. The joins counted are the queue's next ones.
  await classes.newVisitor();
  const joins = await counted(arm.snapshot, () => runConcurrent(visitors, joinConcurrency, async (i) => void (cookies[i] = await classes.newVisitor())));
  // Each visitor polls as the holding page's Refresh header asks: once per refresh_seconds.
  const intervalMs = config.refreshSeconds * 1000;
  log(
    `${arm.name}: ${input.pass}, ${visitors} visitors poll every ${config.refreshSeconds} s for ${windowMs / 1000} s ` +
      `(one poll every ${(intervalMs / visitors).toFixed(2)} ms, at most ${pollConcurrency} in flight)`,
  );
  const plan: PollPlan = {
    url: classes.page,
    cookies,
    cookieName: config.cookieName,
    holdStatus: config.holdStatus,
    intervalMs,
    windowMs,
    concurrency: pollConcurrency,
  };
  const failuresBefore = host.log.troubleCount();
  const before = await arm.snapshot();
  const windowStart = performance.now();
  const poll = await runPollPlan(arm.load, plan, windowMs + REQUEST_TIMEOUT_MS + 10_000);
  const window = countsBetween(before, await arm.snapshot());
  // A Compute host prints its log lines from another process: let the window's last ones arrive.
  await sleep(300);
  const storeFailures = host.log.troubleCount() - failuresBefore;
  const times = arm.storeTimes().filter((t) => t >= windowStart);
  const gapMs = (config.stateCacheSeconds * 1000) / 4;
  const loadsPerExpiry: number[] = [];
  let last = -Infinity;
  for (const t of times) {
    if (loadsPerExpiry.length === 0 || t - last > gapMs) loadsPerExpiry.push(1);
    else loadsPerExpiry[loadsPerExpiry.length - 1]!++;
    last = t;
  }
  return {
    host: arm.name,
    visitors,
    joins,
    poll,
    ...window,
    windowMs,
    intervalMs,
    ttlSeconds: config.stateCacheSeconds,
    loadsPerExpiry,
    storeFailures,
  };
}

/** A poll window's billed-table rows: the joins that made its visitors, and the window's polls. */
/** `budgets`: billed commands per join and per poll, asserted by the billed table (none: reported only). */
export function pollWindowBilled(
  pass: PassName,
  arm: ArmName,
  what: string,
  outcome: Outcome<CachedPassResult> | undefined,
  budgets: { readonly join?: number; readonly poll?: number } = {},
): BilledRow[] {
  if (outcome?.kind !== 'ran') return [];
  const r = outcome.result;
  return [
    { pass, arm, label: `${what}: new visitor (join, before the window)`, requests: r.visitors, counts: r.joins, billedBudget: budgets.join },
    { pass, arm, label: `${what}: waiting poll (the window)`, requests: r.poll.sent, counts: { http: r.http, redis: r.redis, billed: r.billed }, billedBudget: budgets.poll },
  ];
}

/** A poll window whose failure is its outcome, with the store errors that explain it. */
export async function pollPass(arm: Arm, input: PollWindowInput): Promise<CachedOutcome> {
  try {
    return { kind: 'ran', result: await runPollWindow(arm, input) };
  } catch (error) {
    log(`${arm.name} ${input.pass} FAILED: ${messageOf(error)}`);
    const lines = await printTrouble(`${arm.name} ${input.pass}`, arm.troubleSources(input.room));
    return { kind: 'error', message: [messageOf(error), ...lines].join('\n  ') };
  }
}

/** Expected store commands of one POP over the window: one load per cache lifetime. */
export function expectedLoads(r: CachedPassResult): number {
  return r.ttlSeconds > 0 ? r.windowMs / 1000 / r.ttlSeconds : r.poll.sent;
}

/**
 * The cached pass's verdict. `pass`: both counts per poll below the limit. `uncollapsed` (only
 * where the cache does not collapse concurrent misses, i.e. the stand-in): the raw counts are not,
 * but only because of extra loads at expiries: one load per expiry is below the limit, and the
 * expiries come no more often than once per lifetime. Anything else fails, as do errors and
 * admissions.
 */
export function cachedVerdict(r: CachedPassResult, collapses: boolean): 'pass' | 'uncollapsed' | 'fail' {
  const polls = r.poll.sent;
  if (polls === 0 || r.poll.errors > 0 || r.poll.admitted > 0 || r.storeFailures > 0 || r.redis < 1) return 'fail';
  if (r.http / polls < CACHED_MAX_COMMANDS_PER_POLL && r.redis / polls < CACHED_MAX_COMMANDS_PER_POLL) return 'pass';
  const expiries = r.loadsPerExpiry.length;
  if (!collapses && expiries / polls < CACHED_MAX_COMMANDS_PER_POLL && expiries <= Math.ceil(expectedLoads(r)) + 1) return 'uncollapsed';
  return 'fail';
}

export type CachedOutcome = { readonly kind: 'ran'; readonly result: CachedPassResult } | { readonly kind: 'error'; readonly message: string };

function cachedPassReport(ttlSeconds: number, node: CachedOutcome, wasm: Outcome<CachedPassResult>): { text: string; failed: boolean } {
  const rows: string[][] = [];
  const notes: string[] = [];
  let failed = false;
  const add = (label: string, outcome: Outcome<CachedPassResult>, collapses: boolean): void => {
    if (outcome.kind !== 'ran') {
      failed ||= outcome.kind === 'error';
      const why = outcome.kind === 'error' ? `FAILED: ${outcome.message}` : `skipped: ${outcome.reason}`;
      rows.push([label, '—', '—', '—', '—', '—', '—', outcome.kind === 'error' ? 'FAIL' : 'skipped']);
      notes.push(`${label}: ${why}`);
      return;
    }
    const r = outcome.result;
    const polls = r.poll.sent;
    const verdict = cachedVerdict(r, collapses);
    failed ||= verdict === 'fail';
    const expected = expectedLoads(r);
    const expiries = r.loadsPerExpiry.length;
    const maxPerExpiry = Math.max(0, ...r.loadsPerExpiry);
    const extra = r.http - expiries;
    rows.push([
      label,
      String(r.visitors),
      String(polls),
      `${r.http} · ${r.redis}`,
      polls > 0 ? `${(r.http / polls).toFixed(4)} · ${(r.redis / polls).toFixed(4)}` : 'n/a',
      `≈ ${expected.toFixed(0)} (${r.windowMs / 1000} s ÷ ${r.ttlSeconds} s)`,
      `${expiries} · ${expiries > 0 ? (r.http / expiries).toFixed(2) : 'n/a'} · ${maxPerExpiry}`,
      verdict === 'pass'
        ? 'PASS'
        : verdict === 'uncollapsed'
          ? `PASS only at one load per expiry (${(r.loadsPerExpiry.length / polls).toFixed(4)}); raw over the limit: uncollapsed misses`
          : 'FAIL',
    ]);
    const p = r.poll;
    notes.push(
      `${label}: ${r.visitors} visitors, each holding the waiting cookie of its own real join (the joins, before the window and not in its counts: ` +
        `${r.joins.http} HTTP / ${r.joins.redis} Redis for ${r.visitors} joins), polling every ${r.intervalMs / 1000} s (one poll every ` +
        `${(r.intervalMs / r.visitors).toFixed(2)} ms across them); ${p.scheduled} polls due in the window, ${p.sent} sent` +
        (p.scheduled > p.sent ? ` (${p.scheduled - p.sent} not sent: the host was behind)` : '') +
        `, latest send ${ms(p.maxLagMs)} ms after its due time; ${p.held} answered with the holding page and a renewed waiting cookie, ` +
        `${p.admitted} admitted, ${p.errors} errors${p.firstError !== undefined ? ` (first: ${p.firstError})` : ''}` +
        `${r.storeFailures > 0 ? `, ${r.storeFailures} requests that met a STORE FAILURE (held all the same: see "Store failures seen by the hosts")` : ''}; poll p50 ${ms(p.p50Ms)} ms, ` +
        `p99 ${ms(p.p99Ms)} ms; last answer ${(p.wallMs / 1000).toFixed(1)} s after the first send (${(p.sent / (r.windowMs / 1000)).toFixed(0)} polls/s). ` +
        (collapses
          ? `Concurrent misses share one load here (MemoryStateCache): ${extra === 0 ? 'one load per expiry, as expected' : `${extra} extra load(s) over ${expiries} expiries — UNEXPECTED`}.`
          : `The stand-in's SimpleCache does NOT collapse concurrent misses (request collapsing is not implemented; see its README): every ` +
            `request that misses while another is loading runs its own load, so a few extra loads at each expiry are expected here; ` +
            `measured ${extra} extra load(s) over ${expiries} expiries (at most ${maxPerExpiry} at one expiry). Fastly's SimpleCache.getOrSet ` +
            `collapses them within a POP, so there the count is one load per expiry: ${expiries} here, ${polls > 0 ? (expiries / polls).toFixed(4) : 'n/a'} per poll.`),
    );
  };
  add('node (one process = one POP)', node, true);
  add('wasm on the Compute host (one POP)', wasm, false);
  const text = [
    `### Store commands per poll with the state cache on (state_cache_seconds at its default, ${ttlSeconds} s; ${CACHED_WINDOW_MS / 1000} s of real waiting visitors polling; nobody admitted)`,
    '',
    table(
      [
        'host',
        'visitors',
        'polls',
        'store commands (HTTP · Redis)',
        'commands per poll (HTTP · Redis)',
        'expected ≈ window ÷ lifetime (one POP)',
        'expiries · loads per expiry (mean · max)',
        `verdict (< ${CACHED_MAX_COMMANDS_PER_POLL} per poll)`,
      ],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      rows,
    ),
    '',
    `A separate host of each kind with the same settings as above except state_cache_seconds (left at its default) and its own queue ` +
      `(${describeSettings(CACHED_ROOM.overrides)}). Store commands: HTTP requests that reached the ` +
      'bridge · script commands Redis executed (INFO commandstats deltas of EVALSHA/EVAL), from the window\'s start to its last answer. ' +
      'Every answer is checked: a holding page with a renewed waiting cookie (an access cookie would be an admission). ' +
      '"loads per expiry": bridge requests less than a quarter of the cache lifetime apart are counted as one expiry. ' +
      `Verdict: PASS when both counts per poll are below ${CACHED_MAX_COMMANDS_PER_POLL}. On the wasm only, where the stand-in does not ` +
      'collapse concurrent misses, raw counts over the limit are reported as such and pass only if one load per expiry is below it and ' +
      'the expiries come no more often than once per lifetime; errors or admissions fail.',
    ...notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
  return { text, failed };
}


export function cachePass(): Pass {
  const outcomes: Partial<Record<ArmName, CachedOutcome>> = {};
  let ttlSeconds = NaN;
  return {
    name: 'cache',
    async run(arm: Arm) {
      ttlSeconds = arm.config(CACHED_ROOM).stateCacheSeconds;
      outcomes[arm.name] = await pollPass(arm, {
        pass: 'cached pass',
        label: 'cached',
        room: CACHED_ROOM,
        windowMs: CACHED_WINDOW_MS,
        visitors: CACHED_VISITORS[arm.name],
      });
    },
    report(wasm) {
      const report = cachedPassReport(ttlSeconds, outcomes.node ?? { kind: 'error', message: 'it did not run' }, wasmOutcome(outcomes.wasm, wasm));
      return {
        text: report.text,
        failures: report.failed ? [`the cached pass failed, had errors or admissions, or cost ${CACHED_MAX_COMMANDS_PER_POLL} store commands per poll or more`] : [],
        billed: (['node', 'wasm'] as const).flatMap((arm) => pollWindowBilled('cache', arm, `fifo, state cache ${ttlSeconds} s`, outcomes[arm])),
      };
    },
  };
}
