/**
 * The figures an on-call person watches, in the OpenMetrics text format, for a scraper
 * (`GET <prefix>api/metrics` with the origin's bearer token, or `admin/metrics` with the console's
 * password): the queue's figures from one stats call (its latency is the store probe), the new
 * tickets refused in the last minute by reason and the store errors in the last minute, both
 * counted where the request is served (per POP on Fastly, in Edge Rate Limiting; the Node host is
 * one POP). When the store does not answer, the answer is still a 200 with `wr_store_up 0` and the
 * per-POP counts, so an alert can fire on it.
 */
import type { FailureLimiter, QueueStats } from './ports';
import { refusedTicketsLastMinute } from './ticket-limit';
import { isCapacityMode } from './types';

/** The limiter key under which a queue's failed store calls are counted (per POP, last minute). */
function storeErrorsKey(queue: string): string {
  return `store_error|${queue}`;
}

/** Counts one failed store call for the metrics; a limiter that fails counts nothing. */
export async function countStoreError(limiter: FailureLimiter | undefined, queue: string): Promise<void> {
  if (limiter === undefined) return;
  await limiter.countFailure(storeErrorsKey(queue), 60).catch(() => 0);
}

export interface MetricsInput {
  readonly queue: string;
  readonly method: 'fifo' | 'random';
  /** The stats call's answer and how long it took, or why it failed. */
  readonly stats: { readonly ok: true; readonly value: QueueStats; readonly ms: number } | { readonly ok: false };
  readonly limiter: FailureLimiter | undefined;
}

/** Label values are quoted; a queue name is `[a-z0-9_-]`, but escaping costs nothing. */
const label = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

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
    const waiting = input.method === 'random' ? s.waiting : Math.max(0, s.tail - s.cursor);
    metric('wr_store_probe_seconds', 'gauge', 'How long the store took to answer this scrape.', [[q, input.stats.ms / 1000]]);
    metric('wr_waiting', 'gauge', 'Visitors waiting (FIFO: tickets not yet called; random: present in the draw).', [[q, waiting]]);
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
  lines.push('# EOF');
  return `${lines.join('\n')}\n`;
}
