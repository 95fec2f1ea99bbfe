/**
 * Pages rendered at the edge from `templates/`. Every value is HTML-escaped on the way in, so a
 * queue name, a configured message or a number can never become markup.
 */
import ADMIN_HTML from '../../templates/admin.html';
import HOLDING_HTML from '../../templates/holding.html';
import LOGO_SVG from '../../templates/logo.svg';
import STYLE_CSS from '../../templates/style.css';

export interface Asset {
  readonly body: string;
  readonly contentType: string;
}

/** Files served under `<prefix>assets/`, from the edge, never from the origin. */
export const ASSETS: ReadonlyMap<string, Asset> = new Map([
  ['style.css', { body: STYLE_CSS, contentType: 'text/css; charset=utf-8' }],
  ['logo.svg', { body: LOGO_SVG, contentType: 'image/svg+xml' }],
]);

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/** Fills `{{name}}` slots with escaped values. A slot without a value is a bug: it throws. */
export function renderTemplate(template: string, values: Readonly<Record<string, string | number>>): string {
  return template.replace(/\{\{\s*([a-z_]+)\s*\}\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`template slot {{${name}}} has no value`);
    return escapeHtml(String(value));
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
    note: 'Keep this page open: it refreshes by itself and takes you to the site when it is your turn.',
    ticket: view.ticket === undefined ? 'pending' : `#${formatCount(view.ticket)}`,
  });
}

export interface AdminView {
  readonly queue: string;
  readonly tail: number;
  readonly cursor: number;
  readonly autoText: string;
  readonly csrf: string;
  readonly admitAction: string;
  readonly assetPrefix: string;
  readonly maxAdmit: number;
  readonly notice: string;
  readonly asOf: string;
  /** Seconds until a change reaches every edge location (the per-POP cache lifetime). */
  readonly propagationSeconds: number;
}

export function renderAdminPage(view: AdminView): string {
  return renderTemplate(ADMIN_HTML, {
    queue: view.queue,
    notice: view.notice,
    waiting: formatCount(Math.max(0, view.tail - view.cursor)),
    tail: formatCount(view.tail),
    cursor: formatCount(view.cursor),
    auto: view.autoText,
    csrf: view.csrf,
    admit_action: view.admitAction,
    asset_prefix: view.assetPrefix,
    max_admit: view.maxAdmit,
    as_of: view.asOf,
    propagation:
      view.propagationSeconds === 0
        ? 'Changes reach waiting visitors on their next refresh.'
        : `Changes reach every edge location within ${view.propagationSeconds} ${view.propagationSeconds === 1 ? 'second' : 'seconds'} (the per-POP cache lifetime), then waiting visitors on their next refresh.`,
  });
}
