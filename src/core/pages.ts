/**
 * Pages rendered at the edge from `templates/`. Every value is HTML-escaped on the way in, so a
 * queue name, a configured message or a number can never become markup.
 */
import ADMIN_HTML from '../../templates/admin.html';
import HOLDING_HTML from '../../templates/holding.html';
import LOGO_SVG from '../../templates/logo.svg';
import SESSION_JS from '../../templates/session.js';
import STYLE_CSS from '../../templates/style.css';
import { formatDuration } from './estimate';
import type { QueueStats } from './ports';

export interface Asset {
  readonly body: string;
  readonly contentType: string;
}

/** Files served under `<prefix>assets/`, from the edge, never from the origin. */
export const ASSETS: ReadonlyMap<string, Asset> = new Map([
  ['style.css', { body: STYLE_CSS, contentType: 'text/css; charset=utf-8' }],
  ['logo.svg', { body: LOGO_SVG, contentType: 'image/svg+xml' }],
  ['session.js', { body: SESSION_JS, contentType: 'text/javascript; charset=utf-8' }],
]);

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** Markup built by our own code from escaped parts, for a `{{{name}}}` slot. */
export class SafeHtml {
  constructor(readonly html: string) {}
}

/**
 * Fills `{{name}}` slots with escaped values, and `{{{name}}}` slots with SafeHtml only (so a
 * plain string can never reach the page unescaped). A slot without a value is a bug: it throws.
 */
export function renderTemplate(template: string, values: Readonly<Record<string, string | number | SafeHtml>>): string {
  return template.replace(/\{\{(\{?)\s*([a-z_]+)\s*\}?\}\}/g, (_, raw: string, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`template slot {{${name}}} has no value`);
    if (raw !== '') {
      if (!(value instanceof SafeHtml)) throw new Error(`template slot {{{${name}}}} takes markup built with SafeHtml`);
      return value.html;
    }
    return escapeHtml(value instanceof SafeHtml ? value.html : String(value));
  });
}

/** Digits in groups of three, without `Intl` (the Fastly engine has none). */
export function formatCount(value: number): string {
  return String(Math.trunc(value)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

export interface HoldingView {
  readonly title: string;
  readonly message: string;
  /** The visitor's ticket, when one could be taken. */
  readonly ticket: number | undefined;
  /** Visitors ahead; undefined when the store could not be asked. */
  readonly ahead: number | undefined;
  /** The estimated wait in words (empty when there is none to give). */
  readonly estimate: string;
  readonly refreshSeconds: number;
  readonly assetPrefix: string;
}

export function renderHoldingPage(view: HoldingView): string {
  const known = view.ahead !== undefined;
  const ahead = view.ahead ?? 0;
  return renderTemplate(HOLDING_HTML, {
    title: view.title,
    message: view.message,
    refresh_seconds: view.refreshSeconds,
    asset_prefix: view.assetPrefix,
    place_label: known ? 'Your place in line' : 'We are checking your place in line',
    place: known ? formatCount(ahead + 1) : '…',
    ahead_text: !known
      ? 'Our queue service is slow to answer; you keep your place.'
      : ahead === 0
        ? 'You are next.'
        : ahead === 1
          ? '1 person is ahead of you.'
          : `${formatCount(ahead)} people are ahead of you.`,
    estimate: view.estimate,
    note: 'Keep this page open: it refreshes by itself and takes you to the site when it is your turn.',
    ticket: view.ticket === undefined ? 'pending' : `#${formatCount(view.ticket)}`,
  });
}

export interface AdminView {
  readonly queue: string;
  readonly stats: QueueStats;
  readonly modeText: string;
  readonly csrf: string;
  /** Where the forms post: `<prefix>admin/`, and the query naming the queue (with several). */
  readonly actionPrefix: string;
  readonly actionQuery: string;
  /** With several queues: each queue's figures, listed with links to its page. */
  readonly queues: readonly { readonly name: string; readonly stats: QueueStats | undefined }[] | undefined;
  readonly assetPrefix: string;
  readonly maxAdmit: number;
  readonly notice: string;
  readonly asOf: string;
  /** Seconds until a change reaches every edge location (the per-POP cache lifetime). */
  readonly propagationSeconds: number;
}

function renderQueueList(view: AdminView): string {
  if (view.queues === undefined) return '';
  const rows = view.queues.map(({ name, stats }) => {
    const figures =
      stats === undefined
        ? 'figures unavailable'
        : `${formatCount(Math.max(0, stats.tail - stats.cursor))} waiting, ${formatCount(stats.active)} active${stats.paused ? ', paused' : ''}`;
    const current = name === view.queue ? ' aria-current="page"' : '';
    return `<li><a href="${escapeHtml(`${view.actionPrefix.replace(/admin\/$/, 'admin')}?queue=${encodeURIComponent(name)}`)}"${current}><code>${escapeHtml(name)}</code></a>: ${escapeHtml(figures)}</li>`;
  });
  return `<nav aria-label="Queues"><ul class="queues">${rows.join('')}</ul></nav>`;
}

export function renderAdminPage(view: AdminView): string {
  const { stats } = view;
  return renderTemplate(ADMIN_HTML, {
    queue: view.queue,
    notice: view.notice,
    waiting: formatCount(Math.max(0, stats.tail - stats.cursor)),
    active: stats.maxActive > 0 ? `${formatCount(stats.active)} of ${formatCount(stats.maxActive)}` : formatCount(stats.active),
    admitted_last_minute: formatCount(stats.admittedLastMinute),
    avg_wait: stats.avgWaitSeconds === null ? '–' : formatDuration(stats.avgWaitSeconds),
    tail: formatCount(stats.tail),
    cursor: formatCount(stats.cursor),
    state: stats.paused ? 'paused' : 'running',
    mode: view.modeText,
    pause_value: stats.paused ? 'false' : 'true',
    pause_label: stats.paused ? 'Resume admission' : 'Pause admission',
    max_active: stats.maxActive === 0 ? 'no limit' : String(stats.maxActive),
    max_new_per_minute: stats.maxNewPerMinute === 0 ? 'no limit' : String(stats.maxNewPerMinute),
    csrf: view.csrf,
    action_prefix: view.actionPrefix,
    action_query: view.actionQuery,
    queues: new SafeHtml(renderQueueList(view)),
    asset_prefix: view.assetPrefix,
    max_admit: view.maxAdmit,
    as_of: view.asOf,
    propagation:
      view.propagationSeconds === 0
        ? 'Changes reach waiting visitors on their next refresh.'
        : `Changes reach every edge location within ${view.propagationSeconds} ${view.propagationSeconds === 1 ? 'second' : 'seconds'} (the per-POP cache lifetime), then waiting visitors on their next refresh.`,
  });
}
