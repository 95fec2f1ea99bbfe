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
import type { Role } from './accounts';
import type { AuditEntry } from './audit';

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
  /** Who is signed in: a viewer's page has every control off. None: no account line (tests of the page alone). */
  readonly account?: { readonly name: string; readonly role: Role } | undefined;
  /** Where the sign-out link goes. */
  readonly signOutUrl?: string | undefined;
  /** The newest changes, newest first; undefined when the store did not answer them. */
  readonly audit?: readonly AuditEntry[] | undefined;
}

const auditTime = (ms: number): string => new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';

/** The "Recent changes" list: when, who (and role), from where, what. Every value escaped. */
export function renderAuditList(entries: readonly AuditEntry[] | undefined): string {
  if (entries === undefined) return '<p class="small">The changes could not be read from the store just now.</p>';
  if (entries.length === 0) return '<p class="small">No changes recorded yet.</p>';
  const items = entries.map(
    (e) =>
      `<li data-action="${escapeHtml(e.action)}"><time datetime="${escapeHtml(new Date(e.atMs).toISOString())}">${escapeHtml(auditTime(e.atMs))}</time> · <strong data-actor>${escapeHtml(e.actor)}</strong> (${escapeHtml(e.role)}) from <code>${escapeHtml(e.client)}</code>: <span data-change>${escapeHtml(e.change)}</span></li>`,
  );
  return `<ol class="audit-list">${items.join('')}</ol>`;
}

/** A viewer's page: every control rendered off, so nothing looks as if it could be used. */
function readOnly(html: string): string {
  return html.replace(/<(button|select|textarea|input)\b(?![^>]*type="hidden")/g, '<$1 disabled');
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
  const viewer = view.account?.role === 'viewer';
  const accountBar =
    view.account === undefined
      ? ''
      : `<p class="small account" id="account">Signed in as <strong>${escapeHtml(view.account.name)}</strong> (${escapeHtml(view.account.role)})${
          view.signOutUrl === undefined ? '' : ` · <a href="${escapeHtml(view.signOutUrl)}" id="sign-out">Sign out</a>`
        }</p>${viewer ? '<p class="notice" role="note" id="read-only">This account is a viewer: it sees everything and changes nothing, so the controls are off.</p>' : ''}`;
  const html = renderTemplate(ADMIN_HTML, {
    account_bar: new SafeHtml(accountBar),
    audit: new SafeHtml(renderAuditList(view.audit)),
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
  return viewer ? readOnly(html) : html;
}

/**
 * The start of a page of the console's own (signed out, store down, the sale's report) up to its
 * `<body>`: not indexed, the console's style sheet; `title` is escaped here, `extra` (more of the
 * head) is the caller's markup.
 */
export function adminHead(prefix: string, title: string, extra = ''): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="${escapeHtml(prefix)}assets/style.css">
${extra}</head>`;
}
