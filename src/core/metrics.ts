/**
 * The figures an on-call person watches, in the OpenMetrics text format, for a scraper
 * (`GET <prefix>api/metrics` with the origin's bearer token, or `admin/metrics` with the console's
 * password): the queue's figures from one stats call (its latency is the store probe), the new
 * tickets refused in the last minute by reason and the store errors in the last minute, both
 * counted where the request is served (per POP on Fastly, in Edge Rate Limiting; the Node host is
 * one POP). When the store does not answer, the answer is still a 200 with `wr_store_up 0` and the
 * per-POP counts, so an alert can fire on it.
 */
import { tallyStoreError } from './edge-tally';
import { REFUSAL_REASONS, WAIT_BOUNDS_MS, type FailureLimiter, type QueueStats, type SaleTotals } from './ports';
import { refusedTicketsLastMinute } from './ticket-limit';
import { isCapacityMode, waitingOf } from './types';

/** The limiter key under which a queue's failed store calls are counted (per POP, last minute). */
function storeErrorsKey(queue: string): string {
  return `store_error|${queue}`;
}

/** Counts one failed store call for the metrics; a limiter that fails counts nothing. */
export async function countStoreError(limiter: FailureLimiter | undefined, queue: string): Promise<void> {
  // And in the sale's record, carried by this instance's next join (see edge-tally.ts).
  tallyStoreError(queue);
  if (limiter === undefined) return;
  await limiter.countFailure(storeErrorsKey(queue), 60).catch(() => 0);
}

export interface MetricsInput {
  readonly queue: string;
  readonly method: 'fifo' | 'random';
  /** The stats call's answer and how long it took, or why it failed. */
  readonly stats: { readonly ok: true; readonly value: QueueStats; readonly ms: number } | { readonly ok: false };
  readonly limiter: FailureLimiter | undefined;
  /** Ticket blocks, as the instance answering this scrape counted them (see edge-blocks.ts); undefined: it keeps none. */
  readonly blocks?: { readonly handed: number; readonly holes: number; readonly blocks: number } | undefined;
}

/** Label values are quoted; a queue name is `[a-z0-9_-]`, but escaping costs nothing. */
const label = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/** A bucket bound as OpenMetrics wants it: a canonical float (`5.0`, `7200.0`). */
const canonical = (seconds: number): string => (Number.isInteger(seconds) ? `${seconds}.0` : String(seconds));

/**
 * The sale's counters and the wait histogram, from the totals the same stats call read (see
 * SaleTotals): they only grow while the store keeps the queue's state, and start again from zero
 * if it loses it (which a scraper's rate() takes as a counter reset).
 */
function totalsMetrics(lines: string[], q: string, tail: number, t: SaleTotals): void {
  const counter = (name: string, help: string, samples: readonly [string, number][]): void => {
    lines.push(`# TYPE ${name} counter`, `# HELP ${name} ${help}`);
    for (const [labels, value] of samples) lines.push(`${name}_total{${labels}} ${value}`);
  };
  counter('wr_tickets_issued', 'Tickets handed out (the tail).', [[q, tail]]);
  counter('wr_admitted', 'Visitors let in (claims, walk-ins, collected draws).', [[q, t.admitted]]);
  counter('wr_lapsed_calls', 'Calls that lapsed unclaimed: the holder never came back in time.', [[q, t.lapsed]]);
  counter('wr_tickets_refused', 'New tickets refused at the edge, by reason, as the serving instances carried them into the store.', REFUSAL_REASONS.map((r) => [`${q},reason="${r}"`, t.refused[r]]));
  counter('wr_store_errors', 'Store calls that failed or timed out, as the serving instances carried them into the store.', [[q, t.storeErrors]]);
  counter('wr_switch_changes', 'Changes of the emergency switch.', [[q, t.switchChanges]]);
  lines.push('# TYPE wr_wait_seconds histogram', '# HELP wr_wait_seconds How long the visitors let in waited, from their ticket to their admission.');
  let seen = 0;
  WAIT_BOUNDS_MS.forEach((bound, i) => {
    seen += t.waitBuckets[i] ?? 0;
    lines.push(`wr_wait_seconds_bucket{${q},le="${canonical(bound / 1000)}"} ${seen}`);
  });
  seen += t.waitBuckets[WAIT_BOUNDS_MS.length] ?? 0;
  lines.push(`wr_wait_seconds_bucket{${q},le="+Inf"} ${seen}`, `wr_wait_seconds_count{${q}} ${seen}`, `wr_wait_seconds_sum{${q}} ${t.waitSumMs / 1000}`);
}

/** The exposition, ending with `# EOF`. */
export async function metricsText(input: MetricsInput): Promise<string> {
  const q = `queue="${label(input.queue)}"`;
  const lines: string[] = [];
  const metric = (name: string, type: 'gauge', help: string, samples: readonly [string, number][]): void => {
    lines.push(`# TYPE ${name} ${type}`, `# HELP ${name} ${help}`);
    for (const [labels, value] of samples) lines.push(`${name}{${labels}} ${Number.isFinite(value) ? value : 'NaN'}`);
  };
  metric('wr_store_up', 'gauge', 'Whether the store answered this scrape (1) or not (0).', [[q, input.stats.ok ? 1 : 0]]);
  if (input.stats.ok) {
    const s = input.stats.value;
    const waiting = waitingOf(s, input.method === 'random');
    metric('wr_store_probe_seconds', 'gauge', 'How long the store took to answer this scrape.', [[q, input.stats.ms / 1000]]);
    metric('wr_waiting', 'gauge', 'Visitors waiting (FIFO: tickets not yet called, less the holes of ticket blocks; random: present in the draw).', [[q, waiting]]);
    // Rate FIFO holds no slots: there is no count of active visitors to report.
    if (isCapacityMode(s) || input.method === 'random') metric('wr_active', 'gauge', 'Visitors holding a slot (capacity mode).', [[q, s.active]]);
    metric('wr_admitted_last_minute', 'gauge', 'Visitors let in during the last minute.', [[q, s.admittedLastMinute]]);
    metric('wr_admitted_last_5_minutes', 'gauge', 'Visitors let in during the last five minutes.', [[q, s.admittedLast5Minutes]]);
    metric('wr_tail', 'gauge', 'Tickets handed out.', [[q, s.tail]]);
    metric('wr_cursor', 'gauge', 'Tickets called.', [[q, s.cursor]]);
    metric('wr_paused', 'gauge', 'Whether automatic admission is paused.', [[q, s.paused ? 1 : 0]]);
    metric('wr_switch', 'gauge', 'The emergency switch in force (1 for the state that holds).', (['normal', 'open', 'hold'] as const).map((state) => [`${q},state="${state}"`, (s.switch ?? 'normal') === state ? 1 : 0]));
    // 0 while the state was never lost; else when, so an alert can fire on a change of it.
    metric('wr_state_lost_timestamp_seconds', 'gauge', 'When the store last lost this queue\'s state and a POP restored its controls (0: never).', [[q, s.lostState === undefined ? 0 : Math.floor(s.lostState.atMs / 1000)]]);
    metric('wr_state_restored', 'gauge', 'The controls restored after the last lost state (1 for each that was).', (['open', 'hold', 'paused'] as const).map((c) => [`${q},control="${c}"`, s.lostState?.restored.includes(c) === true ? 1 : 0]));
    if (s.totals !== undefined) totalsMetrics(lines, q, s.tail, s.totals);
  }
  const refused = await refusedTicketsLastMinute(input.limiter, input.queue);
  metric(
    'wr_tickets_refused_last_minute',
    'gauge',
    'New tickets refused in the last minute where this is served, by reason.',
    Object.entries(refused).map(([reason, n]) => [`${q},reason="${reason}"`, n ?? Number.NaN]),
  );
  let errors = Number.NaN;
  if (input.limiter !== undefined) {
    try {
      errors = await input.limiter.countOf(storeErrorsKey(input.queue), 60);
    } catch {
      errors = Number.NaN;
    }
  }
  metric('wr_store_errors_last_minute', 'gauge', 'Store calls that failed or timed out in the last minute where this is served.', [[q, errors]]);
  if (input.blocks !== undefined) {
    // Counted in the memory of the instance that answers: the Node host's are all of them; on
    // Fastly, one sandbox's since it started (a scrape reaches one), a sample, not a total.
    const b = input.blocks;
    for (const [name, help, value] of [
      ['wr_block_tickets_handed', 'Tickets handed out of ticket blocks with no store call, by the instance that answered this scrape.', b.handed],
      ['wr_block_holes_reported', 'Numbers of expired blocks reported to the store as holes, by the instance that answered this scrape.', b.holes],
      ['wr_ticket_blocks_taken', 'Block joins answered with a block, by the instance that answered this scrape.', b.blocks],
    ] as const) {
      lines.push(`# TYPE ${name} counter`, `# HELP ${name} ${help}`, `${name}_total{${q}} ${value}`);
    }
  }
  lines.push('# EOF');
  return `${lines.join('\n')}\n`;
}
