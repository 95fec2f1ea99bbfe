/**
 * What the admin console shows of a queue: its figures as text (the same strings in the page and
 * in the live JSON its script polls) and a chart of the sale drawn as SVG from the per-minute
 * history the store keeps (its last hour), ending at the figures the tiles show. The chart is built from numbers
 * only, so it is safe as markup.
 */
import type { Config } from './config';
import { estimateWait, formatDuration } from './estimate';
import { escapeHtml, formatCount } from './pages';
import type { HistoryPoint, QueueStats } from './ports';
import type { RefusalReason } from './ticket-limit';
import { eventPhase, isCapacityMode, waitingOf, type AdminFigures } from './types';

export type { AdminFigures } from './types';

const utc = (ms: number): string => `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/** Waiting visitors: tickets not yet called that somebody holds (FIFO), or those present in the draw (random). */
export function waitingCount(stats: QueueStats, config: Readonly<Config>): number {
  return waitingOf(stats, config.queueMethod === 'random');
}

/** The console's line on refused tickets: what each gate in force turned away in the last minute here. */
function refusedText(config: Readonly<Config>, refused: Readonly<Record<RefusalReason, number | null>> | undefined): string {
  const count = (n: number | null | undefined): string => (n === null || n === undefined ? '–' : formatCount(n));
  const parts: string[] = [];
  if (config.ticketLimit > 0) parts.push(`${count(refused?.ticket_limit)} over the per-client limit`);
  if (config.powDifficulty > 0) parts.push(`${count(refused?.proof_failed)} with a failed proof of work`, `${count(refused?.proof_missing)} sent a challenge`);
  if (config.challengeProvider !== 'none') {
    parts.push(`${count(refused?.challenge_failed)} with a token ${config.challengeProvider} refused`, `${count(refused?.challenge_missing)} sent its widget`);
  }
  return parts.length === 0 ? 'no gate set' : parts.join(', ');
}

export function adminFigures(stats: QueueStats, config: Readonly<Config>, nowMs: number, refused?: Readonly<Record<RefusalReason, number | null>>): AdminFigures {
  const waiting = waitingCount(stats, config);
  // The period quota in force (a runtime change, else the configured one).
  const quota = stats.admitPerPeriod ?? config.admitPerPeriod;
  const estimate = estimateWait(waiting, stats, quota === config.admitPerPeriod ? config : { ...config, admitPerPeriod: quota });
  const measured = stats.avgWaitSeconds;
  const fromHistory = measured === null && config.queueMethod !== 'random' ? waitFromHistory(stats, nowMs) : null;
  const phase = eventPhase(config, nowMs);
  return {
    waiting: formatCount(waiting),
    // Rate mode holds no slots (an admitted visitor's token needs nothing from the store): it has no count to show.
    active:
      stats.maxActive > 0
        ? `${formatCount(stats.active)} of ${formatCount(stats.maxActive)}`
        : isCapacityMode(stats) || config.queueMethod === 'random'
          ? formatCount(stats.active)
          : 'not counted in rate mode',
    admitted_last_minute: formatCount(stats.admittedLastMinute),
    avg_wait:
      measured !== null
        ? formatDuration(measured)
        : fromHistory === null
          ? '–'
          : `${formatDuration(fromHistory.seconds)}${fromHistory.atLeast ? ' or more' : ''} (estimated)`,
    refused: refusedText(config, refused),
    est_wait: estimate.seconds === null ? '–' : `${formatDuration(estimate.seconds)} (${estimate.basis})`,
    tail: formatCount(stats.tail) + perDatabase(stats, 'tail'),
    cursor: formatCount(stats.cursor) + perDatabase(stats, 'cursor'),
    state:
      (stats.switch === 'open'
        ? 'switched open: everyone passes, nobody is queued'
        : stats.switch === 'hold'
          ? 'switched to hold: nobody new gets in'
          : stats.paused
            ? 'paused'
            : 'running') + lostStateText(stats, nowMs),
    mode: isCapacityMode(stats)
      ? `capacity: ${stats.maxActive > 0 ? `${formatCount(stats.maxActive)} at once` : 'no limit at once'}, ${stats.maxNewPerMinute > 0 ? `${formatCount(stats.maxNewPerMinute)} new a minute` : 'no limit a minute'}`
      : quota > 0
        ? `rate: ${formatCount(quota)} every ${config.admitPeriodSeconds} s`
        : 'by hand (admin and origin)',
    method: config.queueMethod === 'random' ? 'random draw among visitors still waiting' : 'first in, first out',
    adaptive: adaptiveText(stats, config, nowMs),
    event:
      config.eventStartMs === 0 && config.eventEndMs === 0
        ? 'none scheduled'
        : phase === 'before'
          ? `pre-queue until ${utc(config.eventStartMs)} (${config.eventOrder === 'shuffle' ? 'shuffled at the start' : 'arrival order'})`
          : phase === 'open'
            ? `open${config.eventEndMs > 0 ? ` until ${utc(config.eventEndMs)}` : ''}${stats.eventSize > 0 ? `; pre-queue of ${formatCount(stats.eventSize)} ${config.eventOrder === 'shuffle' ? 'shuffled' : 'kept in order'}` : ''}`
            : `ended at ${utc(config.eventEndMs)} (${config.eventAfter === 'pass' ? 'everyone goes through' : '"event over" page'})`,
  };
}

/**
 * The average wait of the visitors called in the last five minutes, where the store records no
 * waits (first in, first out without capacity: a called visitor's token needs nothing from the
 * store). Read from the per-minute history the panel already has: at each recorded minute of the
 * last five and now, the ticket at the cursor waited from when the tail reached it (interpolated
 * between the recorded minutes) until then; a cursor past the tail (called ahead: walk-ins) waited
 * nothing. When a
 * ticket was handed out before the oldest point, its wait is at least what is known (`atLeast`).
 * Null without a point in the last five minutes.
 */
export function waitFromHistory(stats: Pick<QueueStats, 'tail' | 'cursor' | 'history'>, nowMs: number): { seconds: number; atLeast: boolean } | null {
  const points = [...(stats.history ?? []).filter((p) => p.atMs <= nowMs), { atMs: nowMs, tail: stats.tail, cursor: stats.cursor }];
  // Nobody called yet: no wait to tell.
  const samples = points.filter((p) => p.atMs > nowMs - 300_000 && p.cursor > 0);
  if (samples.length === 0 || (stats.history ?? []).length === 0) return null;
  let atLeast = false;
  const handedOut = (ticket: number): number => {
    const i = points.findIndex((p) => p.tail >= ticket);
    const at = points[i]!;
    const before = points[i - 1];
    if (before === undefined) {
      atLeast = true;
      return at.atMs;
    }
    return before.atMs + ((ticket - before.tail) / Math.max(1, at.tail - before.tail)) * (at.atMs - before.atMs);
  };
  const waits = samples.map((p) => (p.cursor > p.tail ? 0 : Math.max(0, p.atMs - handedOut(p.cursor))));
  const seconds = Math.round(waits.reduce((a, b) => a + b, 0) / waits.length / 1000);
  // "Less than a minute or more" says nothing: a lower bound under a minute is no figure.
  return atLeast && seconds < 60 ? null : { seconds, atLeast };
}

/** How long the console mentions that the store lost its state: a day. */
const LOST_STATE_SHOWN_MS = 86_400_000;

/** The store lost the queue's state lately: when, and what a POP restored (see remembered-controls.ts). */
function lostStateText(stats: QueueStats, nowMs: number): string {
  const lost = stats.lostState;
  if (lost === undefined || nowMs - lost.atMs > LOST_STATE_SHOWN_MS) return '';
  const restored = lost.restored.length === 0 ? 'nothing to restore (it was running normally)' : `restored ${lost.restored.map((c) => (c === 'paused' ? 'the pause' : c)).join(' and ')}`;
  return ` (the store lost its state at ${utc(lost.atMs)}; ${restored})`;
}

const KNOB_TEXT = { admit_per_period: 'visitors a period', max_active: 'at once', max_new_per_minute: 'new a minute' } as const;
const REASON_TEXT = { errors: 'down: errors over target', slow: 'down: slow answers over target', healthy: 'up: healthy, people waiting', pinned: 'pinned by an operator', released: 'released by an operator' } as const;

/** Adaptive admission in words: its value and bounds, what its last step saw, its last move. */
export function adaptiveText(stats: QueueStats, config: Readonly<Config>, nowMs: number): string {
  const a = stats.adaptive;
  if (config.adaptiveAdmission === 'off' && (a === undefined || !a.enabled)) return 'off in the configuration (adaptive_admission = off)';
  if (a === undefined) return 'no report from the edge yet';
  const bounds = `${formatCount(a.min)} – ${formatCount(a.max)}`;
  if (!a.enabled) return `off${a.source === 'console' ? ' (switched off here)' : ''}; bounds ${bounds}`;
  const head = `${a.pinned ? 'pinned at' : 'learned'} ${formatCount(a.value)} ${KNOB_TEXT[a.knob]} (bounds ${bounds}${a.source === 'console' ? ', switched on here' : ''})`;
  const s = a.signals;
  const pct = (n: number) => (s === null || s.requests === 0 ? '0' : ((100 * n) / s.requests).toFixed(1));
  const saw = s === null ? 'no origin answers counted yet' : `${formatCount(s.requests)} origin answers from ${s.pops} ${s.pops === 1 ? 'POP' : 'POPs'} in the 10 s before ${utc(s.atMs)}: ${pct(s.errors)} % errors (target ${a.errorPercent} %), ${pct(s.slow)} % slow (target ${a.slowPercent} %)`;
  const last = a.moves.at(-1);
  const moved = last === undefined ? 'no move yet' : `last move ${formatCount(last.from)} → ${formatCount(last.to)}, ${REASON_TEXT[last.reason]}, ${Math.max(0, Math.round((nowMs - last.atMs) / 1000))} s ago`;
  return `${head}; ${saw}; ${moved}`;
}

/**
 * The tiles and the chart of one stats answer. The chart's latest point is the tiles' own figures
 * at `nowMs`: a minute's history point is the state its first writing run saw, up to a minute old
 * (older when nothing wrote since), so under a rush the chart ending there said "1,200 waiting now"
 * beside a tile saying 5,400.
 */
export function adminPanel(
  stats: QueueStats,
  config: Readonly<Config>,
  nowMs: number,
  refused?: Readonly<Record<RefusalReason, number | null>>,
  saleStartMs?: number,
): { figures: AdminFigures; chart: string } {
  const latest = { waiting: waitingCount(stats, config), admittedLastMinute: stats.admittedLastMinute };
  // The caller may know better (a sale with neither reset nor event began at its oldest recorded point).
  const saleStart = saleStartMs ?? saleStartOf(stats, config, nowMs);
  return { figures: adminFigures(stats, config, nowMs, refused), chart: renderChart(stats.history ?? [], nowMs, latest, saleStart) };
}

/** When the sale began: the last reset, or else the event's start (0: neither, the chart shows the last hour). */
export function saleStartOf(stats: Pick<QueueStats, 'epoch'>, config: Pick<Config, 'eventStartMs'>, nowMs: number): number {
  return stats.epoch > 0 ? stats.epoch : config.eventStartMs > 0 && config.eventStartMs < nowMs ? config.eventStartMs : 0;
}

/** The figures the chart ends at: those of the tiles, read now. */
export interface ChartLatest {
  readonly waiting: number;
  readonly admittedLastMinute: number;
}

const WIDTH = 640;
const HEIGHT = 180;
const PAD = { left: 44, right: 44, top: 14, bottom: 26 };
const HOUR_MS = 3_600_000;

/** A rounded-up scale maximum: 2, 5 or 10 × a power of ten (at least 2, so its middle is whole). */
function niceMax(value: number): number {
  if (value <= 2) return 2;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/** A scale's label: the middle of 0–5 is 2.5, not 2. */
const tick = (value: number): string => (Number.isInteger(value) ? formatCount(value) : value.toFixed(1));

/** `HH:MM` UTC. */
const clock = (ms: number): string => new Date(ms).toISOString().slice(11, 16);

/**
 * Queue length and admissions a minute over the whole sale: from `saleStartMs` (the last reset, or
 * the event's start) when that is more than an hour ago, else over the last hour. Two lines over a
 * shared time axis, each with its own scale on its own axis (waiting on the left, let in a minute on
 * the right, each labelled in its line's colour), and a text summary for screen readers. The store
 * keeps one point a minute for the last hour only: before that the chart says so over a shaded band,
 * and the waiting line is dashed from the start (nobody waits at a sale's start or just after a
 * reset) to the first recorded minute. The lines end at `latest`, the figures now (a dot on each
 * line that carries its value), so the chart's last point is what the tiles say.
 */
export function renderChart(history: readonly HistoryPoint[], nowMs: number, latest: ChartLatest, saleStartMs = 0): string {
  const hourAgo = nowMs - HOUR_MS;
  const from = saleStartMs > 0 && saleStartMs < hourAgo ? saleStartMs : hourAgo;
  const span = nowMs - from;
  // The points of the span shown: the last hour's, and before it what the caller read of the sale's
  // record (see olderPoints in admin.ts).
  const recorded = history.filter((p) => p.atMs >= Math.min(from, hourAgo) - 60_000 && p.atMs <= nowMs);
  const shown: readonly Pick<HistoryPoint, 'atMs' | 'waiting' | 'admittedLastMinute'>[] = [...recorded, { atMs: nowMs, ...latest }];
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (ms: number): number => PAD.left + Math.max(0, Math.min(1, (ms - from) / span)) * plotW;
  const maxWaiting = niceMax(Math.max(0, ...shown.map((p) => p.waiting)));
  const maxAdmitted = niceMax(Math.max(0, ...shown.map((p) => p.admittedLastMinute)));
  const y = (value: number, max: number): string => (PAD.top + plotH - (value / max) * plotH).toFixed(1);
  const line = (values: readonly number[], max: number): string => shown.map((p, i) => `${x(p.atMs).toFixed(1)},${y(values[i]!, max)}`).join(' ');
  const dot = (series: string, value: number, max: number, title: string): string =>
    `<circle class="${series}" data-value="${value}" cx="${x(nowMs).toFixed(1)}" cy="${y(value, max)}" r="3.5"><title>${escapeHtml(title)}</title></circle>`;
  const waitingNow = `${formatCount(latest.waiting)} waiting now`;
  const admittedNow = `${formatCount(latest.admittedLastMinute)} let in during the last minute`;
  const whole = from < hourAgo;
  const since = whole ? `Since the sale began at ${clock(from)} UTC (minutes before the first recorded point are shaded): ` : '';
  const summary =
    since +
    (recorded.length === 0
      ? `No figures recorded in the last hour yet. Now: ${waitingNow}; ${admittedNow}.`
      : `${whole ? 'One point a minute' : 'Last hour, one point a minute'}, then now: ${waitingNow} (most ${formatCount(Math.max(...shown.map((p) => p.waiting)))}); ` +
        `${admittedNow} (most ${formatCount(Math.max(...shown.map((p) => p.admittedLastMinute)))}).`);
  // One scale per axis: waiting's on the left, let in a minute's on the right, each in its colour.
  const grid = [0, 0.5, 1]
    .map((f) => {
      const gy = y(f, 1);
      return `<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${gy}" y2="${gy}" class="grid"/>` +
        `<text x="${PAD.left - 6}" y="${gy}" class="axis axis-waiting" text-anchor="end" dominant-baseline="middle">${escapeHtml(tick(f * maxWaiting))}</text>` +
        `<text x="${WIDTH - PAD.right + 6}" y="${gy}" class="axis axis-admitted" text-anchor="start" dominant-baseline="middle">${escapeHtml(tick(f * maxAdmitted))}</text>`;
    })
    .join('');
  const tickTimes = whole ? [0, 0.25, 0.5, 0.75].map((f) => from + f * span) : [60, 45, 30, 15].map((m) => nowMs - m * 60_000);
  const ticks =
    tickTimes.map((at) => `<text x="${x(at).toFixed(1)}" y="${HEIGHT - 8}" class="axis" text-anchor="middle">${whole ? clock(at) : `−${Math.round((nowMs - at) / 60_000)} min`}</text>`).join('') +
    `<text x="${x(nowMs).toFixed(1)}" y="${HEIGHT - 8}" class="axis" text-anchor="middle">now</text>`;
  // Before the recorded hour: a band that says nothing was kept, and the waiting line dashed from
  // the start (0 waiting) to the first recorded minute.
  const first = recorded[0] ?? { atMs: nowMs, ...latest };
  const unrecorded = whole
    ? (x(first.atMs) - PAD.left > 1 ? `<rect class="unrecorded" x="${PAD.left}" y="${PAD.top}" width="${(x(Math.max(from, first.atMs)) - PAD.left).toFixed(1)}" height="${plotH}"/>` : '') +
      (x(first.atMs) - PAD.left > 80 ? `<text x="${((PAD.left + x(first.atMs)) / 2).toFixed(1)}" y="${PAD.top + 12}" class="axis" text-anchor="middle">not recorded</text>` : '') +
      `<line class="waiting gap" x1="${x(from).toFixed(1)}" y1="${y(0, maxWaiting)}" x2="${x(first.atMs).toFixed(1)}" y2="${y(first.waiting, maxWaiting)}"/>`
    : '';
  const series =
    (recorded.length === 0
      ? `<text x="${WIDTH / 2}" y="${HEIGHT / 2}" class="axis" text-anchor="middle">No history yet: a point is recorded once a minute while the queue is used.</text>`
      : `<polyline class="waiting" points="${line(shown.map((p) => p.waiting), maxWaiting)}"/>` +
        `<polyline class="admitted" points="${line(shown.map((p) => p.admittedLastMinute), maxAdmitted)}"/>`) +
    // The figures now as a dot on each line, so that they show without any history too.
    dot('waiting', latest.waiting, maxWaiting, waitingNow) +
    dot('admitted', latest.admittedLastMinute, maxAdmitted, admittedNow);
  return (
    `<svg class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg">` +
    `<title id="chart-title">Queue length and admissions, ${whole ? `since ${clock(from)} UTC` : 'last hour'}</title><desc id="chart-desc">${escapeHtml(summary)}</desc>` +
    `${unrecorded}${grid}${ticks}${series}</svg>` +
    `<p class="legend"><span class="key waiting"></span> waiting (scale 0–${escapeHtml(formatCount(maxWaiting))}, left axis) ` +
    `<span class="key admitted"></span> let in per minute (scale 0–${escapeHtml(formatCount(maxAdmitted))}, right axis)</p>`
  );
}

/** Several databases: the figure of each, ` (12 + 9 in 2 databases)`; nothing with one. */
function perDatabase(stats: QueueStats, figure: 'tail' | 'cursor'): string {
  const each = stats.databases;
  if (each === undefined || each.length < 2) return '';
  return ` (${each.map((d) => formatCount(d[figure])).join(' + ')} in ${each.length} databases)`;
}
