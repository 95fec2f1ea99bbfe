/**
 * Pages rendered at the edge from `templates/`. Every value is HTML-escaped on the way in, so a
 * queue name, a configured message or a number can never become markup.
 */
import HOLDING_HTML from '../../templates/holding.html';
import LOGO_SVG from '../../templates/logo.svg';
import ADMIN_JS from '../../templates/admin.js';
import HOLDING_JS from '../../templates/holding.js';
import SESSION_JS from '../../templates/session.js';
import STYLE_CSS from '../../templates/style.css';
import type { Messages } from './i18n';
import { OVERVIEW_READS, type QueueOverview } from './ports';
import { waitingOf, type ChallengeHook, type HoldTexts, type HoldView, type PowChallenge } from './types';

export interface Asset {
  readonly body: string;
  readonly contentType: string;
}

/** Files served under `<prefix>assets/`, from the edge, never from the origin. */
export const ASSETS: ReadonlyMap<string, Asset> = new Map([
  ['style.css', { body: STYLE_CSS, contentType: 'text/css; charset=utf-8' }],
  ['logo.svg', { body: LOGO_SVG, contentType: 'image/svg+xml' }],
  ['session.js', { body: SESSION_JS, contentType: 'text/javascript; charset=utf-8' }],
  ['holding.js', { body: HOLDING_JS, contentType: 'text/javascript; charset=utf-8' }],
  ['admin.js', { body: ADMIN_JS, contentType: 'text/javascript; charset=utf-8' }],
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

export interface HoldingPage {
  readonly view: HoldView;
  readonly texts: HoldTexts;
  readonly locale: Pick<Messages, 'htmlLang' | 'dir' | 'powNoScript' | 'challengeNoScript' | 'challengePrompt' | 'vipRefused'>;
  /** The site's name and message, from the configuration. */
  readonly title: string;
  readonly message: string;
  readonly branding: Branding;
  readonly assetPrefix: string;
  /** Where the page's script polls for updates. */
  readonly statusUrl: string;
  /** The Content-Security-Policy nonce of the page's one inline style (the brand colours). */
  readonly nonce: string;
  /**
   * How long a page in a background tab, once it is the visitor's turn, waits to be looked at
   * before it goes to the site (its tab's title says whose turn it is meanwhile), seconds.
   * @default 60
   */
  readonly turnWaitSeconds?: number | undefined;
  /** A proof-of-work challenge for the page's script to solve before the visitor gets a ticket. */
  readonly pow?: PowChallenge | undefined;
  /** A challenge provider's widget for the page's script to show before the visitor gets a ticket. */
  readonly hook?: ChallengeHook | undefined;
}

/** Colours are validated `#rrggbb` values and the logo a checked URL, so they are safe in the page. */
export interface Branding {
  readonly logoUrl: string;
  readonly accent: string;
  readonly background: string;
}

/** JSON inside a `<script type="application/json">`: nothing in it can close the element. */
export function scriptJson(value: unknown): SafeHtml {
  return new SafeHtml(JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029'));
}

/** The tab's title: what the page says first (the place, else the heading), then the site's name unless it only repeats the heading. */
export function documentTitle(first: string, site: string, heading: string): string {
  return site === '' || site === heading || site === first ? first : `${first} · ${site}`;
}

export function renderHoldingPage(page: HoldingPage, template: string = HOLDING_HTML): string {
  const { view, texts } = page;
  // A check (a proof of work, a provider's widget) comes before any place: the page shows no
  // place and does not say the visitor keeps one.
  const beforePlace = page.pow !== undefined || page.hook !== undefined;
  return renderTemplate(template, {
    html_lang: page.locale.htmlLang,
    dir: page.locale.dir,
    // A site name that only repeats the heading is not shown twice.
    title: page.title === texts.heading ? '' : page.title,
    // The place first, where a tab in the background still shows it ("#5 in line · Shop"), else the
    // heading; the heading alone when the site has no name set (never "You are in line · You are in line").
    document_title: documentTitle(texts.title, page.title, texts.heading),
    message: page.message,
    state: view.state,
    heading: texts.heading,
    // Before a check is passed there is no place to show or to keep, and no retry to promise: only
    // what to do (the note, and a provider's widget under it).
    place_label: beforePlace ? '' : texts.placeLabel,
    place: beforePlace ? '' : texts.place,
    detail: beforePlace ? '' : texts.detail,
    estimate: texts.estimate,
    // A proof-of-work or challenge page says, without JavaScript, that it needs it (its script then
    // puts the usual note back, or asks for the check).
    note: page.pow !== undefined ? page.locale.powNoScript : page.hook !== undefined ? page.locale.challengeNoScript : texts.note,
    ticket: texts.ticket,
    away: beforePlace ? '' : texts.away,
    // Said once, on the page that answered the link; the live updates leave it be.
    notice: page.view.vipRefused === undefined ? '' : page.locale.vipRefused,
    progress: texts.progress ?? 0,
    progress_hidden: new SafeHtml(texts.progress === null ? 'hidden' : ''),
    progress_label: texts.progressLabel,
    updated: texts.updated,
    // Only a page that reloads itself says so: not a check's page, not an ended event's.
    refresh_note: page.pow === undefined && page.hook === undefined && view.state !== 'over' ? texts.refreshNote : '',
    refresh_seconds: view.refreshSeconds,
    asset_prefix: page.assetPrefix,
    logo_url: page.branding.logoUrl,
    accent: page.branding.accent,
    background: page.branding.background,
    nonce: page.nonce,
    live: scriptJson({
      status: page.statusUrl,
      refresh: view.refreshSeconds,
      texts,
      // The site's name for the tab's title the script writes, and the address without a refused VIP code.
      site: page.title === texts.heading ? '' : page.title,
      turnWait: page.turnWaitSeconds ?? 60,
      ...(page.view.vipRefused !== undefined && { clean: page.view.vipRefused }),
      ...(page.pow !== undefined && { pow: page.pow }),
      ...(page.hook !== undefined && { hook: { ...page.hook, prompt: page.locale.challengePrompt } }),
    }),
  });
}

/** The console's list of queues, each with its figures and a link to its own page. */
export function renderQueueList(queues: readonly QueueOverview[], current: string, adminPath: string): string {
  const phases = { before: ', pre-queue (event not started)', open: ', event open', over: ', event over' } as const;
  const rows = queues.map(({ name, method, event, stats, unread }) => {
    const waiting = stats === undefined ? 0 : waitingOf(stats, method === 'random');
    const figures =
      unread === true
        ? `figures on its own page (a page reads the figures of ${OVERVIEW_READS} queues at most)`
        : stats === undefined
        ? 'figures unavailable'
        : `${formatCount(waiting)} waiting, ${formatCount(stats.active)} active${stats.paused ? ', paused' : ''}${method === 'random' ? ', random draw' : ''}${event === undefined ? '' : phases[event]}`;
    const here = name === current ? ' aria-current="page"' : '';
    return `<li><a href="${escapeHtml(`${adminPath}?queue=${encodeURIComponent(name)}`)}"${here}><code>${escapeHtml(name)}</code></a>: ${escapeHtml(figures)}</li>`;
  });
  return `<ul class="queues">${rows.join('')}</ul>`;
}

/** The pause button: what it sends and what it says, for the state the queue is in. */
export function pauseControl(paused: boolean): { readonly pause_value: string; readonly pause_label: string } {
  return paused ? { pause_value: 'false', pause_label: 'Resume admission' } : { pause_value: 'true', pause_label: 'Pause admission' };
}

