/**
 * The queueing-methods pass: store commands per waiting poll, FIFO with the per-POP cache against
 * `queue_method=random`, on each kind of host. A few hundred fresh waiting visitors poll the cache
 * pass's FIFO host (CACHED_ROOM) for a fixed window, then as many poll one more host with
 * `queue_method=random` (RANDOM_ROOM, a queue of its own, the cache also at its default, where it
 * cannot help) for the same window; store commands per poll of each, and their ratio. Random
 * presence is per visitor, so the per-POP cache cannot answer a random poll: one store call each.
 * Nobody is admitted.
 */
import { table } from '../support/markdown-table';
import { type Arm, type ArmName, type Pass, type RoomSpec, type WasmStatus } from './harness';
import { CACHED_ROOM, cachedVerdict, expectedLoads, pollPass, pollWindowBilled, POLL_JOIN_CONCURRENCY, type CachedOutcome, type CachedPassResult } from './pass-cache';
import { describeSettings, ms } from './util';

const RANDOM_ROOM: RoomSpec = {
  variant: 'random',
  overrides: { ...CACHED_ROOM.overrides, queue_name: 'bench-random', queue_method: 'random' },
  nodeLogName: 'node random waiting room (methods pass random)',
  sockets: POLL_JOIN_CONCURRENCY,
};
const METHODS_WINDOW_MS = 10_000;
/** Fewer visitors on the wasm (the stand-in), and at most as many polls in flight as it has workers. */
const METHODS_VISITORS: Readonly<Record<ArmName, number>> = { node: 300, wasm: 150 };

/** Both methods on one kind of host: FIFO (the cached pass's host, fresh visitors) and random (its own host). */
interface MethodsOutcome {
  readonly fifo: CachedOutcome;
  readonly random: CachedOutcome;
}

/** Random: every sent poll is exactly one store command, both counts; no errors, nobody admitted. */
function randomVerdict(r: CachedPassResult): boolean {
  const polls = r.poll.sent;
  return polls > 0 && r.poll.errors === 0 && r.poll.admitted === 0 && r.storeFailures === 0 && r.http === polls && r.redis === polls;
}

/** A one-line account of a poll window (what was due, sent, answered, how late, how fast). */
function pollWindowNote(r: CachedPassResult): string {
  const p = r.poll;
  return (
    `${r.visitors} visitors (their joins before the window, not counted: ${r.joins.http} HTTP / ${r.joins.redis} Redis), one poll every ` +
    `${(r.intervalMs / r.visitors).toFixed(2)} ms across them; ${p.scheduled} polls due, ${p.sent} sent` +
    (p.scheduled > p.sent ? ` (${p.scheduled - p.sent} not sent: the host was behind)` : '') +
    `, latest send ${ms(p.maxLagMs)} ms late; ${p.held} held with a renewed waiting cookie, ${p.admitted} admitted, ${p.errors} errors` +
    (r.storeFailures > 0 ? `, ${r.storeFailures} requests that met a STORE FAILURE (held all the same: see "Store failures seen by the hosts")` : '') +
    `${p.firstError !== undefined ? ` (first: ${p.firstError})` : ''}; p50 ${ms(p.p50Ms)} ms, p99 ${ms(p.p99Ms)} ms; ` +
    `${(p.sent / (r.windowMs / 1000)).toFixed(0)} polls/s`
  );
}

function methodsReport(
  ttlSeconds: number,
  refreshSeconds: number,
  node: MethodsOutcome,
  wasm: MethodsOutcome | { kind: 'skipped'; reason: string } | { kind: 'error'; message: string },
): { text: string; failed: boolean } {
  const rows: string[][] = [];
  const notes: string[] = [];
  let failed = false;
  const perPoll = (count: number, polls: number): string => (polls > 0 ? (count / polls).toFixed(4) : 'n/a');
  const ratio = (random: number, fifo: number): string => (fifo > 0 && Number.isFinite(random / fifo) ? `${(random / fifo).toFixed(0)}×` : 'n/a');
  const add = (host: string, outcome: MethodsOutcome | { kind: 'skipped'; reason: string } | { kind: 'error'; message: string }, collapses: boolean): void => {
    if ('kind' in outcome) {
      failed ||= outcome.kind === 'error';
      for (const method of ['fifo', 'random']) rows.push([host, method, '—', '—', '—', '—', '—', '—', outcome.kind === 'error' ? 'FAIL' : 'skipped']);
      notes.push(`${host}: ${outcome.kind === 'error' ? `FAILED: ${outcome.message}` : `skipped: ${outcome.reason}`}`);
      return;
    }
    const { fifo, random } = outcome;
    let fifoPerPoll: { http: number; redis: number } | undefined;
    if (fifo.kind === 'ran') {
      const r = fifo.result;
      const polls = r.poll.sent;
      const verdict = cachedVerdict(r, collapses);
      failed ||= verdict === 'fail';
      fifoPerPoll = polls > 0 ? { http: r.http / polls, redis: r.redis / polls } : undefined;
      const expiries = r.loadsPerExpiry.length;
      rows.push([
        host,
        `fifo, state_cache_seconds=${r.ttlSeconds}`,
        String(r.visitors),
        String(polls),
        `${r.http} · ${r.redis}`,
        `${perPoll(r.http, polls)} · ${perPoll(r.redis, polls)}`,
        `≈ ${expectedLoads(r).toFixed(0)} (${r.windowMs / 1000} s ÷ ${r.ttlSeconds} s, one POP)`,
        '1×',
        verdict === 'pass' ? 'PASS' : verdict === 'uncollapsed' ? `PASS at one load per expiry (${expiries} expiries: ${perPoll(expiries, polls)} per poll)` : 'FAIL',
      ]);
      notes.push(
        `${host}, fifo: ${pollWindowNote(r)}; ${expiries} cache expiries, ${(r.http / Math.max(1, expiries)).toFixed(2)} loads per expiry` +
          (collapses ? '.' : ' (the stand-in does not collapse concurrent misses; Fastly does: one load per expiry there).'),
      );
    } else {
      failed = true;
      rows.push([host, 'fifo', '—', '—', '—', '—', '—', '—', 'FAIL']);
      notes.push(`${host}, fifo: FAILED: ${fifo.message}`);
    }
    if (random.kind === 'ran') {
      const r = random.result;
      const polls = r.poll.sent;
      const ok = randomVerdict(r);
      failed ||= !ok;
      rows.push([
        host,
        'random',
        String(r.visitors),
        String(polls),
        `${r.http} · ${r.redis}`,
        `${perPoll(r.http, polls)} · ${perPoll(r.redis, polls)}`,
        `= polls (${polls}): one draw each`,
        fifoPerPoll === undefined || polls === 0 ? 'n/a' : `${ratio(r.http / polls, fifoPerPoll.http)} · ${ratio(r.redis / polls, fifoPerPoll.redis)}`,
        ok ? 'PASS (one per poll)' : 'FAIL',
      ]);
      notes.push(`${host}, random: ${pollWindowNote(r)}.`);
    } else {
      failed = true;
      rows.push([host, 'random', '—', '—', '—', '—', '—', '—', 'FAIL']);
      notes.push(`${host}, random: FAILED: ${random.message}`);
    }
  };
  add('node (one POP)', node, true);
  add('wasm on the Compute host (one POP)', wasm, false);
  const text = [
    `### Store commands per waiting poll: FIFO with the per-POP cache vs random (${METHODS_WINDOW_MS / 1000} s of waiting visitors polling every ${refreshSeconds} s; nobody admitted)`,
    '',
    table(
      ['host', 'queue_method', 'visitors', 'polls', 'store commands (HTTP · Redis)', 'commands per poll (HTTP · Redis)', 'expected', 'per poll vs FIFO (HTTP · Redis)', 'verdict'],
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      rows,
    ),
    '',
    `The same number of fresh waiting visitors (each with the cookie of its own real join) poll for the same window, one method after ` +
      `the other on each kind of host: fifo on the cached pass's host (${describeSettings(CACHED_ROOM.overrides)}; ` +
      `state_cache_seconds at its default, ${ttlSeconds} s), random on a host of its own (${describeSettings(RANDOM_ROOM.overrides)}). ` +
      'Counted as in the cached pass (HTTP requests that reached the bridge · script commands Redis executed, from the window\'s start to ' +
      'its last answer). FIFO: one load per cache lifetime serves every poll in the POP, so its cost per poll falls as the crowd grows ' +
      '(≈ refresh_seconds ÷ (lifetime × visitors)); random: a visitor\'s presence in the draw is its own, so every poll is a store call, ' +
      'whatever the crowd. Verdict: fifo as in the cached pass; random PASS when both counts equal the polls sent exactly.',
    ...notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
  return { text, failed };
}


export function methodsPass(): Pass {
  const outcomes: Partial<Record<ArmName, MethodsOutcome>> = {};
  let ttlSeconds = NaN;
  let refreshSeconds = NaN;
  return {
    name: 'methods',
    async run(arm: Arm) {
      const fifoConfig = arm.config(CACHED_ROOM);
      const randomConfig = arm.config(RANDOM_ROOM);
      if (randomConfig.queueMethod !== 'random') throw new Error(`the random room's queue_method is ${randomConfig.queueMethod}`);
      if (fifoConfig.queueMethod !== 'fifo' || fifoConfig.stateCacheSeconds < 1) {
        throw new Error(`the cached room is not FIFO with the cache on (${fifoConfig.queueMethod}, state_cache_seconds=${fifoConfig.stateCacheSeconds})`);
      }
      ttlSeconds = fifoConfig.stateCacheSeconds;
      refreshSeconds = fifoConfig.refreshSeconds;
      const visitors = METHODS_VISITORS[arm.name];
      const fifo = await pollPass(arm, { pass: 'methods pass, fifo', label: 'fifo', room: CACHED_ROOM, windowMs: METHODS_WINDOW_MS, visitors });
      const random = await pollPass(arm, { pass: 'methods pass, random', label: 'random', room: RANDOM_ROOM, windowMs: METHODS_WINDOW_MS, visitors });
      outcomes[arm.name] = { fifo, random };
    },
    report(wasm: WasmStatus) {
      const node = outcomes.node ?? { fifo: { kind: 'error', message: 'it did not run' }, random: { kind: 'error', message: 'it did not run' } };
      const wasmSide = outcomes.wasm ?? (wasm.kind === 'skipped' ? wasm : { kind: 'error' as const, message: 'the wasm arm failed before it' });
      const report = methodsReport(ttlSeconds, refreshSeconds, node, wasmSide);
      return {
        text: report.text,
        failures: report.failed
          ? ['the queueing-methods pass failed, had errors or admissions, FIFO cost too much per poll, or random did not cost exactly one store command per poll']
          : [],
        billed: (['node', 'wasm'] as const).flatMap((arm) => [
          ...pollWindowBilled('methods', arm, `fifo, state cache ${ttlSeconds} s`, outcomes[arm]?.fifo),
          // Random: a join behind undrawn tickets is its number and its entry in the draw (ZADD), 4; a
          // waiting poll is a state load of its own (the cache cannot answer a presence), ≤ 4.
          ...pollWindowBilled('methods', arm, `random, state cache ${ttlSeconds} s`, outcomes[arm]?.random, { join: 4, poll: 4 }),
        ]),
      };
    },
  };
}
