/**
 * What a held visitor reads, in their language: one set of texts made at the edge from the visit,
 * used both to render the page (which must work without JavaScript) and in the status JSON that the
 * page's script polls to update itself in place. So the live page and the reloaded page can never
 * say different things.
 */
import { DEFAULT_ACCENT_COLOR, DEFAULT_BACKGROUND_COLOR } from './config';
import type { HoldTexts, HoldView } from './types';
import { messages, negotiateLocale, type Locale, type Messages } from './i18n';
import { NOSNIFF } from './http';
import { renderHoldingPage } from './pages';

export type { HoldTexts } from './types';

export function holdTexts(view: HoldView, locale: Locale, m: Messages = messages(locale)): HoldTexts {
  const f = m.format;
  const clock = (ms: number, zone?: string): string => f.clock(new Date(ms), 0, zone === undefined ? {} : { zoneLabel: zone });
  let heading = m.inLine;
  let placeLabel = m.placeLabel;
  let place = '…';
  let detail = '';
  let estimate = '';
  let note = m.noAction;
  let title: string | undefined;
  let progress: number | null = null;
  // A lottery's number says nothing of the visitor's chances, and shown it would suggest it does.
  let lottery = false;
  switch (view.state) {
    case 'checking':
      // A newcomer has no place yet: nothing to show, nothing to keep.
      heading = view.newcomer === true ? m.joiningTitle : m.checkingTitle;
      detail = view.newcomer === true ? m.joiningBody : m.checkingBody;
      if (view.newcomer === true) {
        placeLabel = '';
        place = '';
      }
      break;
    case 'unreachable':
      heading = m.unreachableTitle;
      placeLabel = '';
      place = '';
      detail = m.unreachableBody;
      note = '';
      break;
    case 'over':
      heading = m.eventOverTitle;
      placeLabel = '';
      place = '';
      detail = m.eventOverBody;
      note = '';
      break;
    case 'prequeue': {
      heading = m.prequeueTitle;
      placeLabel = view.startsAtMs === null ? '' : m.prequeueOpensAt(clock(view.startsAtMs, 'UTC'));
      const untilStart = view.startsAtMs === null ? 0 : Math.max(0, Math.ceil((view.startsAtMs - view.nowMs) / 1000));
      place = untilStart > 0 ? m.countdown(f.duration(untilStart)) : '…';
      detail = view.order === 'arrival' ? m.prequeueFifo : m.prequeueShuffle;
      lottery = view.order !== 'arrival';
      break;
    }
    case 'waiting':
      if (view.inDraw !== null) {
        heading = m.drawTitle;
        placeLabel = '';
        place = '';
        detail = m.drawWaiting(view.inDraw - 1);
        note = m.drawExplain;
        lottery = true;
      } else if (view.place !== null) {
        place = f.number(view.place);
        title = m.titlePlace(view.place);
        detail = m.ahead(view.ahead ?? 0);
        const first = Math.max(view.first ?? view.place, view.place);
        progress = first <= 1 ? 100 : Math.round(((first - view.place) / (first - 1)) * 100);
      }
      if (view.paused) estimate = m.paused;
      else if (view.front) estimate = m.front;
      else if (view.estimate !== null) estimate = view.estimate.seconds === null ? m.estimateUnknown : m.estimate(f.duration(view.estimate.seconds));
      break;
  }
  // Only where the visitor holds a place that outlives the page: in line, or before the opening.
  const keepsPlace = (view.state === 'waiting' && view.inDraw === null) || view.state === 'prequeue';
  const away = keepsPlace && view.awaySeconds !== undefined && view.awaySeconds > 0 ? m.away(f.span(view.awaySeconds)) : '';
  const forms = f.forms('next_update');
  return {
    heading,
    placeLabel,
    place,
    detail,
    estimate,
    note,
    ticket: view.ticket === null || view.ticket <= 0 || lottery ? '' : m.ticket(view.ticket),
    title: title ?? heading,
    turnTitle: m.turnTitle,
    away,
    progress,
    progressLabel: m.progressLabel,
    updatedPattern: m.updatedAt('{clock}'),
    updated: m.updatedAt(clock(view.nowMs, 'UTC')),
    nextUpdate: { forms, rule: f.rule, ...(f.digits !== undefined && { digits: f.digits }) },
    refreshNote: m.refreshNote(view.refreshSeconds),
    admitted: m.admitted,
    failed: m.lastUpdateFailed,
    ...(view.state === 'prequeue' &&
      view.startsAtMs !== null && {
        // The clock as the language writes it, with the hours:minutes and the zone left to the script.
        opensAt: { atMs: view.startsAtMs, pattern: m.prequeueOpensAt(f.clockPattern(true)) },
      }),
  };
}

/** A view with no figures yet: the start of every view, and the whole of "checking" and "over". */
export function blankHoldView(state: HoldView['state'], nowMs: number, refreshSeconds: number): HoldView {
  return {
    state,
    ticket: null,
    place: null,
    ahead: null,
    first: null,
    front: false,
    paused: false,
    inDraw: null,
    estimate: null,
    startsAtMs: null,
    order: null,
    refreshSeconds,
    nowMs,
  };
}

/**
 * The holding page's Content-Security-Policy: its one inline style (the brand colours) by `nonce`,
 * scripts only from the edge, images from the edge and the logo's https origin, no framing. With a
 * challenge provider's widget, its origins (`widget`) may also serve scripts, styles and frames and
 * be called.
 */
export function holdingCsp(nonce: string, logoUrl: string, widget: readonly string[] = []): string {
  const logoOrigin = /^https:\/\/[^/]+/.exec(logoUrl)?.[0];
  const img = logoOrigin === undefined ? "img-src 'self'" : `img-src 'self' ${logoOrigin}`;
  const w = widget.map((origin) => ` ${origin}`).join('');
  const frame = widget.length === 0 ? '' : ` frame-src${w};`;
  return `default-src 'none'; style-src 'self' 'nonce-${nonce}'${w}; script-src 'self'${w}; ${img}; connect-src 'self'${w};${frame} base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

/**
 * The "we are checking your place" page on its own, for when there is no usable configuration at
 * all (no handler to ask): the built-in design and the visitor's language, reloading every 30 s.
 */
export function checkingPageResponse(request: Request, pathPrefix: string, nowMs: number): Response {
  const locale = negotiateLocale(request.headers.get('accept-language'));
  const refreshSeconds = 30;
  const view = blankHoldView('checking', nowMs, refreshSeconds);
  const assetPrefix = `${pathPrefix}assets/`;
  const nonce = nowMs.toString(36);
  const html = renderHoldingPage({
    view,
    texts: holdTexts(view, locale),
    locale: messages(locale),
    title: '',
    message: '',
    branding: { logoUrl: `${assetPrefix}logo.svg`, accent: DEFAULT_ACCENT_COLOR, background: DEFAULT_BACKGROUND_COLOR },
    assetPrefix,
    statusUrl: `${pathPrefix}status`,
    nonce,
  });
  return new Response(html, {
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      refresh: String(refreshSeconds),
      'content-security-policy': holdingCsp(nonce, `${assetPrefix}logo.svg`),
      ...NOSNIFF,
      'x-compress-hint': 'on',
    },
  });
}
