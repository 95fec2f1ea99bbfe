/**
 * The admin console's page, rendered at the edge from templates/admin.html: the emergency strip and
 * the outage banner on top, the figures and the chart beside the controls. Every select is rendered
 * with the state in force selected; the limits shown are those of the mode in force. Every value is
 * HTML-escaped on the way in (see renderTemplate).
 */
import ADMIN_HTML from '../../templates/admin.html';
import { escapeHtml, pauseControl, renderQueueList, renderTemplate, SafeHtml } from './pages';
import type { QueueOverview, QueueStats } from './ports';
import type { AdminFigures } from './types';

/** What the console page shows: the queue, its figures and chart, and what its forms need. */
export interface ConsolePageView {
  readonly queue: string;
  readonly stats: QueueStats;
  readonly figures: AdminFigures;
  /** The last hour's chart, built by renderChart from numbers only. */
  readonly chart: string;
  readonly csrf: string;
  /** The admit form's idempotency key for its first submission (the page's script makes one per submission after that). */
  readonly admitKey: string;
  /** Where the forms post: `<prefix>admin/`, and the query naming the queue (with several). */
  readonly actionPrefix: string;
  readonly actionQuery: string;
  /** What the page's script polls for live figures, and how often. */
  readonly liveUrl: string;
  readonly liveSeconds: number;
  /** With several queues: each queue's figures, listed with links to its page. */
  readonly queues: readonly QueueOverview[] | undefined;
  readonly assetPrefix: string;
  readonly maxAdmit: number;
  readonly notice: string;
  readonly asOf: string;
  /** Seconds until a change reaches every edge location (the per-POP cache lifetime). */
  readonly propagationSeconds: number;
  /** The notice is a warning (an admit refused under hold), not a done. */
  readonly noticeIsWarning?: boolean | undefined;
  /** The length of rate mode's period, for the labels. @default 60 */
  readonly periodSeconds?: number | undefined;
  /** Adaptive admission as configured (the select's "as configured" says which). @default 'off' */
  readonly adaptiveConfigured?: 'off' | 'standby' | 'on' | undefined;
  /** The outage banner's texts, the store-down page's own (see store-down-text.ts). */
  readonly storeDown?: { readonly title: string; readonly kept: string; readonly visitors: string; readonly waits: string } | undefined;
}

/**
 * Whether the operator's pause is what holds admission: the pause button resumes only that. Under
 * hold (which reports paused too) or a recovery window, "Resume admission" would lift nothing.
 */
export function pausedByOperator(stats: Pick<QueueStats, 'paused' | 'switch' | 'recovering'>): boolean {
  return stats.paused && stats.switch !== 'hold' && stats.recovering !== true;
}

/** `<option>`s with the one in force selected, so that a select shows the state, not its first choice. */
function options(choices: readonly (readonly [string, string])[], selected: string): SafeHtml {
  return new SafeHtml(choices.map(([value, label]) => `<option value="${escapeHtml(value)}"${value === selected ? ' selected' : ''}>${escapeHtml(label)}</option>`).join(''));
}

/** The console's mode from the thresholds in force: capacity, rate or by hand (see QueueMode in admin.ts). */
export function consoleMode(stats: Pick<QueueStats, 'maxActive' | 'maxNewPerMinute' | 'admitPerPeriod'>): 'capacity' | 'rate' | 'manual' {
  return stats.maxActive > 0 || stats.maxNewPerMinute > 0 ? 'capacity' : (stats.admitPerPeriod ?? 0) > 0 ? 'rate' : 'manual';
}

/** The adaptive select's value in force: on or off when the console decided, else as configured. */
export function adaptiveInForce(stats: Pick<QueueStats, 'adaptive'>): 'on' | 'off' | 'config' {
  const a = stats.adaptive;
  return a === undefined || a.source !== 'console' ? 'config' : a.enabled ? 'on' : 'off';
}

export function renderConsolePage(view: ConsolePageView): string {
  const { stats, figures } = view;
  const mode = consoleMode(stats);
  const hidden = (shown: boolean): SafeHtml => new SafeHtml(shown ? '' : ' hidden');
  const configured = view.adaptiveConfigured ?? 'off';
  const down = view.storeDown ?? { title: '', kept: '', visitors: '', waits: '' };
  return renderTemplate(ADMIN_HTML, {
    queue: view.queue,
    notice: view.notice,
    notice_class: new SafeHtml(view.noticeIsWarning === true ? ' data-warning' : ''),
    switch_value: stats.switch ?? 'normal',
    switch_options: options([['normal', 'normal'], ['open', 'open: everyone passes'], ['hold', 'hold: nobody new gets in']], stats.switch ?? 'normal'),
    mode_value: mode,
    mode_name: { capacity: 'capacity', rate: 'rate', manual: 'by hand' }[mode],
    mode_options: options([['rate', 'rate'], ['capacity', 'capacity'], ['manual', 'by hand']], mode),
    rate_hidden: hidden(mode === 'rate'),
    capacity_hidden: hidden(mode === 'capacity'),
    manual_hidden: hidden(mode === 'manual'),
    period_seconds: view.periodSeconds ?? 60,
    admit_per_period: String(stats.admitPerPeriod ?? 0),
    adaptive_value: adaptiveInForce(stats),
    adaptive_options: options([['on', 'on'], ['off', 'off'], ['config', `as configured (${configured})`]], adaptiveInForce(stats)),
    store_down_title: down.title,
    store_down_kept: down.kept,
    store_down_visitors: down.visitors,
    store_down_waits: down.waits,
    ...figures,
    // A tile whose figure is words (rate mode's "not counted") in the text size, as the others.
    active_text: new SafeHtml(/^[0-9]/.test(figures.active) ? '' : ' class="text"'),
    chart: new SafeHtml(view.chart),
    live_url: view.liveUrl,
    live_seconds: view.liveSeconds,
    ...pauseControl(pausedByOperator(stats)),
    max_active: stats.maxActive === 0 ? 'no limit' : String(stats.maxActive),
    max_new_per_minute: stats.maxNewPerMinute === 0 ? 'no limit' : String(stats.maxNewPerMinute),
    csrf: view.csrf,
    admit_key: view.admitKey,
    epoch: String(stats.epoch),
    action_prefix: view.actionPrefix,
    action_query: view.actionQuery,
    queues: new SafeHtml(
      view.queues === undefined ? '' : `<nav aria-label="Queues" id="queues">${renderQueueList(view.queues, view.queue, view.actionPrefix.replace(/admin\/$/, 'admin'))}</nav>`,
    ),
    asset_prefix: view.assetPrefix,
    max_admit: view.maxAdmit,
    as_of: view.asOf,
    propagation:
      view.propagationSeconds === 0
        ? 'Changes reach waiting visitors on their next refresh.'
        : `Changes reach every edge location within ${view.propagationSeconds} ${view.propagationSeconds === 1 ? 'second' : 'seconds'} (the per-POP cache lifetime), then waiting visitors on their next refresh.`,
  });
}
