/**
 * What the admin console shows of a queue: its figures as text (the same strings in the page and
 * in the live JSON its script polls) and a chart of the last hour drawn as SVG from the per-minute
 * history the store keeps, ending at the figures the tiles show. The chart is built from numbers
 * only, so it is safe as markup.
 */
import type { Config } from './config';
import { estimateWait, formatDuration } from './estimate';
import { escapeHtml, formatCount } from './pages';
import type { HistoryPoint, QueueStats } from './ports';
import type { RefusalReason } from './ticket-limit';
import { eventPhase, isCapacityMode, type AdminFigures } from './types';

export type { AdminFigures } from './types';

const utc = (ms: number): string => `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/** Waiting visitors: tickets not yet called (FIFO), or those present in the draw (random). */
export function waitingCount(stats: QueueStats, config: Readonly<Config>): number {
  return config.queueMethod === 'random' ? stats.waiting : Math.max(0, stats.tail - stats.cursor);
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
  const estimate = estimateWait(waiting, stats, config);
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
    avg_wait: stats.avgWaitSeconds === null ? '–' : formatDuration(stats.avgWaitSeconds),
    refused: refusedText(config, refused),
    est_wait: estimate.seconds === null ? '–' : `${formatDuration(estimate.seconds)} (${estimate.basis})`,
    tail: formatCount(stats.tail),
    cursor: formatCount(stats.cursor),
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
      : config.admitPerPeriod > 0
        ? `rate: ${formatCount(config.admitPerPeriod)} every ${config.admitPeriodSeconds} s`
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
): { figures: AdminFigures; chart: string } {
  const latest = { waiting: waitingCount(stats, config), admittedLastMinute: stats.admittedLastMinute };
  return { figures: adminFigures(stats, config, nowMs, refused), chart: renderChart(stats.history ?? [], nowMs, latest) };
}

/** The figures the chart ends at: those of the tiles, read now. */
export interface ChartLatest {
  readonly waiting: number;
  readonly admittedLastMinute: number;
}

const WIDTH = 640;
const HEIGHT = 180;
const PAD = { left: 44, right: 12, top: 14, bottom: 26 };

/** A rounded-up scale maximum: 2, 5 or 10 × a power of ten (at least 2, so its middle is whole). */
function niceMax(value: number): number {
  if (value <= 2) return 2;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/**
 * Queue length and admissions a minute over the last hour: two lines over a shared time axis,
 * each on its own scale (noted in the legend), with a text summary for screen readers. The lines
 * run through the recorded minutes and end at `latest`, the figures now (drawn at "now", a dot on
 * each line that carries its value), so the chart's last point is what the tiles say.
 */
export function renderChart(history: readonly HistoryPoint[], nowMs: number, latest: ChartLatest): string {
  const from = nowMs - 3_600_000;
  const recorded = history.filter((p) => p.atMs >= from - 60_000 && p.atMs <= nowMs);
  const shown: readonly Pick<HistoryPoint, 'atMs' | 'waiting' | 'admittedLastMinute'>[] = [...recorded, { atMs: nowMs, ...latest }];
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (ms: number): number => PAD.left + Math.max(0, Math.min(1, (ms - from) / 3_600_000)) * plotW;
  const maxWaiting = niceMax(Math.max(0, ...shown.map((p) => p.waiting)));
  const maxAdmitted = niceMax(Math.max(0, ...shown.map((p) => p.admittedLastMinute)));
  const y = (value: number, max: number): string => (PAD.top + plotH - (value / max) * plotH).toFixed(1);
  const line = (values: readonly number[], max: number): string => shown.map((p, i) => `${x(p.atMs).toFixed(1)},${y(values[i]!, max)}`).join(' ');
  const dot = (series: string, value: number, max: number, title: string): string =>
    `<circle class="${series}" data-value="${value}" cx="${x(nowMs).toFixed(1)}" cy="${y(value, max)}" r="3.5"><title>${escapeHtml(title)}</title></circle>`;
  const waitingNow = `${formatCount(latest.waiting)} waiting now`;
  const admittedNow = `${formatCount(latest.admittedLastMinute)} let in during the last minute`;
  const summary =
    recorded.length === 0
      ? `No figures recorded in the last hour yet. Now: ${waitingNow}; ${admittedNow}.`
      : `Last hour, one point a minute, then now: ${waitingNow} (most ${formatCount(Math.max(...shown.map((p) => p.waiting)))}); ` +
        `${admittedNow} (most ${formatCount(Math.max(...shown.map((p) => p.admittedLastMinute)))}).`;
  const grid = [0, 0.5, 1]
    .map((f) => {
      const gy = y(f, 1);
      return `<line x1="${PAD.left}" x2="${WIDTH - PAD.right}" y1="${gy}" y2="${gy}" class="grid"/>` +
        `<text x="${PAD.left - 6}" y="${gy}" class="axis" text-anchor="end" dominant-baseline="middle">${escapeHtml(formatCount(f * maxWaiting))}</text>`;
    })
    .join('');
  const ticks = [60, 45, 30, 15, 0]
    .map((m) => `<text x="${x(nowMs - m * 60_000).toFixed(1)}" y="${HEIGHT - 8}" class="axis" text-anchor="middle">${m === 0 ? 'now' : `−${m} min`}</text>`)
    .join('');
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
    `<title id="chart-title">Queue length and admissions, last hour</title><desc id="chart-desc">${escapeHtml(summary)}</desc>` +
    `${grid}${ticks}${series}</svg>` +
    `<p class="legend"><span class="key waiting"></span> waiting (scale 0–${escapeHtml(formatCount(maxWaiting))}) ` +
    `<span class="key admitted"></span> let in per minute (scale 0–${escapeHtml(formatCount(maxAdmitted))})</p>`
  );
}
